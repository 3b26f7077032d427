/* GBNF grammars, as llama.cpp parses and matches them (src/llama-grammar.cpp; the language in
 * its grammars/README.md): rules `name ::= alternatives`, sequences, groups, `*` `+` `?`
 * `{m}` `{m,}` `{m,n}`, "literals", [character classes] with ranges and ^ negation, `.`,
 * escapes \xHH \uHHHH \UHHHHHHHH \t \n \r \\ \" \[ \] \-, # comments; `root` is the start.
 * Not supported: llama.cpp's token references <[id]> <token> !<token> (a parse error).
 *
 * Parsing (grammar_parse.c) rewrites repetitions into helper rules exactly as llama.cpp does
 * and refuses, with "line L, column C" where it applies: malformed syntax, an undefined rule,
 * no root rule, left recursion, and grammars past the size limits below.
 *
 * Matching (grammar_match.c) keeps llama.cpp's pushdown stacks over code points: a state is
 * the set of stacks whose tops are terminals (an empty stack: the grammar may end here) plus
 * the partial UTF-8 sequence a token piece left unfinished. Candidate filtering is llama.cpp's
 * llama_grammar_reject_candidates: all candidates advance one code point at a time together.
 *
 * Contract: a parsed sl_grammar is immutable (share it between threads); an sl_gmatch is used
 * by one thread at a time. Functions return sl_status with err set; nothing aborts. */
#ifndef SL_RUNTIME_GRAMMAR_H
#define SL_RUNTIME_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* llama.cpp's llama_gretype. A rule is a run of elements ending in END; ALT separates its
 * alternatives; a character set is CHAR or CHAR_NOT followed by CHAR_ALT / CHAR_RNG_UPPER. */
typedef enum sl_gtype {
    SL_G_END = 0,
    SL_G_ALT,
    SL_G_RULE_REF,      /* value: rule id */
    SL_G_CHAR,          /* value: code point */
    SL_G_CHAR_NOT,
    SL_G_CHAR_RNG_UPPER,
    SL_G_CHAR_ALT,
    SL_G_CHAR_ANY,
} sl_gtype;

typedef struct sl_gelem {
    uint32_t type;      /* sl_gtype */
    uint32_t value;
} sl_gelem;

/* Size limits (inputs are untrusted): llama.cpp's repetition threshold, plus caps it lacks. */
enum {
    SL_GRAMMAR_MAX_REPETITION = 2000,       /* llama.cpp's MAX_REPETITION_THRESHOLD */
    SL_GRAMMAR_MAX_NESTING = 256,           /* ( ... ) groups inside each other */
    SL_GRAMMAR_MAX_ELEMS = 1 << 22,         /* elements after rewriting repetitions */
    SL_GRAMMAR_MAX_STACKS = 1 << 10,        /* stacks one step may expand to */
    SL_GRAMMAR_MAX_WORK = 1 << 16,          /* stack expansions in one call (a JSON mask over
                                               262k tokens takes < 300) */
};

/* Parsed rules. Invariants: rules[root] exists; every RULE_REF names a rule; no rule is left
 * recursive; elems[start[r] ..] ends in END for each rule r. */
typedef struct sl_grammar {
    sl_gelem *elems;
    uint32_t *start;    /* [n_rules] first element of each rule */
    uint32_t n_rules, n_elems, root;
} sl_grammar;

/* Parses len bytes of GBNF (no NUL inside). Errors: SL_ERR_FORMAT "line L, column C: ...",
 * SL_ERR_RANGE past a size limit, SL_ERR_NOMEM. */
sl_status sl_grammar_parse(const char *text, size_t len, sl_grammar **out, sl_error *err);
void sl_grammar_free(sl_grammar *g);
/* Checks the invariants above (tests, fuzzing); SL_ERR_FORMAT naming the first broken one. */
sl_status sl_grammar_validate(const sl_grammar *g, sl_error *err);

/* A UTF-8 sequence cut by the end of a piece: the bits so far, how many continuation bytes
 * are missing (0: none; -1: invalid bytes, which nothing matches) and the sequence's length. */
typedef struct sl_gpartial {
    uint32_t value;
    int n_remain;
    int len;
} sl_gpartial;

/* Decodes bytes s[0, n) continuing from *partial (llama.cpp's decode_utf8, but strict: lead
 * bytes C0, C1 and F5-FF, overlong forms, surrogates and code points past U+10FFFF are invalid,
 * so that constrained text is always valid UTF-8): writes the whole code points to cp (room
 * for n + 1) followed by a 0, updates *partial. Returns the count (0 and cp[0] = 0 when the
 * bytes are invalid: *partial then says n_remain -1). */
size_t sl_grammar_decode(const char *s, size_t n, sl_gpartial *partial, uint32_t *cp);

/* A candidate for filtering: its code points (0-terminated) and the partial sequence they end
 * in. index: the caller's (a token id). */
typedef struct sl_gcand {
    uint32_t index;
    const uint32_t *cp;
    sl_gpartial partial;
} sl_gcand;

typedef struct sl_gmatch sl_gmatch;

/* The start state of g (g must outlive the matcher). */
sl_status sl_gmatch_create(const sl_grammar *g, sl_gmatch **out, sl_error *err);
void sl_gmatch_free(sl_gmatch *m);
/* The partial UTF-8 state after the text accepted so far. */
sl_gpartial sl_gmatch_partial(const sl_gmatch *m);
/* Accepts bytes s[0, n) (a token piece). SL_ERR_INVALID when the grammar cannot continue with
 * them; the state is then unchanged. */
sl_status sl_gmatch_accept(sl_gmatch *m, const char *s, size_t n, sl_error *err);
/* Whether the text so far is a whole sentence of the grammar (end of generation allowed). */
bool sl_gmatch_can_end(const sl_gmatch *m);
/* Whether it is whole and nothing can follow (every stack is empty). */
bool sl_gmatch_done(const sl_gmatch *m);
/* Marks cand[i].index rejected (rejected[index] = true) for each candidate that cannot
 * continue the text from this state; the others are left alone. */
sl_status sl_gmatch_reject(sl_gmatch *m, const sl_gcand *cand, size_t n, bool *rejected,
                           sl_error *err);

#endif
