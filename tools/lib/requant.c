/* tools/lib/requant.c: see requant.h. */
#include "tools/lib/requant.h"

#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"

/* One row of t (n elements) from src in its type to dst in `type`, through F32. */
static sl_status convert_row(uint32_t from, uint32_t to, const void *src, void *dst, float *tmp,
                             int64_t n, sl_error *err)
{
    sl_status st = sl_quant_dequant_row(from, src, tmp, n, err);
    return st ? st : sl_quant_row(to, tmp, dst, n, err);
}

static sl_status write_tensor(sl_gguf_writer *wr, const sl_gguf *g, const sl_gguf_tensor *t,
                              bool change, uint32_t type, sl_error *err)
{
    const uint8_t *src = sl_gguf_tensor_view(g, t);
    if (!src && t->nbytes)
        return sl_error_set(err, SL_ERR_IO, "%s: tensor '%s': no file mapping", t->path, t->name);
    if (!change) return sl_gguf_writer_write(wr, src, t->nbytes, err);
    const int64_t n = t->ne[0], rows = t->nbytes ? (int64_t)(t->nbytes /
                                                             sl_quant_row_bytes(t->type, n)) : 0;
    const size_t ib = sl_quant_row_bytes(t->type, n), ob = sl_quant_row_bytes(type, n);
    float *tmp = malloc((size_t)n * sizeof *tmp + 1);
    uint8_t *row = malloc(ob + 1);
    sl_status st = tmp && row ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "requant: out of memory");
    for (int64_t r = 0; r < rows && !st; r++) {
        st = convert_row(t->type, type, src + (size_t)r * ib, row, tmp, n, err);
        if (!st) st = sl_gguf_writer_write(wr, row, ob, err);
    }
    free(tmp);
    free(row);
    return st;
}

static sl_status requant(const sl_gguf *g, const char *out_path, const regex_t *re,
                         uint32_t type, uint32_t *n_changed, sl_gguf_writer_options wo,
                         sl_error *err)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    /* alignment 0: a copied general.alignment decides, as in the source */
    wo.split_keys_verbatim = true;
    sl_gguf_writer *wr;
    sl_status st = sl_gguf_writer_create(out_path, &wo, &wr, err);
    if (st) return st;
    for (size_t i = 0; i < sl_gguf_kv_count(g) && !st; i++)
        st = sl_gguf_writer_set(wr, sl_gguf_kv_key(g, i), sl_gguf_kv_value(g, i), err);
    const size_t nt = sl_gguf_tensor_count(g);
    bool *change = calloc(nt ? nt : 1, sizeof *change);
    if (!change && !st) st = sl_error_set(err, SL_ERR_NOMEM, "requant: out of memory");
    *n_changed = 0;
    for (size_t i = 0; i < nt && !st; i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        change[i] = regexec(re, t->name, 0, NULL, 0) == 0;
        if (change[i] && (t->ne[0] % ti->block_size || !sl_quant_supported(t->type)))
            st = sl_error_set(err, SL_ERR_INVALID, "tensor '%s': rows of %lld %s cannot "
                              "become %s", t->name, (long long)t->ne[0],
                              sl_gguf_type_get(t->type) ? sl_gguf_type_get(t->type)->name : "?",
                              ti->name);
        *n_changed += change[i];
        if (!st) st = sl_gguf_writer_add_tensor(wr, t->name, change[i] ? type : t->type,
                                                t->n_dims, t->ne, err);
    }
    if (!st && !*n_changed)
        st = sl_error_set(err, SL_ERR_NOT_FOUND, "no tensor matches the pattern");
    for (size_t i = 0; i < nt && !st; i++)
        st = write_tensor(wr, g, sl_gguf_tensor_at(g, i), change[i], type, err);
    if (!st) st = sl_gguf_writer_finish(wr, err);
    sl_gguf_writer_destroy(wr); /* removes OUT.partial if unfinished */
    free(change);
    return st;
}

sl_status sl_requant_file(const char *in, const char *out, const char *pattern, uint32_t type,
                          uint32_t *n_changed,
                          void (*progress)(void *user, uint64_t done, uint64_t total),
                          void *progress_user, bool (*cancelled)(void *user),
                          void *cancelled_user, sl_error *err)
{
    uint32_t n = 0;
    if (n_changed) *n_changed = 0;
    if (!in || !out || !pattern)
        return sl_error_set(err, SL_ERR_INVALID, "requant: NULL argument");
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    if (!ti || !sl_quant_can_quantize(type))
        return sl_error_set(err, SL_ERR_INVALID, "requant: type %s cannot be written by the "
                            "quantizers", ti ? ti->name : "?");
    char *anchored = malloc(strlen(pattern) + 5);
    if (!anchored) return sl_error_set(err, SL_ERR_NOMEM, "requant: out of memory");
    sprintf(anchored, "^(%s)$", pattern);
    regex_t re;
    const int rc = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc) return sl_error_set(err, SL_ERR_INVALID, "requant: bad pattern '%s'", pattern);
    sl_gguf *g = NULL;
    sl_gguf_options go = {.no_shards = true};
    sl_status st = sl_gguf_open(in, &go, &g, err);
    if (!st) {
        /* the writer's OUT.partial, renamed at finish, is the only temporary: a fixed name
         * that the next run replaces if this one is killed */
        const sl_gguf_writer_options wo = {.progress = progress, .progress_user = progress_user,
                                           .cancelled = cancelled,
                                           .cancelled_user = cancelled_user};
        st = requant(g, out, &re, type, &n, wo, err);
    }
    sl_gguf_close(g);
    regfree(&re);
    if (n_changed) *n_changed = n;
    return st;
}
