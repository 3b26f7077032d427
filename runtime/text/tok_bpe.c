/* Byte-level BPE tokenizer: llama.cpp's llm_tokenizer_bpe_session.
 *
 * The fragment is decoded to code points (invalid UTF-8 -> U+FFFD) and split into words by the
 * pre-tokenizer (pretok.c). Each word's UTF-8 bytes are mapped to GPT-2's byte alphabet; the
 * mapped word is cut into characters, and adjacent pairs that are merges go into a min-heap keyed
 * by (merge rank, then lowest left index). Merging and staleness work as in tok_spm.c
 * (a popped pair is stale when left.n + right.n != size). llama3 (ignore_merges) emits a word
 * that is itself a token without merging. A final symbol that is not a token falls back to the
 * tokens of its single bytes where they exist (llama.cpp's behaviour; they rarely do).
 * Invariant: within a word, symbols with n > 0, followed through next, tile the mapped word. */
#include <stdlib.h>
#include <string.h>

#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"

typedef struct sym {
    int32_t prev, next;
    uint32_t off, n;
} sym;

typedef struct bigram {
    int32_t left, right;
    int32_t rank;
    uint32_t size;
} bigram;

static bool before(const bigram *a, const bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

#include "runtime/text/bigram_heap_tmpl.h"

typedef struct scratch {
    sym *s;
    heap h;
} scratch;

static bool try_add(const sl_vocab *v, const char *w, const sym *s, int32_t left, int32_t right,
                    heap *h)
{
    if (left < 0 || right < 0) return true;
    const int32_t rank = sl__vocab_merge_rank(v, w + s[left].off, s[left].n, w + s[right].off,
                                              s[right].n);
    if (rank < 0) return true;
    return heap_push(h, (bigram){left, right, rank, s[left].n + s[right].n});
}

/* Merges one mapped word w[0, n) and appends its tokens. false only when out of memory. */
static bool merge_word(const sl_vocab *v, const char *w, size_t n, scratch *sc, sl__tokbuf *out)
{
    if (v->ignore_merges) {
        const int32_t id = sl_vocab_find(v, w, n);
        if (id >= 0) return sl__tokbuf_push(out, id);
    }
    sym *s = sc->s;
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = sl__utf8_len((unsigned char)w[off]);
        if (cl > n - off) cl = n - off;
        s[n_sym] = (sym){n_sym - 1, off + cl == n ? -1 : n_sym + 1, (uint32_t)off, (uint32_t)cl};
        n_sym++;
        off += cl;
    }
    heap *h = &sc->h;
    h->n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!try_add(v, w, s, i - 1, i, h)) return false;
    while (h->n) {
        const bigram b = heap_pop(h);
        sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        if (!try_add(v, w, s, l->prev, b.left, h) || !try_add(v, w, s, b.left, l->next, h))
            return false;
    }
    for (int32_t i = 0; n_sym > 0 && i != -1; i = s[i].next) {
        const int32_t id = sl_vocab_find(v, w + s[i].off, s[i].n);
        if (id >= 0) {
            if (!sl__tokbuf_push(out, id)) return false;
            continue;
        }
        for (uint32_t j = 0; j < s[i].n; j++) {
            const int32_t b = sl_vocab_find(v, w + s[i].off + j, 1);
            if (b >= 0 && !sl__tokbuf_push(out, b)) return false;
        }
    }
    return true;
}

sl_status sl__bpe_tokenize(const sl_vocab *v, const char *text, size_t len, sl__tokbuf *out,
                           sl_error *err)
{
    if (len == 0) return SL_OK;
    if (len > INT32_MAX / 8) /* symbol offsets are 32-bit; mapped words take <= 6 len bytes */
        return sl_error_set(err, SL_ERR_RANGE, "tokenize: %zu bytes of text exceed the BPE "
                            "tokenizer's limit", len);
    sl_status st = SL_OK;
    size_t *lens = NULL, n_words = 0;
    uint32_t *cps = malloc(len * sizeof *cps);
    char *w = NULL;
    scratch sc = {NULL, {0}};
    if (!cps) goto nomem;
    size_t n = 0;
    for (size_t i = 0; i < len;) cps[n++] = sl__utf8_decode(text, len, &i);
    st = sl__pretok_split(&v->pre, cps, n, &lens, &n_words, err);
    if (st != SL_OK) goto out;
    /* Scratch for the longest word: a word of B UTF-8 bytes maps to B symbols of at most
     * 2 bytes each (a U+FFFD standing for one bad input byte counts its 3 bytes). */
    size_t max_bytes = 0;
    for (size_t k = 0, start = 0; k < n_words; start += lens[k++]) {
        size_t b = 0;
        for (size_t i = start; i < start + lens[k]; i++) {
            char u[4];
            b += sl__utf8_encode(cps[i], u);
        }
        if (b > max_bytes) max_bytes = b;
    }
    w = malloc(2 * max_bytes + 1);
    sc.s = malloc((max_bytes + 1) * sizeof *sc.s);
    if (!w || !sc.s) goto nomem;
    size_t start = 0;
    for (size_t k = 0; k < n_words; k++) {
        size_t wn = 0;
        for (size_t i = start; i < start + lens[k]; i++) {
            char u[4];
            const size_t ul = sl__utf8_encode(cps[i], u);
            for (size_t j = 0; j < ul; j++)
                wn += sl__utf8_encode(sl__gpt2_byte_to_cp((uint8_t)u[j]), w + wn);
        }
        start += lens[k];
        if (!merge_word(v, w, wn, &sc, out)) goto nomem;
    }
    goto out;
nomem:
    st = sl_error_set(err, SL_ERR_NOMEM, "tokenize: out of memory on %zu bytes of text", len);
out:
    free(cps);
    free(w);
    free(sc.s);
    free(sc.h.v);
    free(lens);
    return st;
}
