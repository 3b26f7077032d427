/* sluice inspect: a GGUF file's header, metadata and tensor table, for people or (--json) for
 * tests and scripts.
 *
 * The JSON form is the contract other tools check against (tests/gguf_io compares it with
 * gguf-py): full values, never abbreviated; integers exact; floats that parse back to the same
 * bits (tools/common/json.h); tensor shapes in ggml order (ne[0] first) and offsets exactly as
 * stored, relative to the tensor's shard's data section. The human form abbreviates long
 * arrays and strings so a 150k-token vocabulary stays one line. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"

enum {
    HUMAN_ARR_HEAD = 8,         /* elements shown of a top-level array */
    HUMAN_ARR_HEAD_NESTED = 4,  /* ... and of a nested one */
    HUMAN_STR_MAX = 160,        /* bytes of a string shown before it is cut */
};

static void usage(FILE *f)
{
    fputs("usage: sluice inspect FILE [--json] [--checksum]\n"
          "  Prints a GGUF file's version, alignment, shards, metadata and tensor table.\n"
          "  A shard set is opened whole when FILE is PREFIX-00001-of-0000N.gguf.\n"
          "  --json      one JSON object (full values) instead of the human summary\n"
          "  --checksum  add each tensor's FNV-1a 64-bit hash of its data bytes\n",
          f);
}

static uint64_t fnv1a64(const void *data, uint64_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static const uint64_t k_fnv_basis = 0xcbf29ce484222325ull;

/* Hash of t's bytes: through the mapping, or (if the reader has none) with pread. */
static sl_status tensor_hash(const sl_gguf *g, const sl_gguf_tensor *t, uint64_t *out,
                             sl_error *err)
{
    if (t->nbytes == 0) {
        *out = k_fnv_basis;
        return SL_OK;
    }
    const void *view = sl_gguf_tensor_view(g, t);
    if (view) {
        *out = fnv1a64(view, t->nbytes, k_fnv_basis);
        return SL_OK;
    }
    if (t->nbytes > SIZE_MAX)
        return sl_error_set(err, SL_ERR_NOMEM, "tensor '%s': %" PRIu64 " bytes do not fit in "
                            "memory", t->name, t->nbytes);
    void *buf = malloc((size_t)t->nbytes);
    if (!buf) return sl_error_set(err, SL_ERR_NOMEM, "tensor '%s': out of memory", t->name);
    void *data;
    sl_status s = sl_gguf_tensor_read(g, t, SL_GGUF_IO_PREAD, buf, t->nbytes, &data, err);
    if (!s) *out = fnv1a64(data, t->nbytes, k_fnv_basis);
    free(buf);
    return s;
}

static const char *type_name(uint32_t code)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(code);
    return ti ? ti->name : "?";
}

/* ---- JSON ------------------------------------------------------------------------------ */

static sl_status json_value(FILE *f, const sl_gguf_value *v, sl_error *err)
{
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        fprintf(f, "%" PRIu64, v->v.u64);
        return SL_OK;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        fprintf(f, "%" PRId64, v->v.i64);
        return SL_OK;
    case SL_GGUF_F32: sl_json_f32(f, v->v.f32); return SL_OK;
    case SL_GGUF_F64: sl_json_f64(f, v->v.f64); return SL_OK;
    case SL_GGUF_BOOL: fputs(v->v.b ? "true" : "false", f); return SL_OK;
    case SL_GGUF_STR: sl_json_str(f, v->v.str.ptr, (size_t)v->v.str.len); return SL_OK;
    case SL_GGUF_ARR: break;
    default: return sl_error_set(err, SL_ERR_FORMAT, "value type %d is invalid", (int)v->type);
    }
    fputc('[', f);
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        sl_gguf_value e;
        sl_status s = sl_gguf_arr_get(v, i, &e, err);
        if (s) return s;
        if (i) fputc(',', f);
        if ((s = json_value(f, &e, err))) return s;
    }
    fputc(']', f);
    return SL_OK;
}

/* "u32", "string", "array[f32]", "array[array]" (nested arrays may differ in element type). */
static void type_string(char *buf, size_t cap, const sl_gguf_value *v)
{
    if (v->type == SL_GGUF_ARR)
        snprintf(buf, cap, "array[%s]", sl_gguf_vtype_name(v->v.arr.elem));
    else
        snprintf(buf, cap, "%s", sl_gguf_vtype_name(v->type));
}

static sl_status print_json(FILE *f, const sl_gguf *g, bool checksum, sl_error *err)
{
    sl_status s;
    fprintf(f, "{\"version\":%" PRIu32 ",\"alignment\":%" PRIu32 ",\"shards\":%" PRIu32
               ",\"powerinfer\":%s,\"kv\":{",
            sl_gguf_version(g), sl_gguf_alignment(g), sl_gguf_shard_count(g),
            sl_gguf_is_powerinfer(g) ? "true" : "false");
    size_t n_kv = sl_gguf_kv_count(g);
    for (size_t i = 0; i < n_kv; i++) {
        if (i) fputc(',', f);
        sl_json_cstr(f, sl_gguf_kv_key(g, i));
        fputc(':', f);
        if ((s = json_value(f, sl_gguf_kv_value(g, i), err))) return s;
    }
    fputs("},\"kv_types\":{", f);
    for (size_t i = 0; i < n_kv; i++) {
        char tbuf[64];
        type_string(tbuf, sizeof tbuf, sl_gguf_kv_value(g, i));
        if (i) fputc(',', f);
        sl_json_cstr(f, sl_gguf_kv_key(g, i));
        fprintf(f, ":\"%s\"", tbuf);
    }
    fputs("},\"tensors\":[", f);
    size_t n_t = sl_gguf_tensor_count(g);
    for (size_t i = 0; i < n_t; i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        if (i) fputc(',', f);
        fputs("{\"name\":", f);
        sl_json_cstr(f, t->name);
        fprintf(f, ",\"type\":\"%s\",\"shape\":[", type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) fprintf(f, "%s%" PRId64, d ? "," : "", t->ne[d]);
        fprintf(f, "],\"offset\":%" PRIu64 ",\"nbytes\":%" PRIu64 ",\"shard\":%" PRIu32,
                t->offset, t->nbytes, t->shard);
        if (checksum) {
            uint64_t h;
            if ((s = tensor_hash(g, t, &h, err))) return s;
            fprintf(f, ",\"fnv1a64\":\"%016" PRIx64 "\"", h);
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
    return SL_OK;
}

/* ---- human ----------------------------------------------------------------------------- */

static void human_str(FILE *f, const char *p, uint64_t len)
{
    if (len <= HUMAN_STR_MAX) {
        sl_json_str(f, p, (size_t)len);
        return;
    }
    sl_json_str(f, p, HUMAN_STR_MAX);
    fprintf(f, "... (%" PRIu64 " bytes)", len);
}

static sl_status human_value(FILE *f, const sl_gguf_value *v, unsigned depth, sl_error *err)
{
    if (v->type == SL_GGUF_STR) {
        human_str(f, v->v.str.ptr, v->v.str.len);
        return SL_OK;
    }
    if (v->type != SL_GGUF_ARR) return json_value(f, v, err);
    uint64_t n = v->v.arr.n, head = depth ? HUMAN_ARR_HEAD_NESTED : HUMAN_ARR_HEAD;
    uint64_t shown = n <= head + 2 ? n : head; /* "... (N total)" only when it saves space */
    fputc('[', f);
    for (uint64_t i = 0; i < shown; i++) {
        sl_gguf_value e;
        sl_status s = sl_gguf_arr_get(v, i, &e, err);
        if (s) return s;
        if (i) fputs(", ", f);
        if ((s = human_value(f, &e, depth + 1, err))) return s;
    }
    if (shown < n) fprintf(f, ", ... (%" PRIu64 " total)", n);
    fputc(']', f);
    return SL_OK;
}

static void shape_string(char *buf, size_t cap, const sl_gguf_tensor *t)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static sl_status print_human(FILE *f, const char *path, const sl_gguf *g, bool checksum,
                             sl_error *err)
{
    sl_status s;
    fprintf(f, "file:       %s\nversion:    %" PRIu32 "\nalignment:  %" PRIu32
               "\nshards:     %" PRIu32 "\npowerinfer: %s\n",
            path, sl_gguf_version(g), sl_gguf_alignment(g), sl_gguf_shard_count(g),
            sl_gguf_is_powerinfer(g) ? "yes" : "no");
    size_t n_kv = sl_gguf_kv_count(g);
    fprintf(f, "\nmetadata: %zu keys\n", n_kv);
    for (size_t i = 0; i < n_kv; i++) {
        const sl_gguf_value *v = sl_gguf_kv_value(g, i);
        char tbuf[64];
        type_string(tbuf, sizeof tbuf, v);
        if (v->type == SL_GGUF_ARR)
            snprintf(tbuf + strlen(tbuf), sizeof tbuf - strlen(tbuf), "(%" PRIu64 ")",
                     v->v.arr.n);
        fprintf(f, "  %-40s %-16s ", sl_gguf_kv_key(g, i), tbuf);
        if ((s = human_value(f, v, 0, err))) return s;
        fputc('\n', f);
    }

    size_t n_t = sl_gguf_tensor_count(g);
    fprintf(f, "\ntensors: %zu\n  %-40s %-8s %-24s %5s %14s %14s%s\n", n_t, "name", "type",
            "shape", "shard", "offset", "bytes", checksum ? "  fnv1a64" : "");
    uint64_t count_by_type[SL_GGML_TYPE_LIMIT] = {0}, bytes_by_type[SL_GGML_TYPE_LIMIT] = {0};
    uint64_t total_bytes = 0;
    for (size_t i = 0; i < n_t; i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        char shape[128];
        shape_string(shape, sizeof shape, t);
        fprintf(f, "  %-40s %-8s %-24s %5" PRIu32 " %14" PRIu64 " %14" PRIu64, t->name,
                type_name(t->type), shape, t->shard, t->offset, t->nbytes);
        if (checksum) {
            uint64_t h;
            if ((s = tensor_hash(g, t, &h, err))) return s;
            fprintf(f, "  %016" PRIx64, h);
        }
        fputc('\n', f);
        if (t->type < SL_GGML_TYPE_LIMIT) {
            count_by_type[t->type]++;
            bytes_by_type[t->type] += t->nbytes;
        }
        total_bytes += t->nbytes;
    }
    fprintf(f, "\ntotals by type:\n");
    for (uint32_t c = 0; c < SL_GGML_TYPE_LIMIT; c++)
        if (count_by_type[c])
            fprintf(f, "  %-8s %8" PRIu64 " tensors %16" PRIu64 " bytes\n", type_name(c),
                    count_by_type[c], bytes_by_type[c]);
    fprintf(f, "  %-8s %8zu tensors %16" PRIu64 " bytes (%.3f GiB)\n", "all", n_t, total_bytes,
            (double)total_bytes / (1024.0 * 1024.0 * 1024.0));
    return SL_OK;
}

int sl_cli_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false, checksum = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json") || !strcmp(a, "--checksum")) {
            bool *flag = !strcmp(a, "--json") ? &json : &checksum;
            if (*flag) {
                fprintf(stderr, "sluice inspect: %s given twice\n", a);
                return 2;
            }
            *flag = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "sluice inspect: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "sluice inspect: one FILE expected, got '%s' and '%s'\n", path, a);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "sluice inspect: FILE missing\n");
        usage(stderr);
        return 2;
    }
    sl_error err;
    sl_error_clear(&err);
    sl_gguf *g = NULL;
    if (sl_gguf_open(path, NULL, &g, &err)) {
        fprintf(stderr, "sluice inspect: %s\n", err.msg);
        return 1;
    }
    sl_status s = json ? print_json(stdout, g, checksum, &err)
                       : print_human(stdout, path, g, checksum, &err);
    sl_gguf_close(g);
    if (s) {
        fflush(stdout);
        fprintf(stderr, "sluice inspect: %s\n", err.msg);
        return 1;
    }
    return sl_cli_stdout_check("inspect");
}
