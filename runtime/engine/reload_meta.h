/* runtime/engine/reload_meta.h: private to the live reload (reload.c). */
#ifndef SL_RELOAD_META_H
#define SL_RELOAD_META_H

#include <stdbool.h>
#include <stddef.h>

#include "gguf/gguf.h"
#include "runtime/engine/model.h"

/* Whether the rewritten first shard g keeps every metadata value the model was opened with
 * (descriptive general.* and quantize.* keys aside); why: the first key that differs, with
 * both values. */
bool sl__reload_same_metadata(const sl_model *m, const sl_gguf *g, char *why, size_t n);
/* Whether g has a tensor the model's files did not (a fresh open might bind it); why: its name. */
bool sl__reload_new_tensor(const sl_model *m, const sl_gguf *g, char *why, size_t n);

#endif
