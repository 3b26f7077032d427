/* Private bridge between the engine (sl_model, owned by the engine) and the text functions of
 * sluice.h (runtime/text/text_api.c): the engine loads the vocabulary with sl_vocab_load when it
 * opens a model and hands it out here.
 *
 * Contract: returns the model's vocabulary, valid until sl_model_close(m); NULL for a NULL m
 * or a model whose file has no tokenizer (no tokenizer.ggml.model: it still evaluates token
 * ids, and the text functions say it has no tokenizer); a tokenizer that is present but
 * cannot be loaded fails sl_model_open. Thread-safe (const). */
#ifndef SL_RUNTIME_MODEL_VOCAB_H
#define SL_RUNTIME_MODEL_VOCAB_H

#include "runtime/sluice.h"
#include "runtime/text/tokenizer.h"

/* Implemented by the engine (runtime/engine/model.c). */
const sl_vocab *sl__model_vocab(const sl_model *m);

#endif
