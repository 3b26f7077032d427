/* scheduler/ffn_split.c: see ffn_split.h. */
#include "scheduler/ffn_split.h"

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

void sl_ffn_split_part_bytes(const sl_ffn_split_src *s, int64_t n_part, uint64_t bytes[3])
{
    bytes[0] = (uint64_t)n_part * row_bytes(s->type_gate, s->n_embd);
    bytes[1] = (uint64_t)n_part * row_bytes(s->type_up, s->n_embd);
    bytes[2] = (uint64_t)s->n_embd * row_bytes(s->type_down, n_part);
}

sl_status sl_ffn_split_gather(const sl_ffn_split_src *s, const bool *hot_granule, bool want,
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
