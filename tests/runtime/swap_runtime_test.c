/* Live tensor swap of models in a runtime (sl_model_open_in: one arena and host pool shared,
 * a host floor per model) on the sim device: the new bytes replace the floor and the device
 * copy (eviction, reacquire, compaction bring them back), a shared floor is never written,
 * released to disk and loaded again the model reads the new file versions, and a tensor the
 * arena has no room for falls back to the host with its expert siblings (counted, reported,
 * kept by the residency, returned together later). Each checked by logits that must equal a
 * fresh load of the changed file bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/swap_testlib.h"
#include "tests/testing.h"

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
    /* a refused change beside an applied one: the file is refused whole (the model keeps
     * what it had), and the file it holds is gone: no way back to disk */
    copy_file(shape, live);
    reload_refused(m, &r, "blk.0.ffn_up.weight");
    CHECK(r.n_refused == 1 && r.n_reloaded == 0);
    sl_reload_report_free(&r);
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "changed since its last reload");
    CHECK(sl_model_residency(m) == SL_RESIDENCY_DEVICE);
    expect(rt_logits(rt, m), l_q, V, "refused: logits differ from the file before it");
    sl_model_close(m);
    sl_model_close(m2);
    CHECK(sl_runtime_destroy(rt, &e) == SL_OK);
    CHECK(sl_runtime_destroy(rt2, &e) == SL_OK);
    free(l_orig);
    free(l_q);
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
    reload_fault(m, &r, 2);
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
    reload_fault(m, &r, 1);
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
    reload_fault(m, &r, 1);
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

/* The last-token logits of tokens evaluated from position 0 by context c (kept across calls,
 * unlike rt_logits's). */
static float *ctx_logits(sl_ctx *c, int V)
{
    sl_error e;
    CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK);
    if (sl_ctx_eval(c, k_tokens, N_TOK, &e)) {
        CHECK_MSG(0, "eval: %s", e.msg);
        return NULL;
    }
    float *out = malloc((size_t)V * sizeof *out);
    memcpy(out, sl_ctx_logits(c, -1), (size_t)V * sizeof *out);
    return out;
}

static uint64_t refreshes(const sl_ctx *c, uint64_t *rebinds)
{
    sl_ctx_stats s;
    sl_ctx_stats_get(c, &s);
    *rebinds = s.rebinds;
    return s.refreshes;
}

/* A context kept across a live reload of its runtime's model refreshes once: the reload bumps
 * the swap gate's epoch and the residency's, and the step sees both. Moves between the host
 * floor and the device (eviction and reacquire, compaction) change addresses alone: a rebind
 * each, no refresh; released to disk and loaded again from the files: a refresh. The logits
 * equal a fresh load's after each. */
static void test_runtime_refresh(void)
{
    const char *orig = tmp_path("rr_orig.gguf"), *live = tmp_path("rr_live.gguf");
    const char *q = tmp_path("rr_q.gguf");
    write_model("qwen3moe", SL_GGML_Q8_0, 13, NULL, 0, orig);
    requant(orig, q, "blk\\.1\\.attn_q\\.weight", SL_GGML_F16);
    copy_file(orig, live);
    float *l_orig = fresh_logits(orig, SL_PLACE_GPU, NULL);
    float *l_q = fresh_logits(q, SL_PLACE_GPU, NULL);
    sl_runtime *rt;
    sl_model *m = rt_open(live, false, &rt);
    if (!m) return;
    const int V = n_vocab(m);
    sl_error e;
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "%s", e.msg);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    sl_ctx *c = NULL;
    CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "%s", e.msg);
    if (!c) return;
    uint64_t rb;
    expect(ctx_logits(c, V), l_orig, V, "refresh: first logits");
    CHECK(refreshes(c, &rb) == 0 && rb == 0);
    copy_file(q, live);
    sl_reload_report r;
    reload(m, &r);
    CHECK(r.changed && r.n_reloaded == 1);
    sl_reload_report_free(&r);
    expect(ctx_logits(c, V), l_q, V, "refresh: logits after the reload");
    CHECK_MSG(refreshes(c, &rb) == 1 && rb == 0, "a reload refreshed the context %llu times, "
              "rebound it %llu", (unsigned long long)refreshes(c, &rb), (unsigned long long)rb);
    expect(ctx_logits(c, V), l_q, V, "refresh: logits of the next step");
    CHECK(refreshes(c, &rb) == 1 && rb == 0);
    CHECK(sl_runtime_set_residency(rt, m, SL_RESIDENCY_HOST, &e) == SL_OK);
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "%s", e.msg);
    expect(ctx_logits(c, V), l_q, V, "refresh: logits after evict + acquire");
    CHECK_MSG(refreshes(c, &rb) == 1 && rb == 1, "evict + acquire: %llu refreshes, %llu "
              "rebinds", (unsigned long long)refreshes(c, &rb), (unsigned long long)rb);
    CHECK_MSG(sl_runtime_compact(rt, &m, 1, &e) == SL_OK, "%s", e.msg);
    expect(ctx_logits(c, V), l_q, V, "refresh: logits after compaction");
    CHECK(refreshes(c, &rb) == 1 && rb == 2);
    CHECK_MSG(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_OK, "%s", e.msg);
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "%s", e.msg);
    expect(ctx_logits(c, V), l_q, V, "refresh: logits after disk + acquire");
    CHECK(refreshes(c, &rb) == 2 && rb == 2);
    sl_ctx_destroy(c);
    sl_model_close(m);
    CHECK(sl_runtime_destroy(rt, &e) == SL_OK);
    free(l_orig);
    free(l_q);
}

int main(void)
{
    test_runtime(false, SL_LOAD_DIRECT);
    test_runtime(true, SL_LOAD_DIRECT);
    test_runtime(false, SL_LOAD_MMAP); /* host weights in the file view's mapping */
    test_runtime_fallback();
    test_runtime_refresh();
    return sl_test_finish("swap_runtime_test");
}
