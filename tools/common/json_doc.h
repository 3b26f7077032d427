/* A strict JSON parser (RFC 8259) for untrusted input, such as the bodies `sluice serve` reads.
 * (json.h is the writer.)
 *
 * Contract: sl_jdoc_parse accepts exactly RFC 8259 JSON text — no comments, trailing commas,
 * single quotes, NaN, leading zeros or bare control characters; strings must be valid UTF-8 and
 * \u escapes must pair their surrogates — with one value surrounded by optional whitespace and
 * nesting at most `max_depth` deep. On failure it returns SL_ERR_FORMAT (SL_ERR_RANGE past the
 * depth, SL_ERR_NOMEM) with a message naming the byte offset. Duplicate keys are kept and
 * lookups return the last one, as most JSON libraries do. The document owns every string it
 * hands out; they live until sl_jdoc_free. Not thread-safe for concurrent parse into the same
 * document; reading a finished document from several threads is safe.
 *
 * Layout: values are nodes of one array, addressed by index (sl_jref); node 0 is the root.
 * A container's children follow the chain first -> next -> ... -> SL_JNONE, in document
 * order. Decoded strings (keys and values) are stored NUL-terminated in one byte buffer; a
 * string may itself contain NUL bytes (from \u0000), so use the length. */
#ifndef SL_CLI_JSON_DOC_H
#define SL_CLI_JSON_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

typedef enum sl_jkind {
    SL_JNULL,
    SL_JBOOL,
    SL_JNUM,
    SL_JSTR,
    SL_JARR,
    SL_JOBJ,
} sl_jkind;

typedef uint32_t sl_jref;
#define SL_JNONE UINT32_MAX /* "no node": absent key, end of a child chain */

typedef struct sl_jdoc sl_jdoc;

/* Parses len bytes of text (need not be NUL-terminated). max_depth: containers nested deeper
 * are refused (0: 64). */
sl_status sl_jdoc_parse(const char *text, size_t len, int max_depth, sl_jdoc **out,
                        sl_error *err);
void sl_jdoc_free(sl_jdoc *d);
/* Checks the layout invariants above (tests); SL_ERR_FORMAT naming the first broken one. */
sl_status sl_jdoc_validate(const sl_jdoc *d, sl_error *err);

sl_jkind sl_jdoc_kind(const sl_jdoc *d, sl_jref v);
/* "null", "boolean", "number", "string", "array", "object": for messages. */
const char *sl_jdoc_kind_name(sl_jkind k);
/* Object member by key (last duplicate wins); SL_JNONE if v is no object or lacks the key. */
sl_jref sl_jdoc_get(const sl_jdoc *d, sl_jref v, const char *key);
/* Children of an array or object in order (first is SL_JNONE when empty or a scalar). */
sl_jref sl_jdoc_first(const sl_jdoc *d, sl_jref v);
sl_jref sl_jdoc_next(const sl_jdoc *d, sl_jref v);
size_t sl_jdoc_count(const sl_jdoc *d, sl_jref v);
/* The key of an object member (child of an object), else NULL. */
const char *sl_jdoc_key(const sl_jdoc *d, sl_jref v);

/* Value accessors: the decoded string (len may be NULL), NULL for a non-string; the boolean;
 * the number as a double (finite; values beyond double range are refused by the parser). */
const char *sl_jdoc_str(const sl_jdoc *d, sl_jref v, size_t *len);
bool sl_jdoc_bool(const sl_jdoc *d, sl_jref v);
double sl_jdoc_num(const sl_jdoc *d, sl_jref v);
/* Whether a number is an integer written without fraction or exponent, and its exact value in
 * [lo, hi]: false for other numbers and for integers out of the range. */
bool sl_jdoc_int(const sl_jdoc *d, sl_jref v, int64_t lo, int64_t hi, int64_t *out);
bool sl_jdoc_u64(const sl_jdoc *d, sl_jref v, uint64_t *out);
/* Writes v as compact JSON text (no spaces; numbers: integers as written, others the shortest
 * form that reads back the same; strings escaped as json.h's). */
void sl_jdoc_write(FILE *f, const sl_jdoc *d, sl_jref v);

#endif
