/* GGUF reader: every validation error on handcrafted files (message names file, offset and
 * field), truncation at every byte, v1/v2/v3, PowerInfer magic, typed getters, shards,
 * provenance, and the three data paths. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf_impl.h"
#include "tests/gguf/gguf_builder.h"
#include "tests/testing.h"

static const char *tmpdir(void)
{
    const char *d = getenv("TEST_TMPDIR");
    return d && *d ? d : "/tmp";
}

/* A valid v3 image: 3 KV, two F32 tensors [8] and [4,2], alignment 32. */
static gb valid_image(int version)
{
    gb b = {0};
    gb_header(&b, "GGUF", (uint32_t)version, 2, 3);
    gb_key(&b, "general.architecture", SL_GGUF_STR);
    gb_str(&b, "llama");
    gb_key(&b, "x.count", SL_GGUF_U32);
    gb_u32(&b, 42);
    gb_key(&b, "x.list", SL_GGUF_ARR);
    gb_u32(&b, SL_GGUF_STR);
    gb_count(&b, 2);
    gb_str(&b, "ab");
    gb_str(&b, "");
    gb_tensor(&b, "a", 1, (uint64_t[]){8}, SL_GGML_F32, 0);
    gb_tensor(&b, "b", 2, (uint64_t[]){4, 2}, SL_GGML_F32, 32);
    gb_pad(&b, 32);
    gb_fill(&b, 32, 1);
    gb_fill(&b, 32, 100);
    return b;
}

/* Opens an image from memory and expects failure `code` with every substring given. */
static void expect_fail(const gb *b, sl_status code, const char *const *needles, const char *what)
{
    sl_gguf *g = NULL;
    sl_error e = {0};
    sl_status s = sl_gguf_open_memory(b->p, b->n, "case.gguf", &g, &e);
    CHECK_MSG(s == code, "%s: status %s, wanted %s (%s)", what, sl_status_name(s), sl_status_name(code), e.msg);
    CHECK_MSG(g == NULL, "%s: handle returned on failure", what);
    if (s != SL_OK) {
        CHECK_CONTAINS(e.msg, "case.gguf");
        for (; needles && *needles; needles++) CHECK_CONTAINS(e.msg, *needles);
    }
    sl_gguf_close(g);
}
#define FAILS(b, code, what, ...) expect_fail(&(b), code, (const char *const[]){__VA_ARGS__, NULL}, what)

static void test_valid_versions(void)
{
    for (int v = 1; v <= 3; v++) {
        gb b = valid_image(v);
        sl_gguf *g = NULL;
        sl_error e = {0};
        CHECK_MSG(sl_gguf_open_memory(b.p, b.n, "ok.gguf", &g, &e) == SL_OK, "v%d: %s", v, e.msg);
        if (g) {
            CHECK(sl_gguf_version(g) == (uint32_t)v);
            CHECK(sl_gguf_alignment(g) == 32);
            CHECK(!sl_gguf_is_powerinfer(g));
            CHECK(sl_gguf_kv_count(g) == 3);
            CHECK(sl_gguf_tensor_count(g) == 2);
            const sl_gguf_tensor *t = sl_gguf_tensor_find(g, "b");
            CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && t->ne[2] == 1 && t->nbytes == 32);
            CHECK(t && t->file_offset == sl_gguf_data_offset(g, 0) + 32);
            const uint8_t *d = t ? sl_gguf_tensor_view(g, t) : NULL;
            CHECK(d && d[0] == 100 && d[31] == 131);
            CHECK(sl_gguf_tensor_find(g, "nope") == NULL);
            uint32_t u = 0;
            CHECK(sl_gguf_get_u32(g, "x.count", &u, &e) == SL_OK && u == 42);
            const char *s = NULL;
            CHECK(sl_gguf_get_str(g, "general.architecture", &s, &e) == SL_OK && !strcmp(s, "llama"));
            const sl_gguf_value *arr = NULL;
            CHECK(sl_gguf_get_arr(g, "x.list", SL_GGUF_STR, &arr, &e) == SL_OK);
            sl_gguf_value el;
            CHECK(arr && sl_gguf_arr_get(arr, 0, &el, &e) == SL_OK && el.v.str.len == 2 &&
                  !memcmp(el.v.str.ptr, "ab", 2));
            CHECK(arr && sl_gguf_arr_get(arr, 2, &el, &e) == SL_ERR_RANGE);
            CHECK(sl__gguf_validate(g, &e) == SL_OK);
            /* typed getters never convert */
            uint64_t u64;
            CHECK(sl_gguf_get_u64(g, "x.count", &u64, &e) == SL_ERR_TYPE);
            CHECK_CONTAINS(e.msg, "x.count");
            CHECK_CONTAINS(e.msg, "u32");
            CHECK(sl_gguf_get_u32(g, "missing.key", &u, &e) == SL_ERR_NOT_FOUND);
            CHECK_CONTAINS(e.msg, "missing.key");
            CHECK(sl_gguf_get_arr(g, "x.list", SL_GGUF_U8, &arr, &e) == SL_ERR_TYPE);
        }
        sl_gguf_close(g);
        gb_free(&b);
    }
}

static void test_truncation_everywhere(void)
{
    gb b = valid_image(3);
    for (size_t n = 0; n < b.n; n++) {
        sl_gguf *g = NULL;
        sl_error e = {0};
        /* A copy of exactly n bytes, so ASan catches any read past the end. */
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        sl_status s = sl_gguf_open_memory(copy, n, "trunc.gguf", &g, &e);
        CHECK_MSG(s == SL_ERR_FORMAT, "prefix %zu: status %s", n, sl_status_name(s));
        if (s == SL_ERR_FORMAT) {
            CHECK_CONTAINS(e.msg, "trunc.gguf: offset ");
        }
        sl_gguf_close(g);
        free(copy);
    }
    gb_free(&b);
}

static void test_header_errors(void)
{
    gb b = {0};
    gb_header(&b, "GGUX", 3, 0, 0);
    FAILS(b, SL_ERR_FORMAT, "bad magic", "offset 0", "header.magic", "bad magic");
    gb_free(&b);

    gb_header(&b, "GGUF", 4, 0, 0);
    FAILS(b, SL_ERR_UNSUPPORTED, "version 4", "offset 4", "header.version", "unsupported GGUF version 4");
    gb_free(&b);

    gb_header(&b, "GGUF", 0, 0, 0);
    FAILS(b, SL_ERR_UNSUPPORTED, "version 0", "header.version");
    gb_free(&b);

    gb_header(&b, "GGUF", 0x03000000u, 0, 0);
    FAILS(b, SL_ERR_UNSUPPORTED, "big-endian", "offset 4", "big-endian");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, (uint64_t)1 << 62);
    FAILS(b, SL_ERR_FORMAT, "huge n_kv", "offset 16", "header.n_kv", "cannot fit");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, UINT64_MAX, 0);
    FAILS(b, SL_ERR_FORMAT, "huge n_tensors", "offset 8", "header.n_tensors", "cannot fit");
    gb_free(&b);

    /* PowerInfer's sparse-model magic is accepted and flagged. */
    gb_header(&b, "PWRI", 3, 0, 0);
    sl_gguf *g = NULL;
    sl_error e;
    CHECK(sl_gguf_open_memory(b.p, b.n, "pwri.gguf", &g, &e) == SL_OK);
    CHECK(g && sl_gguf_is_powerinfer(g));
    sl_gguf_close(g);
    gb_free(&b);
}

static void test_kv_errors(void)
{
    gb b = {0};
    gb_header(&b, "GGUF", 3, 0, 1);
    gb_count(&b, (uint64_t)1 << 40);
    gb_fill(&b, 8, 0);
    FAILS(b, SL_ERR_FORMAT, "key length", "offset 24", "kv[0].key", "exceeds");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "", SL_GGUF_U8);
    gb_u8(&b, 1);
    gb_u8(&b, 0); /* a header with 1 KV is at least 14 bytes past the counts */
    FAILS(b, SL_ERR_FORMAT, "empty key", "kv[0].key", "empty name");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_strn(&b, "a\0b", 3);
    gb_u32(&b, SL_GGUF_U8);
    gb_u8(&b, 1);
    FAILS(b, SL_ERR_FORMAT, "NUL in key", "kv[0].key", "NUL");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 2);
    gb_key(&b, "k", SL_GGUF_U8);
    gb_u8(&b, 1);
    gb_key(&b, "k", SL_GGUF_U16);
    gb_u16(&b, 1);
    FAILS(b, SL_ERR_FORMAT, "duplicate key", "kv[1]", "duplicate key 'k'");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "k", 13);
    gb_u8(&b, 1);
    FAILS(b, SL_ERR_FORMAT, "bad value type", "offset 33", "kv[0] 'k' type", "invalid value type 13");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "k", SL_GGUF_ARR);
    gb_u32(&b, 77);
    gb_u64(&b, 0);
    FAILS(b, SL_ERR_FORMAT, "bad elem type", "kv[0] 'k' value", "invalid array element type 77");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "k", SL_GGUF_ARR);
    gb_u32(&b, SL_GGUF_U32);
    gb_u64(&b, (uint64_t)1 << 61);
    FAILS(b, SL_ERR_FORMAT, "array count", "kv[0] 'k' value", "cannot fit");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "k", SL_GGUF_ARR);
    gb_u32(&b, SL_GGUF_STR);
    gb_u64(&b, 2);
    gb_str(&b, "x");
    gb_u64(&b, 1000);
    FAILS(b, SL_ERR_FORMAT, "string in array", "element 1", "exceeds");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "k", SL_GGUF_BOOL);
    gb_u8(&b, 2);
    FAILS(b, SL_ERR_FORMAT, "bool", "kv[0] 'k' value", "bool byte 2");
    gb_free(&b);

    /* Nesting: 8 levels of arrays are accepted, 9 are refused. */
    for (int levels = 8; levels <= 9; levels++) {
        gb_header(&b, "GGUF", 3, 0, 1);
        gb_key(&b, "deep", SL_GGUF_ARR);
        for (int l = 1; l < levels; l++) {
            gb_u32(&b, SL_GGUF_ARR);
            gb_u64(&b, 1);
        }
        gb_u32(&b, SL_GGUF_I32);
        gb_u64(&b, 1);
        gb_i32(&b, -5);
        if (levels == 9) {
            FAILS(b, SL_ERR_FORMAT, "nesting", "kv[0] 'deep' value", "nested deeper");
        } else {
            sl_gguf *g = NULL;
            sl_error e;
            CHECK_MSG(sl_gguf_open_memory(b.p, b.n, "deep.gguf", &g, &e) == SL_OK, "%s", e.msg);
            const sl_gguf_value *v = g ? sl_gguf_find(g, "deep") : NULL;
            for (int l = 1; v && l < levels; l++) v = v->v.arr.items;
            sl_gguf_value leaf;
            CHECK(v && v->v.arr.elem == SL_GGUF_I32 && sl_gguf_arr_get(v, 0, &leaf, &e) == SL_OK &&
                  leaf.v.i64 == -5);
            sl_gguf_close(g);
        }
        gb_free(&b);
    }

    /* general.alignment must be a u32 power of two. */
    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "general.alignment", SL_GGUF_U64);
    gb_u64(&b, 32);
    FAILS(b, SL_ERR_FORMAT, "alignment type", "general.alignment", "must be u32");
    gb_free(&b);
    const uint32_t bad_align[] = {0, 48, 3};
    for (size_t i = 0; i < 3; i++) {
        gb_header(&b, "GGUF", 3, 0, 1);
        gb_key(&b, "general.alignment", SL_GGUF_U32);
        gb_u32(&b, bad_align[i]);
        FAILS(b, SL_ERR_FORMAT, "alignment value", "general.alignment", "not a power of two");
        gb_free(&b);
    }
}

/* One tensor with the given fields, alignment 32, `data` bytes of data after the padding. */
static gb one_tensor(const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset, size_t data)
{
    gb b = {0};
    gb_header(&b, "GGUF", 3, 1, 0);
    gb_tensor(&b, name, n_dims, ne, type, offset);
    gb_pad(&b, 32);
    gb_fill(&b, data, 0);
    return b;
}

static void test_tensor_errors(void)
{
    gb b = one_tensor("t", 5, (uint64_t[]){1, 1, 1, 1, 1}, SL_GGML_F32, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "n_dims", "offset 33", "tensor[0] 't' n_dims", "n_dims 5 exceeds 4");
    gb_free(&b);

    b = one_tensor("t", 2, (uint64_t[]){4, UINT64_MAX}, SL_GGML_F32, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "negative dim", "tensor[0] 't' ne[1]", "negative");
    gb_free(&b);

    b = one_tensor("t", 3, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32, 2}, SL_GGML_F32, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "elements overflow", "tensor[0] 't'", "overflows");
    gb_free(&b);

    /* Wraps 2^64 exactly: 2^32 * 2^32 == 0 mod 2^64 must not look like an empty tensor. */
    b = one_tensor("t", 2, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32}, SL_GGML_I8, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "wrap to zero", "tensor[0] 't'", "overflows");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){(uint64_t)1 << 62}, SL_GGML_F64, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "bytes overflow", "tensor[0] 't'", "byte size");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){33}, SL_GGML_Q4_0, 0, 64);
    FAILS(b, SL_ERR_FORMAT, "block multiple", "tensor[0] 't'", "ne[0] = 33 is not a multiple of Q4_0 block size 32");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){8}, 99, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "unknown type", "tensor[0] 't' type", "unknown ggml type code 99");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){8}, 4, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "retired type", "tensor[0] 't' type", "retired ggml type code 4");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){8}, SL_GGML_F32, 16, 64);
    FAILS(b, SL_ERR_FORMAT, "misaligned", "tensor[0] 't'", "not a multiple of the alignment 32");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){16}, SL_GGML_F32, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "beyond EOF", "tensor[0] 't'", "beyond the end of file");
    gb_free(&b);

    b = one_tensor("t", 1, (uint64_t[]){8}, SL_GGML_F32, (uint64_t)-32, 32);
    FAILS(b, SL_ERR_FORMAT, "offset wraps", "tensor[0] 't'", "beyond the end of file");
    gb_free(&b);

    b = one_tensor("", 1, (uint64_t[]){8}, SL_GGML_F32, 0, 32);
    FAILS(b, SL_ERR_FORMAT, "empty name", "tensor[0].name", "empty name");
    gb_free(&b);

    /* Overlap and duplicates need two tensors. */
    gb_header(&b, "GGUF", 3, 2, 0);
    gb_tensor(&b, "x", 1, (uint64_t[]){16}, SL_GGML_F32, 0);
    gb_tensor(&b, "y", 1, (uint64_t[]){8}, SL_GGML_F32, 32);
    gb_pad(&b, 32);
    gb_fill(&b, 96, 0);
    FAILS(b, SL_ERR_FORMAT, "overlap", "tensor[1] 'y'", "overlaps tensor[0] 'x'");
    gb_free(&b);

    gb_header(&b, "GGUF", 3, 2, 0);
    gb_tensor(&b, "x", 1, (uint64_t[]){8}, SL_GGML_F32, 0);
    gb_tensor(&b, "x", 1, (uint64_t[]){8}, SL_GGML_F32, 32);
    gb_pad(&b, 32);
    gb_fill(&b, 64, 0);
    FAILS(b, SL_ERR_FORMAT, "duplicate tensor", "tensor[1]", "duplicate tensor name 'x'");
    gb_free(&b);

    /* Zero-size tensors are valid (llama.cpp and gguf-py accept them), also at the very end,
     * and overlap nothing; alignment 1 is valid too. */
    gb_header(&b, "GGUF", 3, 3, 1);
    gb_key(&b, "general.alignment", SL_GGUF_U32);
    gb_u32(&b, 1);
    gb_tensor(&b, "z0", 2, (uint64_t[]){4, 0}, SL_GGML_F32, 0);
    gb_tensor(&b, "x", 1, (uint64_t[]){3}, SL_GGML_F32, 0);
    gb_tensor(&b, "z1", 1, (uint64_t[]){0}, SL_GGML_Q4_K, 12);
    gb_fill(&b, 12, 0);
    sl_gguf *g = NULL;
    sl_error e;
    CHECK_MSG(sl_gguf_open_memory(b.p, b.n, "zero.gguf", &g, &e) == SL_OK, "%s", e.msg);
    CHECK(g && sl_gguf_tensor_find(g, "z0")->nbytes == 0 && sl_gguf_tensor_find(g, "z1")->nbytes == 0);
    CHECK(g && sl_gguf_alignment(g) == 1);
    sl_gguf_close(g);
    gb_free(&b);
}

static const char *path_in_tmp(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir(), name);
    return buf;
}

/* Shard i of n holding tensor `name` (F32 [8]); split keys as gguf-split writes them. */
static gb shard_image(unsigned i, unsigned n, const char *name, int total, int split_no)
{
    gb b = {0};
    gb_header(&b, "GGUF", 3, 1, i == 0 ? 4 : 3);
    if (i == 0) {
        gb_key(&b, "general.architecture", SL_GGUF_STR);
        gb_str(&b, "llama");
    }
    gb_key(&b, "split.no", SL_GGUF_U16);
    gb_u16(&b, (uint16_t)split_no);
    gb_key(&b, "split.count", SL_GGUF_U16);
    gb_u16(&b, (uint16_t)n);
    gb_key(&b, "split.tensors.count", SL_GGUF_I32);
    gb_i32(&b, total);
    gb_tensor(&b, name, 1, (uint64_t[]){8}, SL_GGML_F32, 0);
    gb_pad(&b, 32);
    gb_fill(&b, 32, (uint8_t)(10 * i));
    return b;
}

static void write_set(const char *prefix, unsigned n, const char *const *names, int total,
                      int bad_no_at)
{
    char path[1024];
    for (unsigned i = 0; i < n; i++) {
        gb b = shard_image(i, n, names[i], total, (int)i == bad_no_at ? 7 : (int)i);
        snprintf(path, sizeof path, "%s/%s-%05u-of-%05u.gguf", tmpdir(), prefix, i + 1, n);
        CHECK(gb_save(&b, path) == 0);
        gb_free(&b);
    }
}

static void test_shards(void)
{
    char path[1024];
    const char *names[] = {"a", "b", "c"};
    write_set("good", 3, names, 3, -1);
    snprintf(path, sizeof path, "%s/good-00001-of-00003.gguf", tmpdir());
    sl_gguf *g = NULL;
    sl_error e;
    CHECK_MSG(sl_gguf_open(path, NULL, &g, &e) == SL_OK, "%s", e.msg);
    if (g) {
        CHECK(sl_gguf_shard_count(g) == 3);
        CHECK(sl_gguf_tensor_count(g) == 3);
        const sl_gguf_tensor *t = sl_gguf_tensor_find(g, "c");
        CHECK(t && t->shard == 2 && strstr(t->path, "good-00003-of-00003.gguf"));
        const uint8_t *d = t ? sl_gguf_tensor_view(g, t) : NULL;
        CHECK(d && d[0] == 20);
        const char *arch;
        CHECK(sl_gguf_get_str(g, "general.architecture", &arch, &e) == SL_OK);
        CHECK(sl__gguf_validate(g, &e) == SL_OK);
    }
    sl_gguf_close(g);
    /* Opening a later shard opens the whole set as well. */
    snprintf(path, sizeof path, "%s/good-00002-of-00003.gguf", tmpdir());
    CHECK(sl_gguf_open(path, NULL, &g, &e) == SL_OK && sl_gguf_tensor_count(g) == 3);
    sl_gguf_close(g);
    /* ... unless asked not to: then only the named shard. */
    sl_gguf_options only = {.no_shards = true};
    CHECK_MSG(sl_gguf_open(path, &only, &g, &e) == SL_OK, "%s", e.msg);
    CHECK(g && sl_gguf_shard_count(g) == 1 && sl_gguf_tensor_count(g) == 1 && sl_gguf_tensor_find(g, "b"));
    sl_gguf_close(g);
    /* A renamed shard cannot find its siblings, and says so. */
    char renamed[1024];
    snprintf(renamed, sizeof renamed, "%s/renamed-shard.gguf", tmpdir());
    gb sb = shard_image(1, 3, "b", 3, 1);
    CHECK(gb_save(&sb, renamed) == 0);
    gb_free(&sb);
    CHECK(sl_gguf_open(renamed, NULL, &g, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "one shard of 3");

    /* missing shard */
    write_set("miss", 3, names, 3, -1);
    snprintf(path, sizeof path, "%s/miss-00002-of-00003.gguf", tmpdir());
    unlink(path);
    snprintf(path, sizeof path, "%s/miss-00001-of-00003.gguf", tmpdir());
    CHECK(sl_gguf_open(path, NULL, &g, &e) == SL_ERR_NOT_FOUND);
    CHECK_CONTAINS(e.msg, "miss-00002-of-00003.gguf");
    CHECK_CONTAINS(e.msg, "shard 2 of 3 is missing");

    /* duplicate tensor across shards */
    const char *dup[] = {"a", "b", "a"};
    write_set("dup", 3, dup, 3, -1);
    snprintf(path, sizeof path, "%s/dup-00001-of-00003.gguf", tmpdir());
    CHECK(sl_gguf_open(path, NULL, &g, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "duplicate tensor 'a'");
    CHECK_CONTAINS(e.msg, "dup-00003-of-00003.gguf");

    /* split.no disagreeing with the name, and a wrong total */
    write_set("badno", 3, names, 3, 1);
    snprintf(path, sizeof path, "%s/badno-00001-of-00003.gguf", tmpdir());
    CHECK(sl_gguf_open(path, NULL, &g, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "split.no = 7");
    write_set("badtotal", 3, names, 5, -1);
    snprintf(path, sizeof path, "%s/badtotal-00001-of-00003.gguf", tmpdir());
    CHECK(sl_gguf_open(path, NULL, &g, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "split.tensors.count = 5");

    /* a file that is not there at all */
    CHECK(sl_gguf_open(path_in_tmp(path, sizeof path, "absent.gguf"), NULL, &g, &e) == SL_ERR_NOT_FOUND);
    CHECK_CONTAINS(e.msg, "absent.gguf");
}

static void count_notice(void *user, const char *msg)
{
    (void)msg;
    ++*(int *)user;
}

static void test_data_paths_and_provenance(void)
{
    /* 3 tensors, one spanning several 4 KiB pages at an offset that is not page aligned. */
    gb b = {0};
    gb_header(&b, "GGUF", 3, 3, 0);
    gb_tensor(&b, "small", 1, (uint64_t[]){8}, SL_GGML_F32, 0);
    gb_tensor(&b, "big", 1, (uint64_t[]){5000}, SL_GGML_F32, 32);
    gb_tensor(&b, "tail", 1, (uint64_t[]){3}, SL_GGML_I8, 32 + 20000);
    gb_pad(&b, 32);
    size_t data_start = b.n;
    gb_fill(&b, 32 + 20000 + 3, 7);
    char path[1024];
    path_in_tmp(path, sizeof path, "data.gguf");
    CHECK(gb_save(&b, path) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    int notices = 0;
    sl_gguf_options opt = {.notice = count_notice, .notice_user = &notices};
    sl_gguf *g = NULL;
    sl_error e;
    CHECK_MSG(sl_gguf_open(path, &opt, &g, &e) == SL_OK, "%s", e.msg);
    if (!g) {
        gb_free(&b);
        return;
    }
    void *buf = NULL;
    CHECK(posix_memalign(&buf, SL_GGUF_DIRECT_ALIGN, 64 * 1024) == 0);
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        CHECK(t->file_offset == data_start + t->offset);
        CHECK(t->mtime_sec == (int64_t)st.st_mtim.tv_sec && t->mtime_nsec == (int64_t)st.st_mtim.tv_nsec);
        CHECK(!strcmp(t->path, path));
        const uint8_t *want = b.p + t->file_offset;
        CHECK(!memcmp(sl_gguf_tensor_view(g, t), want, t->nbytes));
        for (int io = 0; io < 3; io++) {
            void *data = NULL;
            memset(buf, 0xEE, 64 * 1024);
            sl_status s = sl_gguf_tensor_read(g, t, (sl_gguf_io)io, buf, 64 * 1024, &data, &e);
            CHECK_MSG(s == SL_OK, "io %d tensor %s: %s", io, t->name, e.msg);
            CHECK_MSG(s || !memcmp(data, want, t->nbytes), "io %d tensor %s: bytes differ", io, t->name);
        }
        void *data;
        CHECK(sl_gguf_tensor_read(g, t, SL_GGUF_IO_PREAD, buf, t->nbytes - 1, &data, &e) == SL_ERR_RANGE);
        CHECK(sl_gguf_tensor_read(g, t, SL_GGUF_IO_DIRECT, (char *)buf + 1, 60000, &data, &e) == SL_ERR_INVALID);
    }
    CHECK(notices <= 1); /* at most once per handle, if the file system refuses O_DIRECT */
    free(buf);
    sl_gguf_close(g);
    gb_free(&b);
}

static void test_long_string_array(void)
{
    /* A 150k-entry vocabulary parses and indexes in place. */
    gb b = {0};
    gb_header(&b, "GGUF", 3, 0, 1);
    gb_key(&b, "tokenizer.ggml.tokens", SL_GGUF_ARR);
    gb_u32(&b, SL_GGUF_STR);
    gb_u64(&b, 150000);
    char tok[32];
    for (int i = 0; i < 150000; i++) {
        snprintf(tok, sizeof tok, "tok%d", i);
        gb_str(&b, tok);
    }
    sl_gguf *g = NULL;
    sl_error e;
    CHECK(sl_gguf_open_memory(b.p, b.n, "vocab.gguf", &g, &e) == SL_OK);
    const sl_gguf_value *v = NULL;
    CHECK(g && sl_gguf_get_arr(g, "tokenizer.ggml.tokens", SL_GGUF_STR, &v, &e) == SL_OK);
    sl_gguf_value el;
    CHECK(v && v->v.arr.n == 150000 && sl_gguf_arr_get(v, 149999, &el, &e) == SL_OK &&
          el.v.str.len == 9 && !memcmp(el.v.str.ptr, "tok149999", 9));
    sl_gguf_close(g);
    gb_free(&b);
}

int main(void)
{
    test_valid_versions();
    test_truncation_everywhere();
    test_header_errors();
    test_kv_errors();
    test_tensor_errors();
    test_shards();
    test_data_paths_and_provenance();
    test_long_string_array();
    return sl_test_finish("reader_test");
}
