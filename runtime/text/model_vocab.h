/* Private bridge between the engine (sl_model, owned by the engine) and the text functions of
 * sluice.h (runtime/text/text_api.c): the engine loads the vocabulary with sl_vocab_load when it
 * opens a model and hands it out here.
 *
 * Contract: returns the model's vocabulary, valid until sl_model_close(m); never NULL for an
 * open model (sl_model_open fails if the tokenizer cannot be loaded). Thread-safe (const). */
#ifndef SL_RUNTIME_MODEL_VOCAB_H
#define SL_RUNTIME_MODEL_VOCAB_H

#include "runtime/sluice.h"
#include "runtime/text/tokenizer.h"

/* Implemented by the engine (runtime/model.c or wherever sl_model lives). */
const sl_vocab *sl__model_vocab(const sl_model *m);

#endif
