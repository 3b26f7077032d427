/* sl_vocab: loading from GGUF, lookups, special-token partition, tokenize/detokenize entry
 * points. Contracts in tokenizer.h, layout and invariants in vocab_impl.h; the SPM and BPE
 * merge loops live in tok_spm.c and tok_bpe.c, the BPE pre-tokenizers in pretok.c.
 *
 * Everything a vocabulary needs is copied into one arena at load, so a vocab outlives the GGUF
 * handle and holds no pointers into its mapping. Lookups are open-addressing hash tables
 * (FNV-1a, linear probing, load <= 1/2): token text -> id and merge pair -> rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"

static const char k_spm_space[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */

uint64_t sl__fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

bool sl__tokbuf_push(sl__tokbuf *b, int32_t id)
{
    if (b->n == b->cap) {
        const size_t cap = b->cap ? 2 * b->cap : 256;
        int32_t *p = realloc(b->ids, cap * sizeof *p);
        if (!p) return false;
        b->ids = p;
        b->cap = cap;
    }
    b->ids[b->n++] = id;
    return true;
}

/* ---- lookups ---------------------------------------------------------------------------- */

int32_t sl_vocab_find(const sl_vocab *v, const char *text, size_t len)
{
    if (!v || (!text && len)) return -1;
    uint32_t i = (uint32_t)sl__fnv1a(SL__FNV_INIT, text, len) & v->tok_mask;
    for (;;) {
        const uint32_t slot = v->tok_table[i];
        if (slot == 0) return -1;
        const int32_t id = (int32_t)slot - 1;
        if (v->text_len[id] == len && memcmp(sl__vocab_text(v, id), text, len) == 0) return id;
        i = (i + 1) & v->tok_mask;
    }
}

static uint64_t merge_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    /* the length separates the halves: ("ab","c") and ("a","bc") hash differently */
    uint64_t h = sl__fnv1a(SL__FNV_INIT, l, ln);
    h = (h ^ (uint64_t)ln) * 0x100000001b3ull;
    return sl__fnv1a(h, r, rn);
}

int32_t sl__vocab_merge_rank(const sl_vocab *v, const char *l, size_t ln, const char *r,
                             size_t rn)
{
    if (!v->merge_table) return -1;
    uint32_t i = (uint32_t)merge_hash(l, ln, r, rn) & v->merge_mask;
    for (;;) {
        const uint32_t slot = v->merge_table[i];
        if (slot == 0) return -1;
        const sl__merge *m = &v->merges[slot - 1];
        const char *t = v->arena + m->off;
        if (m->left_len == ln && m->right_len == rn && memcmp(t, l, ln) == 0 &&
            memcmp(t + ln, r, rn) == 0)
            return (int32_t)(slot - 1);
        i = (i + 1) & v->merge_mask;
    }
}

int32_t sl_vocab_n_tokens(const sl_vocab *v) { return v->n_tokens; }
sl_vocab_kind sl_vocab_kind_get(const sl_vocab *v) { return v->kind; }
sl_pretok sl_vocab_pretok(const sl_vocab *v) { return v->pre.kind; }
int32_t sl_vocab_bos(const sl_vocab *v) { return v->bos; }
int32_t sl_vocab_eos(const sl_vocab *v) { return v->eos; }
int32_t sl_vocab_eot(const sl_vocab *v) { return v->eot; }
int32_t sl_vocab_unk(const sl_vocab *v) { return v->unk; }
int32_t sl_vocab_pad(const sl_vocab *v) { return v->pad; }
bool sl_vocab_add_bos(const sl_vocab *v) { return v->add_bos; }
bool sl_vocab_add_eos(const sl_vocab *v) { return v->add_eos; }

int32_t sl_vocab_fim(const sl_vocab *v, int which)
{
    return which >= 0 && which < SL__VOCAB_FIM ? v->fim[which] : -1;
}

bool sl_vocab_is_eog(const sl_vocab *v, int32_t token)
{
    return token >= 0 && token < v->n_tokens && v->eog[token];
}

const char *sl_vocab_token_text(const sl_vocab *v, int32_t token, size_t *len)
{
    if (token < 0 || token >= v->n_tokens) return NULL;
    if (len) *len = v->text_len[token];
    return sl__vocab_text(v, token);
}

sl_token_type sl_vocab_token_type(const sl_vocab *v, int32_t token)
{
    return token >= 0 && token < v->n_tokens ? (sl_token_type)v->types[token] : SL_TOKEN_UNDEFINED;
}

float sl_vocab_token_score(const sl_vocab *v, int32_t token)
{
    return token >= 0 && token < v->n_tokens ? v->scores[token] : 0.0f;
}

/* ---- loading ---------------------------------------------------------------------------- */

static uint32_t table_size(uint64_t n)
{
    uint32_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* An optional integer key (any integer type, as converters vary): false if absent. */
static sl_status get_int(const sl_gguf *g, const char *key, bool *found, int64_t *out,
                         sl_error *err)
{
    const sl_gguf_value *val = sl_gguf_find(g, key);
    *found = false;
    if (!val) return SL_OK;
    switch (val->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        *out = val->v.u64 > INT64_MAX ? INT64_MAX : (int64_t)val->v.u64;
        break;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        *out = val->v.i64;
        break;
    default:
        return sl_error_set(err, SL_ERR_TYPE, "%s: expected an integer, found %s", key,
                            sl_gguf_vtype_name(val->type));
    }
    *found = true;
    return SL_OK;
}

static sl_status get_bool_opt(const sl_gguf *g, const char *key, bool *out, sl_error *err)
{
    const sl_gguf_value *val = sl_gguf_find(g, key);
    if (!val) return SL_OK;
    if (val->type != SL_GGUF_BOOL)
        return sl_error_set(err, SL_ERR_TYPE, "%s: expected bool, found %s", key,
                            sl_gguf_vtype_name(val->type));
    *out = val->v.b;
    return SL_OK;
}

/* A special id: the key if present and in range (llama.cpp ignores an out-of-range key and
 * keeps its default), else the default if in range, else -1. */
static sl_status get_special(const sl_gguf *g, const char *key, int32_t def, int32_t n_tokens,
                             int32_t *out, sl_error *err)
{
    bool found;
    int64_t id;
    sl_status st = get_int(g, key, &found, &id, err);
    if (st != SL_OK) return st;
    *out = found && id >= 0 && id < n_tokens ? (int32_t)id : def >= 0 && def < n_tokens ? def : -1;
    return SL_OK;
}

static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), /* DeepSeek */
    "<end_of_utterance>",
};
/* llama.cpp 0c1e570's end-of-generation texts (llama_vocab::impl::load), whatever the model */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "[e~[",
};

static int32_t find_cstr(const sl_vocab *v, const char *s)
{
    return sl_vocab_find(v, s, strlen(s));
}

/* qsort has no context argument in C17: sort (length, id) pairs instead. */
typedef struct len_id {
    uint32_t len;
    int32_t id;
} len_id;

static int cmp_len_id(const void *pa, const void *pb)
{
    const len_id *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1; /* longest first */
    return (a->id > b->id) - (a->id < b->id);
}

static sl_status load_tokens(const sl_gguf *g, sl_vocab *v, const sl_gguf_value *toks,
                             const sl_gguf_value *merges, sl_error *err)
{
    const uint64_t n = toks->v.arr.n;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++) bytes += toks->v.arr.strs[i].len ? toks->v.arr.strs[i].len : 32;
    if (merges)
        for (uint64_t i = 0; i < merges->v.arr.n; i++) bytes += merges->v.arr.strs[i].len;
    if (bytes >= UINT32_MAX)
        return sl_error_set(err, SL_ERR_RANGE, "tokenizer.ggml.tokens: %llu bytes of token "
                            "text is more than the vocabulary supports (4 GiB)",
                            (unsigned long long)bytes);
    v->arena = malloc(bytes + 1);
    v->text_off = malloc(n * sizeof *v->text_off);
    v->text_len = malloc(n * sizeof *v->text_len);
    v->scores = calloc(n, sizeof *v->scores);
    v->types = malloc(n);
    v->eog = calloc(n, 1);
    const uint32_t ts = table_size(n);
    v->tok_table = calloc(ts, sizeof *v->tok_table);
    v->tok_mask = ts - 1;
    if (!v->arena || !v->text_off || !v->text_len || !v->scores || !v->types || !v->eog ||
        !v->tok_table)
        return sl_error_set(err, SL_ERR_NOMEM, "tokenizer: out of memory for %llu tokens",
                            (unsigned long long)n);
    size_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        const sl_gguf_str *s = &toks->v.arr.strs[i];
        v->text_off[i] = (uint32_t)at;
        if (s->len == 0) { /* llama.cpp's name for an empty token */
            at += (size_t)snprintf(v->arena + at, 32, "[EMPTY_%llu]", (unsigned long long)i);
        } else {
            memcpy(v->arena + at, s->ptr, s->len);
            at += s->len;
        }
        v->text_len[i] = (uint32_t)(at - v->text_off[i]);
        v->types[i] = SL_TOKEN_NORMAL;
        uint32_t h = (uint32_t)sl__fnv1a(SL__FNV_INIT, v->arena + v->text_off[i], v->text_len[i]) &
                     v->tok_mask;
        v->n_tokens = (int32_t)i; /* lookups so far see tokens [0, i) */
        const int32_t dup = sl_vocab_find(v, v->arena + v->text_off[i], v->text_len[i]);
        if (dup >= 0)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "tokenizer.ggml.tokens: token %llu '%.*s' duplicates token %d",
                                (unsigned long long)i, (int)v->text_len[i],
                                v->arena + v->text_off[i], dup);
        while (v->tok_table[h]) h = (h + 1) & v->tok_mask;
        v->tok_table[h] = (uint32_t)i + 1;
    }
    v->n_tokens = (int32_t)n;

    const sl_gguf_value *sc = sl_gguf_find(g, "tokenizer.ggml.scores");
    if (sc) {
        if (sc->type != SL_GGUF_ARR || (sc->v.arr.elem != SL_GGUF_F32 && sc->v.arr.elem != SL_GGUF_I32))
            return sl_error_set(err, SL_ERR_TYPE, "tokenizer.ggml.scores: expected an array of "
                                "f32 or i32");
        if (sc->v.arr.n < n)
            return sl_error_set(err, SL_ERR_FORMAT, "tokenizer.ggml.scores: %llu entries for "
                                "%llu tokens", (unsigned long long)sc->v.arr.n,
                                (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            const char *p = (const char *)sc->v.arr.raw + 4 * i; /* possibly unaligned */
            if (sc->v.arr.elem == SL_GGUF_F32) {
                memcpy(&v->scores[i], p, 4);
            } else {
                int32_t x;
                memcpy(&x, p, 4);
                v->scores[i] = (float)x;
            }
        }
    }
    const sl_gguf_value *tt = sl_gguf_find(g, "tokenizer.ggml.token_type");
    if (tt) {
        if (tt->type != SL_GGUF_ARR || tt->v.arr.elem != SL_GGUF_I32)
            return sl_error_set(err, SL_ERR_TYPE, "tokenizer.ggml.token_type: expected an array "
                                "of i32");
        if (tt->v.arr.n < n)
            return sl_error_set(err, SL_ERR_FORMAT, "tokenizer.ggml.token_type: %llu entries "
                                "for %llu tokens", (unsigned long long)tt->v.arr.n,
                                (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, (const char *)tt->v.arr.raw + 4 * i, 4);
            v->types[i] = x >= SL_TOKEN_NORMAL && x <= SL_TOKEN_BYTE ? (uint8_t)x
                                                                     : SL_TOKEN_UNDEFINED;
        }
    }

    if (merges) {
        const uint64_t nm = merges->v.arr.n;
        v->merges = malloc((nm ? nm : 1) * sizeof *v->merges);
        const uint32_t ms = table_size(nm);
        v->merge_table = calloc(ms, sizeof *v->merge_table);
        v->merge_mask = ms - 1;
        if (!v->merges || !v->merge_table)
            return sl_error_set(err, SL_ERR_NOMEM, "tokenizer: out of memory for %llu merges",
                                (unsigned long long)nm);
        for (uint64_t i = 0; i < nm; i++) {
            const sl_gguf_str *s = &merges->v.arr.strs[i];
            /* split at the first space after byte 0, as llama.cpp (word.find(' ', 1)) */
            const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
            sl__merge *m = &v->merges[i];
            m->off = (uint32_t)at;
            m->left_len = sp ? (uint32_t)(sp - s->ptr) : 0;
            m->right_len = sp ? (uint32_t)(s->len - m->left_len - 1) : 0;
            if (sp) {
                memcpy(v->arena + at, s->ptr, m->left_len);
                memcpy(v->arena + at + m->left_len, sp + 1, m->right_len);
                at += m->left_len + m->right_len;
            }
            v->n_merges = (uint32_t)i;
            if (!sp || sl__vocab_merge_rank(v, s->ptr, m->left_len, sp + 1, m->right_len) >= 0)
                continue; /* malformed (can never match) or a repeated pair (first rank wins) */
            uint32_t h = (uint32_t)merge_hash(s->ptr, m->left_len, sp + 1, m->right_len) &
                         v->merge_mask;
            while (v->merge_table[h]) h = (h + 1) & v->merge_mask;
            v->merge_table[h] = (uint32_t)i + 1;
        }
        v->n_merges = (uint32_t)nm;
    }
    v->arena_len = at;
    return SL_OK;
}

/* gpt-oss's harmony tokens, as llama.cpp's load overrides them for every vocabulary: the
 * channel markers are always matched and rendered (USER_DEFINED), and when both <|return|> and
 * <|call|> end generation, <|end|> (which closes a message, not a turn) does not. */
static void harmony_overrides(sl_vocab *v)
{
    static const char *const k_rendered[] = {"<|channel|>", "<|message|>", "<|start|>",
                                             "<|constrain|>"};
    for (size_t i = 0; i < sizeof k_rendered / sizeof *k_rendered; i++) {
        const int32_t id = find_cstr(v, k_rendered[i]);
        if (id >= 0) v->types[id] = SL_TOKEN_USER_DEFINED;
    }
    /* <|end|> ends a message, not the generation, beside <|return|> and <|call|> (harmony) or
     * <|calls|> and <|flush|> (solar-open) */
    const int32_t ret = find_cstr(v, "<|return|>"), end = find_cstr(v, "<|end|>");
    const int32_t call = find_cstr(v, "<|call|>"), calls = find_cstr(v, "<|calls|>");
    const int32_t flush = find_cstr(v, "<|flush|>");
    const bool has_ret = ret >= 0 && v->eog[ret], has_flush = flush >= 0 && v->eog[flush];
    const bool has_call = (call >= 0 && v->eog[call]) || (calls >= 0 && v->eog[calls]);
    if (end >= 0 && v->eog[end] && has_call && (has_ret || has_flush)) {
        v->eog[end] = 0;
        v->types[end] = SL_TOKEN_USER_DEFINED;
    }
}

/* FIM tokens as llama.cpp 0c1e570 reads them (sluice.h sl_fim says the rule). */
static const char *const k_fim_keys[SL__VOCAB_FIM] = {
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
    "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"};
static const char *const k_fim_old[3] = {"tokenizer.ggml.prefix_token_id",
                                         "tokenizer.ggml.suffix_token_id",
                                         "tokenizer.ggml.middle_token_id"};
static const char *const k_fim_text[SL__VOCAB_FIM][10] = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin"
     "\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole"
     "\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end"
     "\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL},
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
    {"<|file_sep|>", NULL},
};

static sl_status load_fim(const sl_gguf *g, sl_vocab *v, sl_error *err)
{
    sl_status st;
    for (int k = 0; k < SL__VOCAB_FIM; k++)
        if ((st = get_special(g, k_fim_keys[k], -1, v->n_tokens, &v->fim[k], err))) return st;
    for (int k = 0; k < 3; k++) /* read after the new keys: they win, as in llama.cpp */
        if ((st = get_special(g, k_fim_old[k], v->fim[k], v->n_tokens, &v->fim[k], err)))
            return st;
    for (int k = 0; k < SL__VOCAB_FIM; k++) {
        if (v->fim[k] >= 0) continue;
        int32_t best = -1;
        for (int w = 0; k_fim_text[k][w]; w++) {
            const int32_t id = find_cstr(v, k_fim_text[k][w]);
            if (id >= 0 && (best < 0 || id < best)) best = id;
        }
        if (best >= 0) v->types[best] = SL_TOKEN_CONTROL; /* found by text: llama.cpp's rule */
        v->fim[k] = best;
    }
    for (int k = SL__VOCAB_FIM_EOG_FROM; k < SL__VOCAB_FIM; k++)
        if (v->fim[k] >= 0) v->eog[v->fim[k]] = 1;
    return SL_OK;
}

static sl_status load_specials(const sl_gguf *g, sl_vocab *v, sl_error *err)
{
    const bool spm = v->kind == SL_VOCAB_SPM;
    const int32_t n = v->n_tokens;
    sl_status st;
    if ((st = get_special(g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n, &v->bos, err)) ||
        (st = get_special(g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n, &v->eos, err)) ||
        (st = get_special(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n, &v->unk, err)) ||
        (st = get_special(g, "tokenizer.ggml.padding_token_id", -1, n, &v->pad, err)) ||
        (st = get_special(g, "tokenizer.ggml.eot_token_id", -1, n, &v->eot, err)) ||
        (st = get_special(g, "tokenizer.ggml.eom_token_id", -1, n, &v->eom, err)))
        return st;
    if ((st = get_bool_opt(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) ||
        (st = get_bool_opt(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)))
        return st;
    if (v->add_bos && v->bos < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "tokenizer.ggml.add_bos_token is true, but "
                            "tokenizer.ggml.bos_token_id is not set (or out of range)");
    if (v->add_eos && v->eos < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "tokenizer.ggml.add_eos_token is true, but "
                            "tokenizer.ggml.eos_token_id is not set (or out of range)");

    /* End-of-turn tokens found by text, forced to CONTROL as llama.cpp does. */
    if (v->eot < 0)
        for (size_t i = 0; i < sizeof k_eot_texts / sizeof *k_eot_texts && v->eot < 0; i++)
            v->eot = find_cstr(v, k_eot_texts[i]);
    if (v->eom < 0) v->eom = find_cstr(v, "<|eom_id|>");
    for (size_t i = 0; i < sizeof k_eog_texts / sizeof *k_eog_texts; i++) {
        const int32_t id = find_cstr(v, k_eog_texts[i]);
        if (id >= 0) {
            v->eog[id] = 1;
            v->types[id] = SL_TOKEN_CONTROL;
        }
    }
    if (v->eot >= 0) v->types[v->eot] = SL_TOKEN_CONTROL;
    if (v->eom >= 0) v->types[v->eom] = SL_TOKEN_CONTROL;
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (v->eot >= 0) v->eog[v->eot] = 1;
    if (v->eom >= 0) v->eog[v->eom] = 1;
    if ((st = load_fim(g, v, err))) return st;
    harmony_overrides(v);

    /* Byte tokens: SPM <0xNN> (else the byte itself as a piece), BPE the GPT-2 symbol. */
    for (int b = 0; b < 256; b++) {
        char s[8];
        if (spm) {
            snprintf(s, sizeof s, "<0x%02X>", b);
            v->byte_token[b] = find_cstr(v, s);
            if (v->byte_token[b] < 0) {
                const char c = (char)b;
                v->byte_token[b] = sl_vocab_find(v, &c, 1);
            }
        } else {
            v->byte_token[b] = sl_vocab_find(v, s, sl__utf8_encode(sl__gpt2_byte_to_cp((uint8_t)b), s));
        }
    }

    int32_t count = 0;
    for (int32_t i = 0; i < n; i++) {
        const uint8_t t = v->types[i];
        count += t == SL_TOKEN_CONTROL || t == SL_TOKEN_USER_DEFINED || t == SL_TOKEN_UNKNOWN;
    }
    len_id *tmp = malloc(((size_t)count + 1) * sizeof *tmp);
    v->special = malloc(((size_t)count + 1) * sizeof *v->special);
    if (!tmp || !v->special) {
        free(tmp);
        return sl_error_set(err, SL_ERR_NOMEM, "tokenizer: out of memory for %d special tokens",
                            count);
    }
    count = 0;
    for (int32_t i = 0; i < n; i++) {
        const uint8_t t = v->types[i];
        if (t == SL_TOKEN_CONTROL || t == SL_TOKEN_USER_DEFINED || t == SL_TOKEN_UNKNOWN)
            tmp[count++] = (len_id){v->text_len[i], i};
    }
    qsort(tmp, (size_t)count, sizeof *tmp, cmp_len_id);
    for (int32_t i = 0; i < count; i++) v->special[i] = tmp[i].id;
    v->n_special = count;
    free(tmp);
    return SL_OK;
}

sl_status sl_vocab_load(const sl_gguf *g, sl_vocab **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_vocab_load: out is NULL");
    *out = NULL;
    if (!g) return sl_error_set(err, SL_ERR_INVALID, "sl_vocab_load: gguf handle is NULL");
    const char *model;
    sl_status st = sl_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st != SL_OK) return st;
    sl_vocab *v = calloc(1, sizeof *v);
    if (!v) return sl_error_set(err, SL_ERR_NOMEM, "tokenizer: out of memory");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = -1;
    if (!strcmp(model, "llama")) {
        v->kind = SL_VOCAB_SPM;
        v->pre.kind = SL_PRETOK_NONE;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (!strcmp(model, "gpt2")) {
        v->kind = SL_VOCAB_BPE;
        const char *pre = "";
        const sl_gguf_value *pv = sl_gguf_find(g, "tokenizer.ggml.pre");
        if (pv && (st = sl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) goto fail;
        /* absent or empty: llama.cpp warns and uses "default" */
        const sl__pretok_def *p = sl__pretok_find(*pre ? pre : "default");
        if (!p) {
            st = sl_error_set(err, SL_ERR_UNSUPPORTED,
                              "tokenizer.ggml.pre '%s': unsupported pre-tokenizer (Sluice runs "
                              "llama.cpp's BPE pre-tokenizers but gemma4, sarvam-moe, "
                              "whitespace, superbpe, tiny_aya, cohere2moe, afmoe, chameleon and "
                              "the embedding models' ones)", pre);
            goto fail;
        }
        if ((st = sl__pretok_init(&v->pre, p, err))) goto fail;
        v->ignore_merges = p->flags & SL__PRE_IGNORE_MERGES;
        v->clean_spaces = !(p->flags & SL__PRE_KEEP_SPACES);
        v->add_bos = p->flags & SL__PRE_ADD_BOS;
    } else {
        st = sl_error_set(err, SL_ERR_UNSUPPORTED,
                          "tokenizer.ggml.model '%s': unsupported tokenizer (supported: 'llama' "
                          "SentencePiece, 'gpt2' byte-level BPE)", model);
        goto fail;
    }
    if ((st = get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)))
        goto fail;
    if (v->kind == SL_VOCAB_BPE) v->add_space_prefix = false; /* only SPM has the rule */

    const sl_gguf_value *toks, *merges = NULL;
    if ((st = sl_gguf_get_arr(g, "tokenizer.ggml.tokens", SL_GGUF_STR, &toks, err))) goto fail;
    if (toks->v.arr.n == 0 || toks->v.arr.n > INT32_MAX / 2) {
        st = sl_error_set(err, SL_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens (need 1 .. %d)",
                          (unsigned long long)toks->v.arr.n, INT32_MAX / 2);
        goto fail;
    }
    if (v->kind == SL_VOCAB_BPE &&
        (st = sl_gguf_get_arr(g, "tokenizer.ggml.merges", SL_GGUF_STR, &merges, err)))
        goto fail;
    if ((st = load_tokens(g, v, toks, merges, err))) goto fail;
    if ((st = load_specials(g, v, err))) goto fail;
    if ((st = sl__vocab_validate(v, err))) goto fail;
    *out = v;
    return SL_OK;
fail:
    sl_vocab_free(v);
    return st;
}

void sl_vocab_free(sl_vocab *v)
{
    if (!v) return;
    free(v->arena);
    free(v->text_off);
    free(v->text_len);
    free(v->scores);
    free(v->types);
    free(v->eog);
    free(v->tok_table);
    free(v->merges);
    free(v->merge_table);
    free(v->special);
    sl__pretok_free(&v->pre);
    free(v);
}

sl_status sl__vocab_validate(const sl_vocab *v, sl_error *err)
{
    if (v->n_tokens <= 0) return sl_error_set(err, SL_ERR_FORMAT, "vocab: %d tokens", v->n_tokens);
    const bool table = v->pre.kind == SL_PRETOK_REGEX;
    bool stages_ok = table ? v->pre.n_re >= 1 && v->pre.n_re <= SL__PRETOK_MAX_RE
                           : v->pre.n_re == 0;
    for (size_t i = 0; stages_ok && i < v->pre.n_re; i++) stages_ok = v->pre.re[i] != NULL;
    if (!stages_ok || (v->kind == SL_VOCAB_SPM) != (v->pre.kind == SL_PRETOK_NONE))
        return sl_error_set(err, SL_ERR_FORMAT, "vocab: pre-tokenizer %d with %zu regex stages "
                            "for a vocabulary of kind %d", (int)v->pre.kind, v->pre.n_re,
                            (int)v->kind);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->text_len[i] == 0 || (size_t)v->text_off[i] + v->text_len[i] > v->arena_len)
            return sl_error_set(err, SL_ERR_FORMAT, "vocab: token %d text outside the arena", i);
        if (sl_vocab_find(v, sl__vocab_text(v, i), v->text_len[i]) != i)
            return sl_error_set(err, SL_ERR_FORMAT, "vocab: lookup of token %d fails", i);
    }
    for (int32_t i = 1; i < v->n_special; i++)
        if (v->text_len[v->special[i]] > v->text_len[v->special[i - 1]])
            return sl_error_set(err, SL_ERR_FORMAT, "vocab: special tokens out of order at %d", i);
    for (int b = 0; b < 256; b++)
        if (v->byte_token[b] >= v->n_tokens)
            return sl_error_set(err, SL_ERR_FORMAT, "vocab: byte token of 0x%02X out of range", b);
    return SL_OK;
}

/* ---- special-token partition ----------------------------------------------------------- */

typedef struct fragment {
    int32_t token; /* -1: raw text [off, off + len) */
    size_t off, len;
} fragment;

typedef struct frags {
    fragment *v;
    size_t n, cap;
} frags;

static bool frags_push(frags *f, fragment x)
{
    if (f->n == f->cap) {
        const size_t cap = f->cap ? 2 * f->cap : 16;
        fragment *p = realloc(f->v, cap * sizeof *p);
        if (!p) return false;
        f->v = p;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return true;
}

/* llama.cpp's tokenizer_st_partition: for each special token, longest first, split every raw
 * fragment at each occurrence of its text. */
static bool partition(const sl_vocab *v, const char *text, size_t len, bool parse_special,
                      frags *cur)
{
    if (len == 0) return true;
    if (!frags_push(cur, (fragment){-1, 0, len})) return false;
    for (int32_t k = 0; k < v->n_special; k++) {
        const int32_t id = v->special[k];
        const uint8_t t = v->types[id];
        if (!parse_special && (t == SL_TOKEN_CONTROL || t == SL_TOKEN_UNKNOWN)) continue;
        const char *st = sl__vocab_text(v, id);
        const size_t sn = v->text_len[id];
        frags next = {0};
        bool ok = true;
        for (size_t i = 0; ok && i < cur->n; i++) {
            fragment f = cur->v[i];
            if (f.token >= 0 || f.len < sn) {
                ok = frags_push(&next, f);
                continue;
            }
            size_t at = f.off;
            const size_t end = f.off + f.len;
            while (ok && end - at >= sn) {
                const char *m = memmem(text + at, end - at, st, sn);
                if (!m) break;
                const size_t mo = (size_t)(m - text);
                if (mo > at) ok = frags_push(&next, (fragment){-1, at, mo - at});
                ok = ok && frags_push(&next, (fragment){id, 0, 0});
                at = mo + sn;
            }
            if (ok && at < end) ok = frags_push(&next, (fragment){-1, at, end - at});
        }
        free(cur->v);
        *cur = next;
        if (!ok) return false;
    }
    return true;
}

/* ---- tokenize --------------------------------------------------------------------------- */

static sl_status spm_fragment(const sl_vocab *v, const char *text, size_t len, bool prefix,
                              sl__tokbuf *out, sl_error *err)
{
    /* ' ' -> U+2581 (3 bytes), with the optional leading space */
    size_t spaces = prefix;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    const size_t n = len + prefix + 2 * spaces;
    char *buf = malloc(n ? n : 1);
    if (!buf) return sl_error_set(err, SL_ERR_NOMEM, "tokenize: out of memory (%zu bytes)", n);
    size_t at = 0;
    if (prefix) {
        memcpy(buf, k_spm_space, 3);
        at = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + at, k_spm_space, 3);
            at += 3;
        } else {
            buf[at++] = text[i];
        }
    }
    const sl_status st = sl__spm_tokenize(v, buf, at, out, err);
    free(buf);
    return st;
}

sl_status sl_vocab_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *tokens, size_t cap, size_t *n_out,
                            sl_error *err)
{
    if (!v || !n_out || (!text && len) || (!tokens && cap))
        return sl_error_set(err, SL_ERR_INVALID, "sl_vocab_tokenize: NULL %s",
                            !v ? "vocab" : !n_out ? "n_out" : (!text && len) ? "text" : "tokens");
    *n_out = 0;
    frags fr = {0};
    sl__tokbuf out = {0};
    sl_status st = SL_OK;
    if (!partition(v, text, len, parse_special, &fr)) goto nomem;
    if (add_special && v->add_bos && !sl__tokbuf_push(&out, v->bos)) goto nomem;
    bool prev_special = true; /* SPM: prefix a space at the start and after a special token */
    for (size_t i = 0; i < fr.n && st == SL_OK; i++) {
        const fragment *f = &fr.v[i];
        if (f->token >= 0) {
            if (!sl__tokbuf_push(&out, f->token)) goto nomem;
            prev_special = true;
        } else if (v->kind == SL_VOCAB_SPM) {
            st = spm_fragment(v, text + f->off, f->len, v->add_space_prefix && prev_special, &out,
                              err);
            prev_special = false;
        } else {
            st = sl__bpe_tokenize(v, text + f->off, f->len, &out, err);
        }
    }
    if (st != SL_OK) goto done;
    if (add_special && v->add_eos && !sl__tokbuf_push(&out, v->eos)) goto nomem;
    *n_out = out.n;
    if (out.n && cap) memcpy(tokens, out.ids, (out.n < cap ? out.n : cap) * sizeof *tokens);
    if (out.n > cap)
        st = sl_error_set(err, SL_ERR_RANGE, "tokenize: %zu tokens do not fit in %zu", out.n,
                          cap);
    goto done;
nomem:
    st = sl_error_set(err, SL_ERR_NOMEM, "tokenize: out of memory on %zu bytes of text", len);
done:
    free(fr.v);
    free(out.ids);
    return st;
}

/* ---- pieces ----------------------------------------------------------------------------- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Writes the piece of id to dst (room for max(text_len, 1) bytes); returns its length. */
static size_t piece_into(const sl_vocab *v, int32_t id, bool special, char *dst)
{
    const uint8_t t = v->types[id];
    const char *s = sl__vocab_text(v, id);
    const size_t n = v->text_len[id];
    if (t == SL_TOKEN_CONTROL || t == SL_TOKEN_UNKNOWN || t == SL_TOKEN_USER_DEFINED) {
        if (!special && t != SL_TOKEN_USER_DEFINED) return 0;
        memcpy(dst, s, n);
        return n;
    }
    if (t == SL_TOKEN_BYTE) { /* "<0xNN>" */
        if (n < 6 || hexval(s[3]) < 0 || hexval(s[4]) < 0) return 0;
        dst[0] = (char)(hexval(s[3]) * 16 + hexval(s[4]));
        return 1;
    }
    if (t != SL_TOKEN_NORMAL) return 0; /* UNUSED, UNDEFINED: suppressed like control tokens */
    size_t at = 0;
    if (v->kind == SL_VOCAB_SPM) {
        for (size_t i = 0; i < n;) {
            if (n - i >= 3 && memcmp(s + i, k_spm_space, 3) == 0) {
                dst[at++] = ' ';
                i += 3;
            } else {
                dst[at++] = s[i++];
            }
        }
        return at;
    }
    for (size_t i = 0; i < n;) {
        const size_t start = i;
        const uint32_t cp = sl__utf8_decode(s, n, &i);
        const int b = sl__gpt2_cp_to_byte(cp);
        if (b >= 0) {
            dst[at++] = (char)b;
        } else { /* not in the byte alphabet: kept as written (llama.cpp inserts a marker) */
            memcpy(dst + at, s + start, i - start);
            at += i - start;
        }
    }
    return at;
}

sl_status sl_vocab_token_to_piece(const sl_vocab *v, int32_t token, bool render_special,
                                  char *buf, size_t cap, size_t *n_out, sl_error *err)
{
    if (!v || !n_out || (!buf && cap))
        return sl_error_set(err, SL_ERR_INVALID, "sl_vocab_token_to_piece: NULL %s",
                            !v ? "vocab" : !n_out ? "n_out" : "buf");
    *n_out = 0;
    if (token < 0 || token >= v->n_tokens)
        return sl_error_set(err, SL_ERR_RANGE, "token_to_piece: token %d outside [0, %d)", token,
                            v->n_tokens);
    char small[256];
    const size_t need = v->text_len[token];
    char *tmp = need <= sizeof small ? small : malloc(need);
    if (!tmp) return sl_error_set(err, SL_ERR_NOMEM, "token_to_piece: out of memory");
    const size_t n = piece_into(v, token, render_special, tmp);
    *n_out = n;
    sl_status st = SL_OK;
    if (n < cap) {
        memcpy(buf, tmp, n);
        buf[n] = '\0';
    } else if (n > cap) {
        st = sl_error_set(err, SL_ERR_RANGE, "token_to_piece: token %d's piece has %zu bytes, "
                          "buffer %zu", token, n, cap);
    } else if (n) {
        memcpy(buf, tmp, n); /* exactly fits: no room for the NUL */
    }
    if (tmp != small) free(tmp);
    return st;
}

/* llama.cpp's clean_spaces passes over the detokenized text; returns the new length. */
static size_t clean_spaces(char *t, size_t total)
{
    size_t n1 = total, k = total ? 1 : 0;
    for (size_t i = 1; i < n1; i++) { /* " ?", " !", " .", " ," */
        const char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
        t[k++] = x;
    }
    size_t n2 = k;
    k = n2 ? 1 : 0;
    for (size_t i = 1; i < n2; i++) { /* " ' " -> "'" */
        const char x = t[i];
        if (x == '\'' && i + 1 < n2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
            k--;
            t[++i] = '\0';
        }
        t[k++] = x;
    }
    size_t n3 = k;
    k = n3 ? 1 : 0;
    for (size_t i = 1; i < n3; i++) { /* " 's" " 'm" " 're" " 've" lose their space */
        const char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            const char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') k--;
            else if (i + 2 < n3 && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
                k--;
        }
        t[k++] = x;
    }
    return k;
}

sl_status sl_vocab_detokenize(const sl_vocab *v, const int32_t *tokens, size_t n, char *buf,
                              size_t cap, size_t *n_out, sl_error *err)
{
    if (!v || !n_out || (!tokens && n) || (!buf && cap))
        return sl_error_set(err, SL_ERR_INVALID, "sl_vocab_detokenize: NULL %s",
                            !v ? "vocab" : !n_out ? "n_out" : (!tokens && n) ? "tokens" : "buf");
    *n_out = 0;
    size_t first = 0, end = n;
    if (v->add_bos && end > first && tokens[first] == v->bos) first++;
    if (v->add_eos && end > first && tokens[end - 1] == v->eos) end--;
    size_t bytes = 0;
    for (size_t i = first; i < end; i++) {
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens)
            return sl_error_set(err, SL_ERR_RANGE, "detokenize: tokens[%zu] = %d outside [0, %d)",
                                i, tokens[i], v->n_tokens);
        bytes += v->text_len[tokens[i]];
    }
    char *t = malloc(bytes + 1);
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "detokenize: out of memory (%zu bytes)", bytes);
    size_t total = 0;
    for (size_t i = first; i < end; i++) {
        char *p = t + total;
        size_t k = piece_into(v, tokens[i], false, p);
        if (i == first && v->add_space_prefix && k && p[0] == ' ') { /* the SPM prefix space */
            memmove(p, p + 1, k - 1);
            k--;
        }
        total += k;
    }
    if (v->clean_spaces) total = clean_spaces(t, total);
    *n_out = total;
    sl_status st = SL_OK;
    if (total <= cap) {
        if (total) memcpy(buf, t, total);
        if (total < cap) buf[total] = '\0';
    } else {
        st = sl_error_set(err, SL_ERR_RANGE, "detokenize: %zu bytes of text, buffer %zu", total,
                          cap);
    }
    free(t);
    return st;
}
