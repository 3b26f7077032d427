/* Live tensor swap (sl_reload_changed, scheduler/swap.h) on the sim device: every case of the
 * policy, each checked by logits that must equal a fresh load of the changed file bit for bit
 * (and the original's after a restore); a hot/cold split layer rebuilt from new bytes; a torn
 * file; a many-shard model; the fetch scheduler's expert cache; a stress run with one thread
 * evaluating while another rewrites and reloads; and models in a runtime (host floor and
 * device copy replaced, shared floor left alone). */
#include <glob.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "scheduler/gpuidx.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"
#include "tools/lib/requant.h"

enum { N_TOK = 6 };
static const int32_t k_tokens[N_TOK] = {1, 17, 250, 3, 99, 42};
static char g_dir[512];

static const char *tmp_path(const char *name)
{
    static char buf[16][640];
    static int i;
    char *b = buf[i++ % 16];
    snprintf(b, sizeof buf[0], "%s/%s", g_dir, name);
    return b;
}

static void copy_file(const char *from, const char *to)
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
static sl_model *open_model_idx(const char *path, sl_placement pl, const char *idx)
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

static sl_model *open_model(const char *path, sl_placement pl)
{
    return open_model_idx(path, pl, NULL);
}

/* Last-token logits of k_tokens from an empty cache, malloc'd. */
static float *run_logits(sl_model *m, const char *sched)
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

static int n_vocab(sl_model *m)
{
    sl_model_info mi;
    sl_model_info_get(m, &mi);
    return mi.n_vocab;
}

static bool same(const float *a, const float *b, int n)
{
    return a && b && !memcmp(a, b, (size_t)n * sizeof *a);
}

/* Checks that got (a logits row, freed here; NULL counts as a failure) equals want. */
static void expect(float *got, const float *want, int n, const char *what)
{
    CHECK_MSG(got && same(got, want, n), "%s", what);
    free(got);
}

/* Logits of a fresh load of path. */
static float *fresh_logits(const char *path, sl_placement pl, const char *sched)
{
    sl_model *m = open_model(path, pl);
    float *l = m ? run_logits(m, sched) : NULL;
    sl_model_close(m);
    return l;
}

static const sl_reload_entry *find(const sl_reload_report *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->entries[i].name, name)) return &r->entries[i];
    return NULL;
}

static void reload(sl_model *m, sl_reload_report *r)
{
    sl_error e;
    sl_status st = sl_reload_changed(m, r, &e);
    CHECK_MSG(st == SL_OK, "reload: %s", e.msg);
}

/* reload under SLUICE_FAULT_SWAP_ALLOC=fault (NULL: none) */
static void reload_fault(sl_model *m, sl_reload_report *r, const char *fault)
{
    if (fault) setenv("SLUICE_FAULT_SWAP_ALLOC", fault, 1);
    reload(m, r);
    unsetenv("SLUICE_FAULT_SWAP_ALLOC");
}

static bool entry_is(const sl_reload_report *r, const char *name, sl_reload_kind kind,
                     const char *where)
{
    const sl_reload_entry *e = find(r, name);
    CHECK_MSG(e && e->kind == kind && !strcmp(e->where, where), "%s: kind %d where '%s'", name,
              e ? (int)e->kind : -1, e ? e->where : "(none)");
    return e && e->kind == kind && !strcmp(e->where, where);
}

static void requant(const char *in, const char *out, const char *pat, uint32_t type)
{
    sl_error e;
    uint32_t n;
    sl_status st = sl_requant_file(in, out, pat, type, &n, &e);
    CHECK_MSG(st == SL_OK, "requant %s: %s", pat, e.msg);
}

static void write_model(const char *arch, uint32_t wtype, uint64_t seed, const char *reshape,
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

/* Whether two KV values are equal: type, and value (element by element for arrays). */
static bool value_eq(const sl_gguf_value *a, const sl_gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case SL_GGUF_F32:
        return !memcmp(&a->v.f32, &b->v.f32, sizeof a->v.f32);
    case SL_GGUF_F64:
        return !memcmp(&a->v.f64, &b->v.f64, sizeof a->v.f64);
    case SL_GGUF_BOOL:
        return a->v.b == b->v.b;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        return a->v.i64 == b->v.i64;
    case SL_GGUF_STR:
        return a->v.str.len == b->v.str.len &&
               !memcmp(a->v.str.ptr, b->v.str.ptr, (size_t)a->v.str.len);
    case SL_GGUF_ARR:
        if (a->v.arr.elem != b->v.arr.elem || a->v.arr.n != b->v.arr.n) return false;
        for (uint64_t i = 0; i < a->v.arr.n; i++) {
            sl_gguf_value x, y;
            if (sl_gguf_arr_get(a, i, &x, NULL) || sl_gguf_arr_get(b, i, &y, NULL) ||
                !value_eq(&x, &y))
                return false;
        }
        return true;
    default:
        return a->v.u64 == b->v.u64;
    }
}

/* requant keeps everything but the chosen tensors' types and bytes: every KV pair (order and
 * value), the alignment, every tensor's name, shape and order, every other tensor's bytes. */
static void test_requant_keeps(void)
{
    const char *in = tmp_path("k_in.gguf"), *out = tmp_path("k_out.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 13, NULL, 0, in);
    requant(in, out, "blk\\.1\\.ffn_down_exps\\.weight|output\\.weight", SL_GGML_Q4_0);
    sl_gguf *a = NULL, *b = NULL;
    sl_error e;
    CHECK_MSG(sl_gguf_open(in, NULL, &a, &e) == SL_OK && sl_gguf_open(out, NULL, &b, &e) == SL_OK,
              "%s", e.msg);
    if (!a || !b) return;
    CHECK(sl_gguf_kv_count(a) == sl_gguf_kv_count(b) && sl_gguf_kv_count(a) > 5);
    for (size_t i = 0; i < sl_gguf_kv_count(a) && i < sl_gguf_kv_count(b); i++)
        CHECK_MSG(!strcmp(sl_gguf_kv_key(a, i), sl_gguf_kv_key(b, i)) &&
                  value_eq(sl_gguf_kv_value(a, i), sl_gguf_kv_value(b, i)), "KV %s",
                  sl_gguf_kv_key(a, i));
    CHECK(sl_gguf_alignment(a) == sl_gguf_alignment(b));
    CHECK(sl_gguf_tensor_count(a) == sl_gguf_tensor_count(b));
    int changed = 0;
    for (size_t i = 0; i < sl_gguf_tensor_count(a) && i < sl_gguf_tensor_count(b); i++) {
        const sl_gguf_tensor *x = sl_gguf_tensor_at(a, i), *y = sl_gguf_tensor_at(b, i);
        const bool chosen = !strcmp(x->name, "blk.1.ffn_down_exps.weight") ||
                            !strcmp(x->name, "output.weight");
        CHECK_MSG(!strcmp(x->name, y->name) && x->n_dims == y->n_dims &&
                  !memcmp(x->ne, y->ne, sizeof x->ne), "tensor %zu: %s / %s", i, x->name, y->name);
        if (chosen) {
            changed += y->type == SL_GGML_Q4_0 && x->type == SL_GGML_Q8_0;
            continue;
        }
        CHECK_MSG(x->type == y->type && x->nbytes == y->nbytes &&
                  !memcmp(sl_gguf_tensor_view(a, x), sl_gguf_tensor_view(b, y),
                          (size_t)x->nbytes), "requant changed '%s'", x->name);
    }
    CHECK(changed == 2);
    sl_gguf_close(a);
    sl_gguf_close(b);
}

/* Private block, reattach, in place, refused shape, on a device (gpu) and a host (cpu)
 * placement. */
static void test_policy(sl_placement pl)
{
    const char *orig = tmp_path("p_orig.gguf"), *live = tmp_path("p_live.gguf");
    const char *f16 = tmp_path("p_f16.gguf"), *seed2 = tmp_path("p_seed2.gguf");
    const char *shape = tmp_path("p_shape.gguf");
    write_model("llama", SL_GGML_Q8_0, 1, NULL, 0, orig);
    write_model("llama", SL_GGML_Q8_0, 2, NULL, 0, seed2);
    write_model("llama", SL_GGML_Q8_0, 1, "blk.0.ffn_up.weight", 0, shape);
    requant(orig, f16, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    sl_model *m = open_model(live, pl);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_f16 = fresh_logits(f16, pl, NULL);
    float *l_seed2 = fresh_logits(seed2, pl, NULL);
    const char *want_where = pl == SL_PLACE_GPU ? "device" : "host";
    sl_reload_report r;

    reload(m, &r); /* nothing changed */
    CHECK(!r.changed && r.n == 0 && r.files_changed == 0);
    sl_reload_report_free(&r);

    copy_file(f16, live); /* new type: a private block where it lived */
    reload(m, &r);
    CHECK(r.changed && r.n_reloaded == 1);
    const sl_reload_entry *e = find(&r, "blk.1.attn_q.weight");
    CHECK(e && e->kind == SL_RELOAD_PRIVATE && e->old_type == SL_GGML_Q8_0 &&
          e->new_type == SL_GGML_F16 && !strcmp(e->where, want_where));
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK_MSG(same(l, l_f16, V), "private block: logits differ from a fresh load");
    CHECK(!same(l, l_orig, V));
    free(l);

    copy_file(orig, live); /* back: reattach to the original block, bit-identical */
    reload(m, &r);
    e = find(&r, "blk.1.attn_q.weight");
    CHECK(e && e->kind == SL_RELOAD_REATTACHED && e->new_type == SL_GGML_Q8_0 && r.n_reloaded == 1);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "reattach: logits differ from the original");

    copy_file(seed2, live); /* same types, other bytes: every tensor in place */
    reload(m, &r);
    e = find(&r, "blk.0.wq.weight") ? find(&r, "blk.0.wq.weight") : find(&r, "blk.0.attn_q.weight");
    CHECK(e && e->kind == SL_RELOAD_IN_PLACE);
    CHECK(r.n_refused == 0 && r.n_reloaded > 5);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_seed2, V, "in place: logits differ from a fresh load");

    copy_file(orig, live);
    reload(m, &r);
    sl_reload_report_free(&r);
    copy_file(shape, live); /* a different logical shape: refused, the rest untouched */
    reload(m, &r);
    e = find(&r, "blk.0.ffn_up.weight");
    CHECK(e && e->kind == SL_RELOAD_REFUSED && strstr(e->msg, "shape"));
    CHECK(r.n_reloaded == 0 && !r.changed);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "refused: logits changed");
    free(l_orig);
    free(l_f16);
    free(l_seed2);
    sl_model_close(m);
}

/* Host fallback (injected allocation failure) and sibling consistency of merged experts. */
static void test_fallback_siblings(void)
{
    const char *orig = tmp_path("s_orig.gguf"), *live = tmp_path("s_live.gguf");
    const char *f16 = tmp_path("s_f16.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 3, NULL, 0, orig);
    requant(orig, f16, "blk\\.0\\.ffn_up_exps\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    sl_model *m = open_model(live, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_f16 = fresh_logits(f16, SL_PLACE_GPU, NULL);
    sl_reload_report r;
    copy_file(f16, live);
    reload_fault(m, &r, "1");
    const sl_reload_entry *e = find(&r, "blk.0.ffn_up_exps.weight");
    CHECK(e && e->kind == SL_RELOAD_PRIVATE && !strcmp(e->where, "host (fallback)"));
    CHECK(r.n_fallback == 1);
    const sl_reload_entry *g = find(&r, "blk.0.ffn_gate_exps.weight");
    const sl_reload_entry *d = find(&r, "blk.0.ffn_down_exps.weight");
    CHECK(g && g->kind == SL_RELOAD_SIBLING && !strcmp(g->where, "host (fallback)"));
    CHECK(d && d->kind == SL_RELOAD_SIBLING && !strcmp(d->where, "host (fallback)"));
    CHECK(!find(&r, "blk.1.ffn_gate_exps.weight"));
    sl_reload_report_print(&r, stdout);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK_MSG(same(l, l_f16, V), "fallback: logits differ from a fresh load");
    free(l);

    copy_file(orig, live); /* the group returns to the device together */
    reload(m, &r);
    e = find(&r, "blk.0.ffn_up_exps.weight");
    CHECK(e && e->kind == SL_RELOAD_REATTACHED);
    g = find(&r, "blk.0.ffn_gate_exps.weight");
    /* the rewritten file holds the siblings too: they reattach (or return) with it */
    CHECK(g && (g->kind == SL_RELOAD_SIBLING || g->kind == SL_RELOAD_REATTACHED) &&
          !strcmp(g->where, "device"));
    sl_reload_report_print(&r, stdout);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V,
           "restore after fallback: logits differ from the original");
    free(l_orig);
    free(l_f16);
    sl_model_close(m);
}

/* Per-expert tensors: one expert alone may not change type; all of a projection may. */
static void test_per_expert(void)
{
    const char *orig = tmp_path("x_orig.gguf"), *live = tmp_path("x_live.gguf");
    const char *one = tmp_path("x_one.gguf"), *all = tmp_path("x_all.gguf");
    write_model("mixtral-split", SL_GGML_Q8_0, 4, NULL, 0, orig);
    requant(orig, one, "blk\\.0\\.ffn_up\\.3\\.weight", SL_GGML_F16);
    requant(orig, all, "blk\\.0\\.ffn_up\\.[0-9]+\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    sl_model *m = open_model(live, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_all = fresh_logits(all, SL_PLACE_GPU, NULL);
    sl_reload_report r;
    copy_file(one, live);
    reload(m, &r);
    const sl_reload_entry *e = find(&r, "blk.0.ffn_up.3.weight");
    CHECK(e && e->kind == SL_RELOAD_REFUSED && strstr(e->msg, "share a type"));
    CHECK(!r.changed);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK(same(l, l_orig, V));
    free(l);
    copy_file(all, live); /* the first new block refused: every expert of layer 0 follows */
    reload_fault(m, &r, "1");
    CHECK(r.changed && r.n_reloaded == 8 && r.n_refused == 0 && r.n_fallback == 1);
    entry_is(&r, "blk.0.ffn_up.0.weight", SL_RELOAD_PRIVATE, "host (fallback)");
    entry_is(&r, "blk.0.ffn_gate.5.weight", SL_RELOAD_SIBLING, "host (fallback)");
    entry_is(&r, "blk.0.ffn_down.7.weight", SL_RELOAD_SIBLING, "host (fallback)");
    CHECK(!find(&r, "blk.1.ffn_gate.0.weight"));
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_all, V, "per-expert fallback: logits differ from a fresh load");
    copy_file(orig, live);
    reload(m, &r);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "per-expert: restore");
    copy_file(all, live);
    reload(m, &r);
    CHECK(r.changed && r.n_reloaded == 8 && r.n_refused == 0);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_all, V, "per-expert: logits differ from a fresh load");
    free(l_orig);
    free(l_all);
    sl_model_close(m);
}

/* A torn file (truncated, header or data past the end) or one that changes while it is read
 * is skipped and retried. */
static void test_torn(void)
{
    const char *orig = tmp_path("t_orig.gguf"), *live = tmp_path("t_live.gguf");
    const char *f16 = tmp_path("t_f16.gguf");
    write_model("llama", SL_GGML_Q8_0, 5, NULL, 0, orig);
    requant(orig, f16, "output\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    sl_model *m = open_model(live, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_f16 = fresh_logits(f16, SL_PLACE_GPU, NULL);
    sl_reload_report r;
    const long cuts[2] = {100, 0}; /* inside the header; inside the data (set below) */
    FILE *f = fopen(f16, "rb");
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fclose(f);
    for (int k = 0; k < 2; k++) {
        copy_file(f16, live);
        CHECK(truncate(live, k ? size - 64 : cuts[k]) == 0);
        reload(m, &r);
        CHECK(r.files_skipped == 1 && !r.changed && r.n &&
              r.entries[0].kind == SL_RELOAD_SKIPPED_FILE);
        sl_reload_report_free(&r);
        float *l = run_logits(m, NULL);
        CHECK_MSG(same(l, l_orig, V), "torn file %d: the old tensors must stay", k);
        free(l);
    }
    /* whole, but its mtime moves between the stat before the reads and the one after (a writer
     * still at work; SLUICE_FAULT_SWAP_TOUCH does it deterministically): skipped too */
    copy_file(f16, live);
    setenv("SLUICE_FAULT_SWAP_TOUCH", "1", 1);
    reload(m, &r);
    unsetenv("SLUICE_FAULT_SWAP_TOUCH");
    CHECK(r.files_skipped == 1 && !r.changed && r.n_reloaded == 0 && r.n == 1 &&
          r.entries[0].kind == SL_RELOAD_SKIPPED_FILE &&
          strstr(r.entries[0].msg, "changed while it was read"));
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "a file changing while read: logits changed");
    /* still now: retried and applied */
    reload(m, &r);
    CHECK(r.changed && r.n_reloaded == 1 && r.files_skipped == 0);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK(same(l, l_f16, V));
    free(l);
    free(l_orig);
    free(l_f16);
    sl_model_close(m);
}

/* Copies a model into one shard per tensor (llama.cpp's gguf-split layout). */
static void reshard(const char *in, const char *out)
{
    sl_gguf *g;
    sl_error e;
    if (sl_gguf_open(in, NULL, &g, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    sl_gguf_writer_options wo = {.shard_max_tensors = 1};
    sl_gguf_writer *w;
    CHECK(sl_gguf_writer_create(out, &wo, &w, &e) == SL_OK);
    for (size_t i = 0; i < sl_gguf_kv_count(g); i++)
        if (strcmp(sl_gguf_kv_key(g, i), "general.alignment"))
            CHECK(sl_gguf_writer_set(w, sl_gguf_kv_key(g, i), sl_gguf_kv_value(g, i), &e) == 0);
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        CHECK(sl_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &e) == 0);
    }
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        CHECK(sl_gguf_writer_write(w, sl_gguf_tensor_view(g, t), t->nbytes, &e) == 0);
    }
    CHECK_MSG(sl_gguf_writer_finish(w, &e) == SL_OK, "%s", e.msg);
    sl_gguf_writer_destroy(w);
    sl_gguf_close(g);
}

/* The first shard of the one-tensor-per-file copy NAME-0000K-of-N.gguf of in (first) and the
 * shard holding each of tensors[0..n) (shard[k]); returns the shard count (0: failed). */
static uint32_t reshard_find(const char *in, const char *name, char first[700],
                             const char *const *tensors, size_t n, char (*shard)[700])
{
    char pat[700];
    reshard(in, tmp_path(name));
    snprintf(pat, sizeof pat, "%.*s-00001-of-*.gguf", (int)strlen(name) - 5, name);
    glob_t gl;
    CHECK(glob(tmp_path(pat), 0, NULL, &gl) == 0 && gl.gl_pathc == 1);
    if (gl.gl_pathc != 1) return 0;
    snprintf(first, 700, "%s", gl.gl_pathv[0]);
    globfree(&gl);
    sl_gguf *g = NULL;
    sl_error e;
    CHECK_MSG(sl_gguf_open(first, NULL, &g, &e) == SL_OK, "%s", e.msg);
    if (!g) return 0;
    const uint32_t n_shard = sl_gguf_shard_count(g);
    for (size_t k = 0; k < n; k++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_find(g, tensors[k]);
        snprintf(shard[k], 700, "%s", t ? sl_gguf_shard_path(g, t->shard) : "");
    }
    sl_gguf_close(g);
    return n_shard;
}

/* Many shards: only the changed one is parsed; the result equals a fresh load. */
static void test_shards(void)
{
    const char *orig = tmp_path("h_orig.gguf");
    write_model("llama", SL_GGML_Q8_0, 6, NULL, 112, orig); /* 1,011 tensors */
    char first[700], shard[1][700];
    const char *const down = "blk.7.ffn_down.weight";
    const uint32_t n_shard = reshard_find(orig, "h.gguf", first, &down, 1, shard);
    if (!n_shard) return;
    CHECK(n_shard >= 1000); /* the layout of per-tensor sweeps (ik_llama.cpp users) */
    sl_model *m = open_model(first, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL);
    char saved[720];
    snprintf(saved, sizeof saved, "%s.orig", shard[0]);
    copy_file(shard[0], saved);
    requant(shard[0], shard[0], "blk\\.7\\.ffn_down\\.weight", SL_GGML_Q4_0);
    float *l_new = fresh_logits(first, SL_PLACE_GPU, NULL);
    sl_reload_report r;
    reload(m, &r);
    CHECK(r.files_changed == 1 && r.n_reloaded == 1 && r.changed);
    const sl_reload_entry *x = find(&r, "blk.7.ffn_down.weight");
    CHECK(x && x->kind == SL_RELOAD_PRIVATE && x->new_type == SL_GGML_Q4_0);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK_MSG(same(l, l_new, V), "shards: logits differ from a fresh load");
    CHECK(!same(l, l_orig, V));
    free(l);
    copy_file(saved, shard[0]);
    reload(m, &r);
    CHECK(r.n_reloaded == 1 && r.entries[0].kind == SL_RELOAD_REATTACHED);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "logits differ");
    free(l_orig);
    free(l_new);
    sl_model_close(m);
}

/* Experts on the host computed by the fetch scheduler with an expert cache on the device:
 * the cache's copies must not outlive a reload. */
static void test_expert_cache(void)
{
    const char *orig = tmp_path("c_orig.gguf"), *live = tmp_path("c_live.gguf");
    const char *seed2 = tmp_path("c_seed2.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 7, NULL, 0, orig);
    write_model("qwen3moe", SL_GGML_Q8_0, 8, NULL, 0, seed2);
    copy_file(orig, live);
    const char *sched = "mode=full cache_kb=4096";
    sl_model *m = open_model(live, SL_PLACE_EXPERTS_CPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_seed2 = fresh_logits(seed2, SL_PLACE_EXPERTS_CPU, sched);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.sched = sched;
    sl_ctx *c;
    sl_error e;
    if (sl_ctx_create(m, &co, &c, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        sl_model_close(m);
        return;
    }
    for (int k = 0; k < 3; k++) { /* warm the cache */
        CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK && sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK);
    }
    copy_file(seed2, live);
    sl_reload_report r;
    CHECK(sl_ctx_reload_changed(c, &r, &e) == SL_OK && r.changed);
    sl_reload_report_free(&r);
    CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK && sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK);
    CHECK_MSG(same(sl_ctx_logits(c, -1), l_seed2, V), "stale expert cache after a reload");
    sl_ctx_stats cs;
    sl_ctx_stats_get(c, &cs);
    CHECK(cs.expert_cache_lookups > 0);
    sl_ctx_destroy(c);
    free(l_seed2);
    sl_model_close(m);
}

/* Logits of m in rt after acquiring it (the runtime's invariants checked too). */
static float *rt_logits(sl_runtime *rt, sl_model *m)
{
    sl_error e;
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "acquire: %s", e.msg);
    CHECK_MSG(sl_runtime_validate(rt, &e) == SL_OK, "%s", e.msg);
    return run_logits(m, NULL);
}

/* A runtime on the sim device (64 MiB arena) with path opened in it (placement gpu). */
static sl_model *rt_open_io(const char *path, bool shared, sl_load_io io, sl_runtime **rt)
{
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = 64ull << 20;
    ro.host_slab_bytes = 4ull << 20;
    ro.shared_floor = shared;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "sluice-swaptest-%d", (int)getpid());
    ro.shm_prefix = prefix;
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.progress = false;
    o.n_threads = 1;
    o.io = io;
    sl_model *m = NULL;
    sl_error e;
    *rt = NULL;
    CHECK_MSG(sl_runtime_create(&ro, rt, &e) == SL_OK && sl_model_open_in(*rt, path, &o, &m, &e)
              == SL_OK, "%s", e.msg);
    return m;
}

static sl_model *rt_open(const char *path, bool shared, sl_runtime **rt)
{
    return rt_open_io(path, shared, SL_LOAD_DIRECT, rt);
}

static uint64_t rt_device_bytes(sl_runtime *rt, sl_model *m)
{
    sl_runtime_model_info mi = {0};
    sl_error e;
    CHECK_MSG(sl_runtime_model_info_get(rt, m, &mi, &e) == SL_OK, "%s", e.msg);
    return mi.device_bytes;
}

/* A model in a runtime: the new bytes replace its host floor and its device copy, so its
 * logits equal a fresh load of the changed file after the reload, after an eviction and
 * reacquire, and after a compaction; a restore brings the original's back. With a shared
 * floor the region is never written (copy-on-write): a second runtime mapping the same
 * region (another process, as far as the floor knows) keeps the original's logits. Released
 * to disk and loaded again it reads the new file versions (io: how; with mmap its host weights
 * point into the refreshed file view). */
static void test_runtime(bool shared, sl_load_io io)
{
    const char *orig = tmp_path("rt_orig.gguf"), *live = tmp_path("rt_live.gguf");
    const char *q = tmp_path("rt_q.gguf"), *q2 = tmp_path("rt_q2.gguf");
    write_model("llama", SL_GGML_Q8_0, 5, NULL, 0, orig);
    /* a device tensor to a new type (new block), the host embedding to a new type */
    requant(orig, q2, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16);
    requant(q2, q, "token_embd\\.weight", SL_GGML_Q4_0);
    const char *shape = tmp_path("rt_shape.gguf");
    write_model("llama", SL_GGML_Q8_0, 5, "blk.0.ffn_up.weight", 0, shape);
    requant(shape, shape, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16); /* q2 but a shape */
    copy_file(orig, live);
    float *l_orig = fresh_logits(orig, SL_PLACE_GPU, NULL);
    float *l_q = fresh_logits(q, SL_PLACE_GPU, NULL);
    sl_runtime *rt = NULL, *rt2 = NULL;
    sl_model *m = rt_open_io(live, shared, io, &rt);
    sl_model *m2 = shared ? rt_open(live, true, &rt2) : NULL;
    sl_error e;
    if (!m || (shared && !m2)) return;
    const int V = n_vocab(m);
    float *l = rt_logits(rt, m);
    CHECK_MSG(same(l, l_orig, V), "runtime: logits differ from a private open's");
    free(l);
    CHECK(!same(l_orig, l_q, V));

    copy_file(q, live);
    sl_reload_report r;
    reload(m, &r);
    const sl_reload_entry *a = find(&r, "blk.1.attn_q.weight"), *b = find(&r, "token_embd.weight");
    CHECK(r.changed && r.n_reloaded == 2 && r.n_refused == 0);
    CHECK(a && a->kind == SL_RELOAD_PRIVATE && a->new_type == SL_GGML_F16 &&
          !strcmp(a->where, "device"));
    CHECK(b && b->kind == SL_RELOAD_PRIVATE && !strcmp(b->where, "host"));
    sl_reload_report_free(&r);
    expect(rt_logits(rt, m), l_q, V, "runtime reload: logits differ from a fresh load");
    /* evicted to the host floor and back: the floor held the new bytes */
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_HOST, &e) == SL_OK);
    expect(rt_logits(rt, m), l_q, V, "runtime reload: logits differ after evict + acquire");
    CHECK_MSG(sl_runtime_compact(rt, &m, 1, &e) == SL_OK, "%s", e.msg);
    expect(rt_logits(rt, m), l_q, V, "runtime reload: logits differ after compaction");
    if (shared) {
        float *l2 = rt_logits(rt2, m2);
        CHECK_MSG(same(l2, l_orig, V), "shared floor: the other runtime's logits changed");
        free(l2);
        CHECK(sl_runtime_set_residency(rt2, m2, SL_RESIDENCY_HOST, &e) == SL_OK);
        expect(rt_logits(rt2, m2), l_orig, V, "shared floor: written under the other runtime");
    }
    /* a reload while evicted (on its floor) replaces the floor alone */
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_HOST, &e) == SL_OK);
    copy_file(orig, live);
    reload(m, &r);
    CHECK(r.changed && r.n_reloaded == 2 && !strcmp(find(&r, "token_embd.weight")->where, "host"));
    sl_reload_report_free(&r);
    CHECK_MSG(sl_runtime_validate(rt, &e) == SL_OK, "%s", e.msg);
    expect(rt_logits(rt, m), l_orig, V, "runtime restore: logits differ from the original");
    /* back to disk and loaded again: the new file versions are read (the files were replaced
     * by rename, so the handle of the first open still reads the old ones) — once a reload has
     * caught up with the files */
    copy_file(q, live);
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "reload it first");
    CHECK(sl_model_residency(m) == SL_RESIDENCY_DEVICE);
    reload(m, &r);
    CHECK(r.n_reloaded == 2);
    sl_reload_report_free(&r);
    CHECK_MSG(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_OK, "%s", e.msg);
    CHECK(sl_model_residency(m) == SL_RESIDENCY_DISK);
    expect(rt_logits(rt, m), l_q, V, "reload, disk, load: logits differ from a fresh load");
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_OK);
    expect(rt_logits(rt, m), l_q, V, "disk twice: logits differ from a fresh load");
    /* a refused change beside an applied one leaves a tensor whose bytes the file no longer
     * has: no way back to disk */
    copy_file(shape, live);
    reload(m, &r);
    CHECK(r.n_refused == 1 && r.n_reloaded == 1);
    sl_reload_report_free(&r);
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "blk.0.ffn_up.weight");
    CHECK(sl_model_residency(m) == SL_RESIDENCY_DEVICE);
    float *l_q2 = fresh_logits(q2, SL_PLACE_GPU, NULL);
    expect(rt_logits(rt, m), l_q2, V, "refused: logits differ from the file before it");
    free(l_q2);
    sl_model_close(m);
    sl_model_close(m2);
    CHECK(sl_runtime_destroy(rt, &e) == SL_OK);
    CHECK(sl_runtime_destroy(rt2, &e) == SL_OK);
    free(l_orig);
    free(l_q);
}

/* One thread evaluates continuously while another rewrites the file and reloads: every logits
 * vector equals one of the two references; a private model, and one in a runtime. */
typedef struct stress {
    sl_model *m;
    const float *ref[2];
    int V;
    atomic_bool stop;
    atomic_int evals, bad, errors;
} stress;

static void *evaluator(void *arg)
{
    stress *s = arg;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    sl_ctx *c;
    sl_error e;
    if (sl_ctx_create(s->m, &co, &c, &e)) {
        atomic_fetch_add(&s->errors, 1);
        return NULL;
    }
    while (!atomic_load(&s->stop)) {
        if (sl_ctx_rewind(c, 0, &e) || sl_ctx_eval(c, k_tokens, N_TOK, &e)) {
            atomic_fetch_add(&s->errors, 1);
            break;
        }
        const float *l = sl_ctx_logits(c, -1);
        if (!same(l, s->ref[0], s->V) && !same(l, s->ref[1], s->V)) atomic_fetch_add(&s->bad, 1);
        atomic_fetch_add(&s->evals, 1);
    }
    sl_ctx_destroy(c);
    return NULL;
}

static void test_stress(bool in_runtime)
{
    const char *a = tmp_path("r_a.gguf"), *b = tmp_path("r_b.gguf");
    const char *live = tmp_path("r_live.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 9, NULL, 0, a);
    requant(a, b, "blk\\.1\\.ffn_(gate|up)_exps\\.weight|blk\\.0\\.attn_q\\.weight",
            SL_GGML_F16);
    copy_file(a, live);
    float *ra = fresh_logits(a, SL_PLACE_GPU, NULL), *rb = fresh_logits(b, SL_PLACE_GPU, NULL);
    sl_runtime *rt = NULL;
    stress s = {.m = in_runtime ? rt_open(live, false, &rt) : open_model(live, SL_PLACE_GPU),
                .ref = {ra, rb}};
    if (!s.m) return;
    sl_error e;
    if (rt) CHECK_MSG(sl_runtime_acquire(rt, s.m, &e) == SL_OK, "%s", e.msg);
    s.V = n_vocab(s.m);
    CHECK(!same(ra, rb, s.V));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, evaluator, &s);
    const time_t t0 = time(NULL);
    int reloads = 0, fallbacks = 0;
    for (int k = 0; k < 40 && time(NULL) - t0 < 20; k++) {
        copy_file(k % 2 ? a : b, live);
        sl_reload_report r;
        /* in a runtime, every third reload finds no room for a new block: fallbacks and returns
         * of expert groups under the evaluations too */
        reload_fault(s.m, &r, rt && k % 3 == 0 ? "1" : NULL);
        reloads += r.changed;
        fallbacks += (int)r.n_fallback;
        sl_reload_report_free(&r);
        usleep(2000);
    }
    atomic_store(&s.stop, true);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    printf("stress%s: %d reloads (%d fallbacks), %d evaluations, %d torn, %d errors\n",
           rt ? " (runtime)" : "", reloads, fallbacks, atomic_load(&s.evals),
           atomic_load(&s.bad), atomic_load(&s.errors));
    CHECK(reloads >= 10 && atomic_load(&s.evals) > 0 && (!rt || fallbacks > 0));
    CHECK(atomic_load(&s.bad) == 0 && atomic_load(&s.errors) == 0);
    if (rt) CHECK_MSG(sl_runtime_validate(rt, &e) == SL_OK, "%s", e.msg);
    sl_model_close(s.m);
    if (rt) CHECK(sl_runtime_destroy(rt, &e) == SL_OK);
    free(ra);
    free(rb);
}

/* Host fallback in a runtime (the device short of memory for a tensor's new size, injected):
 * the tensor and its expert siblings stay on the host, counted and reported; the runtime's
 * residency knows it (device bytes, eviction, reacquire and compaction keep them there and the
 * logits right); a repeated fault keeps the group there; a later reload returns it together;
 * a non-expert tensor falls back alone on the sim device. */
static void test_runtime_fallback(void)
{
    const char *orig = tmp_path("rf_orig.gguf"), *live = tmp_path("rf_live.gguf");
    const char *a = tmp_path("rf_a.gguf"), *a1 = tmp_path("rf_a1.gguf");
    const char *q = tmp_path("rf_q.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 11, NULL, 0, orig);
    requant(orig, a1, "blk\\.0\\.ffn_up_exps\\.weight", SL_GGML_F16);
    requant(a1, a, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16);
    requant(orig, q, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16);
    const char *g = tmp_path("rf_g.gguf");
    requant(orig, g, "blk\\.0\\.attn_q\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    float *l_orig = fresh_logits(orig, SL_PLACE_GPU, NULL);
    float *l_g = fresh_logits(g, SL_PLACE_GPU, NULL);
    float *l_a = fresh_logits(a, SL_PLACE_GPU, NULL), *l_q = fresh_logits(q, SL_PLACE_GPU, NULL);
    float *l_a1 = fresh_logits(a1, SL_PLACE_GPU, NULL);
    sl_runtime *rt;
    sl_model *m = rt_open(live, false, &rt);
    if (!m) return;
    const int V = n_vocab(m);
    sl_error e;
    expect(rt_logits(rt, m), l_orig, V, "runtime fallback: first logits");
    const uint64_t dev0 = rt_device_bytes(rt, m);
    sl_reload_report r;

    /* up_exps's new block is refused (the second taken: attn_q grows less, so it goes first) */
    copy_file(a, live);
    reload_fault(m, &r, "2");
    sl_reload_report_print(&r, stdout);
    CHECK(r.changed && r.n_fallback == 1 && r.n_reloaded == 2 && r.n_refused == 0);
    entry_is(&r, "blk.0.ffn_up_exps.weight", SL_RELOAD_PRIVATE, "host (fallback)");
    entry_is(&r, "blk.0.ffn_gate_exps.weight", SL_RELOAD_SIBLING, "host (fallback)");
    entry_is(&r, "blk.0.ffn_down_exps.weight", SL_RELOAD_SIBLING, "host (fallback)");
    entry_is(&r, "blk.1.attn_q.weight", SL_RELOAD_PRIVATE, "device");
    CHECK(!find(&r, "blk.1.ffn_up_exps.weight"));
    sl_reload_report_free(&r);
    CHECK(sl_model_residency(m) == SL_RESIDENCY_DEVICE);
    const uint64_t dev_a = rt_device_bytes(rt, m);
    CHECK_MSG(dev_a < dev0, "device bytes %llu, before %llu: the fallen-back experts still "
              "count", (unsigned long long)dev_a, (unsigned long long)dev0);
    expect(rt_logits(rt, m), l_a, V, "runtime fallback: logits differ from a fresh load");
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_HOST, &e) == SL_OK);
    expect(rt_logits(rt, m), l_a, V, "runtime fallback: logits differ after evict + acquire");
    CHECK(rt_device_bytes(rt, m) == dev_a);
    CHECK_MSG(sl_runtime_compact(rt, &m, 1, &e) == SL_OK, "%s", e.msg);
    expect(rt_logits(rt, m), l_a, V, "runtime fallback: logits differ after compaction");

    /* attn_q back to Q8_0 needs a new block and is refused it: a non-expert device tensor
     * falls back alone (sim: host-addressable); the experts' group, wholly on the host by a
     * fallback of an earlier call, returns to the device together */
    copy_file(a1, live);
    reload_fault(m, &r, "1");
    sl_reload_report_print(&r, stdout);
    entry_is(&r, "blk.1.attn_q.weight", SL_RELOAD_PRIVATE, "host (fallback)");
    entry_is(&r, "blk.0.ffn_up_exps.weight", SL_RELOAD_SIBLING, "device");
    entry_is(&r, "blk.0.ffn_gate_exps.weight", SL_RELOAD_SIBLING, "device");
    entry_is(&r, "blk.0.ffn_down_exps.weight", SL_RELOAD_SIBLING, "device");
    CHECK(r.n_fallback == 1 && r.n_reloaded == 1);
    sl_reload_report_free(&r);
    expect(rt_logits(rt, m), l_a1, V, "runtime fallback, non-expert: logits differ");
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_HOST, &e) == SL_OK);
    expect(rt_logits(rt, m), l_a1, V, "runtime fallback, non-expert: after evict + acquire");
    copy_file(q, live); /* attn_q reloaded with room: back on the device */
    reload(m, &r);
    entry_is(&r, "blk.1.attn_q.weight", SL_RELOAD_PRIVATE, "device");
    entry_is(&r, "blk.0.ffn_up_exps.weight", SL_RELOAD_PRIVATE, "device");
    CHECK(r.n_fallback == 0);
    sl_reload_report_free(&r);
    expect(rt_logits(rt, m), l_q, V, "runtime fallback: logits differ after the return");
    copy_file(orig, live);
    reload(m, &r);
    sl_reload_report_free(&r);
    CHECK(rt_device_bytes(rt, m) == dev0);
    expect(rt_logits(rt, m), l_orig, V, "runtime fallback: restore");
    /* tensors that shrink go first, so the memory they free serves those that grow: with the
     * first new block refused, blk.1.attn_q (F16 -> Q8_0) takes the refusal, not blk.0's
     * (Q8_0 -> F16), which comes first in the file */
    copy_file(q, live);
    reload(m, &r);
    sl_reload_report_free(&r);
    copy_file(g, live);
    reload_fault(m, &r, "1");
    entry_is(&r, "blk.1.attn_q.weight", SL_RELOAD_PRIVATE, "host (fallback)");
    entry_is(&r, "blk.0.attn_q.weight", SL_RELOAD_PRIVATE, "device");
    sl_reload_report_free(&r);
    expect(rt_logits(rt, m), l_g, V, "runtime fallback, order: logits differ");
    for (int k = 0; k < 2; k++) { /* blk.1.attn_q reloaded with room returns; then all back */
        copy_file(k ? orig : q, live);
        reload(m, &r);
        sl_reload_report_free(&r);
    }
    CHECK(rt_device_bytes(rt, m) == dev0);
    expect(rt_logits(rt, m), l_orig, V, "runtime fallback: second restore");
    sl_model_close(m);
    CHECK(sl_runtime_destroy(rt, &e) == SL_OK);
    free(l_orig);
    free(l_a);
    free(l_a1);
    free(l_q);
    free(l_g);
}

static float *split_logits(const char *path, const char *idx)
{
    sl_model *m = open_model_idx(path, SL_PLACE_HOT_COLD, idx);
    float *l = m ? run_logits(m, NULL) : NULL;
    sl_model_close(m);
    return l;
}

/* A .gpuidx for the 2-layer test models (n_ff 128): granules 0 and 3 of each layer hot. */
static void write_idx(const char *idx)
{
    sl_gpuidx gi;
    sl_error e;
    const uint32_t nn[2] = {128, 128};
    uint32_t hot[64];
    for (uint32_t j = 0; j < 64; j++) hot[j] = j < 32 ? j : 64 + j;
    CHECK(sl_gpuidx_init(&gi, 2, nn, &e) == SL_OK);
    for (uint32_t il = 0; il < 2; il++) CHECK(sl_gpuidx_set_layer(&gi, il, hot, 64, &e) == SL_OK);
    CHECK_MSG(sl_gpuidx_write(idx, &gi, NULL, &e) == SL_OK, "%s", e.msg);
    sl_gpuidx_free(&gi);
}

/* A split layer whose gate, up and down sit in different files (one tensor per shard): up
 * rewritten, the layer is rebuilt from it and its two unchanged companions read from their
 * files, and the logits equal a fresh open with the same index. A companion whose file is torn
 * meanwhile is not read: the layer is refused and keeps computing what it did; once that file
 * is whole again the layer is rebuilt from it and up's file (the first open's bytes again). */
static void test_split_shards(void)
{
    const char *orig = tmp_path("ss_orig.gguf"), *idx = tmp_path("ss.gpuidx");
    write_model("llama", SL_GGML_Q8_0, 12, NULL, 0, orig);
    write_idx(idx);
    char first[700], shard[3][700], saved[2][720];
    const char *const names[3] = {"blk.0.ffn_up.weight", "blk.0.ffn_gate.weight",
                                  "blk.0.ffn_down.weight"};
    if (!reshard_find(orig, "ss.gguf", first, names, 3, shard)) return;
    CHECK(strcmp(shard[0], shard[1]) && strcmp(shard[0], shard[2]) && strcmp(shard[1], shard[2]));
    sl_model *m = open_model_idx(first, SL_PLACE_HOT_COLD, idx);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL);
    for (int k = 0; k < 2; k++) { /* up's and down's files */
        snprintf(saved[k], sizeof saved[k], "%s.orig", shard[2 * k]);
        copy_file(shard[2 * k], saved[k]);
    }
    requant(shard[0], shard[0], "blk\\.0\\.ffn_up\\.weight", SL_GGML_Q4_0);
    float *l_new = split_logits(first, idx);
    CHECK(l_new && !same(l_new, l_orig, V));
    sl_reload_report r;
    reload(m, &r);
    sl_reload_report_print(&r, stdout);
    CHECK(r.files_changed == 1 && r.n_reloaded == 1 && r.n_refused == 0 && r.changed);
    const sl_reload_entry *en = find(&r, "blk.0.ffn_up.weight");
    CHECK(en && en->kind == SL_RELOAD_PRIVATE && en->new_type == SL_GGML_Q4_0 &&
          strstr(en->where, "hot/cold"));
    for (int p = 1; p < 3; p++) {
        en = find(&r, names[p]);
        CHECK_MSG(en && en->kind == SL_RELOAD_SIBLING && en->new_type == SL_GGML_Q8_0,
                  "%s", names[p]);
    }
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_new, V, "split in shards: logits differ from a fresh open");

    copy_file(saved[0], shard[0]); /* up back, while down's file is torn */
    CHECK(truncate(shard[2], 100) == 0);
    reload(m, &r);
    CHECK(r.files_skipped == 1 && r.n_reloaded == 0 && !r.changed);
    en = find(&r, "blk.0.ffn_up.weight");
    CHECK(en && en->kind == SL_RELOAD_REFUSED && strstr(en->msg, "blk.0.ffn_down.weight"));
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_new, V, "split in shards, torn companion: logits changed");
    /* down whole again: up's file (its refused change back to Q8_0) is read with it */
    copy_file(saved[1], shard[2]);
    reload(m, &r);
    CHECK(r.changed && r.n_refused == 0 && r.files_skipped == 0);
    en = find(&r, "blk.0.ffn_up.weight");
    CHECK(en && en->kind == SL_RELOAD_PRIVATE && en->new_type == SL_GGML_Q8_0);
    en = find(&r, "blk.0.ffn_gate.weight");
    CHECK(en && en->kind == SL_RELOAD_SIBLING);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "split in shards, restored: logits differ");
    sl_model_close(m);
    free(l_orig);
    free(l_new);
}

/* A split layer's gate/up/down rewritten: its parts are rebuilt from the new bytes and the
 * logits equal a fresh open of the new file with the same index — new bytes in the same type,
 * a new type, and back; a down whose new type changes the granule is refused with its layer's
 * gate/up, and the model keeps computing what it did. */
static void test_split(void)
{
    const char *orig = tmp_path("s_orig.gguf"), *live = tmp_path("s_live.gguf");
    const char *seed2 = tmp_path("s_seed2.gguf"), *q4 = tmp_path("s_q4.gguf");
    const char *f16 = tmp_path("s_f16down.gguf"), *idx = tmp_path("s.gpuidx");
    write_model("llama", SL_GGML_Q8_0, 1, NULL, 0, orig);
    write_model("llama", SL_GGML_Q8_0, 2, NULL, 0, seed2);
    requant(orig, q4, "blk\\.[01]\\.ffn_(gate|up|down)\\.weight", SL_GGML_Q4_0);
    requant(orig, f16, "blk\\.0\\.ffn_down\\.weight", SL_GGML_F16);
    write_idx(idx);
    copy_file(orig, live);
    sl_model *m = open_model_idx(live, SL_PLACE_HOT_COLD, idx);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_seed2 = split_logits(seed2, idx);
    float *l_q4 = split_logits(q4, idx);
    CHECK(l_orig && l_seed2 && l_q4 && !same(l_orig, l_seed2, V) && !same(l_orig, l_q4, V));
    sl_reload_report r;
    copy_file(seed2, live); /* every tensor new, same types */
    reload(m, &r);
    const sl_reload_entry *en = find(&r, "blk.1.ffn_down.weight");
    CHECK(r.changed && en && en->kind == SL_RELOAD_IN_PLACE && strstr(en->where, "hot/cold"));
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK_MSG(same(l, l_seed2, V), "split, new bytes: logits differ from a fresh open");
    free(l);
    copy_file(q4, live); /* the FFNs in a new type of the same granule */
    reload(m, &r);
    en = find(&r, "blk.0.ffn_up.weight");
    CHECK(en && en->kind == SL_RELOAD_PRIVATE && en->old_type == SL_GGML_Q8_0 &&
          en->new_type == SL_GGML_Q4_0);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_q4, V, "split, new type: logits differ from a fresh open");
    copy_file(f16, live); /* layer 0's down F16 (granule 1): layer 0 refused, layer 1 back */
    reload(m, &r);
    en = find(&r, "blk.0.ffn_down.weight");
    CHECK(en && en->kind == SL_RELOAD_REFUSED && strstr(en->msg, "blocks of 32"));
    en = find(&r, "blk.0.ffn_gate.weight");
    CHECK(en && en->kind == SL_RELOAD_REFUSED && strstr(en->msg, "blk.0.ffn_down.weight"));
    en = find(&r, "blk.1.ffn_gate.weight");
    CHECK(en && en->kind == SL_RELOAD_PRIVATE && en->new_type == SL_GGML_Q8_0);
    sl_reload_report_free(&r);
    l = run_logits(m, NULL);
    CHECK(l && !same(l, l_orig, V) && !same(l, l_q4, V));
    free(l);
    copy_file(orig, live); /* back: everything as first opened */
    reload(m, &r);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "split, restored: logits differ from the first open");
    sl_model_close(m);
    free(l_orig);
    free(l_seed2);
    free(l_q4);
}

int main(void)
{
    const char *t = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s", t ? t : "/tmp");
    test_requant_keeps();
    test_policy(SL_PLACE_GPU);
    test_policy(SL_PLACE_CPU);
    test_split();
    test_split_shards();
    test_fallback_siblings();
    test_per_expert();
    test_torn();
    test_shards();
    test_expert_cache();
    test_stress(false);
    test_stress(true);
    test_runtime(false, SL_LOAD_DIRECT);
    test_runtime(true, SL_LOAD_DIRECT);
    test_runtime(false, SL_LOAD_MMAP); /* host weights in the file view's mapping */
    test_runtime_fallback();
    return sl_test_finish("swap_test");
}
