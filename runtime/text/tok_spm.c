/* SPM tokenizer: llama.cpp's llm_tokenizer_spm_session.
 *
 * The fragment is cut into UTF-8 characters (symbols in a doubly linked list over an array).
 * Every adjacent pair whose concatenation is a vocabulary piece goes into a max-heap keyed by
 * (piece score, then lowest left index); popping the best pair merges the right symbol into the
 * left one and offers the two new neighbouring pairs. A popped pair is stale, and skipped, when
 * either side was merged away or grew since it was offered: then left.n + right.n != size.
 * Finally each symbol is its piece, or, if a single character is not in the vocabulary, its
 * bytes as <0xNN> tokens.
 * Invariant: symbols with n > 0, followed through next from 0, tile the text in order. */
#include <stdlib.h>

#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"

typedef struct sym {
    int32_t prev, next;
    uint32_t off, n; /* bytes of text; n == 0 once merged into its left neighbour */
} sym;

typedef struct bigram {
    int32_t left, right;
    float score;
    uint32_t size;
} bigram;

/* a ranks before b: higher score, then leftmost */
static bool before(const bigram *a, const bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

#include "runtime/text/bigram_heap_tmpl.h"

/* Offers the pair (left, right) if its text is a piece. false only when out of memory. */
static bool try_add(const sl_vocab *v, const char *text, const sym *s, int32_t left,
                    int32_t right, heap *h)
{
    if (left < 0 || right < 0) return true;
    const uint32_t size = s[left].n + s[right].n;
    const int32_t id = sl_vocab_find(v, text + s[left].off, size);
    if (id < 0) return true;
    return heap_push(h, (bigram){left, right, v->scores[id], size});
}

static bool emit_bytes(const sl_vocab *v, const char *p, size_t n, sl__tokbuf *out)
{
    for (size_t j = 0; j < n; j++) {
        int32_t id = v->byte_token[(unsigned char)p[j]];
        if (id < 0) id = v->unk; /* no byte pieces at all: llama.cpp would throw here */
        if (id >= 0 && !sl__tokbuf_push(out, id)) return false;
    }
    return true;
}

sl_status sl__spm_tokenize(const sl_vocab *v, const char *text, size_t len, sl__tokbuf *out,
                           sl_error *err)
{
    if (len == 0) return SL_OK;
    if (len > INT32_MAX) return sl_error_set(err, SL_ERR_RANGE, "tokenize: %zu bytes of text "
                                             "exceed the SPM tokenizer's limit", len);
    sym *s = malloc(len * sizeof *s);
    heap h = {0};
    bool ok = s != NULL;
    int32_t n_sym = 0;
    for (size_t off = 0; ok && off < len;) {
        size_t n = sl__utf8_len((unsigned char)text[off]);
        if (n > len - off) n = len - off;
        s[n_sym] = (sym){n_sym - 1, off + n == len ? -1 : n_sym + 1, (uint32_t)off, (uint32_t)n};
        n_sym++;
        off += n;
    }
    for (int32_t i = 1; ok && i < n_sym; i++) ok = try_add(v, text, s, i - 1, i, &h);
    while (ok && h.n) {
        const bigram b = heap_pop(&h);
        sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        ok = try_add(v, text, s, l->prev, b.left, &h) && try_add(v, text, s, b.left, l->next, &h);
    }
    for (int32_t i = 0; ok && i != -1; i = s[i].next) {
        const int32_t id = sl_vocab_find(v, text + s[i].off, s[i].n);
        ok = id >= 0 ? sl__tokbuf_push(out, id) : emit_bytes(v, text + s[i].off, s[i].n, out);
    }
    free(s);
    free(h.v);
    if (!ok)
        return sl_error_set(err, SL_ERR_NOMEM, "tokenize: out of memory on %zu bytes of text",
                            len);
    return SL_OK;
}
