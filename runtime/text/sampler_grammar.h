/* A GBNF grammar bound to a vocabulary for sampling (sluice.h sl_sampler_set_grammar), as
 * llama.cpp's llama_grammar_apply_impl / llama_grammar_accept_impl: a token is allowed when
 * its piece continues the text (pieces may end inside a UTF-8 sequence); an end-of-generation
 * token only when the grammar may end here; a token with an empty piece (control tokens,
 * which render as "" in the generated text) never. Pieces are read without special rendering,
 * so the grammar sees exactly the text a front end emits.
 *
 * Contract: the vocabulary outlives the object; one thread at a time. The vocabulary's
 * decoded pieces are built on the first full mask (most steps only check the sampled token). */
#ifndef SL_RUNTIME_SAMPLER_GRAMMAR_H
#define SL_RUNTIME_SAMPLER_GRAMMAR_H

#include "runtime/sluice.h"
#include "runtime/text/tokenizer.h"

typedef struct sl_sgram sl_sgram;

/* Parses text[0, len) (grammar.h's errors). */
sl_status sl__sgram_create(const sl_vocab *v, const char *text, size_t len, sl_sgram **out,
                           sl_error *err);
void sl__sgram_free(sl_sgram *g);
/* Whether token may come next. */
sl_status sl__sgram_allows(sl_sgram *g, int32_t token, bool *ok, sl_error *err);
/* Sets logits[t] = -INFINITY for every token that may not come next. */
sl_status sl__sgram_mask(sl_sgram *g, float *logits, int32_t n_vocab, sl_error *err);
/* Advances the grammar by token (SL_ERR_INVALID if it may not come next). */
sl_status sl__sgram_accept(sl_sgram *g, int32_t token, sl_error *err);
/* Complete with nothing that can follow, or ended by an end-of-generation token. */
bool sl__sgram_done(const sl_sgram *g);

/* sampler.c: installs a grammar over v into s (text NULL or "": removes it). */
sl_status sl__sampler_grammar_set(sl_sampler *s, const sl_vocab *v, const char *text,
                                  sl_error *err);

#endif
