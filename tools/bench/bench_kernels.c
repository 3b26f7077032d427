/* `bench kernels`: CPU GEMV achieved bandwidth per weight type and ISA, next to a streaming-read
 * roofline measured in the same run with the same threads.
 *
 * Default shape: W [14336 rows][4096 cols], an FFN up/gate projection of a 4096-wide model
 * (llama-3-8B: 4096 x 14336), in Q4_K and Q8_0 (the types). One rep = one matvec
 * (quantize x into Q8_K/Q8_0 + the product, as a decode step does it); the number is weight
 * bytes / median time. Weights are random bytes with finite scales (speed does not depend on
 * the values), in transparent huge pages as the host pool maps a model's weights and the
 * roofline its buffer (4 KiB pages cost the GEMV TLB misses the roofline did not pay), first
 * touched by the pool threads (so --numa-node places their pages), and
 * rotated among enough copies that the set exceeds 2x the last-level cache: every rep reads
 * from DRAM, as a model larger than the cache does. --hot keeps one copy (a matrix that fits the
 * cache stays there): the kernel's compute speed, not the memory's.
 *
 * Roofline: a multi-threaded sum over a buffer of max(8 x LLC, 1 GiB) (the same pool, the same
 * binding); its GB/s is what a memory-bound GEMV can at best reach, and ratio = GEMV / roofline.
 *
 * GPU rows (the CUDA GEMV of kernels/cuda) will be appended to the same table by the CUDA part:
 * see the "gpu" place marked below; the JSON carries an empty "gpu" array until then. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc/topo.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/bench.h"
#include "kernels/cuda/gemv.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "tools/bench/bench.h"
#include "tools/common/json.h"
#include "runtime/engine/env.h"

enum { MAX_TYPES = 16, MAX_ISAS = 3 };

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t median(uint64_t *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_u64);
    return t[n / 2];
}

/* ---- parallel helpers ------------------------------------------------------------------- */

typedef struct fill_job {
    uint8_t *p;
    size_t n;
    uint32_t type;
    size_t block_bytes;
} fill_job;

enum { CHUNK = 1 << 20 };

/* Random bytes, then finite half scales where the type has them. Runs on the pool threads
 * (first touch places the pages on their node). */
static void fill_chunk(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const fill_job *j = ctx;
    for (int64_t c = b; c < e; c++) {
        const size_t lo = (size_t)c * CHUNK, hi = lo + CHUNK < j->n ? lo + CHUNK : j->n;
        uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(c + 1);
        for (size_t i = lo; i < hi; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            j->p[i] = (uint8_t)s;
        }
        if (!j->type) continue;
        /* Fix the scale fields of every block starting in [lo, hi) (whole blocks only). */
        for (size_t o = (lo + j->block_bytes - 1) / j->block_bytes * j->block_bytes; o < hi;
             o += j->block_bytes) {
            uint8_t *q = j->p + o;
            switch (j->type) {
            case SL_GGML_F32: {
                const float f = 0.5f;
                if (o + 4 <= j->n) memcpy(q, &f, 4);
                break;
            }
            case SL_GGML_F16:
            case SL_GGML_BF16: {
                const uint16_t v = 0x3c00;
                if (o + 2 <= j->n) memcpy(q, &v, 2);
                break;
            }
            case SL_GGML_MXFP4: q[0] = 120; break;
            default:
                /* Q4_K_R8 is filled as Q4_K, then repacked */
                if (o + j->block_bytes <= j->n)
                    sl_quant_block_set_scale(j->type == SL_TYPE_Q4_K_R8 ? SL_GGML_Q4_K : j->type,
                                             q, 0.01f, 0.01f);
                break;
            }
        }
    }
}

/* The name of a matvec type: GGUF's, or the repacked layout's (kernels/ref/repack.h). */
static const char *tname(uint32_t type)
{
    return type == SL_TYPE_Q4_K_R8 ? "Q4_K_R8" : sl_gguf_type_get(type)->name;
}

/* ---- main -------------------------------------------------------------------------------- */

/* isa is the code path that actually ran for the type: a type without a kernel on the
 * requested ISA runs the scalar fallback, and labelling it with the requested ISA would credit
 * scalar speed to SIMD. */
typedef struct result {
    uint32_t type;
    const char *isa, *requested_isa;
    double weight_mb, median_ms, gbps;
} result;

static int usage(FILE *f, int rc)
{
    fprintf(f,
            "usage: tools/run bench kernels [--threads N] [--numa-node N] [--json]\n"
            "         [--types Q4_K,Q8_0,...] [--rows R --cols C] [--reps N] [--isa NAME] [--hot]\n"
            "  CPU GEMV GB/s (weight bytes / median time) per type and ISA for W [R][C]\n"
            "  (default 14336 x 4096, Q4_K and Q8_0, every SIMD ISA of this CPU, 20 reps) next\n"
            "  to a streaming-read roofline with the same threads; --isa scalar|avx2|avx512\n"
            "  measures one ISA only. Types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K\n"
            "  Q4_K Q5_K Q6_K MXFP4 IQ4_NL IQ4_XS (the GPU part: the types its GEMV has), and\n"
            "  Q4_K_R8 (Q4_K repacked eight rows at a time, as the loader does; R a multiple\n"
            "  of 8).\n"
            "  --hot: one copy of W, read again every rep (a W that fits the cache measures the\n"
            "  kernel's compute speed; default: copies beyond 2x the last-level cache, so every\n"
            "  rep reads DRAM).\n");
    return rc;
}

int sl_bench_kernels(int argc, char **argv)
{
    long threads = sysconf(_SC_NPROCESSORS_ONLN), rows = 14336, cols = 4096, reps = 20;
    int numa_node = -1;
    bool json = false, hot = false;
    const char *types_arg = "Q4_K,Q8_0", *isa_arg = NULL;
    if (threads < 1) threads = 1;
    sl_cli_args a;
    sl_cli_args_init(&a, "bench kernels", argc, argv);
    while (sl_cli_args_next(&a)) {
        const char *v;
        if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else if (sl_cli_is(&a, "--hot", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            hot = true;
        } else if (sl_cli_is(&a, "--threads", NULL)) {
            if (sl_bench_long_value(&a, 1, SL_CPU_POOL_MAX_THREADS, &threads)) return 2;
        } else if (sl_cli_is(&a, "--numa-node", NULL)) {
            sl_error e;
            if (!(v = sl_cli_value(&a))) return 2;
            if (sl_topo_parse_numa_node(v, &numa_node, &e))
                return sl_cli_usage_error(a.cmd, "--numa-node: %s", e.msg);
        } else if (sl_cli_is(&a, "--rows", NULL)) {
            if (sl_bench_long_value(&a, 1, 1 << 20, &rows)) return 2;
        } else if (sl_cli_is(&a, "--cols", NULL)) {
            if (sl_bench_long_value(&a, 1, 1 << 20, &cols)) return 2;
        } else if (sl_cli_is(&a, "--reps", NULL)) {
            if (sl_bench_long_value(&a, 1, 100000, &reps)) return 2;
        } else if (sl_cli_is(&a, "--types", NULL)) {
            if (!(types_arg = sl_cli_value(&a))) return 2;
        } else if (sl_cli_is(&a, "--isa", NULL)) {
            if (!(isa_arg = sl_cli_value(&a))) return 2;
        } else if (sl_cli_is(&a, "-h", "--help")) {
            return usage(stdout, 0);
        } else {
            sl_cli_unknown(&a);
            return usage(stderr, 2);
        }
    }
    if (a.status) return a.status;

    /* types */
    uint32_t types[MAX_TYPES], gpu_types[MAX_TYPES]; /* the GPU has no repacked layouts */
    int n_types = 0, n_gpu = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", types_arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        /* Q4_K_R8: Q4_K repacked as the loader does (kernels/ref/repack.h) */
        const bool r8 = !strcmp(tok, "Q4_K_R8");
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(r8 ? "Q4_K" : tok);
        if (!ti || !sl_ref_matvec_supported(ti->code) || n_types == MAX_TYPES) {
            fprintf(stderr, "sluice bench kernels: --types entry '%s' is not a matvec type\n", tok);
            return 2;
        }
        if (cols % ti->block_size) {
            fprintf(stderr, "sluice bench kernels: --cols %ld is not a multiple of %s's block %u\n",
                    cols, ti->name, ti->block_size);
            return 2;
        }
        if (r8 && rows % 8) {
            fprintf(stderr, "sluice bench kernels: --rows %ld: Q4_K_R8 needs a multiple of 8\n",
                    rows);
            return 2;
        }
        types[n_types++] = r8 ? SL_TYPE_Q4_K_R8 : ti->code;
        if (!r8 && sl_cuda_gemv_supported(ti->code)) gpu_types[n_gpu++] = ti->code;
    }
    if (!n_types) {
        fprintf(stderr, "sluice bench kernels: --types '%s' lists no type\n", types_arg);
        return 2;
    }

    /* ISAs */
    const sl_cpu_features f = sl_cpu_features_detect();
    sl_cpu_matvec_ctx mvs[MAX_ISAS];
    int n_isa = 0;
    sl_error e;
    if (isa_arg) {
        sl_cpu_isa isa;
        if (sl_cpu_isa_parse(isa_arg, &isa, &e) || sl_cpu_matvec_init(&mvs[0], isa, f, &e)) {
            fprintf(stderr, "sluice bench kernels: --isa: %s\n", e.msg);
            return 2;
        }
        n_isa = 1;
    } else {
        const sl_cpu_isa all[] = {SL_CPU_ISA_AVX2, SL_CPU_ISA_AVX512};
        for (int i = 0; i < 2; i++)
            if (!sl_cpu_matvec_init(&mvs[n_isa], all[i], f, &e)) n_isa++;
        if (!n_isa) n_isa = !sl_cpu_matvec_init(&mvs[0], SL_CPU_ISA_SCALAR, f, &e);
    }

    /* pool (+ the calling thread bound to the node too: it is thread 0) */
    sl_topo *topo = NULL;
    if (numa_node >= 0) {
        sl_topo_options to;
        if (sl_env_topo_options(&to, &e) || sl_topo_load(&to, &topo, &e) ||
            sl_topo_bind_thread_to_node(topo, numa_node, &e)) {
            fprintf(stderr, "sluice bench kernels: --numa-node %d: %s\n", numa_node, e.msg);
            sl_topo_destroy(topo);
            return 1;
        }
    }
    sl_cpu_pool *pool = NULL;
    sl_cpu_pool_options po = {.n_threads = (int)threads, .numa_node = numa_node, .topo = topo};
    if (sl_cpu_pool_create(&po, &pool, &e)) {
        fprintf(stderr, "sluice bench kernels: %s\n", e.msg);
        sl_topo_destroy(topo);
        return 1;
    }
    sl_topo_destroy(topo);

    /* roofline */
    const size_t llc = sl_bench_llc_bytes();
    double roof_gbps = 0;
    int rc = 0;
    if (sl_bench_stream_pool_gbps(pool, sl_bench_stream_bytes(), 16, &roof_gbps, &e)) {
        fprintf(stderr, "sluice bench kernels: %s\n", e.msg);
        rc = 1;
        goto out;
    }

    result res[MAX_TYPES * MAX_ISAS];
    int n_res = 0;
    for (int ti = 0; ti < n_types && !rc; ti++) {
        const uint32_t type = types[ti];
        const sl_gguf_type_info *info =
            sl_gguf_type_get(type == SL_TYPE_Q4_K_R8 ? SL_GGML_Q4_K : type);
        const size_t wbytes = sl_ref_matvec_row_bytes(type, cols) * (size_t)rows;
        int copies = (int)((2 * llc + wbytes - 1) / wbytes);
        if (copies < 1) copies = 1;
        if (copies > 64) copies = 64;
        if (hot) copies = 1;
        uint8_t **w = calloc((size_t)copies, sizeof *w);
        float *x = malloc((size_t)cols * sizeof *x), *y = malloc((size_t)rows * sizeof *y);
        const size_t work_bytes = sl_cpu_matvec_work_bytes(type, cols, 1);
        void *work = malloc(work_bytes ? work_bytes : 1);
        uint64_t *t = malloc((size_t)reps * sizeof *t);
        bool ok = w && x && y && work && t;
        for (int c = 0; ok && c < copies; c++) {
            ok = (w[c] = sl_bench_alloc_huge(wbytes)) != NULL;
            fill_job wj = {.p = w[c], .n = wbytes, .type = type, .block_bytes = info->type_size};
            if (ok) sl_cpu_pool_parallel_for(pool, (int64_t)((wbytes + CHUNK - 1) / CHUNK), 1,
                                             fill_chunk, &wj, &e);
            if (ok && type == SL_TYPE_Q4_K_R8)
                ok = !sl_repack_q4_K_r8(w[c], w[c], rows, cols, &e);
        }
        for (long i = 0; ok && i < cols; i++) x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
        for (int m = 0; ok && m < n_isa; m++) {
            /* warm-up: one pass over every copy */
            for (int c = 0; c < copies && ok; c++)
                ok = !sl_cpu_matvec(&mvs[m], pool, type, w[c], rows, cols, x, 1, y, work,
                                    work_bytes, &e);
            for (long r = 0; ok && r < reps; r++) {
                const uint64_t t0 = now_ns();
                ok = !sl_cpu_matvec(&mvs[m], pool, type, w[r % copies], rows, cols, x, 1, y, work,
                                    work_bytes, &e);
                t[r] = now_ns() - t0;
            }
            if (!ok) {
                fprintf(stderr, "sluice bench kernels: %s\n", e.msg);
                break;
            }
            const uint64_t med = median(t, (int)reps);
            const char *req = sl_cpu_matvec_name(&mvs[m]);
            res[n_res++] = (result){type, sl_cpu_matvec_has_simd(&mvs[m], type) ? req : "scalar",
                                    req, (double)wbytes / 1e6, (double)med / 1e6,
                                    (double)wbytes / (double)med};
        }
        if (!ok) {
            if (!w || !x || !y || !work || !t)
                fprintf(stderr, "sluice bench kernels: no memory for %s weights\n", tname(type));
            rc = 1;
        }
        for (int c = 0; w && c < copies; c++) free(w[c]);
        free(w);
        free(x);
        free(y);
        free(work);
        free(t);
    }

    if (!rc && json) {
        printf("{\"bench\":\"kernels\",\"rows\":%ld,\"cols\":%ld,\"threads\":%ld,\"numa_node\":%d,"
               "\"reps\":%ld,\"hot\":%s,\"roofline_gbps\":",
               rows, cols, threads, numa_node, reps, hot ? "true" : "false");
        sl_json_f64(stdout, roof_gbps);
        printf(",\"cpu\":[");
        for (int i = 0; i < n_res; i++) {
            printf("%s{\"type\":", i ? "," : "");
            sl_json_cstr(stdout, tname(res[i].type));
            printf(",\"isa\":");
            sl_json_cstr(stdout, res[i].isa);
            printf(",\"requested_isa\":");
            sl_json_cstr(stdout, res[i].requested_isa);
            printf(",\"weight_mb\":");
            sl_json_f64(stdout, res[i].weight_mb);
            printf(",\"median_ms\":");
            sl_json_f64(stdout, res[i].median_ms);
            printf(",\"gbps\":");
            sl_json_f64(stdout, res[i].gbps);
            printf(",\"ratio\":");
            sl_json_f64(stdout, res[i].gbps / roof_gbps);
            printf("}");
        }
        /* gpu: the CUDA GEMV rows go here (same fields, "device" instead of "isa"). */
        /* GPU rows (kernels/cuda/bench.h): the same shape and types on CUDA device 0, ratio
         * against a device-to-device copy roofline measured in this run; without a usable GPU
         * "gpu" stays empty and "gpu_unavailable" says why. */
        sl_cuda_bench_result gr;
        sl_error ge;
        const sl_status gst =
            sl_cuda_bench_gemv(gpu_types, n_gpu, rows, cols, (int)reps, &gr, &ge);
        printf("],\"gpu\":[");
        for (int i = 0; !gst && i < gr.n_rows; i++) {
            printf("%s{\"type\":", i ? "," : "");
            sl_json_cstr(stdout, sl_gguf_type_get(gr.rows[i].type)->name);
            printf(",\"act\":");
            sl_json_cstr(stdout, gr.rows[i].act);
            printf(",\"device\":");
            sl_json_cstr(stdout, gr.device);
            printf(",\"weight_mb\":");
            sl_json_f64(stdout, gr.rows[i].weight_mb);
            printf(",\"median_ms\":");
            sl_json_f64(stdout, gr.rows[i].median_ms);
            printf(",\"gbps\":");
            sl_json_f64(stdout, gr.rows[i].gbps);
            printf(",\"ratio\":");
            sl_json_f64(stdout, gr.rows[i].gbps / gr.copy_gbps);
            printf("}");
        }
        printf("]");
        if (!gst) {
            printf(",\"gpu_roofline_gbps\":");
            sl_json_f64(stdout, gr.copy_gbps);
        } else {
            printf(",\"gpu_unavailable\":");
            sl_json_cstr(stdout, ge.msg);
        }
        printf("}\n");
    } else if (!rc) {
        printf("bench kernels: W [%ld rows][%ld cols], %ld thread%s%s, median of %ld reps%s\n",
               rows, cols, threads, threads == 1 ? "" : "s",
               numa_node >= 0 ? " on the NUMA node" : "", reps, hot ? ", hot (one copy)" : "");
        printf("roofline: streaming read %.1f GB/s (%zu MiB buffer, LLC %zu MiB)\n", roof_gbps,
               sl_bench_stream_bytes() >> 20, llc >> 20);
        printf("%-7s %-12s %10s %10s %10s %7s\n", "type", "isa", "weight MB", "ms", "GB/s", "ratio");
        bool fallback = false;
        for (int i = 0; i < n_res; i++) {
            const bool fb = strcmp(res[i].isa, res[i].requested_isa) != 0;
            char label[32];
            snprintf(label, sizeof label, "%s%s", res[i].isa, fb ? "*" : "");
            fallback |= fb;
            printf("%-7s %-12s %10.1f %10.3f %10.1f %7.2f\n", tname(res[i].type),
                   label, res[i].weight_mb, res[i].median_ms, res[i].gbps,
                   res[i].gbps / roof_gbps);
        }
        if (fallback)
            printf("* no SIMD kernel for the type on the requested ISA: the scalar code ran\n");
        /* gpu: the CUDA GEMV rows are printed here by the CUDA part. */
        sl_cuda_bench_result gr;
        sl_error ge;
        if (sl_cuda_bench_gemv(gpu_types, n_gpu, rows, cols, (int)reps, &gr, &ge)) {
            printf("gpu: unavailable (%s)\n", ge.msg);
        } else {
            printf("gpu roofline: %s, device-to-device copy %.1f GB/s (read + write of %llu MiB)\n",
                   gr.device, gr.copy_gbps, (unsigned long long)(gr.copy_bytes >> 20));
            printf("%-6s %-14s %10s %10s %10s %7s\n", "type", "device/act", "weight MB", "ms",
                   "GB/s", "ratio");
            for (int i = 0; i < gr.n_rows; i++) {
                char label[32];
                snprintf(label, sizeof label, "cuda:0/%s", gr.rows[i].act);
                printf("%-6s %-14s %10.1f %10.3f %10.1f %7.2f\n",
                       sl_gguf_type_get(gr.rows[i].type)->name, label, gr.rows[i].weight_mb,
                       gr.rows[i].median_ms, gr.rows[i].gbps, gr.rows[i].gbps / gr.copy_gbps);
            }
        }
    }
out:
    sl_cpu_pool_destroy(pool);
    return rc;
}
