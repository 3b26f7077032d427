/* `tools/run bench swap`: how long a live reload of one changed tensor takes against its bound.
 *
 * Method: the model is copied into a temporary folder as A (as is) and B (the tensor quantized
 * to another type and back: same type and size, other bytes); the copy "live" is opened and
 * alternately replaced by B and A (rename) and reloaded, so each reload rewrites the tensor in
 * place. Per reload the tensor's own time (read through the loader's O_DIRECT path into the
 * pinned pool, compare, write into its block) is compared with
 *     bound = B / bw + 1 ms,
 * bw being the measured read bandwidth of the same bytes from the same file (O_DIRECT when the
 * file system allows it, as the loader reads; else the page cache). Reported: median time,
 * bound and their ratio (<= 1 meets the goal), and the whole reload's time (it also re-reads
 * and compares the file's other tensors, which did not change). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/json.h"
#include "tools/lib/requant.h"

static int copy_file(const char *from, const char *to)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    FILE *in = fopen(from, "rb"), *out = fopen(tmp, "wb");
    int rc = in && out ? 0 : 1;
    char b[1 << 16];
    size_t n;
    while (!rc && (n = fread(b, 1, sizeof b, in)) > 0) rc = fwrite(b, 1, n, out) != n;
    if (in) fclose(in);
    if (out && fclose(out)) rc = 1;
    if (!rc && rename(tmp, to)) rc = 1;
    if (rc) fprintf(stderr, "sluice bench swap: copying %s to %s failed\n", from, to);
    return rc;
}

/* Seconds to read nbytes at off of path as the loader does (O_DIRECT, else buffered). */
static double read_seconds(const char *path, uint64_t off, uint64_t nbytes)
{
    const uint64_t a = 4096, lo = off / a * a, hi = (off + nbytes + a - 1) / a * a;
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) fd = open(path, O_RDONLY);
    void *buf = NULL;
    if (fd < 0 || posix_memalign(&buf, a, hi - lo)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    const double t0 = sl_cli_now_s();
    uint64_t done = 0;
    while (done < hi - lo) {
        ssize_t r = pread(fd, (char *)buf + done, hi - lo - done, (off_t)(lo + done));
        if (r <= 0) break;
        done += (uint64_t)r;
    }
    const double t = sl_cli_now_s() - t0;
    close(fd);
    free(buf);
    return t;
}

int sl_bench_swap(int argc, char **argv)
{
    const char *model = NULL, *name = NULL;
    long rounds = 10;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--tensor") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            if (sl_bench_parse_long(argv[++i], "--rounds", 1, 10000, &rounds)) return 2;
        } else {
            fprintf(stderr, "usage: tools/run bench swap -m FILE [--tensor NAME] [--rounds N] "
                            "[--json]\n  (default tensor: the largest)\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "sluice bench swap: -m FILE is required\n");
        return 2;
    }
    sl_error err;
    sl_gguf *g = NULL;
    if (sl_gguf_open(model, NULL, &g, &err)) {
        fprintf(stderr, "sluice bench swap: %s\n", err.msg);
        return 1;
    }
    const sl_gguf_tensor *t = name ? sl_gguf_tensor_find(g, name) : NULL;
    for (size_t i = 0; !name && i < sl_gguf_tensor_count(g); i++)
        if (!t || sl_gguf_tensor_at(g, i)->nbytes > t->nbytes) t = sl_gguf_tensor_at(g, i);
    if (!t || sl_gguf_shard_count(g) != 1) {
        fprintf(stderr, "sluice bench swap: %s: %s\n", model,
                t ? "a one-file model is needed" : "no such tensor");
        sl_gguf_close(g);
        return 1;
    }
    char tname[128];
    snprintf(tname, sizeof tname, "%s", t->name);
    const uint32_t type = t->type;
    const uint64_t B = t->nbytes;
    sl_gguf_close(g);
    char dir[] = "/tmp/sluice-bench-swap-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "sluice bench swap: cannot create a temporary folder\n");
        return 1;
    }
    char pa[4096], pb[4096], live[4096];
    snprintf(pa, sizeof pa, "%s/a.gguf", dir);
    snprintf(pb, sizeof pb, "%s/b.gguf", dir);
    snprintf(live, sizeof live, "%s/live.gguf", dir);
    const uint32_t other = type == SL_GGML_Q4_0 ? SL_GGML_Q8_0 : SL_GGML_Q4_0;
    int rc = 1;
    sl_model *m = NULL;
    double *tt = calloc((size_t)rounds, sizeof *tt), *tr = calloc((size_t)rounds, sizeof *tr);
    if (!tt || !tr || copy_file(model, pa) || copy_file(model, live)) goto done;
    char esc[300];
    size_t k = 0;
    for (const char *c = tname; *c && k + 3 < sizeof esc; c++) {
        if (strchr(".[]()*+?^$|\\{}", *c)) esc[k++] = '\\';
        esc[k++] = *c;
    }
    esc[k] = 0;
    if (sl_requant_file(pa, pb, esc, other, NULL, NULL, NULL, NULL, NULL, &err) ||
        sl_requant_file(pb, pb, esc, type, NULL, NULL, NULL, NULL, NULL, &err)) {
        fprintf(stderr, "sluice bench swap: %s: %s\n", tname, err.msg);
        goto done;
    }
    sl_model_options mo = sl_model_options_default();
    mo.progress = false;
    if (sl_model_open(live, &mo, &m, &err)) {
        fprintf(stderr, "sluice bench swap: %s\n", err.msg);
        goto done;
    }
    double bw_s = 1e30;
    for (long r = 0; r < rounds; r++) {
        if (copy_file(r % 2 ? pa : pb, live)) goto done;
        sl_gguf *gb = NULL;
        if (!sl_gguf_open(live, NULL, &gb, &err)) {
            const sl_gguf_tensor *x = sl_gguf_tensor_find(gb, tname);
            const double s = x ? read_seconds(live, x->file_offset, x->nbytes) : -1;
            if (s > 0 && s < bw_s) bw_s = s;
            sl_gguf_close(gb);
        }
        sl_reload_report rep;
        if (sl_reload_changed(m, &rep, &err)) {
            fprintf(stderr, "sluice bench swap: reload: %s\n", err.msg);
            goto done;
        }
        tr[r] = rep.seconds;
        for (size_t i = 0; i < rep.n; i++)
            if (!strcmp(rep.entries[i].name, tname)) tt[r] = rep.entries[i].seconds;
        sl_reload_report_free(&rep);
    }
    const double bw = (double)B / bw_s, bound = (double)B / bw + 1e-3;
    const double med = sl_cli_median(tt, (size_t)rounds), med_all = sl_cli_median(tr,
                                                                                   (size_t)rounds);
    if (json) {
        printf("{\"bench\":\"swap\",\"tensor\":");
        sl_json_cstr(stdout, tname);
        printf(",\"bytes\":%llu,\"read_gbs\":", (unsigned long long)B);
        sl_json_f64(stdout, bw / 1e9);
        printf(",\"bound_ms\":");
        sl_json_f64(stdout, bound * 1e3);
        printf(",\"tensor_ms\":");
        sl_json_f64(stdout, med * 1e3);
        printf(",\"ratio\":");
        sl_json_f64(stdout, med / bound);
        printf(",\"reload_ms\":");
        sl_json_f64(stdout, med_all * 1e3);
        printf(",\"rounds\":%ld}\n", rounds);
    } else {
        printf("bench swap: %s, %.2f MiB: read bandwidth %.2f GB/s, bound B/bw + 1 ms = %.3f ms\n"
               "  tensor reload (median of %ld): %.3f ms, ratio %.3f (%s)\n"
               "  whole reload (the file's other tensors re-read and compared): %.3f ms\n",
               tname, (double)B / 1048576.0, bw / 1e9, bound * 1e3, rounds, med * 1e3,
               med / bound, med <= bound ? "meets the goal" : "over the bound", med_all * 1e3);
    }
    rc = 0;
done:
    sl_model_close(m);
    free(tt);
    free(tr);
    unlink(pa);
    unlink(pb);
    unlink(live);
    rmdir(dir);
    return rc;
}
