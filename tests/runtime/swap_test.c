/* Live tensor swap (sl_reload_changed, scheduler/policy/swap.h) of a private model on the sim device:
 * every case of the policy, each checked by logits that must equal a fresh load of the changed
 * file bit for bit (and the original's after a restore); a hot/cold split layer rebuilt from
 * new bytes (also with its gate/up/down in separate shards); a torn file and one changing while
 * read; a many-shard model; the fetch scheduler's expert cache; a stress run with one thread
 * reloading while two evaluate (also on a model in a runtime); requant keeping every other
 * byte. Models in a runtime: swap_runtime_test.c. */
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
#include "scheduler/policy/gpuidx.h"
#include "tests/runtime/swap_testlib.h"
#include "tests/testing.h"

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
    copy_file(shape, live); /* a different logical shape: the file refused, nothing applied */
    reload_refused(m, &r, "logical shape differs");
    e = find(&r, "blk.0.ffn_up.weight");
    CHECK(e && e->kind == SL_RELOAD_REFUSED && strstr(e->msg, "shape"));
    CHECK(r.n_reloaded == 0 && !r.changed);
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "refused: logits changed");
    reload_refused(m, &r, "logical shape differs"); /* and again: never "nothing changed" */
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_orig, V, "refused twice: logits changed");
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
    reload_fault(m, &r, 1);
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
    reload_refused(m, &r, "share a type");
    const sl_reload_entry *e = find(&r, "blk.0.ffn_up.3.weight");
    CHECK(e && e->kind == SL_RELOAD_REFUSED && strstr(e->msg, "share a type"));
    CHECK(!r.changed);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK(same(l, l_orig, V));
    free(l);
    copy_file(all, live); /* the first new block refused: every expert of layer 0 follows */
    reload_fault(m, &r, 1);
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
     * still at work; the SL_FAULT_SWAP_TOUCH hook does it deterministically): skipped too */
    copy_file(f16, live);
    sl_fault_plan touch = {.at = {[SL_FAULT_SWAP_TOUCH] = 1}};
    const sl_fault_hook hook = {sl_fault_plan_fn, &touch};
    sl_fault_install(&hook);
    reload(m, &r);
    sl_fault_install(NULL);
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

/* Experts on the host with copies on the device — the fetch scheduler's expert cache, the
 * engine's resident hot experts (runtime/engine/hot.h) — must not outlive a reload. */
static void test_expert_cache(const char *sched, const char *tag)
{
    char n_orig[32], n_live[32], n_seed2[32];
    snprintf(n_orig, sizeof n_orig, "%s_orig.gguf", tag);
    snprintf(n_live, sizeof n_live, "%s_live.gguf", tag);
    snprintf(n_seed2, sizeof n_seed2, "%s_seed2.gguf", tag);
    const char *orig = tmp_path(n_orig), *live = tmp_path(n_live), *seed2 = tmp_path(n_seed2);
    write_model("qwen3moe", SL_GGML_Q8_0, 7, NULL, 0, orig);
    write_model("qwen3moe", SL_GGML_Q8_0, 8, NULL, 0, seed2);
    copy_file(orig, live);
    const bool hot = strstr(sched, "hot_kb") != NULL;
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
    CHECK_MSG(same(sl_ctx_logits(c, -1), l_seed2, V), "%s: stale expert copies after a reload",
              sched);
    sl_ctx_stats cs, c0;
    sl_ctx_stats_get(c, &c0);
    /* again: the hot experts went up anew behind the first pass after the reload */
    CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK && sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK);
    CHECK_MSG(same(sl_ctx_logits(c, -1), l_seed2, V), "%s: stale expert copies in the second "
              "pass after a reload", sched);
    sl_ctx_stats_get(c, &cs);
    CHECK_MSG(!hot || cs.expert_calls_gpu > c0.expert_calls_gpu, "%s: the second pass after a "
              "reload ran no resident expert", sched);
    CHECK_MSG(hot ? cs.expert_calls_gpu > 0 : cs.expert_cache_lookups > 0, "%s: no expert ran "
              "from a device copy", sched);
    sl_ctx_destroy(c);
    free(l_seed2);
    sl_model_close(m);
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
        reload_fault(s.m, &r, rt && k % 3 == 0 ? 1 : 0);
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
    /* layer 0's down F16 (granule 1): refused, and with it the whole file (layer 1 too) */
    copy_file(f16, live);
    reload_refused(m, &r, "blocks of 32");
    en = find(&r, "blk.0.ffn_down.weight");
    CHECK(en && en->kind == SL_RELOAD_REFUSED && strstr(en->msg, "blocks of 32"));
    CHECK(!find(&r, "blk.1.ffn_gate.weight"));
    sl_reload_report_free(&r);
    expect(run_logits(m, NULL), l_q4, V, "split, refused file: logits changed");
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
    test_requant_keeps();
    test_policy(SL_PLACE_GPU);
    test_policy(SL_PLACE_CPU);
    test_split();
    test_split_shards();
    test_fallback_siblings();
    test_per_expert();
    test_torn();
    test_shards();
    test_expert_cache("mode=full cache_kb=4096", "c");
    test_expert_cache("mode=cpu hot_kb=4096 hot_warm=1", "h");
    test_stress(false);
    test_stress(true);
    return sl_test_finish("swap_test");
}
