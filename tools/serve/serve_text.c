/* llama-server's text endpoints and slot list:
 *
 *   POST /tokenize        {"content", "add_special" (false), "parse_special" (true),
 *                          "with_pieces" (false)} -> {"tokens": [id] | [{"id", "piece"}]}, a
 *                          piece being a string when valid UTF-8, else its bytes
 *   POST /detokenize      {"tokens": [id]} -> {"content"}
 *   POST /apply-template  {"messages"} -> {"prompt"}: the chat template's text
 *   GET  /slots           [{"id", "id_task", "n_ctx", "is_processing", "params",
 *                          "next_token"}] of every slot (and its "model")
 *
 * Each takes "model" as the completions do; every other field is a 400. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/json.h"
#include "tools/common/json_doc.h"
#include "tools/common/model_flags.h"
#include "tools/serve/serve_impl.h"


void sl__serve_params_json(FILE *f, const sl_serve_params *p)
{
    fprintf(f, "{\"n_predict\":%" PRId32 ",\"seed\":%" PRIu64 ",\"temperature\":", p->n_predict,
            p->so.seed);
    sl_json_f32(f, p->so.temp);
    fprintf(f, ",\"dynatemp_range\":0.0,\"dynatemp_exponent\":1.0,\"top_k\":%" PRId32
            ",\"top_p\":", p->so.top_k);
    sl_json_f32(f, p->so.top_p);
    fputs(",\"min_p\":", f);
    sl_json_f32(f, p->so.min_p);
    fprintf(f, ",\"top_n_sigma\":-1.0,\"xtc_probability\":0.0,\"xtc_threshold\":0.1,"
            "\"typical_p\":1.0,\"repeat_last_n\":%" PRId32 ",\"repeat_penalty\":",
            p->repeat_last_n);
    sl_json_f32(f, p->repeat_penalty);
    fputs(",\"presence_penalty\":", f);
    sl_json_f32(f, p->presence_penalty);
    fputs(",\"frequency_penalty\":", f);
    sl_json_f32(f, p->frequency_penalty);
    fputs(",\"dry_multiplier\":0.0,\"dry_base\":1.75,\"dry_allowed_length\":2,"
          "\"dry_penalty_last_n\":-1,\"dry_sequence_breakers\":[\"\\n\",\":\",\"\\\"\",\"*\"],"
          "\"mirostat\":0,\"mirostat_tau\":5.0,\"mirostat_eta\":0.1,\"stop\":[", f);
    for (size_t i = 0; i < p->n_stop; i++) {
        if (i) fputc(',', f);
        sl_json_cstr(f, p->stop[i]);
    }
    fprintf(f, "],\"max_tokens\":%" PRId32 ",\"n_keep\":0,\"n_discard\":0,\"ignore_eos\":%s,"
            "\"n_probs\":%" PRId32 ",\"min_keep\":0,\"grammar\":", p->n_predict,
            p->ignore_eos ? "true" : "false", p->n_probs);
    sl_json_cstr(f, p->grammar ? p->grammar : "");
    fputs(",\"samplers\":[\"penalties\",\"top_k\",\"top_p\",\"min_p\",\"temperature\"],"
          "\"logit_bias\":[", f);
    for (size_t i = 0; i < p->n_bias; i++) {
        fputs(i ? ",{\"bias\":" : "{\"bias\":", f);
        if (isinf(p->bias[i].bias)) fputs("false", f);
        else sl_json_f32(f, p->bias[i].bias);
        fprintf(f, ",\"token\":%" PRId32 "}", p->bias[i].id);
    }
    fprintf(f, "],\"return_tokens\":%s,\"post_sampling_probs\":false,\"timings_per_token\":false,"
            "\"lora\":[]}", p->return_tokens ? "true" : "false");
}

static const char *const k_tokenize[] = {"model", "content", "add_special", "parse_special",
                                         "with_pieces", NULL};
static const char *const k_detokenize[] = {"model", "tokens", NULL};
static const char *const k_template[] = {"model", "messages", NULL};

/* A piece as /tokenize writes it: a string when valid UTF-8, else its bytes. */
static void put_piece(FILE *f, const char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = sl_json_utf8_len((const unsigned char *)s + i, n - i))) i += k;
    if (i == n) {
        sl_json_str(f, s, n);
        return;
    }
    fputc('[', f);
    for (i = 0; i < n; i++) fprintf(f, "%s%u", i ? "," : "", (unsigned char)s[i]);
    fputc(']', f);
}

static void tokenize(const sl_serve_req *q)
{
    bool add_special = false, parse_special = true, pieces = false;
    size_t len;
    const char *text = sl_jdoc_str(q->d, sl__serve_field(q, "content"), &len);
    if (!sl__serve_get_bool(q, "add_special", &add_special) ||
        !sl__serve_get_bool(q, "parse_special", &parse_special) ||
        !sl__serve_get_bool(q, "with_pieces", &pieces))
        return;
    if (!text) {
        sl__serve_error(q->r, 400, "'content' must be a string (the text to tokenize)");
        return;
    }
    int32_t *tok = NULL;
    size_t n = 0;
    if (!sl__serve_tokenize(q, text, len, add_special, parse_special, &tok, &n)) return;
    FILE *f = sl__serve_body_open(q->r);
    char *piece = NULL;
    size_t cap = 0;
    if (f) fputs("{\"tokens\":[", f);
    for (size_t i = 0; f && i < n; i++) {
        if (i) fputc(',', f);
        if (!pieces) {
            fprintf(f, "%" PRId32, tok[i]);
            continue;
        }
        size_t k = 0;
        sl_error err = {0};
        if (sl_cli_token_piece(q->sm->model, tok[i], &piece, &cap, &k, &err)) k = 0;
        fprintf(f, "{\"id\":%" PRId32 ",\"piece\":", tok[i]);
        put_piece(f, piece ? piece : "", k);
        fputc('}', f);
    }
    if (f) fputs("]}", f);
    sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    free(piece);
    free(tok);
}

static void detokenize(const sl_serve_req *q)
{
    const sl_jref v = sl__serve_field(q, "tokens");
    const int32_t n_vocab = q->sm->info.n_vocab;
    if (v == SL_JNONE || sl_jdoc_kind(q->d, v) != SL_JARR) {
        sl__serve_error(q->r, 400, "'tokens' must be an array of token ids");
        return;
    }
    const size_t n = sl_jdoc_count(q->d, v);
    int32_t *tok = malloc((n ? n : 1) * sizeof *tok);
    if (!tok) {
        sl__serve_error(q->r, 500, "out of memory");
        return;
    }
    size_t i = 0;
    for (sl_jref e = sl_jdoc_first(q->d, v); e != SL_JNONE; e = sl_jdoc_next(q->d, e), i++) {
        int64_t id;
        if (sl_jdoc_kind(q->d, e) != SL_JNUM || !sl_jdoc_int(q->d, e, 0, n_vocab - 1, &id)) {
            sl__serve_error(q->r, 400, "'tokens'[%zu] must be a token id in [0, %" PRId32 "]", i,
                            n_vocab - 1);
            free(tok);
            return;
        }
        tok[i] = (int32_t)id;
    }
    size_t len = 0;
    char *text = sl__serve_detokenize(q->sm, tok, n, &len);
    free(tok);
    if (!text) {
        sl__serve_error(q->r, 500, "the tokens could not be detokenized");
        return;
    }
    FILE *f = sl__serve_body_open(q->r);
    if (f) {
        fputs("{\"content\":", f);
        sl_json_str(f, text, len);
        fputc('}', f);
    }
    sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    free(text);
}

static void apply_template(const sl_serve_req *q)
{
    char *text = NULL;
    size_t len = 0;
    if (!sl__serve_chat_text(q, &text, &len)) return;
    FILE *f = sl__serve_body_open(q->r);
    if (f) {
        fputs("{\"prompt\":", f);
        sl_json_str(f, text, len);
        fputc('}', f);
    }
    sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    free(text);
}

void sl__serve_text_handle(const sl_serve_req *q, sl_serve_route route)
{
    const char *const *names = route == SL_ROUTE_TOKENIZE     ? k_tokenize
                               : route == SL_ROUTE_DETOKENIZE ? k_detokenize : k_template;
    if (!sl__serve_check_fields(q, names)) return;
    sl_serve_req r = *q;
    if (!(r.sm = sl__serve_req_model(&r))) return;
    if (route == SL_ROUTE_TOKENIZE) tokenize(&r);
    else if (route == SL_ROUTE_DETOKENIZE) detokenize(&r);
    else apply_template(&r);
}

void sl__serve_slots(sl_serve *s, sl_serve_reply *r)
{
    FILE *f = sl__serve_body_open(r);
    bool first = true;
    if (f) fputc('[', f);
    for (size_t i = 0; f && i < s->n_models; i++)
        sl__serve_pool_slots_json(s->models[i].pool, f, &first);
    if (f) fputc(']', f);
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
}
