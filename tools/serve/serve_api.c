/* The endpoints of `sluice serve`, in llama-server's shapes:
 *
 *   GET  /health               {"status":"ok"} (and the hot-swap point: serve_info.c)
 *   POST /completion           llama-server's native completion (content, stop_type, timings..)
 *   POST /v1/completions       OpenAI text completion
 *   POST /v1/chat/completions  OpenAI chat completion, prompt from the model's chat template
 *   GET  /v1/models, /props    what is served (every model with its residency) and with
 *                              which defaults
 *
 * A completion runs on the model its "model" field names (the OpenAI field, on /completion
 * too): absent, the only model (400 when there are several); a name not served is a 404
 * listing the served ones; with --residency external a model that is not on the device is a
 * 409 (nothing loads: the operator loads it with POST /models/load, serve_admin.c).
 *
 * With one model served, any "model" name runs on it (as llama-server). Fields are read by
 * serve_req.c: every field is honoured or refused with a 400 naming it. Responses carry
 * llama-server's "tokens" (return_tokens; always in stream chunks), "completion_probabilities"
 * (n_probs) and, on the OpenAI endpoints, "logprobs": {"content": [...]} and
 * "system_fingerprint"; /v1/completions' echo puts the prompt's text first.
 * Streams are server-sent events, "data: {json}\n\n"; the OpenAI endpoints end theirs with
 * "data: [DONE]\n\n", /completion with a last chunk whose "stop" is true. The OpenAI finish
 * chunk carries "usage"; with stream_options.include_usage a chunk of no choices and the usage
 * follows it (OpenAI's last chunk). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/common/json.h"
#include "tools/common/json_doc.h"
#include "tools/common/model_flags.h"
#include "tools/serve/serve_impl.h"


/* ---- replies -------------------------------------------------------------------------------- */

FILE *sl__serve_body_open(sl_serve_reply *r)
{
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
    return open_memstream(&r->body, &r->body_len);
}

void sl__serve_body_close(sl_serve_reply *r, FILE *f, int status, const char *type)
{
    const bool bad = !f || ferror(f);
    if (f) fclose(f);
    r->status = status;
    r->content_type = type;
    if (!bad) return;
    static const char k_oom[] =
        "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    free(r->body);
    r->body = strdup(k_oom);
    r->body_len = r->body ? sizeof k_oom - 1 : 0;
    r->status = 500;
    r->content_type = SL__SERVE_JSON;
}

static const char *error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 409: return "conflict_error";
    case 500: return "server_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "invalid_request_error";
    }
}

/* {"error":{"code","message","type"[, extra]}}; extra: more members, already JSON. */
static void put_error(FILE *f, int status, const char *type, const char *extra, const char *msg)
{
    fprintf(f, "{\"error\":{\"code\":%d,\"message\":", status);
    sl_json_cstr(f, msg);
    fprintf(f, ",\"type\":\"%s\"%s}}", type ? type : error_type(status), extra ? extra : "");
}

static void verror(sl_serve_reply *r, int status, const char *type, const char *extra,
                   const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    FILE *f = sl__serve_body_open(r);
    if (f) put_error(f, status, type, extra, msg);
    sl__serve_body_close(r, f, status, SL__SERVE_JSON);
}

void sl__serve_error(sl_serve_reply *r, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(r, status, NULL, NULL, fmt, ap);
    va_end(ap);
}

void sl__serve_error_typed(sl_serve_reply *r, int status, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(r, status, type, NULL, fmt, ap);
    va_end(ap);
}

static void error_typed(sl_serve_reply *r, int status, const char *type, const char *extra,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void error_typed(sl_serve_reply *r, int status, const char *type, const char *extra,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(r, status, type, extra, fmt, ap);
    va_end(ap);
}

/* ---- running a job -------------------------------------------------------------------------- */

typedef sl_serve_req req;

struct sl_serve_stream {
    sl_serve *s;
    const sl_serve_model *sm;
    sl_serve_job *job;
    sl_serve_api kind;
    char id[48];
    int64_t created;
    size_t sent;                /* text bytes already sent */
    size_t toks_sent;           /* tokens already sent (tokens, probabilities) */
    char *echo;                 /* /v1/completions echo: the prompt's text (malloc'd) or NULL */
    size_t n_echo;
    bool role_sent, echo_sent, ended;
    char *buf;                  /* formatted bytes not yet handed out: buf[off, n) */
    size_t n, off;
    /* several prompts streamed one after the other (llama-server's chunks carry "index"):
     * job and echo are those of prompt `index`; jobs[i] and echoes[i] for i > index are still
     * to stream (owned), those up to index NULL. One prompt: jobs NULL, index 0. */
    sl_serve_job **jobs;
    char **echoes;
    size_t *n_echoes;
    size_t n_jobs, index;
    /* whether the client closed the connection: polled while the stream waits for tokens,
     * which cancels the job (a dead stream was found only by a failed write, after the job
     * had run its prompt and more) */
    sl_serve_gone_fn gone;
    void *gone_user;
};

/* The tokens of j whose text starts before byte `to` (or is empty and ends by it). */
static size_t toks_upto(const sl_serve_job *j, size_t to)
{
    size_t k = 0;
    while (k < j->n_toks && ((k ? j->toks[k - 1].end : 0) < to || j->toks[k].end <= to)) k++;
    return k;
}

/* A token as llama-server's probabilities list it: {"id","token","bytes","logprob" (open). */
static void put_tok(FILE *f, const sl_serve_model *sm, int32_t id, float logprob)
{
    char *piece = NULL;
    size_t cap = 0, n = 0;
    sl_error err = {0};
    if (sl_cli_token_piece(sm->model, id, &piece, &cap, &n, &err)) n = 0;
    fprintf(f, "{\"id\":%" PRId32 ",\"token\":", id);
    sl_json_str(f, piece ? piece : "", n);
    fputs(",\"bytes\":[", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%u", i ? "," : "", (unsigned char)piece[i]);
    fputs("],\"logprob\":", f);
    sl_json_f32(f, logprob);
    free(piece);
}

/* Tokens [from, to) of j with their top_logprobs: llama-server's probabilities array. */
static void put_probs(FILE *f, const sl_serve_model *sm, const sl_serve_job *j, size_t from,
                      size_t to)
{
    const size_t k = (size_t)j->p.n_probs;
    fputc('[', f);
    for (size_t i = from; i < to; i++) {
        if (i > from) fputc(',', f);
        put_tok(f, sm, j->toks[i].id, j->toks[i].logprob);
        fputs(",\"top_logprobs\":[", f);
        for (size_t a = 0; a < k && j->top[i * k + a].id >= 0; a++) {
            if (a) fputc(',', f);
            put_tok(f, sm, j->top[i * k + a].id, j->top[i * k + a].logprob);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputc(']', f);
}

static void put_token_ids(FILE *f, const sl_serve_job *j, size_t from, size_t to)
{
    fputc('[', f);
    for (size_t i = from; i < to; i++) fprintf(f, "%s%" PRId32, i > from ? "," : "", j->toks[i].id);
    fputc(']', f);
}

/* prompt_n: the prompt tokens evaluated (those past the cached prefix), as llama-server. */
static void put_timings(FILE *f, const sl_serve_job *j)
{
    const double pms = j->prompt_s * 1e3, gms = j->gen_s * 1e3;
    const size_t n = j->n_prompt - j->n_cached;
    fprintf(f, "\"timings\":{\"cache_n\":%zu,\"prompt_n\":%zu,\"prompt_ms\":", j->n_cached, n);
    sl_json_f64(f, pms);
    fputs(",\"prompt_per_token_ms\":", f);
    sl_json_f64(f, n ? pms / (double)n : 0);
    fputs(",\"prompt_per_second\":", f);
    sl_json_f64(f, pms > 0 ? 1e3 * (double)n / pms : 0);
    fprintf(f, ",\"predicted_n\":%" PRId32 ",\"predicted_ms\":", j->n_predicted);
    sl_json_f64(f, gms);
    fputs(",\"predicted_per_token_ms\":", f);
    sl_json_f64(f, j->n_decoded ? gms / j->n_decoded : 0);
    fputs(",\"predicted_per_second\":", f);
    sl_json_f64(f, gms > 0 ? 1e3 * j->n_decoded / gms : 0);
    fputs("}", f);
}

static const char *stop_type(sl_serve_stop s)
{
    static const char *const k[] = {"none", "eos", "limit", "word"};
    return k[s];
}

/* llama-server's /completion object: the whole result (stream: its last chunk, content ""). */
static void put_native(FILE *f, const sl_serve_model *sm, const sl_serve_job *j,
                       const char *content, size_t len, bool last_chunk, size_t from,
                       size_t index)
{
    fprintf(f, "{\"index\":%zu,\"content\":", index);
    sl_json_str(f, content, len);
    /* a stream's last chunk: what the earlier chunks did not carry */
    const size_t to = toks_upto(j, j->n_text);
    fputs(",\"tokens\":", f);
    put_token_ids(f, j, from, j->p.return_tokens || last_chunk ? to : from);
    if (j->p.probs) {
        fputs(",\"completion_probabilities\":", f);
        put_probs(f, sm, j, from, to);
    }
    fprintf(f, ",\"id_slot\":%d,\"stop\":true,\"model\":", j->slot);
    sl_json_cstr(f, sm->name);
    fprintf(f, ",\"tokens_predicted\":%" PRId32 ",\"tokens_evaluated\":%zu,"
            "\"generation_settings\":", j->n_predicted, j->n_prompt);
    sl__serve_params_json(f, &j->p);
    const bool new_line = j->text && memchr(j->text, '\n', j->n_text);
    fprintf(f, ",\"has_new_line\":%s,\"truncated\":false,\"stop_type\":\"%s\","
            "\"stopping_word\":", new_line ? "true" : "false", stop_type(j->stop));
    sl_json_cstr(f, j->stop == SL_STOP_WORD ? j->p.stop[j->stop_word] : "");
    fprintf(f, ",\"tokens_cached\":%" PRId32 ",", j->n_past);
    put_timings(f, j);
    fputs("}", f);
}

static const char *finish_reason(const sl_serve_job *j)
{
    return j->stop == SL_STOP_LIMIT ? "length" : "stop";
}

static void put_usage(FILE *f, const sl_serve_job *j)
{
    fprintf(f, "\"usage\":{\"completion_tokens\":%" PRId32 ",\"prompt_tokens\":%zu,"
            "\"total_tokens\":%zu,\"prompt_tokens_details\":{\"cached_tokens\":%zu}}",
            j->n_predicted, j->n_prompt, j->n_prompt + (size_t)j->n_predicted, j->n_cached);
}

/* The opening members of an OpenAI object: id, object, created, model. */
static void put_oai_head(FILE *f, const sl_serve_model *sm, const char *id, const char *object,
                         int64_t created)
{
    fprintf(f, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64 ",\"system_fingerprint\":"
            "\"%s\",\"model\":", id, object, created, SL__SERVE_BUILD);
    sl_json_cstr(f, sm->name);
}

/* One choice of an OpenAI completion: {"index", "text" or "message"/"delta", "logprobs",
 * "finish_reason"}. */
static void put_oai_choice(FILE *f, const sl_serve_stream *st, const sl_serve_job *j,
                           const char *text, size_t len, const char *finish, bool stream,
                           size_t tf, size_t tt, size_t index)
{
    const bool chat = st->kind == SL_API_OAI_CHAT;
    fprintf(f, "{\"index\":%zu,", index);
    if (!chat) {
        fputs("\"text\":", f);
        sl_json_str(f, text ? text : "", text ? len : 0);
        fputc(',', f);
    } else {
        fputs(stream ? "\"delta\":{" : "\"message\":{\"role\":\"assistant\",", f);
        if (text) {
            fputs("\"content\":", f);
            sl_json_str(f, text, len);
        }
        fputs("},", f);
    }
    if (j->p.probs && tt > tf) { /* llama-server's shape on both OpenAI endpoints */
        fputs("\"logprobs\":{\"content\":", f);
        put_probs(f, st->sm, j, tf, tt);
        fputs("},", f);
    } else if (!chat) {
        fputs("\"logprobs\":null,", f);
    }
    fputs("\"finish_reason\":", f);
    if (finish) fprintf(f, "\"%s\"", finish);
    else fputs("null", f);
    fputs("}", f);
}

/* An OpenAI completion (stream: a chunk). text NULL: no text member (a chat delta {}).
 * finish: NULL for a chunk that does not end the choice. */
static void put_oai(FILE *f, const sl_serve_stream *st, const sl_serve_job *j, const char *text,
                    size_t len, const char *finish, bool stream, size_t tf, size_t tt)
{
    const bool chat = st->kind == SL_API_OAI_CHAT;
    put_oai_head(f, st->sm, st->id, chat ? (stream ? "chat.completion.chunk" : "chat.completion")
                                     : "text_completion", st->created);
    fputs(",\"choices\":[", f);
    put_oai_choice(f, st, j, text, len, finish, stream, tf, tt, st->index);
    fputs("]", f);
    if (finish) {
        fputc(',', f);
        put_usage(f, j);
        fputc(',', f);
        put_timings(f, j);
    }
    fputs("}", f);
}

/* Waits on j->cv (j->mu held) for at most 200 ms: a waiter for a client's job looks at the
 * client between its wakeups. */
static void wait_a_while(sl_serve_job *j)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

bool sl__serve_job_wait(sl_serve_job *j, sl_serve_gone_fn gone, void *user)
{
    pthread_mutex_lock(&j->mu);
    while (j->state != SL_JOB_DONE) {
        wait_a_while(j);
        if (j->state != SL_JOB_DONE && gone && gone(user)) {
            j->cancel = true;
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

static void new_id(sl_serve *s, sl_serve_api kind, char *id, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    const uint64_t n = s->next_id++;
    pthread_mutex_unlock(&s->mu);
    snprintf(id, cap, "%s-%08" PRIx64 "%08" PRIx64, kind == SL_API_OAI_CHAT ? "chatcmpl" : "cmpl",
             (uint64_t)s->started & 0xffffffffu, n);
}

sl_serve_model *sl__serve_req_model(const sl_serve_req *q)
{
    sl_serve *s = q->s;
    const sl_jref v = sl__serve_field(q, "model");
    size_t len = 0;
    const char *name = v == SL_JNONE ? NULL : sl_jdoc_str(q->d, v, &len);
    if (v != SL_JNONE && !name) {
        sl__serve_error(q->r, 400, "'model' must be a string naming a served model");
        return NULL;
    }
    sl_serve_model *sm = sl__serve_model_find(s, name, len);
    if (!sm && s->n_models == 1) sm = &s->models[0]; /* llama-server: any name, one model */
    if (!sm && !name) {
        char names[512];
        sl__serve_model_names(s, names, sizeof names);
        sl__serve_error(q->r, 400, "'model' is required: the server serves several models (%s)",
                        names);
        return NULL;
    }
    if (!sm) {
        sl__serve_model_unknown(s, q->r, name, len);
        return NULL;
    }
    uint64_t dev = 0;
    const char *state = sl__serve_model_state(s, sm, &dev);
    if (s->external && dev && (!strcmp(state, "disk") || !strcmp(state, "host"))) {
        /* the same answer the slot's hold would give, without waiting for a slot */
        error_typed(q->r, 409, "model_not_loaded_error", NULL, "model '%s' is not loaded (%s) "
                    "and the server's residency is external: load it with POST /models/load "
                    "{\"model\":\"%s\"}", sm->name, state, sm->name);
        return NULL;
    }
    return sm;
}

/* /v1/completions' echo: the prompt as text (the request's string, or its tokens'
 * text); malloc'd, NULL after an error reply. */
static char *prompt_text(const req *q, const int32_t *tok, size_t n_tok, size_t *len)
{
    const char *s = sl_jdoc_str(q->d, sl__serve_field(q, "prompt"), len); /* one prompt */
    if (s) {
        char *c = malloc(*len + 1);
        if (c) memcpy(c, s, *len + 1);
        else sl__serve_error(q->r, 500, "out of memory");
        return c;
    }
    char *t = sl__serve_detokenize(q->sm, tok, n_tok, len);
    if (!t) sl__serve_error(q->r, 500, "the prompt could not be detokenized");
    return t;
}

void sl__serve_error_ctx(sl_serve_reply *r, size_t n, int32_t n_ctx)
{
    char extra[96];
    snprintf(extra, sizeof extra, ",\"n_prompt_tokens\":%zu,\"n_ctx\":%" PRId32, n, n_ctx);
    error_typed(r, 400, "exceed_context_size_error", extra, "the prompt has %zu tokens, more "
                "than the context (%" PRId32 "); raise -c", n, n_ctx);
}

/* A prompt a job can take: not empty, within the context (else the 400). */
static bool prompt_fits(const req *q, size_t n, size_t index, size_t count)
{
    const int32_t n_ctx = sl__serve_pool_n_ctx(q->sm->pool);
    if (!n && count > 1) sl__serve_error(q->r, 400, "prompt %zu of %zu is empty", index, count);
    else if (!n) sl__serve_error(q->r, 400, "the prompt is empty");
    else if (n > (size_t)n_ctx) sl__serve_error_ctx(q->r, n, n_ctx);
    return n && n <= (size_t)n_ctx;
}

/* A copy of p that owns its own stop strings, bias and grammar (each job frees its params). */
static bool params_dup(const sl_serve_params *p, sl_serve_params *out)
{
    *out = *p;
    out->n_stop = 0;
    out->bias = NULL;
    out->n_bias = 0;
    out->grammar = NULL;
    if (p->grammar && !(out->grammar = strdup(p->grammar))) goto oom;
    for (size_t i = 0; i < p->n_stop; i++, out->n_stop++)
        if (!(out->stop[i] = strdup(p->stop[i]))) goto oom;
    if (p->n_bias && !(out->bias = malloc(p->n_bias * sizeof *p->bias))) goto oom;
    if (p->n_bias) memcpy(out->bias, p->bias, p->n_bias * sizeof *p->bias);
    out->n_bias = p->n_bias;
    return true;
oom:
    sl__serve_params_free(out);
    return false;
}

/* Several prompts in one request (llama-server's multi-prompt): a job each, run as slots free
 * up (each as it would run alone), answered together: /completion with an array of its
 * objects ("index" i), /v1/completions with one object whose choices carry "index" i and whose
 * usage sums them. Streamed, the prompts' chunks come one prompt after the other, each chunk
 * with its prompt's "index" and each prompt ending with its own last chunk (one [DONE] at the
 * end). Takes p and pr. */
static void completion_many(req *q, sl_serve_api kind, sl_serve_params *p,
                            sl_serve_prompts *pr, bool stream, bool echo, sl_serve_gone_fn gone,
                            void *user)
{
    const size_t N = pr->count;
    sl_serve_job **jobs = calloc(N, sizeof *jobs);
    char **echoes = calloc(N, sizeof *echoes);
    size_t *n_echoes = calloc(N, sizeof *n_echoes);
    sl_error err = {0};
    size_t made = 0;
    bool ok = jobs && echoes && n_echoes;
    if (!ok) sl__serve_error(q->r, 500, "out of memory");
    for (size_t i = 0; ok && i < N; i++) {
        ok = prompt_fits(q, pr->n[i], i, N);
        if (ok && echo && !(echoes[i] = sl__serve_detokenize(q->sm, pr->tok[i], pr->n[i],
                                                              &n_echoes[i]))) {
            sl__serve_error(q->r, 500, "the prompt could not be detokenized");
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < N; i++, made++) {
        sl_serve_params pi;
        if (!params_dup(p, &pi)) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
            break;
        }
        if (sl__serve_job_create(pr->tok[i], pr->n[i], &pi, &jobs[i], &err)) {
            sl__serve_params_free(&pi); /* a job made takes its params; none was */
            sl__serve_error(q->r, 500, "%s", err.msg);
            ok = false;
        } else if (sl__serve_pool_submit(q->sm->pool, jobs[i], &err)) {
            sl__serve_error(q->r, 503, "%s", err.msg);
            ok = false;
        }
        pr->tok[i] = NULL; /* the job's (freed by job_create on failure) */
    }
    sl_serve_stream *st = ok && stream ? calloc(1, sizeof *st) : NULL;
    if (ok && stream && !st) {
        sl__serve_error(q->r, 500, "out of memory");
        ok = false;
    }
    if (st) { /* the stream owns the jobs and echoes from here on */
        *st = (sl_serve_stream){.s = q->s, .sm = q->sm, .job = jobs[0], .kind = kind,
                                .created = (int64_t)time(NULL), .echo = echoes[0],
                                .n_echo = n_echoes[0], .jobs = jobs, .echoes = echoes,
                                .n_echoes = n_echoes, .n_jobs = N, .gone = gone,
                                .gone_user = user};
        jobs[0] = NULL;
        echoes[0] = NULL;
        new_id(q->s, kind, st->id, sizeof st->id);
        q->r->stream = st;
        q->r->status = 200;
        q->r->content_type = "text/event-stream";
        sl__serve_params_free(p);
        sl__serve_prompts_free(pr);
        return;
    }
    for (size_t i = 0; ok && i < made; i++)
        if (!sl__serve_job_wait(jobs[i], gone, user)) {
            sl__serve_error(q->r, 400, "the client closed the connection");
            ok = false;
        } else if (jobs[i]->error_status) {
            sl__serve_error(q->r, jobs[i]->error_status, "%s", jobs[i]->error_msg);
            ok = false;
        }
    FILE *f = ok ? sl__serve_body_open(q->r) : NULL;
    if (f) {
        sl_serve_stream st = {.s = q->s, .sm = q->sm, .kind = kind,
                              .created = (int64_t)time(NULL)};
        new_id(q->s, kind, st.id, sizeof st.id);
        if (kind != SL_API_NATIVE) {
            put_oai_head(f, q->sm, st.id, "text_completion", st.created);
            fputs(",\"choices\":[", f);
        } else {
            fputc('[', f);
        }
        size_t gen = 0, prompt = 0, cached = 0;
        for (size_t i = 0; i < N; i++) {
            const sl_serve_job *j = jobs[i];
            char *out = j->text ? j->text : "";
            size_t n_out = j->n_text, cap = n_echoes[i];
            if (echoes[i] && !sl_cli_append(&echoes[i], &n_echoes[i], &cap, out, n_out)) {
                out = echoes[i];
                n_out = n_echoes[i];
            }
            if (i) fputc(',', f);
            if (kind == SL_API_NATIVE) put_native(f, q->sm, j, out, n_out, false, 0, i);
            else put_oai_choice(f, &st, j, out, n_out, finish_reason(j), false, 0,
                                toks_upto(j, j->n_text), i);
            gen += (size_t)j->n_predicted;
            prompt += j->n_prompt;
            cached += j->n_cached;
        }
        if (kind != SL_API_NATIVE)
            fprintf(f, "],\"usage\":{\"completion_tokens\":%zu,\"prompt_tokens\":%zu,"
                    "\"total_tokens\":%zu,\"prompt_tokens_details\":{\"cached_tokens\":%zu}}}",
                    gen, prompt, gen + prompt, cached);
        else
            fputc(']', f);
        sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    }
    for (size_t i = 0; jobs && i < made; i++) {
        if (!ok && jobs[i]) sl__serve_job_cancel(jobs[i]);
        sl__serve_job_release(jobs[i]);
    }
    for (size_t i = 0; echoes && i < N; i++) free(echoes[i]);
    free(jobs);
    free(echoes);
    free(n_echoes);
    sl__serve_params_free(p);
    sl__serve_prompts_free(pr);
}

static void completion(req *q, sl_serve_api kind, sl_serve_prompts *pre, sl_serve_gone_fn gone,
                       void *user)
{
    sl_serve *s = q->s;
    sl_serve_params p = {0};
    sl_serve_prompts pr = {0};
    bool stream = false, echo = false;
    int32_t *tok = NULL;
    size_t n_tok = 0, n_echo = 0;
    char *text = NULL, *echo_text = NULL;
    if (pre) { /* ours from here on */
        pr = *pre;
        *pre = (sl_serve_prompts){0};
    }
    if (!(q->sm = sl__serve_req_model(q))) goto fail;
    if (!sl__serve_get_params(q, kind, &p)) goto fail;
    if (kind == SL_API_INFILL) kind = SL_API_NATIVE; /* /completion's shapes */
    if (!sl__serve_get_bool(q, "stream", &stream) || !sl__serve_get_bool(q, "echo", &echo))
        goto fail;
    const int n_slots = sl__serve_pool_n_slots(q->sm->pool);
    if (p.id_slot >= n_slots) {
        sl__serve_error(q->r, 400, "'id_slot' %" PRId32 ": the model has %d slot%s (0..%d), or "
                        "-1 for any", p.id_slot, n_slots, n_slots > 1 ? "s" : "", n_slots - 1);
        goto fail;
    }
    if (echo && p.probs) {
        sl__serve_error(q->r, 400, "'echo' with 'logprobs' is not supported (the prompt's "
                        "log-probabilities are not computed)");
        goto fail;
    }
    if (kind == SL_API_OAI_CHAT) {
        size_t len;
        if (!sl__serve_chat_text(q, &text, &len) ||
            !sl__serve_tokenize(q, text, len, true, true, &tok, &n_tok))
            goto fail;
    } else if (!pr.count && !sl__serve_get_prompts(q, "prompt", true, &pr)) {
        goto fail;
    }
    if (pr.count > 1) {
        completion_many(q, kind, &p, &pr, stream, echo, gone, user);
        return;
    }
    if (pr.count == 1) {
        tok = pr.tok[0];
        n_tok = pr.n[0];
        pr.tok[0] = NULL;
        sl__serve_prompts_free(&pr);
    }
    if (echo && !(echo_text = prompt_text(q, tok, n_tok, &n_echo))) goto fail;
    if (!prompt_fits(q, n_tok, 0, 1)) goto fail;
    sl_serve_job *j;
    sl_error err = {0};
    if (sl__serve_job_create(tok, n_tok, &p, &j, &err)) {
        tok = NULL;
        sl__serve_error(q->r, 500, "%s", err.msg);
        goto fail;
    }
    tok = NULL;
    sl_serve_stream *st = NULL;
    if (sl__serve_pool_submit(q->sm->pool, j, &err)) {
        sl__serve_job_release(j);
        sl__serve_error(q->r, 503, "%s", err.msg);
        goto out;
    }
    if (!(st = calloc(1, sizeof *st))) {
        sl__serve_job_cancel(j);
        sl__serve_job_release(j);
        sl__serve_error(q->r, 500, "out of memory");
        goto out;
    }
    *st = (sl_serve_stream){.s = s, .sm = q->sm, .job = j, .kind = kind,
                            .created = (int64_t)time(NULL), .echo = echo_text, .n_echo = n_echo,
                            .gone = gone, .gone_user = user};
    echo_text = NULL;
    free(text);
    text = NULL;
    new_id(s, kind, st->id, sizeof st->id);
    if (stream) {
        q->r->stream = st;
        q->r->status = 200;
        q->r->content_type = "text/event-stream";
        return;
    }
    if (!sl__serve_job_wait(j, gone, user)) {
        sl__serve_error(q->r, 400, "the client closed the connection");
    } else if (j->error_status) {
        sl__serve_error(q->r, j->error_status, "%s", j->error_msg);
    } else {
        FILE *f = sl__serve_body_open(q->r);
        const char *out = j->text ? j->text : "";
        size_t n_out = j->n_text;
        if (st->echo && sl_cli_append(&st->echo, &st->n_echo, &n_echo, out, n_out)) {
            sl__serve_error(q->r, 500, "out of memory");
            if (f) fclose(f);
            f = NULL;
        } else if (st->echo) {
            out = st->echo;
            n_out = st->n_echo;
        }
        const size_t nt = toks_upto(j, j->n_text);
        if (f && kind == SL_API_NATIVE) put_native(f, q->sm, j, out, n_out, false, 0, 0);
        else if (f) put_oai(f, st, j, out, n_out, finish_reason(j), false, 0, nt);
        if (f) sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    }
    sl__serve_job_release(j);
    free(st->echo);
    free(st);
    return;
fail:
    free(tok);
    sl__serve_params_free(&p);
    sl__serve_prompts_free(&pr);
out:
    free(text);
    free(echo_text);
}

void sl__serve_completion(sl_serve_req *q, sl_serve_api kind, sl_serve_prompts *pre,
                          sl_serve_gone_fn gone, void *user)
{
    completion(q, kind, pre, gone, user);
}

/* ---- streams -------------------------------------------------------------------------------- */

/* Formats the next event(s) into st->buf; blocks until there is something to say. */
static void stream_next(sl_serve_stream *st)
{
    free(st->buf);
    st->buf = NULL;
    st->n = st->off = 0;
    FILE *f = open_memstream(&st->buf, &st->n);
    if (!f) {
        st->ended = true;
        return;
    }
    sl_serve_job *j = st->job;
    if (st->echo && !st->echo_sent) { /* echo: the prompt's text comes first */
        fputs("data: ", f);
        put_oai(f, st, j, st->echo, st->n_echo, NULL, true, 0, 0);
        fputs("\n\n", f);
        st->echo_sent = true;
        if (fclose(f)) st->ended = true;
        return;
    }
    if (st->kind == SL_API_OAI_CHAT && !st->role_sent) {
        /* the first chunk names the role, as OpenAI's do */
        fputs("data: ", f);
        put_oai_head(f, st->sm, st->id, "chat.completion.chunk", st->created);
        fputs(",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null},"
              "\"finish_reason\":null}]}\n\n", f);
        st->role_sent = true;
        if (fclose(f)) st->ended = true;
        return;
    }
    pthread_mutex_lock(&j->mu);
    while (j->n_ready <= st->sent && j->state != SL_JOB_DONE && !j->cancel) {
        wait_a_while(j);
        if (j->n_ready <= st->sent && j->state != SL_JOB_DONE && st->gone &&
            st->gone(st->gone_user))
            j->cancel = true;
    }
    const size_t from = st->sent, to = j->n_ready;
    const bool finished = j->state == SL_JOB_DONE;
    const bool done = finished || (j->cancel && to <= from);
    const size_t tf = st->toks_sent, tt = to > from ? toks_upto(j, to) : tf;
    st->sent = to;
    st->toks_sent = tt;
    /* formatted under the lock: the worker may move j->text while it appends */
    if (to > from) {
        fputs("data: ", f);
        if (st->kind == SL_API_NATIVE) {
            fprintf(f, "{\"index\":%zu,\"content\":", st->index);
            sl_json_str(f, j->text + from, to - from);
            fputs(",\"tokens\":", f);
            put_token_ids(f, j, tf, tt);
            if (j->p.probs) {
                fputs(",\"completion_probabilities\":", f);
                put_probs(f, st->sm, j, tf, tt);
            }
            fprintf(f, ",\"stop\":false,\"id_slot\":%d,\"tokens_predicted\":%" PRId32
                    ",\"tokens_evaluated\":%zu}", j->slot, j->n_predicted, j->n_prompt);
        } else {
            put_oai(f, st, j, j->text + from, to - from, NULL, true, tf, tt);
        }
        fputs("\n\n", f);
    }
    pthread_mutex_unlock(&j->mu);
    if (done) {
        if (!finished || j->error_status) {
            fputs("data: ", f);
            put_error(f, finished ? j->error_status : 500, NULL, NULL,
                      finished ? j->error_msg : "the generation was cancelled");
            fputs("\n\n", f);
        } else {
            fputs("data: ", f);
            const size_t nt = toks_upto(j, j->n_text);
            if (st->kind == SL_API_NATIVE)
                put_native(f, st->sm, j, "", 0, true, st->toks_sent, st->index);
            else put_oai(f, st, j, st->kind == SL_API_OAI_CHAT ? NULL : "", 0, finish_reason(j),
                         true, st->toks_sent, nt);
            fputs("\n\n", f);
            if (st->kind != SL_API_NATIVE && j->p.include_usage) {
                /* OpenAI's last chunk with include_usage: no choices, the usage */
                fputs("data: ", f);
                put_oai_head(f, st->sm, st->id, st->kind == SL_API_OAI_CHAT
                             ? "chat.completion.chunk" : "text_completion", st->created);
                fputs(",\"choices\":[],", f);
                put_usage(f, j);
                fputs("}\n\n", f);
            }
            if (st->index + 1 < st->n_jobs) { /* the next prompt's chunks */
                sl__serve_job_release(st->job);
                free(st->echo);
                st->index++;
                st->job = st->jobs[st->index];
                st->echo = st->echoes[st->index];
                st->n_echo = st->n_echoes[st->index];
                st->jobs[st->index] = NULL;
                st->echoes[st->index] = NULL;
                st->sent = st->toks_sent = 0;
                st->echo_sent = false;
                if (fclose(f)) st->ended = true;
                return;
            }
            if (st->kind != SL_API_NATIVE) fputs("data: [DONE]\n\n", f);
        }
        st->ended = true;
    }
    if (fclose(f)) st->ended = true;
}

size_t sl__serve_stream_read(sl_serve_stream *st, char *buf, size_t max)
{
    while (st->off == st->n) {
        if (st->ended) return 0;
        stream_next(st);
    }
    const size_t k = st->n - st->off < max ? st->n - st->off : max;
    memcpy(buf, st->buf + st->off, k);
    st->off += k;
    return k;
}

void sl__serve_stream_close(sl_serve_stream *st)
{
    if (!st) return;
    sl__serve_job_cancel(st->job); /* no effect on a finished job */
    sl__serve_job_release(st->job);
    for (size_t i = st->index + 1; st->jobs && i < st->n_jobs; i++) {
        sl__serve_job_cancel(st->jobs[i]);
        sl__serve_job_release(st->jobs[i]);
        free(st->echoes[i]);
    }
    free(st->jobs);
    free(st->echoes);
    free(st->n_echoes);
    free(st->buf);
    free(st->echo);
    free(st);
}

void sl__serve_api_handle(sl_serve *s, sl_serve_route route, const char *body, size_t len,
                          sl_serve_gone_fn gone, void *gone_user, sl_serve_reply *r)
{
    switch (route) {
    case SL_ROUTE_HEALTH: sl__serve_health(s, r); return;
    case SL_ROUTE_MODELS: sl__serve_models(s, r); return;
    case SL_ROUTE_PROPS: sl__serve_props(s, r); return;
    case SL_ROUTE_METRICS: sl__serve_metrics(s, r); return;
    case SL_ROUTE_SLOTS: sl__serve_slots(s, r); return;
    default: break;
    }
    sl_error err = {0};
    req q = {.s = s, .r = r};
    if (sl_jdoc_parse(body, len, 64, &q.d, &err)) {
        sl__serve_error(r, err.code == SL_ERR_NOMEM ? 500 : 400, "%s", err.msg);
        return;
    }
    if (sl_jdoc_validate(q.d, &err)) {
        sl__serve_error(r, 500, "%s", err.msg);
    } else if (sl_jdoc_kind(q.d, q.root) != SL_JOBJ) {
        sl__serve_error(r, 400, "the request body must be a JSON object");
    } else if (route == SL_ROUTE_EMBEDDING || route == SL_ROUTE_OAI_EMBEDDINGS) {
        sl__serve_embeddings(&q, route == SL_ROUTE_OAI_EMBEDDINGS, gone, gone_user);
    } else if (route == SL_ROUTE_INFILL) {
        sl__serve_infill(&q, gone, gone_user);
    } else if (route >= SL_ROUTE_ADMIN_PIN) {
        sl__serve_admin(s, route, q.d, q.root, r);
    } else if (route >= SL_ROUTE_TOKENIZE) {
        sl__serve_text_handle(&q, route);
    } else {
        const sl_serve_api k = route == SL_ROUTE_COMPLETION ? SL_API_NATIVE
                         : route == SL_ROUTE_OAI_COMPLETION ? SL_API_OAI_TEXT : SL_API_OAI_CHAT;
        completion(&q, k, NULL, gone, gone_user);
    }
    sl_jdoc_free(q.d);
}
