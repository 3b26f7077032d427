/* runtime/text/bigram_heap_tmpl.h: a binary heap of merge candidates, shared by the SPM and BPE
 * merge loops. Included (once per file) after the includer defines its `bigram` type and
 * `static bool before(const bigram *a, const bigram *b)` — the order differs (SPM: highest
 * score first; BPE: lowest rank first; both leftmost on ties), the heap does not. */
#include <stdbool.h>
#include <stdlib.h>

typedef struct heap {
    bigram *v;
    size_t n, cap;
} heap;


static bool heap_push(heap *h, bigram b)
{
    if (h->n == h->cap) {
        const size_t cap = h->cap ? 2 * h->cap : 64;
        bigram *p = realloc(h->v, cap * sizeof *p);
        if (!p) return false;
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!before(&b, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return true;
}

static bigram heap_pop(heap *h)
{
    const bigram top = h->v[0];
    const bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
