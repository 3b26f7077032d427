/* sluice.h's text functions: thin wrappers that find the model's vocabulary
 * (sl__model_vocab, implemented by the engine) and call the tokenizer module. */
#include "runtime/text/model_vocab.h"
#include "runtime/text/sampler_grammar.h"
#include "runtime/text/vocab_impl.h"

static sl_status vocab_of(const sl_model *m, const char *fn, const sl_vocab **v, sl_error *err)
{
    if (!m) return sl_error_set(err, SL_ERR_INVALID, "%s: model is NULL", fn);
    *v = sl__model_vocab(m);
    if (!*v) return sl_error_set(err, SL_ERR_INVALID, "%s: the model has no tokenizer", fn);
    return SL_OK;
}

sl_status sl_tokenize(const sl_model *m, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *tokens, size_t cap, size_t *n_out,
                      sl_error *err)
{
    const sl_vocab *v;
    const sl_status st = vocab_of(m, "sl_tokenize", &v, err);
    if (st != SL_OK) return st;
    return sl_vocab_tokenize(v, text, len, add_special, parse_special, tokens, cap, n_out, err);
}

sl_status sl_token_to_piece(const sl_model *m, int32_t token, bool render_special, char *buf,
                            size_t cap, size_t *n_out, sl_error *err)
{
    const sl_vocab *v;
    const sl_status st = vocab_of(m, "sl_token_to_piece", &v, err);
    if (st != SL_OK) return st;
    return sl_vocab_token_to_piece(v, token, render_special, buf, cap, n_out, err);
}

_Static_assert(SL_FIM_N == SL__VOCAB_FIM && SL_FIM_PAD == SL__VOCAB_FIM_EOG_FROM,
               "sluice.h's sl_fim and the vocabulary's FIM table disagree");

int32_t sl_token_fim(const sl_model *m, sl_fim which)
{
    const sl_vocab *v = m ? sl__model_vocab(m) : NULL;
    return v ? sl_vocab_fim(v, (int)which) : -1;
}

bool sl_token_is_eog(const sl_model *m, int32_t token)
{
    const sl_vocab *v = m ? sl__model_vocab(m) : NULL;
    return v && sl_vocab_is_eog(v, token);
}

sl_status sl_detokenize(const sl_model *m, const int32_t *tokens, size_t n, char *buf,
                        size_t cap, size_t *n_out, sl_error *err)
{
    const sl_vocab *v;
    const sl_status st = vocab_of(m, "sl_detokenize", &v, err);
    if (st != SL_OK) return st;
    return sl_vocab_detokenize(v, tokens, n, buf, cap, n_out, err);
}

sl_status sl_sampler_set_grammar(sl_sampler *s, const sl_model *m, const char *grammar,
                                 sl_error *err)
{
    if (!s) return sl_error_set(err, SL_ERR_INVALID, "sl_sampler_set_grammar: sampler is NULL");
    if (!grammar || !*grammar) /* removing one needs no model (sluice.h) */
        return sl__sampler_grammar_set(s, NULL, NULL, err);
    const sl_vocab *v;
    const sl_status st = vocab_of(m, "sl_sampler_set_grammar", &v, err);
    if (st != SL_OK) return st;
    return sl__sampler_grammar_set(s, v, grammar, err);
}
