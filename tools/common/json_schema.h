/* JSON Schema -> GBNF, in the language of llama.cpp's json-schema-to-grammar.cpp: the same
 * primitive rules (value, object, array, string, number, integer, boolean, null, char, space
 * and the date / time / date-time / uuid formats), the same rule names (root, ITEM-kv,
 * ITEM-rest, refNAME, ...) and object layout (properties in order, the required ones first,
 * the optional ones as nested optional groups), written one rule a line sorted by name.
 *
 * Honoured: type (a string or a list), properties, required, additionalProperties (a schema,
 * true or false; extra keys are strings other than the properties' names, nor prefixes of
 * them, as llama.cpp's _not_strings), items, prefixItems (and the older items array), minItems,
 * maxItems, minLength, maxLength, format (date, time, date-time, uuid; others are annotations),
 * enum, const, anyOf, oneOf, allOf of objects, $ref to #/definitions/... and
 * #/$defs/... (recursion included), the true schema. Annotations (title, description, default,
 * examples, $schema, $id, $comment, definitions, $defs, readOnly, ...) are ignored.
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum on "type": "integer" (|bound| <= 1e15;
 * llama.cpp's build_min_max_int: gbnf_build.h).
 * Refused, naming the keyword and where it is: pattern, the bounds of "number" (and of a type
 * list), multipleOf, not, if / then / else,
 * patternProperties, propertyNames, min/maxProperties, uniqueItems, contains, other $refs, the
 * false schema.
 *
 * Contract: reads d (the schema at v) and writes a NUL-terminated grammar to *out (malloc'd).
 * Errors: SL_ERR_FORMAT / SL_ERR_UNSUPPORTED with a message "at /path: why"; SL_ERR_NOMEM. */
#ifndef SL_CLI_JSON_SCHEMA_H
#define SL_CLI_JSON_SCHEMA_H

#include "base/status.h"
#include "tools/common/json_doc.h"

sl_status sl_json_schema_to_gbnf(const sl_jdoc *d, sl_jref v, char **out, sl_error *err);

#endif
