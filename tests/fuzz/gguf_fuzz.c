/* Fuzz entry point for the GGUF parser: any input must either be refused with a status or
 * yield a handle whose every structure is consistent and readable. A broken invariant aborts,
 * which libFuzzer reports as a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "gguf/gguf_impl.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "gguf_fuzz: invariant broken: %s: %s\n", what, msg);
    abort();
}

/* Touches every element so out-of-bounds views would be caught by ASan. */
static uint64_t walk_value(const sl_gguf_value *v, unsigned depth)
{
    if (depth > SL_GGUF_MAX_NESTING) die("value", "nesting deeper than the limit");
    uint64_t acc = 0;
    if (v->type == SL_GGUF_STR) {
        for (uint64_t i = 0; i < v->v.str.len; i++) acc += (unsigned char)v->v.str.ptr[i];
        return acc;
    }
    if (v->type != SL_GGUF_ARR) return v->v.u64;
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        sl_gguf_value el;
        sl_error e;
        if (sl_gguf_arr_get(v, i, &el, &e) != SL_OK) die("array element", e.msg);
        if (el.type != v->v.arr.elem) die("array element", "type differs from the array's");
        acc += walk_value(&el, depth + 1);
    }
    return acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_gguf *g = NULL;
    sl_error e = {0};
    sl_status s = sl_gguf_open_memory(data, size, "fuzz.gguf", &g, &e);
    if (s != SL_OK) {
        if (g) die("open", "handle returned with an error");
        if (e.msg[0] == '\0') die("open", "error without a message");
        return 0;
    }
    if (sl__gguf_validate(g, &e) != SL_OK) die("validate", e.msg);
    volatile uint64_t acc = 0;
    for (size_t i = 0; i < sl_gguf_kv_count(g); i++) {
        const char *key = sl_gguf_kv_key(g, i);
        if (!key || !*key) die("kv", "empty key");
        if (sl_gguf_find(g, key) != sl_gguf_kv_value(g, i)) die("kv", "lookup mismatch");
        acc += walk_value(sl_gguf_kv_value(g, i), 0);
    }
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        uint64_t nbytes;
        if (sl_gguf_type_nbytes(t->type, t->n_dims ? t->n_dims : 1, t->ne, &nbytes, t->name, &e) != SL_OK ||
            nbytes != t->nbytes)
            die("tensor", "size disagrees with the type table");
        if (t->file_offset > size || t->nbytes > size - t->file_offset) die("tensor", "data out of bounds");
        const uint8_t *d = sl_gguf_tensor_view(g, t);
        if (t->nbytes) acc += d[0] + d[t->nbytes - 1];
    }
    (void)acc;
    sl_gguf_close(g);
    return 0;
}
