/* llama.cpp as a peer: finding its tools and reading their output (peer_llama.h). */
#include "tools/common/peer_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/parse.h"
#include "tools/common/json_doc.h"
#include "tools/common/subproc.h"

static int is_dir(const char *p)
{
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

sl_status sl_peer_bin_dir(char *dir, size_t cap, sl_error *err)
{
    static const char how[] = "build them with tools/peer/llama.cpp (about 5 minutes on 2 cores; "
                              "then run through tools/run), or set SLUICE_PEER_LLAMA_BIN to the "
                              "folder holding llama-bench";
    const char *env = getenv("SLUICE_PEER_LLAMA_BIN");
    if (env && *env) {
        if (!is_dir(env))
            return sl_error_set(err, SL_ERR_NOT_FOUND,
                                "SLUICE_PEER_LLAMA_BIN '%s' is not a folder", env);
        if ((size_t)snprintf(dir, cap, "%s", env) >= cap)
            return sl_error_set(err, SL_ERR_RANGE, "SLUICE_PEER_LLAMA_BIN is too long");
        return SL_OK;
    }
    const char *root = getenv("SLUICE_ROOT");
    if (!root || !*root)
        return sl_error_set(err, SL_ERR_NOT_FOUND,
                            "llama.cpp's tools not found (no SLUICE_PEER_LLAMA_BIN, no "
                            "SLUICE_ROOT): %s",
                            how);
    char script[4096];
    if ((size_t)snprintf(script, sizeof script, "%s/tools/peer/llama.cpp", root) >= sizeof script)
        return sl_error_set(err, SL_ERR_RANGE, "SLUICE_ROOT is too long");
    char *argv[] = {script, "--print-bin", NULL};
    sl_subproc_result r;
    sl_status st = sl_subproc_run(argv, &(sl_subproc_opts){.max_bytes = 1 << 16}, &r, err);
    if (st) return st;
    size_t n = r.out_len;
    while (n && (r.out[n - 1] == '\n' || r.out[n - 1] == '\r')) n--;
    r.out[n] = '\0';
    if (r.exit_code || !is_dir(r.out)) {
        sl_subproc_result_free(&r);
        return sl_error_set(err, SL_ERR_NOT_FOUND, "llama.cpp's tools are not built: %s", how);
    }
    if ((size_t)snprintf(dir, cap, "%s", r.out) >= cap) {
        sl_subproc_result_free(&r);
        return sl_error_set(err, SL_ERR_RANGE, "llama.cpp's folder name is too long");
    }
    sl_subproc_result_free(&r);
    return SL_OK;
}

sl_status sl_peer_bench_run(const char *bin, const char *model, int64_t n_prompt, int64_t n_gen,
                            int64_t n_depth, int64_t threads, int64_t reps,
                            sl_peer_bench_row *rows, size_t cap, size_t *n, sl_error *err)
{
    char exe[4200], p[32], g[32], d[32], t[32], r[32];
    snprintf(exe, sizeof exe, "%s/llama-bench", bin);
    snprintf(p, sizeof p, "%lld", (long long)n_prompt);
    snprintf(g, sizeof g, "%lld", (long long)n_gen);
    snprintf(d, sizeof d, "%lld", (long long)n_depth);
    snprintf(t, sizeof t, "%lld", (long long)threads);
    snprintf(r, sizeof r, "%lld", (long long)reps);
    char *argv[] = {exe, "-m", (char *)model, "-p", p, "-n", g, "-t", t, "-r", r, "-o", "json",
                    "-d", d, NULL};
    if (n_depth <= 0) argv[13] = NULL; /* older llama-bench builds lack -d */
    sl_subproc_result res;
    *n = 0;
    sl_status st = sl_subproc_run(argv, NULL, &res, err);
    if (st) return st;
    if (res.exit_code) {
        size_t k = res.err_len > 1500 ? res.err_len - 1500 : 0;
        st = sl_error_set(err, SL_ERR_IO, "%s exited with status %d: %s", exe, res.exit_code,
                          res.err + k);
    } else {
        st = sl_peer_bench_parse(res.out, res.out_len, rows, cap, n, err);
    }
    sl_subproc_result_free(&res);
    return st;
}

void sl_peer_test_name(int64_t n_prompt, int64_t n_gen, int64_t n_depth, char *buf, size_t cap)
{
    int k;
    if (n_prompt > 0 && n_gen == 0)
        k = snprintf(buf, cap, "pp%lld", (long long)n_prompt);
    else if (n_gen > 0 && n_prompt == 0)
        k = snprintf(buf, cap, "tg%lld", (long long)n_gen);
    else
        k = snprintf(buf, cap, "pp%lld+tg%lld", (long long)n_prompt, (long long)n_gen);
    if (n_depth > 0 && k > 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, " @ d%lld", (long long)n_depth);
}

/* Field readers: each names the field and the test object (1-based) in its message. */
static sl_status get_str(const sl_jdoc *d, sl_jref o, size_t i, const char *key, char *dst,
                         size_t cap, sl_error *err)
{
    sl_jref v = sl_jdoc_get(d, o, key);
    size_t len;
    const char *s = v == SL_JNONE ? NULL : sl_jdoc_str(d, v, &len);
    if (!s)
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: \"%s\" is %s, not "
                            "a string", i + 1, key,
                            v == SL_JNONE ? "missing" : sl_jdoc_kind_name(sl_jdoc_kind(d, v)));
    snprintf(dst, cap, "%.*s", (int)(len < cap ? len : cap - 1), s);
    return SL_OK;
}

static sl_status get_int(const sl_jdoc *d, sl_jref o, size_t i, const char *key, int64_t *out,
                         sl_error *err)
{
    sl_jref v = sl_jdoc_get(d, o, key);
    if (v == SL_JNONE || !sl_jdoc_int(d, v, 0, INT64_MAX, out))
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: \"%s\" is %s, not "
                            "a whole number >= 0", i + 1, key,
                            v == SL_JNONE ? "missing" : sl_jdoc_kind_name(sl_jdoc_kind(d, v)));
    return SL_OK;
}

static sl_status get_num(const sl_jdoc *d, sl_jref o, size_t i, const char *key, double *out,
                         sl_error *err)
{
    sl_jref v = sl_jdoc_get(d, o, key);
    if (v == SL_JNONE || sl_jdoc_kind(d, v) != SL_JNUM || !(sl_jdoc_num(d, v) >= 0))
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: \"%s\" is %s, not "
                            "a number >= 0", i + 1, key,
                            v == SL_JNONE ? "missing" : sl_jdoc_kind_name(sl_jdoc_kind(d, v)));
    *out = sl_jdoc_num(d, v);
    return SL_OK;
}

static sl_status parse_row(const sl_jdoc *d, sl_jref o, size_t i, sl_peer_bench_row *r,
                           sl_error *err)
{
    memset(r, 0, sizeof *r);
    if (sl_jdoc_kind(d, o) != SL_JOBJ)
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu is %s, not an object",
                            i + 1, sl_jdoc_kind_name(sl_jdoc_kind(d, o)));
    int64_t size, params;
    sl_status st;
    if ((st = get_str(d, o, i, "model_type", r->model_type, sizeof r->model_type, err)) ||
        (st = get_str(d, o, i, "backends", r->backend, sizeof r->backend, err)) ||
        (st = get_str(d, o, i, "build_commit", r->build_commit, sizeof r->build_commit, err)) ||
        (st = get_int(d, o, i, "model_size", &size, err)) ||
        (st = get_int(d, o, i, "model_n_params", &params, err)) ||
        (st = get_int(d, o, i, "n_threads", &r->n_threads, err)) ||
        (st = get_int(d, o, i, "n_prompt", &r->n_prompt, err)) ||
        (st = get_int(d, o, i, "n_gen", &r->n_gen, err)) ||
        (st = get_num(d, o, i, "avg_ts", &r->avg_ts, err)) ||
        (st = get_num(d, o, i, "stddev_ts", &r->stddev_ts, err)))
        return st;
    r->model_size = (uint64_t)size;
    r->model_n_params = (uint64_t)params;
    /* n_depth is newer than some llama-bench versions: absent means 0 */
    if (sl_jdoc_get(d, o, "n_depth") != SL_JNONE &&
        (st = get_int(d, o, i, "n_depth", &r->n_depth, err)))
        return st;
    if (r->n_prompt == 0 && r->n_gen == 0)
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu has n_prompt = n_gen"
                            " = 0", i + 1);
    sl_jref a = sl_jdoc_get(d, o, "samples_ts");
    if (a == SL_JNONE || sl_jdoc_kind(d, a) != SL_JARR)
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: \"samples_ts\" is "
                            "%s, not an array", i + 1,
                            a == SL_JNONE ? "missing" : sl_jdoc_kind_name(sl_jdoc_kind(d, a)));
    for (sl_jref v = sl_jdoc_first(d, a); v != SL_JNONE; v = sl_jdoc_next(d, v)) {
        if (sl_jdoc_kind(d, v) != SL_JNUM || !(sl_jdoc_num(d, v) > 0))
            return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: samples_ts[%zu]"
                                " is not a number > 0", i + 1, r->n_samples);
        if (r->n_samples < SL_PEER_MAX_SAMPLES) r->samples_ts[r->n_samples++] = sl_jdoc_num(d, v);
    }
    if (!r->n_samples)
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: test %zu: samples_ts is empty",
                            i + 1);
    return SL_OK;
}

sl_status sl_peer_bench_parse(const char *text, size_t len, sl_peer_bench_row *rows, size_t cap,
                              size_t *n, sl_error *err)
{
    *n = 0;
    sl_jdoc *d = NULL;
    sl_error je = {0};
    if (sl_jdoc_parse(text, len, 8, &d, &je))
        return sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: %s", je.msg);
    sl_status st = SL_OK;
    if (sl_jdoc_kind(d, 0) != SL_JARR) {
        st = sl_error_set(err, SL_ERR_FORMAT, "llama-bench JSON: the top level is %s, not an "
                          "array", sl_jdoc_kind_name(sl_jdoc_kind(d, 0)));
    } else {
        size_t i = 0;
        for (sl_jref o = sl_jdoc_first(d, 0); o != SL_JNONE && !st; o = sl_jdoc_next(d, o), i++) {
            if (i >= cap) {
                st = sl_error_set(err, SL_ERR_RANGE, "llama-bench JSON: more than %zu tests", cap);
                break;
            }
            st = parse_row(d, o, i, &rows[i], err);
        }
        if (!st) *n = i;
    }
    sl_jdoc_free(d);
    return st;
}

sl_status sl_peer_ppl_parse(const char *text, size_t len, double *ppl, double *ppl_err,
                            sl_error *err)
{
    static const char key[] = "Final estimate: PPL = ";
    const char *last = NULL;
    for (const char *p = text; p && p < text + len;) {
        const char *q = memmem(p, (size_t)(text + len - p), key, sizeof key - 1);
        if (!q) break;
        last = q;
        p = q + 1;
    }
    if (!last) return sl_error_set(err, SL_ERR_NOT_FOUND, "no \"%s\" line in the output", key);
    const char *p = last + sizeof key - 1, *end = text + len;
    char num[64];
    double vals[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        size_t m = 0;
        while (p + m < end && m + 1 < sizeof num && p[m] && !strchr(" \t\r\n", p[m])) m++;
        memcpy(num, p, m);
        num[m] = '\0';
        sl_error pe;
        if (sl_parse_f64("PPL", num, (sl_frange){0, 1e300, false, false}, &vals[k], &pe))
            return sl_error_set(err, SL_ERR_FORMAT, "Final estimate line: %s", pe.msg);
        p += m;
        if (k == 0) {
            /* " +/- " separates the estimate from its error; Sluice without one stops here */
            if (end - p < 5 || memcmp(p, " +/- ", 5)) break;
            p += 5;
        }
    }
    *ppl = vals[0];
    if (ppl_err) *ppl_err = vals[1];
    return SL_OK;
}

/* completion.cpp ends with LOG(" [end of text]\n") at an end-of-generation token and then
 * LOG("\n\n") always; anything before is generated text, trailing newlines included. */
size_t sl_peer_completion_text(const char *text, size_t len)
{
    static const char eot[] = " [end of text]\n", tail[] = "\n\n";
    size_t n = len;
    if (n >= sizeof tail - 1 && !memcmp(text + n - (sizeof tail - 1), tail, sizeof tail - 1))
        n -= sizeof tail - 1;
    if (n >= sizeof eot - 1 && !memcmp(text + n - (sizeof eot - 1), eot, sizeof eot - 1))
        n -= sizeof eot - 1;
    return n;
}
