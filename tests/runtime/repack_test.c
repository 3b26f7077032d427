/* Q4_K weights repacked at load into Q4_K_R8 (runtime/engine/repack.h) against the same model kept as
 * stored (no_repack): logits bit for bit (prefill then decode, 1 and 2 threads) for a Q4_K
 * qwen3moe (routed experts repacked) and a dense llama, on the sim device with placement cpu
 * and auto (its routed experts on the host with cpu_moe, the CPU scheduler and the fetch
 * scheduler copying them to the device cache); a llama whose FFN rows are not a multiple of
 * eight (left Q4_K) and a model read by io = mmap (the mapping, as stored) still run; the
 * repacked count is exactly the file's eligible Q4_K matrices, and 0 with no_repack or mmap;
 * a live reload of repacked tensors (new bytes in place, a
 * new type, back to Q4_K by reattaching) gives a fresh load's logits; in a runtime, a private
 * floor's host experts are repacked (again after going to disk), a shared floor's are not.
 * Default options on a machine without a CUDA device (no device named, SLUICE_DEVICE unset)
 * place everything on the CPU, repacked, with placement cpu's logits; SLUICE_DEVICE=sim still
 * takes the simulated device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "base/device/device.h"
#include "runtime/sluice.h"
#include "tests/runtime/swap_testlib.h"
#include "tests/testing.h"

enum { N_DECODE = 3 };

typedef struct run_opt {
    sl_placement pl;
    bool cpu_moe;
    int threads;
    const char *sched;
    bool no_repack;
    bool mmap;
} run_opt;

static sl_model *open_with(const char *path, const run_opt *r)
{
    sl_model_options o = sl_model_options_default();
    o.placement = r->pl;
    o.cpu_moe = r->cpu_moe;
    o.device = "sim";
    o.progress = false;
    o.n_threads = r->threads;
    o.no_repack = r->no_repack;
    if (r->mmap) o.io = SL_LOAD_MMAP;
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "%s: %s", path, e.msg);
    return m;
}

/* The last-position logits after a prefill of k_tokens, then after each of N_DECODE single
 * tokens: (1 + N_DECODE) rows, malloc'd; NULL on a failure (reported). */
static float *prefill_decode(sl_model *m, const char *sched)
{
    const int V = n_vocab(m);
    sl_ctx *c = test_ctx(m, sched);
    if (!c) return NULL;
    sl_error e;
    float *out = malloc((size_t)(1 + N_DECODE) * (size_t)V * sizeof *out);
    static const int32_t next[N_DECODE] = {7, 201, 64};
    bool ok = out && sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK;
    for (int i = 0; ok && i <= N_DECODE; i++) {
        memcpy(out + (size_t)i * (size_t)V, sl_ctx_logits(c, -1), (size_t)V * sizeof *out);
        if (i < N_DECODE) ok = sl_ctx_eval(c, &next[i], 1, &e) == SL_OK;
    }
    CHECK_MSG(ok, "eval: %s", e.msg);
    sl_ctx_destroy(c);
    if (!ok) free(out);
    return ok ? out : NULL;
}

static uint64_t repacked(const sl_model *m)
{
    sl_model_info mi;
    sl_model_info_get(m, &mi);
    return mi.repacked_tensors;
}

/* The file's Q4_K matrices whose rows are whole super-blocks in groups of eight rows, but the
 * token embedding (gathered by rows): what a CPU placement repacks. */
static uint64_t eligible(const char *path)
{
    sl_gguf *g = NULL;
    sl_error e;
    sl_gguf_options go = {.no_shards = true};
    if (sl_gguf_open(path, &go, &g, &e)) {
        CHECK_MSG(0, "%s: %s", path, e.msg);
        return 0;
    }
    uint64_t n = 0;
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        n += t->type == SL_GGML_Q4_K && t->n_dims >= 2 && t->ne[0] % 256 == 0 &&
             t->ne[1] % 8 == 0 && strcmp(t->name, "token_embd.weight") != 0;
    }
    sl_gguf_close(g);
    return n;
}

static void write_q4k(const char *arch, int n_ff, uint64_t seed, const char *path)
{
    tm_params p;
    tm_defaults(arch, &p);
    p.n_embd = 256;
    p.n_ff = n_ff;
    p.wtype = SL_GGML_Q4_K;
    p.seed = seed;
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "%s: %s", path, e.msg);
}

/* Repack on against off for one placement; *n_on: the repacked count with repack on. */
static void compare(const char *path, run_opt r, const char *what, uint64_t *n_on)
{
    for (int th = 1; th <= 2; th++) {
        r.threads = th;
        r.no_repack = true;
        sl_model *off = open_with(path, &r);
        r.no_repack = false;
        sl_model *on = open_with(path, &r);
        if (!off || !on) {
            sl_model_close(off);
            sl_model_close(on);
            return;
        }
        CHECK_MSG(repacked(off) == 0, "%s: no_repack repacked %llu tensors", what,
                  (unsigned long long)repacked(off));
        *n_on = repacked(on);
        float *a = prefill_decode(off, r.sched), *b = prefill_decode(on, r.sched);
        CHECK_MSG(same(a, b, (1 + N_DECODE) * n_vocab(on)),
                  "%s, %d thread(s): logits differ with repack on", what, th);
        free(a);
        free(b);
        sl_model_close(off);
        sl_model_close(on);
    }
}

static void test_models(void)
{
    const char *moe = tmp_path("repack-qwen3moe.gguf"), *llama = tmp_path("repack-llama.gguf");
    const char *odd = tmp_path("repack-llama-odd.gguf");
    write_q4k("qwen3moe", 256, 1, moe);
    write_q4k("llama", 256, 2, llama);
    write_q4k("llama", 252, 3, odd); /* gate/up rows 252: not groups of eight */
    uint64_t n = 0;
    compare(moe, (run_opt){.pl = SL_PLACE_CPU}, "qwen3moe cpu", &n);
    CHECK_MSG(n > 0 && n == eligible(moe), "qwen3moe cpu: %llu repacked, %llu eligible",
              (unsigned long long)n, (unsigned long long)eligible(moe));
    compare(llama, (run_opt){.pl = SL_PLACE_CPU}, "llama cpu", &n);
    CHECK_MSG(n > 0 && n == eligible(llama), "llama cpu: %llu repacked, %llu eligible",
              (unsigned long long)n, (unsigned long long)eligible(llama));
    compare(odd, (run_opt){.pl = SL_PLACE_CPU}, "llama rows % 8 != 0, cpu", &n);
    CHECK_MSG(n == eligible(odd) && n < eligible(llama), "odd llama: %llu repacked, %llu "
              "eligible", (unsigned long long)n, (unsigned long long)eligible(odd));
    /* auto on the sim device: device weights stay Q4_K; the host experts of cpu_moe repack,
     * computed by the CPU scheduler, and by the fetch scheduler from its device cache */
    compare(moe, (run_opt){.pl = SL_PLACE_AUTO, .cpu_moe = true}, "qwen3moe auto cpu-moe", &n);
    CHECK_MSG(n > 0 && n < eligible(moe), "qwen3moe auto cpu-moe: %llu repacked",
              (unsigned long long)n);
    compare(moe, (run_opt){.pl = SL_PLACE_AUTO, .cpu_moe = true, .sched = "mode=full"},
            "qwen3moe auto cpu-moe, fetch mode=full", &n);
    compare(llama, (run_opt){.pl = SL_PLACE_AUTO}, "llama auto", &n);
    /* io = mmap: the host weights are the file mapping, read as stored */
    compare(llama, (run_opt){.pl = SL_PLACE_CPU, .mmap = true}, "llama cpu mmap", &n);
    CHECK_MSG(n == 0, "llama cpu mmap: %llu repacked", (unsigned long long)n);
}

/* A repacked model's tensors reloaded with new bytes (repacked too, written in place), with a
 * new type (a private copy), and back to Q4_K (the repacked original reattached): each time
 * the logits of a fresh load of the file as it is. */
static void test_reload(void)
{
    const char *path = tmp_path("repack-reload.gguf"), *b = tmp_path("repack-reload-b.gguf");
    const char *q8 = tmp_path("repack-reload-q8.gguf");
    write_q4k("qwen3moe", 256, 11, path);
    write_q4k("qwen3moe", 256, 12, b);
    requant(b, q8, "blk\\.0\\.ffn_up_exps\\.weight", SL_GGML_Q8_0);
    const run_opt r = {.pl = SL_PLACE_CPU, .threads = 2};
    sl_model *m = open_with(path, &r);
    if (!m) return;
    const uint64_t n0 = repacked(m);
    const char *steps[3] = {b, q8, b};
    const char *what[3] = {"new bytes", "blk.0.ffn_up_exps to Q8_0", "back to Q4_K"};
    for (int s = 0; s < 3; s++) {
        copy_file(steps[s], path);
        sl_reload_report rep;
        reload(m, &rep);
        CHECK_MSG(rep.n_reloaded > 0, "%s: nothing reloaded", what[s]);
        sl_model *f = open_with(path, &r);
        float *want = f ? prefill_decode(f, NULL) : NULL, *got = prefill_decode(m, NULL);
        CHECK_MSG(same(got, want, (1 + N_DECODE) * n_vocab(m)), "reload %s: logits differ "
                  "from a fresh load", what[s]);
        CHECK_MSG(f && repacked(m) == repacked(f), "reload %s: %llu repacked, a fresh load "
                  "%llu", what[s], (unsigned long long)repacked(m),
                  (unsigned long long)(f ? repacked(f) : 0));
        free(want);
        free(got);
        sl_model_close(f);
        sl_reload_report_free(&rep);
    }
    CHECK_MSG(repacked(m) == n0, "after the round trip: %llu repacked, %llu at load",
              (unsigned long long)repacked(m), (unsigned long long)n0);
    sl_model_close(m);
}

/* A model in a runtime (placement gpu, routed experts on the host with cpu_moe): a private
 * floor repacks its host experts, a shared floor (read-only, other processes map it) nothing;
 * the logits equal a private no_repack model's with the same placement after the first
 * acquire, after going back to disk and loading again, and after a live reload of the
 * repacked experts (the same as a fresh load of the new file). */
static void test_runtime(bool shared)
{
    const char *path = tmp_path(shared ? "repack-rt-shared.gguf" : "repack-rt.gguf");
    const char *b = tmp_path(shared ? "repack-rt-shared-b.gguf" : "repack-rt-b.gguf");
    write_q4k("qwen3moe", 256, 21, path);
    write_q4k("qwen3moe", 256, 22, b);
    const run_opt base = {.pl = SL_PLACE_GPU, .cpu_moe = true, .threads = 1, .no_repack = true};
    sl_model *pm = open_with(path, &base);
    float *want = pm ? prefill_decode(pm, NULL) : NULL;
    sl_model_close(pm);
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.cpu_moe = true;
    o.progress = false;
    o.n_threads = 1;
    sl_runtime *rt = NULL;
    sl_model *m = rt_open_opts(path, shared, &o, &rt);
    sl_error e;
    if (!m) {
        free(want);
        if (rt) sl_runtime_destroy(rt, NULL);
        return;
    }
    const char *what = shared ? "shared floor" : "private floor";
    CHECK_MSG(shared ? repacked(m) == 0 : repacked(m) > 0, "%s: %llu repacked", what,
              (unsigned long long)repacked(m));
    for (int round = 0; round < 2; round++) {
        CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "acquire: %s", e.msg);
        CHECK_MSG(sl_runtime_validate(rt, &e) == SL_OK, "%s", e.msg);
        float *got = prefill_decode(m, NULL);
        CHECK_MSG(same(got, want, (1 + N_DECODE) * n_vocab(m)), "%s, round %d: logits differ "
                  "from a private no_repack model's", what, round);
        free(got);
        /* to disk and back: the floor is read (and repacked) again */
        CHECK_MSG(sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, &e) == SL_OK, "disk: %s",
                  e.msg);
    }
    CHECK_MSG(sl_runtime_acquire(rt, m, &e) == SL_OK, "acquire: %s", e.msg);
    copy_file(b, path);
    sl_reload_report rep;
    reload(m, &rep);
    CHECK_MSG(rep.n_reloaded > 0 && sl_runtime_validate(rt, &e) == SL_OK, "%s: reload: %u "
              "reloaded (%s)", what, rep.n_reloaded, e.msg);
    sl_reload_report_free(&rep);
    sl_model *f = open_with(path, &base);
    float *fresh = f ? prefill_decode(f, NULL) : NULL, *got = prefill_decode(m, NULL);
    CHECK_MSG(same(got, fresh, (1 + N_DECODE) * n_vocab(m)), "%s: reload: logits differ from "
              "a fresh load", what);
    CHECK_MSG(shared || repacked(m) > 0, "%s: reload left %llu repacked", what,
              (unsigned long long)repacked(m));
    free(fresh);
    free(got);
    free(want);
    sl_model_close(f);
    sl_model_close(m);
    CHECK_MSG(sl_runtime_destroy(rt, &e) == SL_OK, "%s", e.msg);
}

static sl_model *open_default(const char *path)
{
    sl_model_options o = sl_model_options_default();
    o.progress = false;
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "%s (default options): %s", path, e.msg);
    return m;
}

static void quiet(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

/* What auto finds: a CUDA device, or none (then the sim device). */
static bool cuda_usable(void)
{
    sl_device_options o = {.kind = "auto", .notice = quiet};
    sl_device *d = NULL;
    sl_error e;
    if (sl_device_open(&o, &d, &e)) return false;
    const bool cuda = sl_device_kind_get(d) == SL_DEVICE_CUDA;
    sl_device_close(d);
    return cuda;
}

static void test_default_placement(void)
{
    const char *llama = tmp_path("repack-llama.gguf"); /* written by test_models */
    const bool cuda = cuda_usable();
    CHECK(unsetenv("SLUICE_DEVICE") == 0);
    sl_model *d = open_default(llama), *c = open_with(llama, &(run_opt){.pl = SL_PLACE_CPU});
    if (d && c) {
        sl_model_info mi;
        sl_model_info_get(d, &mi);
        if (!cuda) {
            CHECK_MSG(mi.gpu_bytes == 0 && mi.host_bytes > 0, "default options without CUDA: "
                      "%llu bytes on the device", (unsigned long long)mi.gpu_bytes);
            CHECK_MSG(repacked(d) == eligible(llama), "default options without CUDA: %llu "
                      "repacked, %llu eligible", (unsigned long long)repacked(d),
                      (unsigned long long)eligible(llama));
            float *a = prefill_decode(d, NULL), *b = prefill_decode(c, NULL);
            CHECK_MSG(same(a, b, (1 + N_DECODE) * n_vocab(d)),
                      "default options without CUDA: logits differ from placement cpu");
            free(a);
            free(b);
        } else {
            CHECK_MSG(mi.gpu_bytes > 0, "default options with a CUDA device: nothing on it");
        }
    }
    sl_model_close(d);
    sl_model_close(c);
    /* SLUICE_DEVICE=auto is the default's auto */
    CHECK(setenv("SLUICE_DEVICE", "auto", 1) == 0);
    d = open_default(llama);
    if (d) {
        sl_model_info mi;
        sl_model_info_get(d, &mi);
        CHECK_MSG(cuda ? mi.gpu_bytes > 0 : mi.gpu_bytes == 0 && repacked(d) == eligible(llama),
                  "SLUICE_DEVICE=auto: %llu bytes on the device, %llu repacked",
                  (unsigned long long)mi.gpu_bytes, (unsigned long long)repacked(d));
    }
    sl_model_close(d);
    /* asked for by the environment, the simulated device holds the model (auto: all of it) */
    CHECK(setenv("SLUICE_DEVICE", "sim", 1) == 0);
    d = open_default(llama);
    if (d) {
        sl_model_info mi;
        sl_model_info_get(d, &mi);
        CHECK_MSG(mi.gpu_bytes > 0 && repacked(d) == 0, "SLUICE_DEVICE=sim: %llu bytes on the "
                  "device, %llu repacked", (unsigned long long)mi.gpu_bytes,
                  (unsigned long long)repacked(d));
    }
    sl_model_close(d);
    CHECK(unsetenv("SLUICE_DEVICE") == 0);
}

int main(void)
{
    test_models();
    test_default_placement();
    test_reload();
    test_runtime(false);
    test_runtime(true);
    return sl_test_finish("repack_test");
}
