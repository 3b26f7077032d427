/* `bench gguf`: header parse time (ours vs gguf-py on the same file) and tensor read
 * throughput by mmap, pread and O_DIRECT.
 *
 * Parse file: 2,000 small tensors and a 150,000-entry string array (a tokenizer vocabulary),
 * written by our writer. Read file: one tensor of --read-mib MiB (default 1024). Before each
 * cold read the file's pages are dropped from the page cache (fsync + POSIX_FADV_DONTNEED), so
 * mmap and pread pay the disk like O_DIRECT does; warm figures are reported beside them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/bench/bench.h"

static sl_status write_parse_file(const char *path, int n_tensors, int n_vocab, sl_error *err)
{
    sl_gguf_writer *w = NULL;
    sl_status s = sl_gguf_writer_create(path, NULL, &w, err);
    if (s) return s;
    char **tok = calloc((size_t)n_vocab, sizeof *tok);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    if (!tok || !scores) s = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    for (int i = 0; !s && i < n_vocab; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "\xe2\x96\x81tok%d", i);
        tok[i] = strdup(buf);
        scores[i] = (float)-i;
        if (!tok[i]) s = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    }
    if (!s) s = sl_gguf_writer_set_str(w, "general.architecture", sl_arch_name(SL_ARCH_LLAMA), err);
    if (!s) s = sl_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", err);
    if (!s) s = sl_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                           (uint64_t)n_vocab, err);
    if (!s) s = sl_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SL_GGUF_F32, scores,
                                       (uint64_t)n_vocab, err);
    const int64_t ne[2] = {64, 4};
    for (int i = 0; !s && i < n_tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_%d.weight", i / 16, i % 16);
        s = sl_gguf_writer_add_tensor(w, name, SL_GGML_F32, 2, ne, err);
    }
    static const float zeros[256];
    for (int i = 0; !s && i < n_tensors; i++) s = sl_gguf_writer_write(w, zeros, sizeof zeros, err);
    if (!s) s = sl_gguf_writer_finish(w, err);
    sl_gguf_writer_destroy(w);
    for (int i = 0; tok && i < n_vocab; i++) free(tok[i]);
    free(tok);
    free(scores);
    return s;
}

static sl_status write_read_file(const char *path, uint64_t bytes, sl_error *err)
{
    sl_gguf_writer *w = NULL;
    sl_status s = sl_gguf_writer_create(path, NULL, &w, err);
    if (s) return s;
    const int64_t ne[1] = {(int64_t)bytes};
    s = sl_gguf_writer_add_tensor(w, "big", SL_GGML_I8, 1, ne, err);
    enum { CHUNK = 8 << 20 };
    unsigned char *chunk = s ? NULL : malloc(CHUNK);
    if (!s && !chunk) s = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; chunk && i < CHUNK; i++) chunk[i] = (unsigned char)(i * 131 + 7);
    for (uint64_t done = 0; !s && done < bytes; done += CHUNK) {
        uint64_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
        s = sl_gguf_writer_write(w, chunk, n, err);
    }
    if (!s) s = sl_gguf_writer_finish(w, err);
    sl_gguf_writer_destroy(w);
    free(chunk);
    return s;
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* gguf-py's GGUFReader on the same file: median seconds of `reps` opens, or < 0 if absent. */
static double gguf_py_parse_s(const char *path, int reps)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys,time,statistics,gguf\n"
             "t=[]\n"
             "for _ in range(%d):\n"
             "  a=time.perf_counter(); r=gguf.GGUFReader(sys.argv[1]); t.append(time.perf_counter()-a)\n"
             "print(statistics.median(t))' '%s' 2>/dev/null",
             reps, path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    double v = -1;
    if (fscanf(p, "%lf", &v) != 1) v = -1;
    if (pclose(p) != 0) v = -1;
    return v;
}

typedef struct read_result {
    double cold_gbs, warm_gbs;
} read_result;

static sl_status time_read(const char *path, sl_gguf_io io, read_result *out, sl_error *err)
{
    sl_gguf *g = NULL;
    sl_status s = SL_OK;
    void *buf = NULL;
    for (int pass = 0; pass < 2 && !s; pass++) {
        if (pass == 0) drop_cache(path);
        if ((s = sl_gguf_open(path, NULL, &g, err))) break;
        const sl_gguf_tensor *t = sl_gguf_tensor_find(g, "big");
        uint64_t cap = sl_gguf_direct_span(t);
        if (!buf && posix_memalign(&buf, SL_GGUF_DIRECT_ALIGN, cap) != 0) {
            s = sl_error_set(err, SL_ERR_NOMEM, "cannot allocate %" PRIu64 " bytes", cap);
            break;
        }
        /* Fault the destination in first: page-fault cost is the pool's, not the reader's. */
        memset(buf, 0, cap);
        void *data;
        double t0 = sl_cli_now_s();
        s = sl_gguf_tensor_read(g, t, io, buf, cap, &data, err);
        double dt = sl_cli_now_s() - t0;
        double gbs = (double)t->nbytes / dt / 1e9;
        if (pass == 0) out->cold_gbs = gbs;
        else out->warm_gbs = gbs;
        sl_gguf_close(g);
        g = NULL;
    }
    sl_gguf_close(g);
    free(buf);
    return s;
}

int sl_bench_gguf(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    bool json = false;
    long read_mib = 1024, n_tensors = 2000, n_vocab = 150000;
    sl_cli_args a;
    sl_cli_args_init(&a, "bench gguf", argc, argv);
    while (sl_cli_args_next(&a)) {
        if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(dir = sl_cli_value(&a))) return 2;
            if (!*dir) return sl_cli_usage_error(a.cmd, "--dir: empty folder name");
        } else if (sl_cli_is(&a, "--read-mib", NULL)) {
            if (sl_bench_long_value(&a, 1, 1 << 20, &read_mib)) return 2;
        } else if (sl_cli_is(&a, "-h", "--help")) {
            printf("usage: tools/run bench gguf [--dir DIR] [--read-mib N] [--json]\n"
                   "  parse: open+parse of a file with %ld tensors and a %ld-entry string array,\n"
                   "         ours vs gguf-py (python3 -c 'import gguf') on the same file\n"
                   "  read:  one N MiB tensor (default 1024) by mmap, pread and O_DIRECT,\n"
                   "         cold (page cache dropped) and warm; files go to DIR (default $TMPDIR or /tmp)\n",
                   n_tensors, n_vocab);
            return 0;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    char parse_path[4096], read_path[4096];
    snprintf(parse_path, sizeof parse_path, "%s/sluice-bench-parse-%d.gguf", dir, (int)getpid());
    snprintf(read_path, sizeof read_path, "%s/sluice-bench-read-%d.gguf", dir, (int)getpid());
    sl_error err = {0};
    int rc = 1;
    enum { REPS = 15 };
    double ours[REPS];
    read_result rr[3] = {{0}};
    double py = -1;
    if (write_parse_file(parse_path, (int)n_tensors, (int)n_vocab, &err)) goto fail;
    for (int r = 0; r < REPS; r++) {
        sl_gguf *g = NULL;
        double t0 = sl_cli_now_s();
        if (sl_gguf_open(parse_path, NULL, &g, &err)) goto fail;
        ours[r] = sl_cli_now_s() - t0;
        sl_gguf_close(g);
    }
    qsort(ours, REPS, sizeof ours[0], sl_cli_cmp_f64);
    py = gguf_py_parse_s(parse_path, 5);
    if (write_read_file(read_path, (uint64_t)read_mib << 20, &err)) goto fail;
    for (int io = 0; io < 3; io++)
        if (time_read(read_path, (sl_gguf_io)io, &rr[io], &err)) goto fail;
    const char *names[3] = {"mmap", "pread", "direct"};
    if (json) {
        printf("{\"parse\": {\"tensors\": %ld, \"vocab\": %ld, \"ours_ms\": %.3f, \"gguf_py_ms\": ",
               n_tensors, n_vocab, ours[REPS / 2] * 1e3);
        if (py >= 0) printf("%.3f", py * 1e3);
        else printf("null");
        printf("}, \"read\": {\"mib\": %ld", read_mib);
        for (int io = 0; io < 3; io++)
            printf(", \"%s\": {\"cold_gbs\": %.3f, \"warm_gbs\": %.3f}", names[io], rr[io].cold_gbs,
                   rr[io].warm_gbs);
        printf("}}\n");
    } else {
        printf("parse: %ld tensors + %ld-entry string array\n", n_tensors, n_vocab);
        printf("  sluice   %8.3f ms (median of %d)\n", ours[REPS / 2] * 1e3, REPS);
        if (py >= 0) printf("  gguf-py  %8.3f ms (median of 5)  -> %.1fx\n", py * 1e3, py / ours[REPS / 2]);
        else printf("  gguf-py  unavailable (python3 with the gguf package not found)\n");
        printf("read: one %ld MiB tensor          cold GB/s   warm GB/s\n", read_mib);
        for (int io = 0; io < 3; io++)
            printf("  %-8s                        %8.2f    %8.2f\n", names[io], rr[io].cold_gbs,
                   rr[io].warm_gbs);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "sluice bench gguf: %s\n", err.msg);
    unlink(parse_path);
    unlink(read_path);
    return rc;
}
