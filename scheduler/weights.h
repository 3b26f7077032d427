/* scheduler/weights.h: one model weight — what it is, where it came from, where it lives.
 *
 * A weight is bound to one GGUF tensor (name, file type, shape in ggml ne order) and keeps that
 * tensor's provenance (path, shard, absolute file offset, bytes, mtime and size of the file),
 * which is what live reload (scheduler/policy/swap.h) re-checks, and a snapshot of its original
 * storage (`orig`, taken after loading). Residency says where its bytes are:
 *   SL_RES_HOST    a host copy: a block of the model's pinned host pool, a malloc'd converted
 *                  copy, or (io = mmap) the read-only file mapping itself;
 *   SL_RES_DEVICE  a block of the model's device arena (sim: a host-addressable region);
 *   SL_RES_PARTS   split by neurons (scheduler/moe/ffn_split.h): compact hot and cold copies, held
 *                  by the layer, replace it; `data` is NULL and it has no block of its own.
 * `data` is what kernels read: the device block when device-resident and the device is
 * host-addressable (sim), else the host copy. Invariants:
 *   residency is SL_RES_PARTS, or (residency != 0  <=>  data != NULL);
 *   h_block != SL_BLOCK_NONE  =>  SL_RES_HOST and data lies inside that block (O_DIRECT reads
 *                                 land at file_offset % 4096 inside it);
 *   d_block != SL_BLOCK_NONE  <=>  SL_RES_DEVICE;
 *   type == file_type unless `converted` (a type the CPU kernels cannot compute, or a vector
 *   that must be F32, was dequantized to F32 at load: then nbytes is the F32 size) or
 *   repacked (sl__weight_repacked);
 *   repacked (type == SL_TYPE_Q4_K_R8, kernels/ref/repack.h)  =>  file_type Q4_K,
 *                 SL_RES_HOST with a pool block or h_owned of its own (never the file mapping,
 *                 a shared floor or a device block: only the CPU kernels read R8), not
 *                 converted; nbytes stays Q4_K's (runtime/engine/repack.h decides which weights);
 *   derive != SL_DERIVE_NONE  =>  t is the tensor it is computed from (its shape differs from
 *                                 ne) and it is always converted.
 * Live reload (scheduler/policy/swap.h) adds:
 *   the storage named by `orig` stays allocated for the model's lifetime;
 *   swapped  <=>  data != orig.data (the weight lives in a private block or host buffer of its
 *                 own, which it alone owns, while orig's storage waits for a reattach);
 *   fallback =>  SL_RES_HOST, and when orig_set: swapped and (orig.residency & SL_RES_DEVICE)
 *                 (the device had no room for the new bytes, or a sibling expert tensor had
 *                 none; a model in a runtime has no orig: its placement said device).
 */
#ifndef SL_SCHEDULER_WEIGHTS_H
#define SL_SCHEDULER_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/bfc.h"
#include "alloc/hostpool.h"
#include "gguf/gguf.h"
#include "kernels/ref/repack.h"

enum { SL_RES_HOST = 1u, SL_RES_DEVICE = 2u, SL_RES_PARTS = 4u };

/* A weight computed at load from another tensor rather than read as is: deepseek2's attn_k_b
 * [nope, kv_lora, H] and attn_v_b [kv_lora, v, H] from a legacy attn_kv_b
 * [kv_lora, H * (nope + v)], split per head as llama.cpp's convert_hf_to_gguf.py does. */
typedef enum sl_weight_derive { SL_DERIVE_NONE, SL_DERIVE_K_B, SL_DERIVE_V_B } sl_weight_derive;

/* Where a weight's bytes were put at load: what a reload back to the original reattaches to. */
typedef struct sl_weight_storage {
    uint32_t type;
    uint64_t nbytes;
    unsigned residency;
    const void *data;
    sl_block h_block, d_block;
    void *h_owned;
    bool converted;
} sl_weight_storage;

typedef struct sl_weight {
    const char *name;           /* owned by the model's gguf handle */
    const sl_gguf_tensor *t;    /* the tensor it is bound to */
    uint32_t file_type;         /* ggml type in the file */
    uint32_t type;              /* ggml type of `data` */
    uint32_t n_dims;
    int64_t ne[SL_GGUF_MAX_DIMS];
    uint64_t nbytes;            /* bytes at `data` */
    /* provenance (copied from the tensor record, so a reload can compare) */
    const char *path;
    uint32_t shard;
    uint64_t file_offset, file_nbytes;
    int64_t mtime_sec, mtime_nsec;
    uint64_t file_size;         /* of `path` when the bytes were read */
    /* residency */
    unsigned residency;         /* SL_RES_* bits */
    const void *data;
    sl_block h_block;           /* host pool block or SL_BLOCK_NONE */
    void *h_owned;              /* malloc'd converted copy or NULL */
    sl_block d_block;           /* device arena block or SL_BLOCK_NONE */
    bool converted;
    bool want_device;           /* placement decision, before loading */
    bool need_f32;              /* kernels read it as plain floats (norms, biases) */
    bool need_matvec;           /* kernels read it through matvec */
    sl_weight_derive derive;    /* computed from t at load (F32), or SL_DERIVE_NONE */
    /* live reload (scheduler/policy/swap.h) */
    sl_weight_storage orig;     /* valid once orig_set */
    bool orig_set, swapped, fallback;
    bool orig_fresh;            /* swapped, and orig's storage still holds the current bytes
                                   (moved for a sibling): returning there needs no copy */
} sl_weight;

/* w's provenance becomes tensor record t's (file type, offset, bytes, mtime) in a file version
 * of file_size bytes: at binding, and when a live reload moves w to a new file version. */
void sl__weight_provenance_set(sl_weight *w, const sl_gguf_tensor *t, uint64_t file_size);

/* Q4_K bytes held as Q4_K_R8 (the invariants above). */
static inline bool sl__weight_repacked(const sl_weight *w)
{
    return w->type == SL_TYPE_Q4_K_R8;
}

/* Bytes of a row of n elements of `type` as stored: sl_quant_row_bytes's, where a Q4_K_R8
 * row counts as Q4_K's (the same bytes per group of eight rows); 0 where that is 0. */
size_t sl__type_row_bytes(uint32_t type, int64_t n);

/* Bytes of one 2-D slice (ne[0] * ne[1] elements) of w as stored at `data`. */
uint64_t sl__weight_slice_bytes(const sl_weight *w);

/* Whether bytes of file type `file_type` must be dequantized to F32 for w's kernels (a vector
 * read as floats, or a matmul type without a CPU matvec). */
bool sl__weight_needs_f32(const sl_weight *w, uint32_t file_type);

/* The weight's current storage, and the weight with storage s put back. */
sl_weight_storage sl__weight_storage_get(const sl_weight *w);
void sl__weight_storage_set(sl_weight *w, const sl_weight_storage *s);

/* Checks the invariants above (pool: the host pool h_block belongs to, NULL if none);
 * SL_ERR_INVALID naming the weight. */
sl_status sl_weight_validate(const sl_weight *w, const sl_hostpool *pool, sl_error *err);

#endif
