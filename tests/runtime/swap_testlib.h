/* tests/runtime/swap_testlib.h: what the live-swap tests share (swap_test.c,
 * swap_runtime_test.c): test files in $TEST_TMPDIR, models opened on the sim device (private or
 * in a runtime), last-token logits of a fixed token list, reloads with injected faults, and
 * report lookups. Header-only (static inline): tests/testing.h counts CHECKs per translation
 * unit, so every CHECK here must be compiled into the test that runs it. */
#ifndef SL_TESTS_RUNTIME_SWAP_TESTLIB_H
#define SL_TESTS_RUNTIME_SWAP_TESTLIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"
#include "tools/lib/requant.h"

enum { N_TOK = 6 };
static const int32_t k_tokens[N_TOK] = {1, 17, 250, 3, 99, 42};

/* name inside the test's temporary folder ($TEST_TMPDIR, else /tmp); one of 16 buffers in
 * turn, so a caller may hold a few at once */
static inline const char *tmp_path(const char *name)
{
    static char buf[16][640];
    static int i;
    const char *dir = getenv("TEST_TMPDIR");
    char *b = buf[i++ % 16];
    snprintf(b, sizeof buf[0], "%s/%s", dir ? dir : "/tmp", name);
    return b;
}

static inline void copy_file(const char *from, const char *to)
{
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.copy", to);
    FILE *in = fopen(from, "rb"), *out = fopen(tmp, "wb");
    CHECK(in && out);
    if (!in || !out) exit(1);
    char b[65536];
    size_t n;
    while ((n = fread(b, 1, sizeof b, in)) > 0) fwrite(b, 1, n, out);
    fclose(in);
    fclose(out);
    CHECK(rename(tmp, to) == 0); /* atomic replace, as a careful user does */
}

/* idx: the .gpuidx of placement hot-cold, else NULL */
static inline sl_model *open_model_idx(const char *path, sl_placement pl, const char *idx)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.gpu_index = idx;
    o.device = "sim";
    o.progress = false;
    o.n_threads = 1;
    sl_model *m = NULL;
    sl_error e;
    sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "%s: %s", path, e.msg);
    return m;
}

static inline sl_model *open_model(const char *path, sl_placement pl)
{
    return open_model_idx(path, pl, NULL);
}

/* A 32-position context on m with scheduler options sched; NULL on a failure (reported). */
static inline sl_ctx *test_ctx(sl_model *m, const char *sched)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e;
    if (sl_ctx_create(m, &co, &c, &e)) {
        CHECK_MSG(0, "ctx: %s", e.msg);
        return NULL;
    }
    return c;
}

/* Last-token logits of k_tokens from an empty cache, malloc'd. */
static inline float *run_logits(sl_model *m, const char *sched)
{
    sl_ctx *c = test_ctx(m, sched);
    if (!c) return NULL;
    sl_error e;
    float *out = NULL;
    if (sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK) {
        sl_model_info mi;
        sl_model_info_get(m, &mi);
        out = malloc((size_t)mi.n_vocab * sizeof *out);
        memcpy(out, sl_ctx_logits(c, -1), (size_t)mi.n_vocab * sizeof *out);
    } else {
        CHECK_MSG(0, "eval: %s", e.msg);
    }
    sl_ctx_destroy(c);
    return out;
}

static inline int n_vocab(sl_model *m)
{
    sl_model_info mi;
    sl_model_info_get(m, &mi);
    return mi.n_vocab;
}

static inline bool same(const float *a, const float *b, int n)
{
    return a && b && !memcmp(a, b, (size_t)n * sizeof *a);
}

/* Checks that got (a logits row, freed here; NULL counts as a failure) equals want. */
static inline void expect(float *got, const float *want, int n, const char *what)
{
    CHECK_MSG(got && same(got, want, n), "%s", what);
    free(got);
}

/* Logits of a fresh load of path. */
static inline float *fresh_logits(const char *path, sl_placement pl, const char *sched)
{
    sl_model *m = open_model(path, pl);
    float *l = m ? run_logits(m, sched) : NULL;
    sl_model_close(m);
    return l;
}

static inline const sl_reload_entry *find(const sl_reload_report *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->entries[i].name, name)) return &r->entries[i];
    return NULL;
}

static inline void reload(sl_model *m, sl_reload_report *r)
{
    sl_error e;
    sl_status st = sl_reload_changed(m, r, &e);
    CHECK_MSG(st == SL_OK, "reload: %s", e.msg);
}

/* A reload that refuses a file whole: SL_ERR_UNSUPPORTED whose message has why, a
 * REFUSED_FILE entry, nothing changed. */
static inline void reload_refused(sl_model *m, sl_reload_report *r, const char *why)
{
    sl_error e;
    sl_status st = sl_reload_changed(m, r, &e);
    CHECK_MSG(st == SL_ERR_UNSUPPORTED, "reload: status %d: %s", (int)st, e.msg);
    if (st) CHECK_CONTAINS(e.msg, why);
    bool entry = false;
    for (size_t i = 0; i < r->n; i++) entry |= r->entries[i].kind == SL_RELOAD_REFUSED_FILE;
    CHECK(entry && r->files_refused >= 1 && !r->changed);
}

/* reload with the reload's at-th new device block refused (base/fault.h's SL_FAULT_SWAP_ALLOC
 * through the installed hook; 0: none) */
static inline void reload_fault(sl_model *m, sl_reload_report *r, uint64_t at)
{
    sl_fault_plan plan = {.at = {[SL_FAULT_SWAP_ALLOC] = at}};
    const sl_fault_hook hook = {sl_fault_plan_fn, &plan};
    sl_fault_install(at ? &hook : NULL);
    reload(m, r);
    sl_fault_install(NULL);
}

static inline bool entry_is(const sl_reload_report *r, const char *name, sl_reload_kind kind,
                     const char *where)
{
    const sl_reload_entry *e = find(r, name);
    CHECK_MSG(e && e->kind == kind && !strcmp(e->where, where), "%s: kind %d where '%s'", name,
              e ? (int)e->kind : -1, e ? e->where : "(none)");
    return e && e->kind == kind && !strcmp(e->where, where);
}

static inline void requant(const char *in, const char *out, const char *pat, uint32_t type)
{
    sl_error e;
    uint32_t n;
    sl_status st = sl_requant_file(in, out, pat, type, &n, NULL, NULL, NULL, NULL, &e);
    CHECK_MSG(st == SL_OK, "requant %s: %s", pat, e.msg);
}

static inline void write_model(const char *arch, uint32_t wtype, uint64_t seed, const char *reshape,
                        int n_layer, const char *path)
{
    tm_params p;
    tm_defaults(arch, &p);
    p.wtype = wtype;
    p.seed = seed;
    p.n_ff = 128; /* non-square FFN matrices: a swapped shape is a different shape */
    p.reshape = reshape;
    if (n_layer) p.n_layer = n_layer;
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "%s", e.msg);
}

/* Logits of m in rt after acquiring it (the runtime's invariants checked too). */
static inline float *rt_logits(sl_runtime *rt, sl_model *m)
{
    sl_error e;
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "acquire: %s", e.msg);
    CHECK_MSG(sl_runtime_validate(rt, &e) == SL_OK, "%s", e.msg);
    return run_logits(m, NULL);
}

/* A runtime on the sim device (64 MiB arena, a shared host floor or not) with path opened in
 * it with options o. */
static inline sl_model *rt_open_opts(const char *path, bool shared, const sl_model_options *o,
                                     sl_runtime **rt)
{
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = 64ull << 20;
    ro.host_slab_bytes = 4ull << 20;
    ro.shared_floor = shared;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "sluice-swaptest-%d", (int)getpid());
    ro.shm_prefix = prefix;
    sl_model *m = NULL;
    sl_error e;
    *rt = NULL;
    CHECK_MSG(sl_runtime_create(&ro, rt, &e) == SL_OK && sl_model_open_in(*rt, path, o, &m, &e)
              == SL_OK, "%s", e.msg);
    return m;
}

/* The same with placement gpu, one thread and io. */
static inline sl_model *rt_open_io(const char *path, bool shared, sl_load_io io, sl_runtime **rt)
{
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.progress = false;
    o.n_threads = 1;
    o.io = io;
    return rt_open_opts(path, shared, &o, rt);
}

static inline sl_model *rt_open(const char *path, bool shared, sl_runtime **rt)
{
    return rt_open_io(path, shared, SL_LOAD_DIRECT, rt);
}

static inline uint64_t rt_device_bytes(sl_runtime *rt, sl_model *m)
{
    sl_runtime_model_info mi = {0};
    sl_error e;
    CHECK_MSG(sl_runtime_model_info_get(rt, m, &mi, &e) == SL_OK, "%s", e.msg);
    return mi.device_bytes;
}

#endif
