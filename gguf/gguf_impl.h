/* Private to gguf/: the handle's layout, the per-shard parser and the bump arena.
 *
 * Invariants of a parsed shard (checked by sl__gguf_validate in debug/test builds):
 *   data_offset == align_up(end of tensor infos, alignment) <= file size
 *   for every tensor t: t.offset % alignment == 0 and
 *                       data_offset + t.offset + t.nbytes <= file size
 *   tensors sorted by offset do not overlap (zero-size tensors overlap nothing)
 *   every key and tensor name is unique and non-empty. */
#ifndef SL_GGUF_IMPL_H
#define SL_GGUF_IMPL_H

#include <stdatomic.h>

#include "gguf/gguf.h"

/* All parse-time allocations come from one arena per handle, so error paths free everything
 * with one call and memory use stays proportional to what was parsed. */
typedef struct sl__arena_block sl__arena_block;
typedef struct sl__arena {
    sl__arena_block *head;
    size_t used_bytes;
} sl__arena;

void *sl__arena_alloc(sl__arena *a, size_t bytes);  /* 16-byte aligned, zeroed; NULL on OOM */
char *sl__arena_strndup(sl__arena *a, const char *s, size_t n);
void sl__arena_free(sl__arena *a);

typedef struct sl__gguf_kv {
    const char *key;
    sl_gguf_value val;
} sl__gguf_kv;

/* Open-addressing set of names -> index; UINT32_MAX marks an empty slot. */
typedef struct sl__name_index {
    uint32_t *slots;
    uint32_t cap;   /* power of two, >= 2 * entries */
} sl__name_index;

typedef struct sl__gguf_shard {
    const char *path;       /* arena copy */
    int fd;                 /* -1 for memory images */
    int fd_direct;          /* -1 if O_DIRECT could not be opened */
    const uint8_t *map;     /* whole file, read-only */
    size_t size;
    bool owns_map;
    uint32_t version;
    uint32_t alignment;
    bool powerinfer;
    uint64_t data_offset;
    int64_t mtime_sec, mtime_nsec;
    sl__gguf_kv *kv;
    size_t n_kv;
    sl_gguf_tensor *tensors; /* into sl_gguf.tensors */
    size_t n_tensors;
} sl__gguf_shard;

struct sl_gguf {
    sl__arena arena;
    sl__gguf_shard *shards;
    uint32_t n_shards;
    sl_gguf_tensor *tensors;
    size_t n_tensors;
    sl__name_index tensor_index;
    sl__name_index kv_index;    /* over shards[0].kv */
    sl_gguf_notice_fn notice;
    void *notice_user;
    atomic_bool direct_notice_done;
    bool lone_shard;            /* opened with no_shards: split keys describe a set not opened */
};

/* Parses one GGUF image buf[0..len) into *shard (tensors allocated from the arena; their
 * provenance fields except path/mtime filled). `name` labels messages. */
sl_status sl__gguf_parse(sl__arena *a, const uint8_t *buf, size_t len, const char *name,
                         sl__gguf_shard *shard, sl_error *err);

sl_status sl__name_index_build(sl__arena *a, sl__name_index *ix, size_t n,
                               const char *(*name_at)(const void *ctx, size_t i),
                               const void *ctx, size_t *dup_first, size_t *dup_second);
/* Index of name or SIZE_MAX. */
size_t sl__name_index_find(const sl__name_index *ix, const char *name,
                           const char *(*name_at)(const void *ctx, size_t i), const void *ctx);

/* Checks the shard invariants above; SL_OK or a message naming the broken one. */
sl_status sl__gguf_validate(const sl_gguf *g, sl_error *err);

#endif
