/* tests/runtime/testmodel.c: see testmodel.h. */
#include "tests/runtime/testmodel.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
#include "tests/testing.h"

void tm_defaults(const char *arch, tm_params *p)
{
    memset(p, 0, sizeof *p);
    p->arch = arch;
    p->n_layer = strcmp(arch, "gemma3") ? 2 : 7;
    p->n_embd = 64;
    p->n_head = 4;
    p->n_head_kv = strcmp(arch, "olmoe") ? 2 : 4;
    p->head_dim = strcmp(arch, "qwen3moe") && strcmp(arch, "qwen3") ? 16 : 32;
    const bool oss = !strcmp(arch, "gpt-oss");
    p->n_ff = 64;
    static const char *const k_dense[] = {"llama", "gemma3", "qwen2", "qwen3", "gemma2",
                                          "granite", "phi3"};
    bool moe = true;
    for (size_t i = 0; i < sizeof k_dense / sizeof *k_dense; i++)
        if (!strcmp(arch, k_dense[i])) moe = false;
    p->n_expert = moe ? oss ? 4 : 8 : 0;
    p->n_expert_used = moe ? 2 : 0;
    p->n_vocab = 300;
    p->n_ff_shexp = 96;
    p->n_swa = 4;
    if (!strcmp(arch, "deepseek2")) {
        p->n_layer = 3;
        p->n_dense = 1;
        p->n_group = 4;
        p->n_group_used = 2;
    }
    if (!strcmp(arch, "glm4moe")) {
        p->n_layer = 3;
        p->n_dense = 1;
    }
    p->wtype = SL_GGML_F32;
    p->seed = 7;
}

typedef enum { T_MAT, T_NORM, T_BIAS, T_EMBD } tkind;

typedef struct tdesc {
    char name[64];
    uint32_t type, nd;
    int64_t ne[4];
    tkind k;
} tdesc;

static void add(tdesc *t, int *n, const tm_params *p, tkind k, const char *name, int64_t ne0,
                int64_t ne1, int64_t ne2)
{
    if (p->omit && !strcmp(p->omit, name)) return;
    tdesc *d = &t[(*n)++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->k = k;
    d->type = k == T_MAT || k == T_EMBD ? p->wtype : SL_GGML_F32;
    /* rows that are not whole blocks of the type (deepseek2's per-head MLA matrices) stay F16,
     * as llama.cpp's quantizer falls back for them */
    const sl_gguf_type_info *ti = sl_gguf_type_get(d->type);
    if (ti && ne0 % ti->block_size) d->type = SL_GGML_F16;
    d->nd = ne2 ? 3 : ne1 ? 2 : 1;
    d->ne[0] = ne0;
    d->ne[1] = ne1 ? ne1 : 1;
    d->ne[2] = ne2 ? ne2 : 1;
    d->ne[3] = 1;
    if (p->reshape && !strcmp(p->reshape, name)) {
        const int64_t x = d->ne[0];
        d->ne[0] = d->ne[1];
        d->ne[1] = x;
        if (d->nd < 2) d->nd = 2;
    }
}

static uint64_t mix(uint64_t *s) { return sl_test_splitmix64(s); }

static double gauss(uint64_t *s)
{
    double a = 0;
    for (int i = 0; i < 4; i++) a += (double)(mix(s) >> 11) * 0x1p-53;
    return (a - 2.0) * 1.7320508075688772;
}

/* A tensor's values are a function of (seed, name), drawn row by row. */
static uint64_t seed_of(const tdesc *t, uint64_t seed)
{
    for (const char *c = t->name; *c; c++) seed = (seed ^ (uint8_t)*c) * 0x100000001b3ull;
    return seed;
}

static float value(const tdesc *t, uint64_t *s)
{
    const double g = gauss(s), sc = 1.0 / sqrt((double)t->ne[0]);
    return (float)(t->k == T_MAT    ? g * sc
                   : t->k == T_EMBD ? g
                   : t->k == T_NORM ? 1.0 + 0.1 * g
                                    : 0.1 * g);
}

/* All of t's values (malloc'd), or NULL when out of memory. */
static float *values(const tdesc *t, uint64_t seed)
{
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2];
    float *v = malloc((size_t)n * sizeof *v);
    uint64_t s = seed_of(t, seed);
    for (int64_t i = 0; v && i < n; i++) v[i] = value(t, &s);
    return v;
}

/* A row of a type without a quantizer (the codebook types IQ1_S .. IQ3_S): random codes with
 * block scales that keep the weights near value()'s 1/sqrt(cols) (any code is valid in these
 * formats); true if the type is one of them. */
static bool codes_row(uint32_t type, uint64_t *s, int64_t cols, uint8_t *q)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    /* a super-block type without a quantizer whose scale kernels/ref can place: the codebook
     * types (TQ1_0/TQ2_0 have no such scale and are refused below) */
    if (!ti || ti->block_size != 256 || sl_quant_can_quantize(type)) return false;
    /* the grids' values run to ~43 (IQ2) / ~62 (IQ3) / 1 (IQ1) times the group scale */
    const float d = type == SL_GGML_IQ3_S      ? 0.02f
                    : type == SL_GGML_IQ1_S || type == SL_GGML_IQ1_M ? 0.3f
                                                                      : 0.01f;
    const float dc = d / sqrtf((float)cols / 64.0f);
    for (int64_t b = 0; b < cols / 256; b++) {
        uint8_t *blk = q + b * ti->type_size;
        for (uint32_t k = 0; k < ti->type_size; k++) {
            *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
            blk[k] = (uint8_t)(*s >> 24);
        }
        if (!sl_quant_block_set_scale(type, blk, dc, 0.0f)) return false;
    }
    return true;
}

sl_status tm_write(const tm_params *p, const char *path, sl_error *err)
{
    const char *a = p->arch;
    const bool mixtral = !strncmp(a, "mixtral", 7), split = !strcmp(a, "mixtral-split");
    const char *garch = mixtral ? "llama" : a;
    const bool moe = p->n_expert > 0, gemma3 = !strcmp(a, "gemma3"), oss = !strcmp(a, "gpt-oss");
    const bool gemma = gemma3 || !strcmp(a, "gemma2"), granite = !strcmp(a, "granite");
    const bool phi3 = !strcmp(a, "phi3"); /* fused attn_qkv and gate | up; Q == n_embd */
    const int64_t E = p->n_embd, D = p->head_dim, Q = (int64_t)p->n_head * D,
                  KV = (int64_t)p->n_head_kv * D, F = p->n_ff, X = p->n_expert,
                  V = p->n_vocab, S = p->n_ff_shexp;
    const int cap = 8 + p->n_layer * (26 + 3 * (p->n_expert + 1));
    tdesc *t = calloc((size_t)cap, sizeof *t);
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "testmodel: oom");
    int n = 0;
    char nm[64];
#define NM(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    const bool ds = !strcmp(a, "deepseek2");
    /* glm4moe: GQA with q/k/v biases and per-head q/k norms (GLM-4.5's use_qk_norm), rotary
     * on half a head, deepseek2's FFN (dense lead, exp_probs_b, one ungated shared expert) */
    const bool glm = !strcmp(a, "glm4moe");
    /* minimax-m2: q/k norms over the whole projections, half rotary, sigmoid routing with
     * exp_probs_b, no shared expert */
    const bool mm2 = !strcmp(a, "minimax-m2");
    /* deepseek2's MLA sizes */
    const int64_t QL = E / 2, C = E / 2, R = D / 2, Dk = D + R, H = p->n_head;
    add(t, &n, p, T_EMBD, "token_embd.weight", E, V, 0);
    for (int i = 0; i < p->n_layer; i++) {
        add(t, &n, p, T_NORM, NM("blk.%d.attn_norm.weight", i), E, 0, 0);
        if ((ds || glm) && i >= p->n_layer - p->n_nextn) {
            add(t, &n, p, T_MAT, NM("blk.%d.nextn.eh_proj.weight", i), 2 * E, E, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.nextn.enorm.weight", i), E, 0, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.nextn.hnorm.weight", i), E, 0, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.nextn.shared_head_norm.weight", i), E, 0, 0);
        }
        if (ds) {
            add(t, &n, p, T_MAT, NM("blk.%d.attn_q_a.weight", i), E, QL, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.attn_q_a_norm.weight", i), QL, 0, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.attn_q_b.weight", i), QL, H * Dk, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.attn_kv_a_mqa.weight", i), E, C + R, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.attn_kv_a_norm.weight", i), C, 0, 0);
            if (p->legacy_kv_b) {
                add(t, &n, p, T_MAT, NM("blk.%d.attn_kv_b.weight", i), C, H * (D + D), 0);
            } else {
                add(t, &n, p, T_MAT, NM("blk.%d.attn_k_b.weight", i), D, C, H);
                add(t, &n, p, T_MAT, NM("blk.%d.attn_v_b.weight", i), C, D, H);
            }
            add(t, &n, p, T_MAT, NM("blk.%d.attn_output.weight", i), H * D, E, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.ffn_norm.weight", i), E, 0, 0);
            if (i < p->n_dense) {
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate.weight", i), E, F, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_up.weight", i), E, F, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_down.weight", i), F, E, 0);
                continue;
            }
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_inp.weight", i), E, X, 0);
            t[n - 1].type = SL_GGML_F32;
            add(t, &n, p, T_BIAS, NM("blk.%d.exp_probs_b.bias", i), X, 0, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_exps.weight", i), E, F, X);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_up_exps.weight", i), E, F, X);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_down_exps.weight", i), F, E, X);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_shexp.weight", i), E, F, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_up_shexp.weight", i), E, F, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_down_shexp.weight", i), F, E, 0);
            continue;
        }
        if (phi3) {
            add(t, &n, p, T_MAT, NM("blk.%d.attn_qkv.weight", i), E, Q + 2 * KV, 0);
        } else {
            add(t, &n, p, T_MAT, NM("blk.%d.attn_q.weight", i), E, Q, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.attn_k.weight", i), E, KV, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.attn_v.weight", i), E, KV, 0);
        }
        add(t, &n, p, T_MAT, NM("blk.%d.attn_output.weight", i), Q, E, 0);
        if (oss) {
            add(t, &n, p, T_BIAS, NM("blk.%d.attn_output.bias", i), E, 0, 0);
            add(t, &n, p, T_BIAS, NM("blk.%d.attn_sinks.weight", i), p->n_head, 0, 0);
        }
        if (!strcmp(a, "qwen2moe") || !strcmp(a, "qwen2") || oss || glm) {
            add(t, &n, p, T_BIAS, NM("blk.%d.attn_q.bias", i), Q, 0, 0);
            add(t, &n, p, T_BIAS, NM("blk.%d.attn_k.bias", i), KV, 0, 0);
            add(t, &n, p, T_BIAS, NM("blk.%d.attn_v.bias", i), KV, 0, 0);
        }
        if (!strcmp(a, "qwen3moe") || !strcmp(a, "qwen3") || gemma3 || glm) {
            add(t, &n, p, T_NORM, NM("blk.%d.attn_q_norm.weight", i), D, 0, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.attn_k_norm.weight", i), D, 0, 0);
        } else if (!strcmp(a, "olmoe") || mm2) {
            add(t, &n, p, T_NORM, NM("blk.%d.attn_q_norm.weight", i), Q, 0, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.attn_k_norm.weight", i), KV, 0, 0);
        }
        if (gemma) {
            add(t, &n, p, T_NORM, NM("blk.%d.post_attention_norm.weight", i), E, 0, 0);
            add(t, &n, p, T_NORM, NM("blk.%d.post_ffw_norm.weight", i), E, 0, 0);
        }
        add(t, &n, p, T_NORM, NM(oss || glm ? "blk.%d.post_attention_norm.weight"
                                            : "blk.%d.ffn_norm.weight", i), E, 0, 0);
        if (phi3) {
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_up.weight", i), E, 2 * F, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_down.weight", i), F, E, 0);
        } else if (!moe || (glm && i < p->n_dense)) {
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate.weight", i), E, F, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_up.weight", i), E, F, 0);
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_down.weight", i), F, E, 0);
        } else {
            add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_inp.weight", i), E, X, 0);
            t[n - 1].type = SL_GGML_F32;
            if (split) {
                for (int x = 0; x < X; x++) {
                    add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate.%d.weight", i, x), E, F, 0);
                    add(t, &n, p, T_MAT, NM("blk.%d.ffn_up.%d.weight", i, x), E, F, 0);
                    add(t, &n, p, T_MAT, NM("blk.%d.ffn_down.%d.weight", i, x), F, E, 0);
                }
            } else {
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_exps.weight", i), E, F, X);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_up_exps.weight", i), E, F, X);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_down_exps.weight", i), F, E, X);
            }
            if (oss) {
                add(t, &n, p, T_BIAS, NM("blk.%d.ffn_gate_inp.bias", i), X, 0, 0);
                add(t, &n, p, T_BIAS, NM("blk.%d.ffn_gate_exps.bias", i), F, X, 0);
                add(t, &n, p, T_BIAS, NM("blk.%d.ffn_up_exps.bias", i), F, X, 0);
                add(t, &n, p, T_BIAS, NM("blk.%d.ffn_down_exps.bias", i), E, X, 0);
            }
            if (mm2) add(t, &n, p, T_BIAS, NM("blk.%d.exp_probs_b.bias", i), X, 0, 0);
            if (glm) {
                add(t, &n, p, T_BIAS, NM("blk.%d.exp_probs_b.bias", i), X, 0, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_shexp.weight", i), E, F, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_up_shexp.weight", i), E, F, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_down_shexp.weight", i), F, E, 0);
            }
            if (!strcmp(a, "qwen2moe")) {
                add(t, &n, p, T_BIAS, NM("blk.%d.ffn_gate_inp_shexp.weight", i), E, 0, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_gate_shexp.weight", i), E, S, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_up_shexp.weight", i), E, S, 0);
                add(t, &n, p, T_MAT, NM("blk.%d.ffn_down_shexp.weight", i), S, E, 0);
            }
        }
    }
    add(t, &n, p, T_NORM, "output_norm.weight", E, 0, 0);
    if (!p->tie_output && (!gemma || p->gemma_output))
        add(t, &n, p, T_MAT, "output.weight", E, V, 0);
    if (p->extra) add(t, &n, p, T_NORM, p->extra, E, 0, 0);
#undef NM

    sl_gguf_writer *w = NULL;
    sl_status st = sl_gguf_writer_create(path, NULL, &w, err);
    char k[128];
    bool set_done = false;
#define KU32(suffix, v)                                                                       \
    if (!st && !(p->drop_key && !strcmp(p->drop_key, suffix))) {                             \
        const bool set_ = p->set_key && !strcmp(p->set_key, suffix);                          \
        set_done |= set_;                                                                     \
        snprintf(k, sizeof k, "%s.%s", garch, suffix);                                        \
        st = sl_gguf_writer_set_u32(w, k, (uint32_t)(set_ ? p->set_val : (v)), err);          \
    }
#define KF32(suffix, v)                                                                       \
    if (!st && !(p->drop_key && !strcmp(p->drop_key, suffix))) {                             \
        snprintf(k, sizeof k, "%s.%s", garch, suffix);                                        \
        st = sl_gguf_writer_set_f32(w, k, (float)(v), err);                                   \
    }
    if (!st) st = sl_gguf_writer_set_str(w, "general.architecture", garch, err);
    if (!st) st = sl_gguf_writer_set_str(w, "general.name", "testmodel", err);
    if (!st && p->ffn_act)
        st = sl_gguf_writer_set_str(w, "sluice.feed_forward_activation", p->ffn_act, err);
    KU32("context_length", 256);
    KU32("embedding_length", E);
    KU32("block_count", p->n_layer);
    KU32("feed_forward_length", F);
    KU32("attention.head_count", p->n_head);
    /* MLA: one latent head (the legacy layout states the per-head attention instead) */
    KU32("attention.head_count_kv", ds ? (p->legacy_kv_b ? p->n_head : 1) : p->n_head_kv);
    KF32("attention.layer_norm_rms_epsilon", 1e-6);
    KF32("rope.freq_base", gemma3 ? 1000000.0 : 10000.0);
    if (D != E / p->n_head) {
        KU32("attention.key_length", D);
        KU32("attention.value_length", D);
    }
    if (moe) {
        KU32("expert_count", X);
        KU32("expert_used_count", p->n_expert_used);
    }
    if (!strcmp(a, "qwen2moe") || !strcmp(a, "qwen3moe") || oss)
        KU32("expert_feed_forward_length", F);
    if (!strcmp(a, "qwen2moe")) KU32("expert_shared_feed_forward_length", S);
    if (gemma || oss) KU32("attention.sliding_window", p->n_swa);
    if (granite) { /* set_key "logit_scale" writes it as a u32: the wrong type */
        if (p->set_key && !strcmp(p->set_key, "logit_scale")) {
            KU32("logit_scale", 8);
        } else {
            KF32("logit_scale", 8.0);
        }
        KF32("embedding_scale", 12.0);
        KF32("residual_scale", 0.22);
        KF32("attention.scale", 0.015625);
    }
    if (oss) {
        KU32("rope.dimension_count", D);
        KF32("rope.scaling.factor", 32.0);
        KU32("rope.scaling.original_context_length", 4096);
        if (!st) st = sl_gguf_writer_set_str(w, "gpt-oss.rope.scaling.type", "yarn", err);
    }
    if (ds) {
        KU32("attention.q_lora_rank", QL);
        KU32("attention.kv_lora_rank", C);
        if (p->legacy_kv_b) {
            KU32("attention.key_length", Dk);
            KU32("attention.value_length", D);
        } else {
            KU32("attention.key_length", C + R);
            KU32("attention.value_length", C);
            KU32("attention.key_length_mla", Dk);
            KU32("attention.value_length_mla", D);
        }
        KU32("rope.dimension_count", R);
        KU32("leading_dense_block_count", p->n_dense);
        KU32("expert_feed_forward_length", F);
        KU32("expert_shared_count", 1);
        KU32("expert_gating_func", 2);
        if (p->n_group) {
            KU32("expert_group_count", p->n_group);
            KU32("expert_group_used_count", p->n_group_used);
        }
        KF32("expert_weights_scale", 2.5);
        KF32("rope.scaling.factor", 40.0);
        KU32("rope.scaling.original_context_length", 4096);
        KF32("rope.scaling.yarn_log_multiplier", 0.1);
        if (!st) st = sl_gguf_writer_set_str(w, "deepseek2.rope.scaling.type", "yarn", err);
        if (!st) st = sl_gguf_writer_set_bool(w, "deepseek2.expert_weights_norm", true, err);
        if (p->n_nextn) KU32("nextn_predict_layers", p->n_nextn);
    }
    if (mm2) {
        KU32("rope.dimension_count", D / 2);
        KU32("expert_feed_forward_length", F);
        KU32("expert_gating_func", 2);
    }
    if (glm) {
        KU32("rope.dimension_count", D / 2);
        KU32("leading_dense_block_count", p->n_dense);
        KU32("expert_feed_forward_length", F);
        KU32("expert_shared_count", 1);
        KU32("expert_gating_func", 2);
        KF32("expert_weights_scale", 2.5);
        if (!st) st = sl_gguf_writer_set_bool(w, "glm4moe.expert_weights_norm", true, err);
        if (p->n_nextn) KU32("nextn_predict_layers", p->n_nextn);
    }
    if (p->set_key && !set_done) KU32(p->set_key, p->set_val);
    if (!st) st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, err);
    if (!st) st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, err);
#undef KU32
#undef KF32
    for (int i = 0; i < n && !st; i++)
        st = sl_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].nd, t[i].ne, err);
    float *row = malloc(4096 * sizeof *row), *kb = NULL, *vb = NULL;
    uint8_t *q = malloc(4096 * 4);
    if (!row || !q) st = sl_error_set(err, SL_ERR_NOMEM, "testmodel: oom");
    for (int i = 0; i < n && !st; i++) {
        const int64_t cols = t[i].ne[0], rows = t[i].ne[1] * t[i].ne[2];
        const size_t rb = sl_quant_row_bytes(t[i].type, cols);
        const char *kv_b = cols == C ? strstr(t[i].name, "attn_kv_b") : NULL;
        if (kv_b) { /* rows h * 2D + j: k_b[h] column j (j < D), then v_b[h] row j - D */
            char kn[64];
            snprintf(kn, sizeof kn, "%.*sattn_k_b.weight", (int)(kv_b - t[i].name), t[i].name);
            tdesc kd = {.k = T_MAT, .type = SL_GGML_F32, .nd = 3, .ne = {D, C, H, 1}};
            tdesc vd = kd;
            snprintf(kd.name, sizeof kd.name, "%s", kn);
            snprintf(vd.name, sizeof vd.name, "%.*sattn_v_b.weight", (int)(kv_b - t[i].name),
                     t[i].name);
            vd.ne[0] = C;
            vd.ne[1] = D;
            free(kb);
            free(vb);
            kb = values(&kd, p->seed);
            vb = values(&vd, p->seed);
            if (!kb || !vb) st = sl_error_set(err, SL_ERR_NOMEM, "testmodel: oom");
            for (int64_t r = 0; r < rows && !st; r++) {
                const int64_t h = r / (2 * D), j = r % (2 * D);
                for (int64_t c = 0; c < C; c++)
                    row[c] = j < D ? kb[(h * C + c) * D + j] : vb[(h * D + j - D) * C + c];
                st = sl_quant_row(t[i].type, row, q, cols, err);
                if (!st) st = sl_gguf_writer_write(w, q, rb, err);
            }
            continue;
        }
        uint64_t s = seed_of(&t[i], p->seed);
        for (int64_t r = 0; r < rows && !st; r++) {
            for (int64_t j = 0; j < cols; j++) row[j] = value(&t[i], &s);
            st = sl_quant_row(t[i].type, row, q, cols, err);
            if (st == SL_ERR_UNSUPPORTED && codes_row(t[i].type, &s, cols, q)) st = SL_OK;
            if (!st) st = sl_gguf_writer_write(w, q, rb, err);
        }
    }
    free(kb);
    free(vb);
    if (!st) st = sl_gguf_writer_finish(w, err);
    sl_gguf_writer_destroy(w);
    free(row);
    free(q);
    free(t);
    return st;
}
