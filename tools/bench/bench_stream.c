/* The streaming-read roofline every benchmark compares with: the GB/s a multi-threaded read of
 * a buffer much larger than the last-level cache reaches with given threads and binding. One
 * routine, so that `bench kernels`' roofline, `bench decode`'s bound, `bench moe` and `place`
 * divide by the same figure, measured the same way.
 *
 * The buffer is first touched by the pool threads (its pages land on their nodes), each chunk
 * with distinct values (no zero-page or compression shortcut); the timed pass sums 64-bit
 * words with four independent chains (prefetching ahead) and keeps the sums observable. It asks for transparent
 * huge pages as the host pool does for the weights (alloc/hostpool.c): with 4 KiB pages the
 * read pays TLB misses the weights do not, and the bound came out below the weights' reads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kernels/cpu/pool.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "runtime/engine/env.h"

enum { CHUNK = 1 << 20, MAX_REPS = 64 };
#define HUGE_PAGE ((size_t)2 << 20)

size_t sl_bench_llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            const size_t b = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : 1ul);
            if (b > best) best = b;
        }
        fclose(f);
    }
    return best ? best : 32ul << 20;
}

size_t sl_bench_stream_bytes(void)
{
    const size_t b = 8 * sl_bench_llc_bytes();
    return b < (1ul << 30) ? 1ul << 30 : b;
}

typedef struct stream_job {
    uint64_t *p;
    size_t n; /* words */
    uint64_t part[SL_CPU_POOL_MAX_THREADS];
} stream_job;

static void stream_fill(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    stream_job *j = ctx;
    const size_t w = CHUNK / 8;
    for (int64_t c = b; c < e; c++) {
        const size_t lo = (size_t)c * w, hi = lo + w < j->n ? lo + w : j->n;
        for (size_t i = lo; i < hi; i++) j->p[i] = i * 0x9E3779B97F4A7C15ull;
    }
}

static void stream_sum(void *ctx, int64_t b, int64_t e, int thread)
{
    stream_job *j = ctx;
    const size_t w = CHUNK / 8;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t c = b; c < e; c++) {
        const uint64_t *p = j->p + (size_t)c * w;
        const size_t n = (size_t)c * w + w <= j->n ? w : j->n - (size_t)c * w;
        /* one cache line a step, prefetched 2 KiB ahead as the matvec row kernels do
         * (matvec_x86_tmpl.h SL_MV_PF_BYTES): where the hardware streamer is weak (this VM:
         * 1.4 GB/s without, the kernels ~8 with) a bound without it is not a bound */
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __builtin_prefetch((const char *)(p + i) + 2048, 0, 3);
            s0 += p[i] + p[i + 4];
            s1 += p[i + 1] + p[i + 5];
            s2 += p[i + 2] + p[i + 6];
            s3 += p[i + 3] + p[i + 7];
        }
        for (; i < n; i++) s0 += p[i];
    }
    j->part[thread] += s0 + s1 + s2 + s3; /* each thread writes only its own slot */
}

void *sl_bench_alloc_huge(size_t bytes)
{
    if (bytes < HUGE_PAGE) return malloc(bytes ? bytes : 1); /* a few TLB entries anyway */
    const size_t alloc = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = alloc >= bytes && alloc ? aligned_alloc(HUGE_PAGE, alloc) : NULL;
    if (p) (void)madvise(p, alloc, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
    return p;
}

sl_status sl_bench_stream_pool_gbps(sl_cpu_pool *pool, size_t bytes, int reps, double *gbps,
                                    sl_error *err)
{
    *gbps = 0;
    if (bytes < 8 || reps < 1 || reps > MAX_REPS)
        return sl_error_set(err, SL_ERR_INVALID, "streaming read: %zu bytes, %d repetitions",
                            bytes, reps);
    stream_job *j = calloc(1, sizeof *j);
    uint64_t *p = sl_bench_alloc_huge(bytes);
    sl_status st = SL_OK;
    if (!j || !p) {
        st = sl_error_set(err, SL_ERR_NOMEM, "streaming read: out of memory (%zu MiB)",
                          bytes >> 20);
        goto out;
    }
    j->p = p;
    j->n = bytes / 8;
    const int64_t chunks = (int64_t)((j->n * 8 + CHUNK - 1) / CHUNK);
    if ((st = sl_cpu_pool_parallel_for(pool, chunks, 1, stream_fill, j, err))) goto out;
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const double t0 = sl_cli_now_s();
        if ((st = sl_cpu_pool_parallel_for(pool, chunks, 1, stream_sum, j, err))) goto out;
        t[r] = sl_cli_now_s() - t0;
    }
    uint64_t sink = 0;
    for (int i = 0; i < SL_CPU_POOL_MAX_THREADS; i++) sink += j->part[i];
    const double med = sl_cli_median(t, reps);
    *gbps = med > 0 ? (double)(j->n * 8) / med / 1e9 : 0;
    if (sink == 42) fputc(' ', stderr); /* keeps the sums observable */
out:
    free(p);
    free(j);
    return st;
}

double sl_bench_stream_gbps(const sl_model_options *mo, int *threads_out, size_t *mib_out)
{
    const int nt = sl_model_options_threads(mo);
    sl_cpu_pool_options po = {.n_threads = nt, .numa_node = mo->numa_node, .cpus = mo->cpus,
                              .topo = NULL};
    sl_cpu_pool *pool = NULL;
    sl_error err = {0};
    if (sl_env_topo_options(&po.topology, &err) || sl_cpu_pool_create(&po, &pool, &err)) {
        fprintf(stderr, "sluice bench: streaming read: thread pool: %s\n", err.msg);
        return 0;
    }
    const size_t bytes = sl_bench_stream_bytes();
    double gbps = 0;
    if (sl_bench_stream_pool_gbps(pool, bytes, 5, &gbps, &err))
        fprintf(stderr, "sluice bench: %s\n", err.msg);
    else {
        *threads_out = nt;
        *mib_out = bytes >> 20;
    }
    sl_cpu_pool_destroy(pool);
    return gbps;
}
