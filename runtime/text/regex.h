/* regex: the regular expressions of the BPE pre-tokenizers (private to runtime/text), matched
 * over code points by a backtracking search with a visited-state memo (RE2's "BitState"): the
 * first time the search reaches instruction pc at position p it is by the most preferred path,
 * so a second arrival can only fail again. One search thus costs at most O(program x fragment)
 * steps, whatever the text, and gives the leftmost-first match Perl, Oniguruma (Hugging Face
 * tokenizers) and tiktoken give. The memo holds a bit only for the instructions two paths can
 * reach (join points; regex.c), O(joins x fragment) bits in all.
 *
 * Syntax: the subset tokenizer.json pre-tokenizers use, with Perl's meaning.
 *   - literals (UTF-8); \r \n \t \f \v; a backslash before punctuation; . (any but \n)
 *   - classes [...] [^...]: ranges, escapes, \p{..}, \s, and one intersection [A&&[^B]]
 *   - \s \S (White_Space); \p{X} \P{X} for X in L Lu Ll Lt Lm Lo M N P S Han
 *   - groups (...) (?:...) (?i:...) (case-insensitive: ASCII, U+017F to s, U+212A to k; for
 *     literals and class members, a negated class refusing every case of what it lists; no
 *     \p{} inside a class there, since Oniguruma folds those differently inside and out),
 *     lookahead (?=...) (?!...) whose body has no unbounded repeat and no lookahead
 *   - quantifiers ? * + {n} {n,} {n,m} (greedy; * + {n,} not of what can match empty, where
 *     Perl's "leave the loop after an empty pass" cannot be memoized); alternation |; ^ $
 * A search sees only its fragment [ini, end): ^, $ and lookahead take the fragment's ends as
 * the text's, as Hugging Face's Split sees each piece of the split before it. Empty matches
 * are not reported (no pre-tokenizer we run has one that could match empty). */
#ifndef SL_RUNTIME_REGEX_H
#define SL_RUNTIME_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct sl__regex sl__regex;

/* Compiles pattern; errors (SL_ERR_INVALID) name the pattern and the offending offset. */
sl_status sl__regex_compile(const char *pattern, sl__regex **out, sl_error *err);
void sl__regex_free(sl__regex *re); /* NULL is allowed */

/* Work space of sl__regex_find, reusable across calls and patterns. */
typedef struct sl__regex_scratch {
    uint64_t *seen;           /* visited (join point, position) bits */
    size_t seen_words;
    size_t *stack;            /* (pc, position) pairs still to try */
    size_t stack_cap;
} sl__regex_scratch;
void sl__regex_scratch_free(sl__regex_scratch *s);

/* The leftmost match at or after `from` inside the fragment [ini, end) of cps, whose classes
 * flags[] holds (sl__unicode_flags of each code point). Returns 1 and sets [*ms, *me), 0 if
 * there is none, -1 if out of memory. A call with from == ini starts a fragment; the calls
 * after it, for the same fragment and pattern, must pass the same scratch and a `from` at or
 * after the previous match's end: the memo carries over. */
int sl__regex_find(const sl__regex *re, const uint32_t *cps, const uint16_t *flags, size_t ini,
                   size_t end, size_t from, size_t *ms, size_t *me, sl__regex_scratch *s);

#endif
