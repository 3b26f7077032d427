/* PowerInfer's .gpuidx: round trips, the file layout, and one malformed file per error.
 *
 * Malformed files are written with the project's GGUF writer tensor by tensor, so each case
 * states exactly what is on disk; every refusal must name the file, the layer and the value.
 * tests/scheduler/gpuidx_powerinfer.py checks the same reader against files gguf-py writes the
 * way PowerInfer's own tool does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "base/prng.h"
#include "scheduler/policy/gpuidx.h"
#include "tests/testing.h"

static char g_dir[] = "/tmp/gpuidx_test_XXXXXX";

static const char *tmp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* ---- round trips -------------------------------------------------------------------------- */

static void check_equal(const sl_gpuidx *a, const sl_gpuidx *b)
{
    CHECK(a->n_layer == b->n_layer);
    CHECK((a->n_expert > 1 ? a->n_expert : 0) == b->n_expert);
    CHECK(a->vram_capacity_bytes == b->vram_capacity_bytes);
    for (uint32_t l = 0; l < a->n_layer && a->n_layer == b->n_layer; l++) {
        const sl_gpuidx_layer *x = &a->layers[l], *y = &b->layers[l];
        CHECK(x->n_neuron == y->n_neuron && x->n_hot == y->n_hot);
        if (x->n_neuron != y->n_neuron || x->n_hot != y->n_hot) continue;
        CHECK(!x->n_neuron || !memcmp(x->hot, y->hot, x->n_neuron));
        CHECK(!x->n_hot || !memcmp(x->hot_list, y->hot_list, x->n_hot * sizeof(uint32_t)));
    }
}

/* Random indexes, including layers with no and with all neurons hot (not split). */
static void test_round_trip(void)
{
    uint64_t s[4];
    sl_prng_seed(s, 11);
    for (int round = 0; round < 50; round++) {
        uint32_t n_layer = 1 + (uint32_t)(sl_prng_next(s) % 6), widths[6];
        for (uint32_t l = 0; l < n_layer; l++) widths[l] = (uint32_t)(sl_prng_next(s) % 300);
        sl_gpuidx idx;
        sl_error e = {0};
        CHECK(sl_gpuidx_init(&idx, n_layer, widths, &e) == SL_OK);
        idx.vram_capacity_bytes = sl_prng_next(s);
        uint32_t list[300];
        for (uint32_t l = 0; l < n_layer; l++) {
            uint32_t mode = (uint32_t)(sl_prng_next(s) % 4), n_hot = 0;
            for (uint32_t i = 0; i < widths[l]; i++)
                if (mode == 1 || (mode >= 2 && sl_prng_next(s) % 3 == 0)) list[n_hot++] = i;
            CHECK(sl_gpuidx_set_layer(&idx, l, list, n_hot, &e) == SL_OK);
            CHECK(sl_gpuidx_layer_is_split(&idx.layers[l]) == (n_hot > 0 && n_hot < widths[l]));
        }
        CHECK(sl_gpuidx_validate(&idx, &e) == SL_OK);
        const char *path = tmp_path("rt.gpuidx");
        CHECK_MSG(sl_gpuidx_write(path, &idx, NULL, &e) == SL_OK, "%s", e.msg);
        sl_gpuidx back;
        CHECK_MSG(sl_gpuidx_read(path, n_layer, widths, &back, &e) == SL_OK, "%s", e.msg);
        check_equal(&idx, &back);
        sl_gpuidx_free(&back);
        /* The same bytes through the in-memory reader. */
        FILE *f = fopen(path, "rb");
        static uint8_t buf[1 << 16];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        CHECK(len > 0 && len < sizeof buf);
        CHECK(!memcmp(buf, "PWRI", 4));
        CHECK(sl_gpuidx_read_memory(buf, len, "mem", 0, NULL, &back, &e) == SL_OK);
        check_equal(&idx, &back);
        sl_gpuidx_free(&back);
        sl_gpuidx_free(&idx);
        sl_gpuidx_free(&idx); /* twice is allowed */
    }
}

/* MoE indexes (gpuidx.h's extension): expert-major entries survive a round trip, the file
 * holds the expert count, and a dense index written the same way has no such key. */
static void test_moe(void)
{
    uint64_t s[4];
    sl_prng_seed(s, 12);
    for (int round = 0; round < 20; round++) {
        const uint32_t X = 2 + (uint32_t)(sl_prng_next(s) % 6), n_layer = 1 + round % 3;
        uint32_t widths[3], list[8 * 40];
        for (uint32_t l = 0; l < n_layer; l++) widths[l] = X * (uint32_t)(sl_prng_next(s) % 40);
        sl_gpuidx idx, back;
        sl_error e = {0};
        CHECK(sl_gpuidx_init(&idx, n_layer, widths, &e) == SL_OK);
        idx.n_expert = X;
        for (uint32_t l = 0; l < n_layer; l++) {
            uint32_t n_hot = 0;
            for (uint32_t i = 0; i < widths[l]; i++)
                if (sl_prng_next(s) % 3 == 0) list[n_hot++] = i;
            CHECK(sl_gpuidx_set_layer(&idx, l, list, n_hot, &e) == SL_OK);
        }
        const char *path = tmp_path("moe.gpuidx");
        CHECK_MSG(sl_gpuidx_write(path, &idx, NULL, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_gpuidx_read(path, n_layer, widths, &back, &e) == SL_OK, "%s", e.msg);
        check_equal(&idx, &back);
        sl_gpuidx_free(&back);
        idx.n_expert = 0; /* dense: no expert key, and read back as dense */
        sl_gguf_options o = {.no_shards = true};
        CHECK(sl_gpuidx_write(path, &idx, &(sl_gpuidx_write_options){.gguf_magic = true},
                              &e) == SL_OK);
        sl_gguf *g = NULL;
        CHECK(sl_gguf_open(path, &o, &g, &e) == SL_OK);
        CHECK(g && !sl_gguf_find(g, "generic.gpu_index.expert_count"));
        sl_gguf_close(g);
        CHECK(sl_gpuidx_read(path, 0, NULL, &back, &e) == SL_OK && back.n_expert == 0);
        sl_gpuidx_free(&back);
        sl_gpuidx_free(&idx);
    }
    /* a width that is not the experts' multiple is refused by validate (and so by write) */
    uint32_t w5[1] = {5};
    sl_gpuidx idx;
    sl_error e = {0};
    CHECK(sl_gpuidx_init(&idx, 1, w5, &e) == SL_OK);
    idx.n_expert = 2;
    CHECK(sl_gpuidx_validate(&idx, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "2 experts");
    sl_gpuidx_free(&idx);
}

/* The layout PowerInfer's loader expects, seen through the plain GGUF reader. */
static void test_layout(void)
{
    uint32_t widths[2] = {4, 3}, hot0[2] = {1, 3};
    sl_gpuidx idx;
    sl_error e = {0};
    CHECK(sl_gpuidx_init(&idx, 2, widths, &e) == SL_OK);
    CHECK(sl_gpuidx_set_layer(&idx, 0, hot0, 2, &e) == SL_OK);
    idx.vram_capacity_bytes = 123456789;
    const char *path = tmp_path("layout.gpuidx");
    sl_gpuidx_write_options o = {.gguf_magic = true};
    CHECK(sl_gpuidx_write(path, &idx, &o, &e) == SL_OK);
    sl_gguf *g = NULL;
    CHECK_MSG(sl_gguf_open(path, NULL, &g, &e) == SL_OK, "%s", e.msg);
    if (g) {
        CHECK(!sl_gguf_is_powerinfer(g) && sl_gguf_version(g) == 3);
        CHECK(sl_gguf_alignment(g) == 32 && sl_gguf_kv_count(g) == 3);
        CHECK(!strcmp(sl_gguf_kv_key(g, 0), "general.architecture"));
        CHECK(!strcmp(sl_gguf_kv_key(g, 1), "generic.gpu_index.block_count"));
        CHECK(!strcmp(sl_gguf_kv_key(g, 2), "split.vram_capacity"));
        const char *arch = NULL;
        uint32_t n = 0;
        uint64_t vram = 0;
        CHECK(sl_gguf_get_str(g, "general.architecture", &arch, &e) == SL_OK && arch &&
              !strcmp(arch, "generic.gpu_index"));
        CHECK(sl_gguf_get_u32(g, "generic.gpu_index.block_count", &n, &e) == SL_OK && n == 2);
        CHECK(sl_gguf_get_u64(g, "split.vram_capacity", &vram, &e) == SL_OK &&
              vram == 123456789);
        const char *names[4] = {"blk.0.gpu_idx", "blk.0.gpu_bucket", "blk.1.gpu_idx",
                                "blk.1.gpu_bucket"};
        const int64_t lens[4] = {4, 2, 3, 0};
        CHECK(sl_gguf_tensor_count(g) == 4);
        for (size_t i = 0; i < 4 && sl_gguf_tensor_count(g) == 4; i++) {
            const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
            CHECK(!strcmp(t->name, names[i]) && t->type == SL_GGML_I32 && t->n_dims == 1 &&
                  t->ne[0] == lens[i]);
        }
        const int32_t *mask = sl_gguf_tensor_view(g, sl_gguf_tensor_at(g, 0));
        CHECK(mask[0] == 0 && mask[1] == 1 && mask[2] == 0 && mask[3] == 1);
        sl_gguf_close(g);
    }
    sl_gpuidx_free(&idx);
}

/* ---- malformed files ---------------------------------------------------------------------- */

typedef struct spec_tensor {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[2];
    int32_t data[8];
} spec_tensor;

/* Writes the tensors (data as I32, or as F32 zeros for other types) and the standard KV unless
 * `block_count` is negative (none); vram_u32 stores split.vram_capacity with the wrong type. */
static const char *write_spec(const char *name, const spec_tensor *t, size_t n, int block_count,
                              bool vram_u32, int experts)
{
    const char *path = tmp_path(name);
    sl_gguf_writer *w = NULL;
    sl_error e = {0};
    CHECK(sl_gguf_writer_create(path, NULL, &w, &e) == SL_OK);
    if (block_count >= 0) {
        CHECK(sl_gguf_writer_set_str(w, "general.architecture", "generic.gpu_index", &e) == 0);
        CHECK(sl_gguf_writer_set_u32(w, "generic.gpu_index.block_count", (uint32_t)block_count,
                                     &e) == SL_OK);
    }
    if (experts > 0)
        CHECK(sl_gguf_writer_set_u32(w, "generic.gpu_index.expert_count", (uint32_t)experts,
                                     &e) == SL_OK);
    if (experts < 0) /* the wrong type */
        CHECK(sl_gguf_writer_set_u64(w, "generic.gpu_index.expert_count", 2, &e) == SL_OK);
    if (vram_u32) CHECK(sl_gguf_writer_set_u32(w, "split.vram_capacity", 1, &e) == SL_OK);
    else CHECK(sl_gguf_writer_set_u64(w, "split.vram_capacity", 1, &e) == SL_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(sl_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, &e) == 0);
    for (size_t i = 0; i < n; i++) {
        int64_t count = t[i].ne[0] * (t[i].n_dims > 1 ? t[i].ne[1] : 1);
        CHECK(sl_gguf_writer_write(w, t[i].data, (uint64_t)count * 4, &e) == SL_OK);
    }
    CHECK_MSG(sl_gguf_writer_finish(w, &e) == SL_OK, "%s", e.msg);
    sl_gguf_writer_destroy(w);
    return path;
}

#define I32 SL_GGML_I32
#define T1(nm, n, ...) {nm, I32, 1, {n, 1}, {__VA_ARGS__}}
#define T0(nm) {nm, I32, 1, {0, 1}, {0}}

typedef struct bad_case {
    const char *what;
    spec_tensor t[5];
    size_t n;
    int block_count;       /* -1: no architecture and no block count */
    bool vram_u32;
    uint32_t expect_n_layer;
    uint32_t expect_n[2];  /* 0: unchecked */
    sl_status status;
    const char *msg[3];    /* substrings the message must hold */
    int experts;           /* generic.gpu_index.expert_count: 0 none, -1 as u64 */
} bad_case;

static const bad_case k_bad[] = {
    {"wrong length", {T1("blk.0.gpu_idx", 3, 1, 0, 0), T1("blk.0.gpu_bucket", 1, 0),
                      T1("blk.1.gpu_idx", 2, 0, 1), T1("blk.1.gpu_bucket", 1, 1)},
     4, 2, false, 2, {3, 4}, SL_ERR_RANGE,
     {"layer 1", "wrong length", "blk.1.gpu_idx has 2 entries, the model's FFN has 4"}, 0},
    {"index out of range", {T1("blk.0.gpu_idx", 4, 1, 0, 0, 0), T1("blk.0.gpu_bucket", 2, 0, 4)},
     2, 1, false, 1, {0}, SL_ERR_FORMAT,
     {"layer 0", "index out of range", "blk.0.gpu_bucket[1] = 4"}, 0},
    {"negative index", {T1("blk.0.gpu_idx", 4, 1, 0, 0, 0), T1("blk.0.gpu_bucket", 1, -1)},
     2, 1, false, 0, {0}, SL_ERR_FORMAT, {"layer 0", "out of range", "[0] = -1"}, 0},
    {"duplicate", {T1("blk.0.gpu_idx", 4, 0, 1, 0, 0), T1("blk.0.gpu_bucket", 2, 1, 1)},
     2, 1, false, 1, {4}, SL_ERR_FORMAT, {"layer 0", "duplicate", "blk.0.gpu_bucket[1] = 1"}, 0},
    {"unsorted", {T1("blk.0.gpu_idx", 4, 0, 1, 0, 1), T1("blk.0.gpu_bucket", 2, 3, 1)},
     2, 1, false, 1, {4}, SL_ERR_FORMAT, {"layer 0", "unsorted bucket", "[1] = 1 after 3"}, 0},
    {"bucket lists a cold neuron",
     {T1("blk.0.gpu_idx", 2, 0, 0), T1("blk.0.gpu_bucket", 0),
      T1("blk.1.gpu_idx", 3, 0, 1, 0), T1("blk.1.gpu_bucket", 2, 1, 2)},
     4, 2, false, 2, {0, 0}, SL_ERR_FORMAT,
     {"layer 1", "disagree", "blk.1.gpu_bucket[1] = 2 but blk.1.gpu_idx[2] = 0"}, 0},
    {"bucket omits a hot neuron", {T1("blk.0.gpu_idx", 3, 1, 1, 0), T1("blk.0.gpu_bucket", 1, 0)},
     2, 1, false, 1, {3}, SL_ERR_FORMAT,
     {"layer 0", "disagree", "blk.0.gpu_idx[1] = 1 but blk.0.gpu_bucket omits 1"}, 0},
    {"value not 0/1", {T1("blk.0.gpu_idx", 3, 0, 2, 0), T1("blk.0.gpu_bucket", 1, 1)},
     2, 1, false, 1, {3}, SL_ERR_FORMAT, {"layer 0", "blk.0.gpu_idx[1] = 2, expected 0 or 1"}, 0},
    {"wrong type", {{"blk.0.gpu_idx", SL_GGML_F32, 1, {2, 1}, {0}}, T1("blk.0.gpu_bucket", 0)},
     2, 1, false, 1, {2}, SL_ERR_TYPE, {"layer 0", "wrong type", "blk.0.gpu_idx is F32"}, 0},
    {"missing tensor", {T1("blk.0.gpu_idx", 2, 0, 0), T1("blk.1.gpu_idx", 2, 0, 0),
                        T1("blk.1.gpu_bucket", 0)},
     3, 2, false, 2, {0}, SL_ERR_FORMAT, {"layer 0", "missing tensor blk.0.gpu_bucket"}, 0},
    {"layer count mismatch (block_count)", {T1("blk.0.gpu_idx", 1, 0), T0("blk.0.gpu_bucket")},
     2, 1, false, 3, {0}, SL_ERR_RANGE,
     {"layer count mismatch", "index has 1 layers (block_count)", "model has 3"}, 0},
    {"layer count mismatch (tensors)", {T1("blk.0.gpu_idx", 1, 0), T0("blk.0.gpu_bucket")},
     2, -1, false, 2, {0}, SL_ERR_RANGE, {"layer count mismatch", "2 tensors per layer"}, 0},
    {"block_count past the tensors", {T1("blk.0.gpu_idx", 1, 0), T0("blk.0.gpu_bucket")},
     2, 2, false, 0, {0}, SL_ERR_FORMAT, {"layer 1", "missing tensor blk.1.gpu_idx"}, 0},
    {"order", {T0("blk.0.gpu_bucket"), T1("blk.0.gpu_idx", 1, 0)},
     2, 1, false, 1, {0}, SL_ERR_FORMAT,
     {"layer 0", "tensor 0 is blk.0.gpu_bucket where blk.0.gpu_idx belongs"}, 0},
    {"extra tensor", {T1("blk.0.gpu_idx", 1, 0), T0("blk.0.gpu_bucket"), T1("output", 1, 0)},
     3, 1, false, 1, {0}, SL_ERR_FORMAT, {"unexpected tensor output", "tensor 2"}, 0},
    {"two dimensions", {{"blk.0.gpu_idx", I32, 2, {2, 2}, {0}}, T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {0}, SL_ERR_FORMAT, {"layer 0", "2 dimensions"}, 0},
    {"vram capacity type", {T1("blk.0.gpu_idx", 1, 0), T0("blk.0.gpu_bucket")},
     2, 1, true, 1, {0}, SL_ERR_TYPE, {"split.vram_capacity is u32, expected u64"}, 0},
    /* MoE indexes: 2 experts of 2 neurons, entries e * 2 + j */
    {"moe value not 0/1", {T1("blk.0.gpu_idx", 4, 0, 0, 0, 2), T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {4}, SL_ERR_FORMAT,
     {"layer 0", "blk.0.gpu_idx[3] = 2 (expert 1, neuron 1)", "expected 0 or 1"}, 2},
    {"moe bucket disagrees", {T1("blk.0.gpu_idx", 4, 0, 0, 1, 0), T1("blk.0.gpu_bucket", 1, 3)},
     2, 1, false, 1, {4}, SL_ERR_FORMAT,
     {"layer 0", "blk.0.gpu_bucket[0] = 3 (expert 1, neuron 1) but blk.0.gpu_idx[3] = 0"}, 2},
    {"moe bucket omits", {T1("blk.0.gpu_idx", 4, 0, 1, 0, 0), T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {4}, SL_ERR_FORMAT,
     {"layer 0", "blk.0.gpu_idx[1] = 1 (expert 0, neuron 1) but"}, 2},
    {"moe width", {T1("blk.0.gpu_idx", 3, 0, 0, 0), T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {0}, SL_ERR_FORMAT,
     {"layer 0", "3 entries, not a multiple", "expert_count = 2"}, 2},
    {"moe one expert", {T1("blk.0.gpu_idx", 2, 0, 0), T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {0}, SL_ERR_FORMAT, {"generic.gpu_index.expert_count = 1"}, 1},
    {"moe count type", {T1("blk.0.gpu_idx", 2, 0, 0), T0("blk.0.gpu_bucket")},
     2, 1, false, 1, {0}, SL_ERR_TYPE, {"expert_count is u64, expected u32"}, -1},
};

static void test_malformed(void)
{
    for (size_t c = 0; c < sizeof k_bad / sizeof k_bad[0]; c++) {
        const bad_case *b = &k_bad[c];
        const char *path = write_spec("bad.gpuidx", b->t, b->n, b->block_count, b->vram_u32,
                                      b->experts);
        sl_gpuidx idx = {.n_layer = 77}; /* must come back empty */
        sl_error e = {0};
        sl_status s = sl_gpuidx_read(path, b->expect_n_layer,
                                     b->expect_n_layer ? b->expect_n : NULL, &idx, &e);
        CHECK_MSG(s == b->status, "%s: status %s, want %s: %s", b->what, sl_status_name(s),
                  sl_status_name(b->status), e.msg);
        CHECK_MSG(idx.n_layer == 0 && idx.layers == NULL, "%s: index not empty", b->what);
        CHECK_CONTAINS(e.msg, path);
        for (int m = 0; m < 3 && b->msg[m]; m++) CHECK_CONTAINS(e.msg, b->msg[m]);
    }
    sl_gpuidx idx;
    sl_error e = {0};
    CHECK(sl_gpuidx_read(tmp_path("absent.gpuidx"), 0, NULL, &idx, &e) == SL_ERR_IO ||
          e.code != SL_OK);
    CHECK(idx.n_layer == 0);
}

/* The structure's own checks: construction refusals and validate on a broken index. */
static void test_structure(void)
{
    uint32_t widths[1] = {5}, bad[2] = {3, 2}, far[1] = {5};
    sl_gpuidx idx;
    sl_error e = {0};
    CHECK(sl_gpuidx_init(&idx, 1, widths, &e) == SL_OK);
    CHECK(sl_gpuidx_set_layer(&idx, 0, bad, 2, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ascending");
    CHECK(sl_gpuidx_set_layer(&idx, 0, far, 1, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "out of range");
    CHECK(sl_gpuidx_set_layer(&idx, 1, far, 0, &e) == SL_ERR_INVALID);
    uint32_t ok[2] = {1, 4};
    CHECK(sl_gpuidx_set_layer(&idx, 0, ok, 2, &e) == SL_OK);
    idx.layers[0].hot[2] = 1; /* the mask now disagrees with the list */
    CHECK(sl_gpuidx_validate(&idx, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "neuron 2");
    CHECK(sl_gpuidx_write(tmp_path("never.gpuidx"), &idx, NULL, &e) == SL_ERR_INVALID);
    CHECK(access(tmp_path("never.gpuidx"), F_OK) != 0);
    sl_gpuidx_free(&idx);
    CHECK(sl_gpuidx_init(&idx, 0, NULL, &e) == SL_OK && idx.n_layer == 0);
    CHECK(sl_gpuidx_validate(&idx, &e) == SL_OK);
}

int main(void)
{
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_moe();
    test_layout();
    test_malformed();
    test_structure();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return sl_test_finish("gpuidx_test");
}
