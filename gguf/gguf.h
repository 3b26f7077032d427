/* gguf: Sluice's GGUF reader and writer (libc only).
 *
 * Reader contract
 * - sl_gguf_open() parses header, KV and tensor infos of a file (or of every shard of a
 *   `PREFIX-00001-of-0000N.gguf` set) without touching tensor data. Versions 1-3, little-endian;
 *   big-endian files are detected and refused (SL_ERR_UNSUPPORTED). Every malformed input is
 *   SL_ERR_FORMAT with a message naming the file, the byte offset and the field.
 * - Memory used while parsing is O(file size); long arrays are indexed in place in a read-only
 *   mmap of the file, never read element by element with system calls.
 * - Everything returned (names, values, tensor records, views) is owned by the handle and valid
 *   until sl_gguf_close(). After open, all const accessors and sl_gguf_tensor_read() may be
 *   called from several threads at once.
 *
 * Writer contract
 * - Writes GGUF v3: KV of any type (nested arrays too), tensor infos, data padded to the
 *   alignment. Tensor data is streamed in declaration order (never held in memory), optionally
 *   split into shards in llama.cpp's gguf-split convention.
 */
#ifndef SL_GGUF_H
#define SL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* ---- ggml type table (llama.cpp's ggml.h enum ggml_type) ------------------------------- */

enum { SL_GGUF_MAX_DIMS = 4, SL_GGUF_DEFAULT_ALIGNMENT = 32 };

typedef enum sl_gguf_type {
    SL_GGML_F32 = 0, SL_GGML_F16 = 1, SL_GGML_Q4_0 = 2, SL_GGML_Q4_1 = 3,
    SL_GGML_Q5_0 = 6, SL_GGML_Q5_1 = 7, SL_GGML_Q8_0 = 8, SL_GGML_Q8_1 = 9,
    SL_GGML_Q2_K = 10, SL_GGML_Q3_K = 11, SL_GGML_Q4_K = 12, SL_GGML_Q5_K = 13,
    SL_GGML_Q6_K = 14, SL_GGML_Q8_K = 15, SL_GGML_IQ2_XXS = 16, SL_GGML_IQ2_XS = 17,
    SL_GGML_IQ3_XXS = 18, SL_GGML_IQ1_S = 19, SL_GGML_IQ4_NL = 20, SL_GGML_IQ3_S = 21,
    SL_GGML_IQ2_S = 22, SL_GGML_IQ4_XS = 23, SL_GGML_I8 = 24, SL_GGML_I16 = 25,
    SL_GGML_I32 = 26, SL_GGML_I64 = 27, SL_GGML_F64 = 28, SL_GGML_IQ1_M = 29,
    SL_GGML_BF16 = 30, SL_GGML_TQ1_0 = 34, SL_GGML_TQ2_0 = 35, SL_GGML_MXFP4 = 39,
    SL_GGML_NVFP4 = 40, SL_GGML_Q1_0 = 41,
    SL_GGML_TYPE_LIMIT = 42 /* codes >= this are unknown */
} sl_gguf_type;

typedef struct sl_gguf_type_info {
    uint32_t code;
    const char *name;       /* "Q4_K" */
    uint32_t block_size;    /* elements per block */
    uint32_t type_size;     /* bytes per block */
} sl_gguf_type_info;

/* Table entry of a live type code; NULL for unknown and retired codes (4, 5, 31-33, 36-38). */
const sl_gguf_type_info *sl_gguf_type_get(uint32_t code);
/* Lookup by name, case-insensitive ("q4_k"); NULL if none. */
const sl_gguf_type_info *sl_gguf_type_by_name(const char *name);
/* True for retired codes, so messages can say "retired" rather than "unknown". */
bool sl_gguf_type_is_retired(uint32_t code);
/* Bytes of a tensor of `type` and shape ne[0..n_dims): checks ne >= 0, ne[0] % block == 0 and
 * every product for overflow. `what` names the tensor in the message. */
sl_status sl_gguf_type_nbytes(uint32_t type, uint32_t n_dims, const int64_t *ne,
                              uint64_t *nbytes, const char *what, sl_error *err);

/* ---- metadata values ------------------------------------------------------------------- */

typedef enum sl_gguf_vtype {
    SL_GGUF_U8 = 0, SL_GGUF_I8 = 1, SL_GGUF_U16 = 2, SL_GGUF_I16 = 3,
    SL_GGUF_U32 = 4, SL_GGUF_I32 = 5, SL_GGUF_F32 = 6, SL_GGUF_BOOL = 7,
    SL_GGUF_STR = 8, SL_GGUF_ARR = 9, SL_GGUF_U64 = 10, SL_GGUF_I64 = 11,
    SL_GGUF_F64 = 12, SL_GGUF_VTYPE_COUNT = 13
} sl_gguf_vtype;

enum { SL_GGUF_MAX_NESTING = 8 }; /* arrays of arrays deeper than this are refused */

typedef struct sl_gguf_str {
    const char *ptr;        /* not NUL-terminated inside arrays; NUL-terminated for scalars */
    uint64_t len;
} sl_gguf_str;

/* A value as stored. Scalars are widened into u64/i64/f64 (f32 keeps its own field so it
 * round-trips exactly). Arrays hold exactly one of raw/strs/items according to elem:
 * raw = `n` packed little-endian elements (possibly unaligned: copy, do not cast);
 * strs = n strings; items = n nested array values. */
typedef struct sl_gguf_value {
    sl_gguf_vtype type;
    union {
        uint64_t u64;   /* U8, U16, U32, U64 */
        int64_t i64;    /* I8, I16, I32, I64 */
        float f32;      /* F32 */
        double f64;     /* F64 */
        bool b;         /* BOOL */
        sl_gguf_str str;
        struct {
            sl_gguf_vtype elem;
            uint64_t n;
            const void *raw;
            const sl_gguf_str *strs;
            const struct sl_gguf_value *items;
        } arr;
    } v;
} sl_gguf_value;

/* Bytes of one element of a scalar type (0 for STR and ARR). */
size_t sl_gguf_vtype_size(sl_gguf_vtype t);
/* "u32", "string", "array", ...; "?" for out of range. */
const char *sl_gguf_vtype_name(sl_gguf_vtype t);
/* Element i of an array value, materialised as a scalar/string/array value. */
sl_status sl_gguf_arr_get(const sl_gguf_value *arr, uint64_t i, sl_gguf_value *out, sl_error *err);

/* ---- reader ---------------------------------------------------------------------------- */

typedef struct sl_gguf sl_gguf;

typedef void (*sl_gguf_notice_fn)(void *user, const char *msg);

typedef struct sl_gguf_options {
    bool no_shards;             /* open only the named file even if it is part of a set */
    sl_gguf_notice_fn notice;   /* one-line notices (e.g. O_DIRECT fallback); NULL: stderr */
    void *notice_user;
} sl_gguf_options;

typedef struct sl_gguf_tensor {
    const char *name;
    uint32_t type;              /* sl_gguf_type code */
    uint32_t n_dims;
    int64_t ne[SL_GGUF_MAX_DIMS];   /* ggml order: ne[0] is the contiguous dim; 1 past n_dims */
    uint64_t offset;            /* relative to its shard's data section, as stored */
    uint64_t nbytes;
    /* provenance, what live swap re-checks */
    uint32_t shard;
    const char *path;
    uint64_t file_offset;       /* absolute byte offset of the data in `path` */
    int64_t mtime_sec, mtime_nsec;
} sl_gguf_tensor;

/* Opens `path` (a shard set when the name is PREFIX-0000K-of-0000N.gguf). opt may be NULL. */
sl_status sl_gguf_open(const char *path, const sl_gguf_options *opt, sl_gguf **out, sl_error *err);
/* Parses a GGUF image in memory (no copy: buf must outlive the handle); `name` labels messages.
 * Tensor data is reachable through sl_gguf_tensor_view() only. The fuzz entry point. */
sl_status sl_gguf_open_memory(const void *buf, size_t len, const char *name, sl_gguf **out,
                              sl_error *err);
void sl_gguf_close(sl_gguf *g);

uint32_t sl_gguf_version(const sl_gguf *g);
uint32_t sl_gguf_alignment(const sl_gguf *g);
bool sl_gguf_is_powerinfer(const sl_gguf *g);     /* PowerInfer's sparse-model magic "PWRI" */
uint32_t sl_gguf_shard_count(const sl_gguf *g);
const char *sl_gguf_shard_path(const sl_gguf *g, uint32_t shard);
uint64_t sl_gguf_data_offset(const sl_gguf *g, uint32_t shard);  /* start of data section */

/* KV of the first shard, in file order. */
size_t sl_gguf_kv_count(const sl_gguf *g);
const char *sl_gguf_kv_key(const sl_gguf *g, size_t i);
const sl_gguf_value *sl_gguf_kv_value(const sl_gguf *g, size_t i);
const sl_gguf_value *sl_gguf_find(const sl_gguf *g, const char *key);   /* NULL if absent */

/* Typed getters: SL_ERR_NOT_FOUND if absent, SL_ERR_TYPE (naming key, wanted and actual type)
 * if stored with another type. No implicit conversions. */
sl_status sl_gguf_get_u8(const sl_gguf *g, const char *key, uint8_t *out, sl_error *err);
sl_status sl_gguf_get_i8(const sl_gguf *g, const char *key, int8_t *out, sl_error *err);
sl_status sl_gguf_get_u16(const sl_gguf *g, const char *key, uint16_t *out, sl_error *err);
sl_status sl_gguf_get_i16(const sl_gguf *g, const char *key, int16_t *out, sl_error *err);
sl_status sl_gguf_get_u32(const sl_gguf *g, const char *key, uint32_t *out, sl_error *err);
sl_status sl_gguf_get_i32(const sl_gguf *g, const char *key, int32_t *out, sl_error *err);
sl_status sl_gguf_get_u64(const sl_gguf *g, const char *key, uint64_t *out, sl_error *err);
sl_status sl_gguf_get_i64(const sl_gguf *g, const char *key, int64_t *out, sl_error *err);
sl_status sl_gguf_get_f32(const sl_gguf *g, const char *key, float *out, sl_error *err);
sl_status sl_gguf_get_f64(const sl_gguf *g, const char *key, double *out, sl_error *err);
sl_status sl_gguf_get_bool(const sl_gguf *g, const char *key, bool *out, sl_error *err);
/* NUL-terminated, owned by g. */
sl_status sl_gguf_get_str(const sl_gguf *g, const char *key, const char **out, sl_error *err);
/* An array whose elements have type `elem`. */
sl_status sl_gguf_get_arr(const sl_gguf *g, const char *key, sl_gguf_vtype elem,
                          const sl_gguf_value **out, sl_error *err);

/* Tensors of all shards, one namespace, in file order (shard by shard). */
size_t sl_gguf_tensor_count(const sl_gguf *g);
const sl_gguf_tensor *sl_gguf_tensor_at(const sl_gguf *g, size_t i);
const sl_gguf_tensor *sl_gguf_tensor_find(const sl_gguf *g, const char *name); /* O(1); NULL */

typedef enum sl_gguf_io { SL_GGUF_IO_MMAP = 0, SL_GGUF_IO_PREAD = 1, SL_GGUF_IO_DIRECT = 2 } sl_gguf_io;
enum { SL_GGUF_DIRECT_ALIGN = 4096 };

/* Read-only pointer to the tensor's bytes in the file mapping; valid until close. */
const void *sl_gguf_tensor_view(const sl_gguf *g, const sl_gguf_tensor *t);
/* Buffer bytes SL_GGUF_IO_DIRECT needs for t: its data widened to SL_GGUF_DIRECT_ALIGN. */
uint64_t sl_gguf_direct_span(const sl_gguf_tensor *t);
/* Reads t into dst (capacity dst_cap) and sets *data to where its first byte landed.
 * MMAP and PREAD: *data == dst, dst_cap >= nbytes. DIRECT: dst aligned to SL_GGUF_DIRECT_ALIGN,
 * dst_cap >= sl_gguf_direct_span(t), *data = dst + (file_offset % SL_GGUF_DIRECT_ALIGN); the
 * page cache is bypassed. If the file system refuses O_DIRECT it falls back to pread with a
 * notice, once per handle. */
sl_status sl_gguf_tensor_read(const sl_gguf *g, const sl_gguf_tensor *t, sl_gguf_io io,
                              void *dst, uint64_t dst_cap, void **data, sl_error *err);

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct sl_gguf_writer sl_gguf_writer;

typedef struct sl_gguf_writer_options {
    uint32_t alignment;         /* 0: 32; else a power of two, stored as general.alignment */
    uint32_t shard_max_tensors; /* 0: no limit */
    uint64_t shard_max_bytes;   /* 0: no limit; data bytes per shard (a larger tensor gets
                                   a shard of its own) */
    bool split_keys_verbatim;   /* without sharding: the caller may set split.* (rewriting
                                   one shard of a set alone); else they are reserved */
    /* NULL, or called after each sl_gguf_writer_write with the tensor bytes written so far and
     * all declared (a progress display; it must not call the writer) */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    /* NULL, or asked before each sl_gguf_writer_write and at finish: true stops the writer
     * (SL_ERR_INVALID "cancelled"; destroy then removes its files), e.g. a flag that a
     * SIGINT handler sets */
    bool (*cancelled)(void *user);
    void *cancelled_user;
} sl_gguf_writer_options;

/* With sharding, `path` "X.gguf" becomes X-00001-of-0000N.gguf ...; N is fixed when the first
 * data is written. Files are created at the first write and removed if destroyed unfinished. */
sl_status sl_gguf_writer_create(const char *path, const sl_gguf_writer_options *opt,
                                sl_gguf_writer **out, sl_error *err);
/* Any value, deep-copied (a value read by sl_gguf_open may be passed as is). Keys must be
 * non-empty and unique. Only before the first data write. */
sl_status sl_gguf_writer_set(sl_gguf_writer *w, const char *key, const sl_gguf_value *v,
                             sl_error *err);
sl_status sl_gguf_writer_set_u32(sl_gguf_writer *w, const char *key, uint32_t v, sl_error *err);
sl_status sl_gguf_writer_set_i32(sl_gguf_writer *w, const char *key, int32_t v, sl_error *err);
sl_status sl_gguf_writer_set_u64(sl_gguf_writer *w, const char *key, uint64_t v, sl_error *err);
sl_status sl_gguf_writer_set_f32(sl_gguf_writer *w, const char *key, float v, sl_error *err);
sl_status sl_gguf_writer_set_bool(sl_gguf_writer *w, const char *key, bool v, sl_error *err);
sl_status sl_gguf_writer_set_str(sl_gguf_writer *w, const char *key, const char *v, sl_error *err);
/* Array of n scalars of type elem, given as a packed host array. */
sl_status sl_gguf_writer_set_arr(sl_gguf_writer *w, const char *key, sl_gguf_vtype elem,
                                 const void *data, uint64_t n, sl_error *err);
sl_status sl_gguf_writer_set_arr_str(sl_gguf_writer *w, const char *key, const char *const *v,
                                     uint64_t n, sl_error *err);

/* Declares a tensor (in data order). ne[i] >= 0, ne[0] a multiple of the block size. */
sl_status sl_gguf_writer_add_tensor(sl_gguf_writer *w, const char *name, uint32_t type,
                                    uint32_t n_dims, const int64_t *ne, sl_error *err);
/* Appends n bytes of tensor data, continuing through the declared tensors in order; a call may
 * cover part of a tensor or several. The first call writes the header(s). */
sl_status sl_gguf_writer_write(sl_gguf_writer *w, const void *data, uint64_t n, sl_error *err);
/* Checks that every declared byte was written, pads, flushes and closes the file(s). */
sl_status sl_gguf_writer_finish(sl_gguf_writer *w, sl_error *err);
/* Frees w; an unfinished writer's files are removed. NULL is allowed. */
void sl_gguf_writer_destroy(sl_gguf_writer *w);
/* Number of files the writer produces (valid after the first write). */
uint32_t sl_gguf_writer_shard_count(const sl_gguf_writer *w);

#endif
