/* scheduler/moe/ffn_split.c: see ffn_split.h. */
#include "scheduler/moe/ffn_split.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

int64_t sl_ffn_split_granule(uint32_t type_down)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type_down);
    return ti ? (int64_t)ti->block_size : 0;
}

int64_t sl_ffn_split_round(const bool *hot, int64_t n_ff, int64_t granule, bool *hot_granule)
{
    int64_t n_hot = 0;
    for (int64_t k = 0; k < n_ff / granule; k++) {
        int64_t c = 0;
        for (int64_t j = 0; j < granule; j++) c += hot[k * granule + j];
        hot_granule[k] = 2 * c >= granule;
        n_hot += hot_granule[k] ? granule : 0;
    }
    return n_hot;
}

static uint64_t row_bytes(uint32_t type, int64_t n)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    return ti ? (uint64_t)(n / ti->block_size) * ti->type_size : 0;
}

/* One expert as a dense FFN, host memory. */
typedef struct split_src {
    uint32_t type_gate, type_up, type_down;
    int64_t n_embd, n_ff, granule;
    const void *gate, *up, *down;
} split_src;

/* Bytes of a part of n_part neurons: gate' [n_part][n_embd], up', down' [n_embd][n_part]. */
static void part_bytes(const split_src *s, int64_t n_part, uint64_t bytes[3])
{
    bytes[0] = (uint64_t)n_part * row_bytes(s->type_gate, s->n_embd);
    bytes[1] = (uint64_t)n_part * row_bytes(s->type_up, s->n_embd);
    bytes[2] = (uint64_t)s->n_embd * row_bytes(s->type_down, n_part);
}

/* Gathers one part: the neurons of the granules whose hot_granule[k] == want into compact
 * gate', up', down' (sized by part_bytes). */
static sl_status gather(const split_src *s, const bool *hot_granule, bool want,
                        void *gate, void *up, void *down, sl_error *err)
{
    const int64_t G = s->granule, K = G > 0 ? s->n_ff / G : 0;
    if (G <= 0 || s->n_ff % G || sl_ffn_split_granule(s->type_down) != G ||
        !row_bytes(s->type_gate, s->n_embd) || !row_bytes(s->type_up, s->n_embd))
        return sl_error_set(err, SL_ERR_INVALID, "ffn split: n_ff %lld is not a multiple of "
                            "down's block of %lld neurons, or a type is unknown",
                            (long long)s->n_ff, (long long)G);
    const uint64_t rg = row_bytes(s->type_gate, s->n_embd), ru = row_bytes(s->type_up, s->n_embd);
    const uint64_t rd = row_bytes(s->type_down, s->n_ff), gd = row_bytes(s->type_down, G);
    int64_t n_part = 0;
    for (int64_t k = 0; k < K; k++) n_part += hot_granule[k] == want;
    const uint64_t rd_part = (uint64_t)n_part * gd;
    int64_t at = 0;
    for (int64_t k = 0; k < K; k++) {
        if (hot_granule[k] != want) continue;
        memcpy((uint8_t *)gate + (uint64_t)at * G * rg, (const uint8_t *)s->gate + k * G * rg,
               (size_t)(G * rg));
        memcpy((uint8_t *)up + (uint64_t)at * G * ru, (const uint8_t *)s->up + k * G * ru,
               (size_t)(G * ru));
        for (int64_t r = 0; r < s->n_embd; r++)
            memcpy((uint8_t *)down + (uint64_t)r * rd_part + (uint64_t)at * gd,
                   (const uint8_t *)s->down + (uint64_t)r * rd + (uint64_t)k * gd, (size_t)gd);
        at++;
    }
    return SL_OK;
}

/* The source of expert e of `whole` as a dense FFN. */
static split_src expert_src(const sl_moe_layer *whole, int32_t e, int64_t granule)
{
    return (split_src){.type_gate = whole->type_gate, .type_up = whole->type_up,
                              .type_down = whole->type_down, .n_embd = whole->n_embd,
                              .n_ff = whole->n_ff, .granule = granule, .gate = whole->gate[e],
                              .up = whole->up[e], .down = whole->down[e]};
}

void sl_ffn_split_experts_layout(const sl_moe_layer *whole, const bool *hot_granule,
                                 int64_t granule, bool want, int64_t *ff_at, uint64_t bytes[3])
{
    const int64_t K = granule > 0 ? whole->n_ff / granule : 0;
    ff_at[0] = 0;
    for (int32_t e = 0; e < whole->n_expert; e++) {
        int64_t n = 0;
        for (int64_t k = 0; k < K; k++) n += hot_granule[e * K + k] == want;
        ff_at[e + 1] = ff_at[e] + n * granule;
    }
    const split_src s = expert_src(whole, 0, granule);
    part_bytes(&s, ff_at[whole->n_expert], bytes);
}

/* dst[0 ..) = the entries of src [n_ff] in granules whose hot_granule[k] == want. */
static void gather_vec(const float *src, int64_t K, int64_t G, const bool *hot_granule,
                       bool want, float *dst)
{
    int64_t at = 0;
    for (int64_t k = 0; k < K; k++)
        if (hot_granule[k] == want) {
            memcpy(dst + at, src + k * G, (size_t)G * sizeof *dst);
            at += G;
        }
}

sl_status sl_ffn_split_experts_gather(const sl_moe_layer *whole, const bool *hot_granule,
                                      int64_t granule, bool want, const int64_t *ff_at,
                                      void *gate, void *up, void *down, float *gate_b,
                                      float *up_b, sl_error *err)
{
    const int64_t K = granule > 0 ? whole->n_ff / granule : 0, E = whole->n_embd;
    const uint64_t rg = row_bytes(whole->type_gate, E), ru = row_bytes(whole->type_up, E);
    for (int32_t e = 0; e < whole->n_expert; e++) {
        const split_src s = expert_src(whole, e, granule);
        const int64_t at = ff_at[e];
        const bool *hg = hot_granule + e * K;
        sl_status st = gather(&s, hg, want, (uint8_t *)gate + (uint64_t)at * rg,
                              (uint8_t *)up + (uint64_t)at * ru,
                              (uint8_t *)down + (uint64_t)E * row_bytes(whole->type_down, at),
                              err);
        if (st && whole->n_expert > 1) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "expert %d: %s", e, why);
        }
        if (st) return st;
        if (whole->gate_b) gather_vec(whole->gate_b + e * whole->n_ff, K, granule, hg, want,
                                      gate_b + at);
        if (whole->up_b) gather_vec(whole->up_b + e * whole->n_ff, K, granule, hg, want,
                                    up_b + at);
    }
    return SL_OK;
}

void sl_ffn_split_experts_part(const sl_moe_layer *whole, const int64_t *ff_at, const void *gate,
                               const void *up, const void *down, const float *gate_b,
                               const float *up_b, bool hot, const bool *on_device,
                               const void **pg, const void **pu, const void **pd,
                               sl_moe_layer *out)
{
    const int64_t E = whole->n_embd;
    int64_t widest = 0;
    for (int32_t e = 0; e < whole->n_expert; e++) {
        const int64_t at = ff_at[e];
        pg[e] = (const uint8_t *)gate + (uint64_t)at * row_bytes(whole->type_gate, E);
        pu[e] = (const uint8_t *)up + (uint64_t)at * row_bytes(whole->type_up, E);
        pd[e] = (const uint8_t *)down + (uint64_t)E * row_bytes(whole->type_down, at);
        if (ff_at[e + 1] - at > widest) widest = ff_at[e + 1] - at;
    }
    *out = *whole;
    out->n_ff = widest > 0 ? widest : 1; /* the scratch's stride; 1 keeps the layer valid */
    out->gate = pg;
    out->up = pu;
    out->down = pd;
    out->on_device = on_device;
    out->gate_b = whole->gate_b ? gate_b : NULL;
    out->up_b = whole->up_b ? up_b : NULL;
    out->down_b = hot ? NULL : whole->down_b; /* each expert's bias once: on the cold side */
    out->ff_at = ff_at;
}
