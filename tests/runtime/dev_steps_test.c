/* Device steps per layer (issue 32): the device executor's calls inside a decode layer on the
 * sim device (the same step list the cuda executor runs), from sl_ctx_stats dev_layer_steps /
 * dev_layers.
 *
 * Held here, for one-token decode after a prompt on --placement gpu --device sim:
 *   - llama, qwen3moe and mixtral layers take at most 6 steps (issue 32 asks 8; the fused ops
 *     of dx.h: norm + QKV; q/k norm + rope + KV store; attention; wo + add + FFN norm; router
 *     GEMV + top-k, experts + the residual add / gate-up + GLU, down + add), every
 *     architecture a positive count;
 *   - deepseek2 layers at most 19 (its per-head k_b / v_b matmuls one mm_heads step each: 40.67
 *     before; the synthetic model's mean over its leading dense layer and MoE layers is 18.67);
 *   - every layer counts once per pass (dev_layers), none on the CPU placement, and only the
 *     device layers with --placement layers -ngl 1;
 *   - the logits equal the CPU placement's bit for bit (fusion changed no arithmetic);
 *   - the step profiler (sl_ctx_options.profile_steps, sl_ctx_step_profile) changes no bit,
 *     counts every device step (attention once per device layer; its calls at least the
 *     layer steps), times them (>= 0, > 0 in all), and on the CPU placement has nothing to
 *     time; without the option it is refused, and a short row array gets SL_ERR_RANGE with
 *     the count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PROMPT = 5, N_DECODE = 4, N_CTX = 32, MAX_STEPS = 6, MAX_STEPS_MLA = 19 };
static const int32_t k_prompt[N_PROMPT] = {1, 17, 250, 3, 99};
static const int32_t k_next[N_DECODE] = {7, 128, 5, 260};

enum { KINDS = 64 };

typedef struct run {
    float *logits; /* [N_DECODE][n_vocab] */
    uint64_t steps, layers;
    bool ok;
    /* profiled: the decode's step calls (all kinds), attn calls, seconds (all kinds) */
    uint64_t prof_calls, prof_attn;
    double prof_s;
    bool prof_bad;    /* a negative time, or a kind without a name */
} run;

/* sl_ctx_step_profile into rows; its row count, 0 after a failed check */
static size_t step_rows(sl_ctx *c, sl_step_profile *rows)
{
    size_t n = 0;
    sl_error e;
    sl_status st = sl_ctx_step_profile(c, rows, KINDS, &n, &e);
    CHECK_MSG(st == SL_OK && n > 0 && n <= KINDS, "sl_ctx_step_profile: %s (%zu rows)",
              st ? e.msg : "ok", n);
    return st ? 0 : n;
}

static run decode(const char *path, sl_placement pl, int gpu_layers, int32_t n_vocab,
                  bool profile)
{
    run r = {0};
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.gpu_layers = gpu_layers;
    o.progress = false;
    o.n_threads = 2;
    if (pl != SL_PLACE_CPU) o.device = "sim";
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open %s: %s", path, e.msg);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    co.kv_f16 = false;
    co.profile_steps = profile;
    if (m) CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx: %s", e.msg);
    r.logits = calloc((size_t)N_DECODE * (size_t)n_vocab, sizeof *r.logits);
    bool ok = c && r.logits && sl_ctx_eval(c, k_prompt, N_PROMPT, &e) == SL_OK;
    CHECK_MSG(ok, "%s prompt: %s", path, c ? e.msg : "no context");
    sl_ctx_stats s0, s1;
    sl_ctx_stats_get(c, &s0);
    sl_step_profile p0[KINDS], p1[KINDS];
    const size_t np = profile && ok ? step_rows(c, p0) : 0;
    for (int i = 0; i < N_DECODE && ok; i++) {
        ok = sl_ctx_eval(c, &k_next[i], 1, &e) == SL_OK;
        CHECK_MSG(ok, "decode %d: %s", i, e.msg);
        const float *l = ok ? sl_ctx_logits(c, -1) : NULL;
        if (l) memcpy(r.logits + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof *l);
    }
    sl_ctx_stats_get(c, &s1);
    r.steps = s1.dev_layer_steps - s0.dev_layer_steps;
    /* kernel launches are cuda's: none counted on sim or the CPU */
    CHECK_MSG(s1.dev_layer_launches == 0, "%s: %llu kernel launches counted", path,
              (unsigned long long)s1.dev_layer_launches);
    r.layers = s1.dev_layers - s0.dev_layers;
    r.ok = ok;
    if (np && ok && step_rows(c, p1) == np)
        for (size_t i = 0; i < np; i++) {
            r.prof_calls += p1[i].calls - p0[i].calls;
            r.prof_s += p1[i].seconds - p0[i].seconds;
            if (p1[i].op && !strcmp(p1[i].op, "attn")) r.prof_attn = p1[i].calls - p0[i].calls;
            r.prof_bad |= !p1[i].op || p1[i].seconds < p0[i].seconds || p1[i].seconds < 0 ||
                          p1[i].gap_seconds < 0;
        }
    sl_ctx_destroy(c);
    sl_model_close(m);
    return r;
}

/* max_steps: the bound per layer (0: none); uniform: every layer the same step list */
static void check_arch(const char *arch, const char *dir, int max_steps, bool uniform)
{
    tm_params p;
    tm_defaults(arch, &p);
    char path[600];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, arch);
    sl_error e;
    if (tm_write(&p, path, &e) != SL_OK) {
        CHECK_MSG(false, "write %s: %s", arch, e.msg);
        return;
    }
    const size_t nv = (size_t)N_DECODE * (size_t)p.n_vocab;
    run cpu = decode(path, SL_PLACE_CPU, 0, p.n_vocab, false);
    run gpu = decode(path, SL_PLACE_GPU, 0, p.n_vocab, false);
    run one = decode(path, SL_PLACE_LAYERS, 1, p.n_vocab, false);
    run prof = decode(path, SL_PLACE_GPU, 0, p.n_vocab, true);
    run cprof = decode(path, SL_PLACE_CPU, 0, p.n_vocab, true);
    if (gpu.ok && prof.ok && cprof.ok) {
        CHECK_MSG(!memcmp(gpu.logits, prof.logits, nv * sizeof *gpu.logits),
                  "%s: profiling changed the logits", arch);
        CHECK_MSG(prof.prof_calls >= gpu.steps && prof.prof_attn == gpu.layers &&
                  prof.prof_s > 0 && !prof.prof_bad, "%s profile: %llu calls (layer steps "
                  "%llu), attn %llu (layers %llu), %.3g s%s", arch,
                  (unsigned long long)prof.prof_calls, (unsigned long long)gpu.steps,
                  (unsigned long long)prof.prof_attn, (unsigned long long)gpu.layers,
                  prof.prof_s, prof.prof_bad ? ", a bad row" : "");
        CHECK_MSG(cprof.prof_calls == 0 && cprof.prof_s == 0, "%s: the CPU placement profiled "
                  "%llu device steps", arch, (unsigned long long)cprof.prof_calls);
    }
    free(prof.logits);
    free(cprof.logits);
    if (cpu.ok && gpu.ok && one.ok) {
        const double per = gpu.layers ? (double)gpu.steps / (double)gpu.layers : 0;
        printf("%-9s device steps per layer: %.2f (%llu steps, %llu layers)\n", arch, per,
               (unsigned long long)gpu.steps, (unsigned long long)gpu.layers);
        CHECK_MSG(gpu.layers == (uint64_t)N_DECODE * (uint64_t)p.n_layer,
                  "%s: %llu device layers, want %d", arch, (unsigned long long)gpu.layers,
                  N_DECODE * p.n_layer);
        CHECK_MSG(per >= 1 && (!max_steps || per <= max_steps), "%s: %.2f device steps per "
                  "layer (want 1 .. %d)", arch, per, max_steps ? max_steps : 999);
        CHECK_MSG(cpu.layers == 0 && cpu.steps == 0, "%s: the CPU placement counted %llu "
                  "device layers", arch, (unsigned long long)cpu.layers);
        /* uniform layers (llama, qwen3moe): the last layer's share; else just fewer */
        CHECK_MSG(one.layers == N_DECODE && (uniform ? one.steps * p.n_layer == gpu.steps
                                                     : one.steps < gpu.steps),
                  "%s -ngl 1: %llu layers, %llu steps (gpu: %llu for %d layers)", arch,
                  (unsigned long long)one.layers, (unsigned long long)one.steps,
                  (unsigned long long)gpu.steps, p.n_layer);
        CHECK_MSG(!memcmp(cpu.logits, gpu.logits, nv * sizeof *cpu.logits) &&
                  !memcmp(cpu.logits, one.logits, nv * sizeof *cpu.logits),
                  "%s: sim logits differ from the CPU's", arch);
    }
    free(cpu.logits);
    free(gpu.logits);
    free(one.logits);
    unlink(path);
}

/* sl_ctx_step_profile's refusals: no profile_steps, a short array, NULL arguments */
static void refusals(const char *dir)
{
    tm_params p;
    tm_defaults("llama", &p);
    char path[600];
    snprintf(path, sizeof path, "%s/refusals.gguf", dir);
    sl_error e;
    if (tm_write(&p, path, &e) != SL_OK) {
        CHECK_MSG(false, "write: %s", e.msg);
        return;
    }
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.device = "sim";
    o.progress = false;
    sl_model *m = NULL;
    sl_ctx *plain = NULL, *prof = NULL;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open: %s", e.msg);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    if (m) CHECK(sl_ctx_create(m, &co, &plain, &e) == SL_OK);
    co.profile_steps = true;
    if (m) CHECK(sl_ctx_create(m, &co, &prof, &e) == SL_OK);
    if (plain && prof) {
        sl_step_profile rows[KINDS];
        size_t n = 0;
        CHECK(sl_ctx_step_profile(plain, rows, KINDS, &n, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "profile_steps");
        CHECK(sl_ctx_step_profile(prof, rows, 2, &n, &e) == SL_ERR_RANGE && n > 2);
        const size_t kinds = n;
        CHECK(sl_ctx_step_profile(prof, rows, KINDS, &n, &e) == SL_OK && n == kinds);
        CHECK(sl_ctx_step_profile(prof, NULL, KINDS, &n, &e) == SL_ERR_INVALID);
        CHECK(sl_ctx_step_profile(prof, rows, KINDS, NULL, &e) == SL_ERR_INVALID);
        CHECK(sl_ctx_step_profile(NULL, rows, KINDS, &n, &e) == SL_ERR_INVALID);
        /* nothing ran yet: every kind named, all zero */
        bool zero = true;
        for (size_t i = 0; i < kinds; i++)
            zero &= rows[i].op && rows[i].calls == 0 && rows[i].seconds == 0;
        CHECK_MSG(zero, "a fresh context's profile is not all zero");
    }
    sl_ctx_destroy(plain);
    sl_ctx_destroy(prof);
    sl_model_close(m);
    unlink(path);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp ? tmp : "/tmp");
    refusals(dir);
    check_arch("llama", dir, MAX_STEPS, true);
    check_arch("qwen3moe", dir, MAX_STEPS, true);
    check_arch("mixtral", dir, MAX_STEPS, true);
    check_arch("deepseek2", dir, MAX_STEPS_MLA, false);
    /* the others: counted, and the same logits (their extra steps: biases, post-norms,
     * sliding windows) */
    const char *others[] = {"qwen2moe", "olmoe", "gemma3", "gpt-oss", "qwen2",
                            "qwen3", "gemma2", "granite", "phi3"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        check_arch(others[i], dir, 0, false);
    return sl_test_finish("dev_steps_test");
}
