/* Internals of `sluice serve`, shared by its files:
 *
 *   serve.c          flags, start-up (models, chat templates, slots, HTTP daemon), signals,
 *                    exit
 *   serve_models.c   the served models: their runtime (one device arena and host floor for
 *                    all), the model of a request, holding it for a request's run
 *   serve_admin.c    POST /models/{pin,unpin,load,unload,compact}: residency by hand
 *   serve_http.c     libmicrohttpd glue: routing, methods, body limit, replies, SSE streams,
 *                    disconnect detection
 *   serve_api.c      the completions: request JSON -> job, job -> response JSON / SSE chunks;
 *                    routes every endpoint
 *   serve_info.c     GET /health (the hot-swap point), /v1/models, /props
 *   serve_metrics.c  GET /metrics (Prometheus text)
 *   serve_slots.c    the slots: one context + worker thread each, the job queue, the
 *                    generation loop
 *   serve_chat.c     chat templates (serve_chat.h)
 *   serve_embd.c     POST /embedding, /v1/embeddings (--embedding): pooled hidden states
 *   serve_infill.c   POST /infill: the model's FIM tokens, the fill-in-the-middle prompt
 *   serve_slot_file.c POST /slots/{id}?action=save|restore|erase (--slot-save-path)
 *
 * Threads: libmicrohttpd runs one thread per connection; it parses the request, submits a job
 * and waits on the job (or streams from it). Each slot's worker thread owns its context: no
 * other thread touches it, but the batcher's leader, which runs it in a pass while the owner
 * waits for its step (serve_slots.c). A job is shared by its connection and its worker through a
 * reference count; everything that changes after submission is guarded by the job's mutex.
 *
 * Invariants (checked by sl__serve_job_validate):
 *   n_ready <= n_text; state DONE => n_ready == n_text;
 *   n_predicted <= max(n_predict, n_ctx) (n_predict < 0: up to the context);
 *   refs >= 1 while anyone holds the job. */
#ifndef SL_CLI_SERVE_IMPL_H
#define SL_CLI_SERVE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/sluice.h"
#include "tools/common/json_doc.h"
#include "tools/serve/serve_chat.h"

typedef struct sl_serve_pool sl_serve_pool;

enum { SL_SERVE_MAX_STOP = 16, SL_SERVE_MAX_STOP_BYTES = 256 };

enum { SL_SERVE_MAX_PROBS = 100 };

/* One logit_bias entry; bias -INFINITY bans the token. */
typedef struct sl_serve_bias {
    int32_t id;
    float bias;
} sl_serve_bias;

/* What a request asks of the generation. */
typedef struct sl_serve_params {
    sl_sampler_options so;
    int32_t n_predict;          /* -1: until EOS or the context is full */
    bool ignore_eos;
    size_t n_stop;
    char *stop[SL_SERVE_MAX_STOP];   /* malloc'd strings, each 1..SL_SERVE_MAX_STOP_BYTES */
    /* applied to the logits before the sampler, in llama.cpp's order (serve_sample.c) */
    sl_serve_bias *bias;        /* malloc'd, n_bias entries */
    size_t n_bias;
    float repeat_penalty, frequency_penalty, presence_penalty; /* 1, 0, 0: off */
    int32_t repeat_last_n;      /* window over prompt + generated tokens; -1: the context */
    bool probs;                 /* record each token's log-probability ... */
    int32_t n_probs;            /* ... and the n_probs most likely (0..SL_SERVE_MAX_PROBS) */
    bool return_tokens;
    bool cache_prompt;          /* reuse the slot's KV for the prompt's common prefix (true) */
    bool include_usage;         /* stream_options.include_usage: a last chunk of usage alone */
    int32_t id_slot;            /* the slot that must run the job; -1: any idle one */
    char *grammar;              /* malloc'd GBNF (from grammar, json_schema or response_format;
                                   checked against the model), or NULL */
} sl_serve_params;

/* What a job asks of its slot: a generation, or one of the slot operations (serve_embd.c,
 * serve_slot_file.c), which run on the slot's context from its worker. */
typedef enum sl_serve_op {
    SL_OP_GENERATE,
    SL_OP_EMBED,                /* evaluate the prompt, pool its hidden states */
    SL_OP_SLOT_SAVE,
    SL_OP_SLOT_RESTORE,
    SL_OP_SLOT_ERASE,
} sl_serve_op;

/* llama.cpp's pooling types (<arch>.pooling_type, --pooling); rank is not implemented. */
typedef enum sl_serve_pooling {
    SL_POOL_NONE = 0,
    SL_POOL_MEAN = 1,
    SL_POOL_CLS = 2,
    SL_POOL_LAST = 3,
} sl_serve_pooling;

/* The vocabulary's fill-in-the-middle tokens, llama.cpp's order; -1 where absent. */

/* A generated token as the responses report it: its id, its log-probability under the raw
 * logits (probs only), where its text ends in job->text (before a stop string's cut), and its
 * top alternatives at job->top[index * n_probs ...]. */
typedef struct sl_serve_tok {
    int32_t id;
    float logprob;
    size_t end;
} sl_serve_tok;

typedef struct sl_serve_alt {
    int32_t id;
    float logprob;
} sl_serve_alt;

typedef enum sl_serve_state { SL_JOB_QUEUED, SL_JOB_RUNNING, SL_JOB_DONE } sl_serve_state;

/* llama-server's stop types (its "stop_type" field). */
typedef enum sl_serve_stop {
    SL_STOP_NONE,               /* cancelled or failed */
    SL_STOP_EOS,
    SL_STOP_LIMIT,              /* n_predict or the context */
    SL_STOP_WORD,               /* one of the stop strings */
} sl_serve_stop;

typedef struct sl_serve_job {
    /* set before submission, then read-only */
    int32_t *prompt;            /* malloc'd */
    size_t n_prompt;
    sl_serve_params p;
    /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* signalled on new text, on DONE and on cancel */
    int refs;
    sl_serve_state state;
    bool cancel;                /* the client is gone or the server is stopping */
    char *text;                 /* generated text, n_text bytes + NUL */
    size_t n_text, cap_text;
    size_t n_ready;             /* bytes a stream may send: no partial stop string or UTF-8 */
    int32_t n_predicted;
    sl_serve_tok *toks;         /* [n_predicted] (n_toks), generated tokens */
    sl_serve_alt *top;          /* [n_toks * p.n_probs] when p.probs */
    size_t n_toks, cap_toks;
    sl_serve_stop stop;
    int stop_word;              /* index into p.stop for SL_STOP_WORD, else -1 */
    int slot;                   /* slot that ran it, -1 before */
    size_t n_cached;            /* prompt tokens whose KV the slot kept (not evaluated) */
    int32_t n_past;             /* tokens in the slot's KV cache at the end */
    double prompt_s, gen_s;     /* prefill time (of n_prompt - n_cached tokens); decode time */
    int32_t n_decoded;          /* tokens of gen_s */
    int error_status;           /* 0, or the HTTP status of a failure */
    char error_msg[256];
    /* a slot operation (op != SL_OP_GENERATE): its input, set before submission ... */
    sl_serve_op op;
    sl_serve_pooling pooling;   /* SL_OP_EMBED */
    int32_t embd_normalize;     /* llama.cpp's: -1 none, 0 max-abs int16, 1 taxicab, 2 L2, >2 p */
    char *path;                 /* SAVE / RESTORE: the file (malloc'd) */
    /* ... and its result, written by the slot's worker before DONE */
    float *embd;                /* EMBED: n_embd_rows rows of info.n_embd floats (malloc'd) */
    size_t n_embd_rows;
    uint64_t io_tokens, io_bytes; /* SAVE / RESTORE / ERASE: tokens and bytes moved */
    double io_ms;
} sl_serve_job;

/* Counters for /metrics (llama-server's names in serve_metrics.c). */
typedef struct sl_serve_counters {
    uint64_t prompt_tokens, predicted_tokens, n_decode, requests_done, requests_cancelled,
        requests_failed;
    uint64_t decoded;           /* one-token decode evaluations */
    uint64_t busy_slots;        /* the steps of the n_decode passes (slots served per pass) */
    double prompt_s, predicted_s;
    int busy, queued;
    sl_ctx_stats engine;        /* summed over the slots, as of each one's last job */
    sl_model_info model;        /* as of the last job */
} sl_serve_counters;

typedef struct sl_serve sl_serve;
typedef struct sl_serve_model sl_serve_model;

/* A slot as its operations see it, from its worker: the context and the tokens its KV holds
 * (hist[0, n_kv), by position); an operation updates n_kv. */
typedef struct sl_serve_slot_kv {
    sl_ctx *ctx;
    int32_t *hist;
    size_t n_kv;
    int32_t n_ctx;
    int id;
    pthread_mutex_t *eval_mu;   /* held around an evaluation, or NULL */
    pthread_mutex_t *file_mu;   /* the server's file_mu */
    const sl_serve_model *sm;
} sl_serve_slot_kv;

/* serve_slots.c */
/* Creates n_slots slots for sm and their workers. Each slot's context (options co, copied)
 * is created now, or with a runtime (s->rt) at its first job, once the model is held (a
 * context of a model off the device cannot be created). eval_mu (or NULL): held around each
 * evaluation (contexts that share a device evaluate one at a time). */
sl_status sl__serve_pool_create(sl_serve *s, sl_serve_model *sm, const sl_ctx_options *co,
                                int n_slots, pthread_mutex_t *eval_mu, sl_serve_pool **out,
                                sl_error *err);
/* Cancels every job (queued ones end with 503) and joins the workers; later submissions are
 * refused. The pool stays readable until destroyed. Idempotent. */
void sl__serve_pool_stop(sl_serve_pool *pool);
/* sl__serve_pool_stop, then frees the contexts and the pool. */
void sl__serve_pool_destroy(sl_serve_pool *pool);
int32_t sl__serve_pool_n_ctx(const sl_serve_pool *pool);
int sl__serve_pool_n_slots(const sl_serve_pool *pool);
void sl__serve_pool_counters(sl_serve_pool *pool, sl_serve_counters *out);
/* Takes ownership of prompt; the job starts with one reference (the caller's). */
sl_status sl__serve_job_create(int32_t *prompt, size_t n_prompt, const sl_serve_params *p,
                               sl_serve_job **out, sl_error *err);
/* Queues the job (the pool takes its own reference); SL_ERR_UNSUPPORTED when stopping. */
sl_status sl__serve_pool_submit(sl_serve_pool *pool, sl_serve_job *job, sl_error *err);
void sl__serve_job_cancel(sl_serve_job *job);
/* The job failed with an HTTP status and a message (from its worker). */
void sl__serve_job_failf(sl_serve_job *j, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sl__serve_job_release(sl_serve_job *job);
sl_status sl__serve_job_validate(const sl_serve_job *job, sl_error *err); /* under job->mu */
void sl__serve_params_free(sl_serve_params *p);

/* serve_sample.c: the step between the logits and the sampler (llama.cpp's chain: logit_bias,
 * penalties, then sl_sampler_sample). */
typedef struct sl_serve_sampling sl_serve_sampling;
sl_status sl__serve_sampling_create(int32_t n_vocab, sl_serve_sampling **out, sl_error *err);
void sl__serve_sampling_destroy(sl_serve_sampling *ss);
/* Whether the request needs the logits (bias, penalties or probabilities). */
bool sl__serve_params_need_logits(const sl_serve_params *p);
/* Picks *tok from logits with p's bias and penalties over the window of hist[0, n_hist);
 * with p->probs fills *logprob (of *tok, from the raw logits) and alt[0, p->n_probs). */
sl_status sl__serve_sample(sl_serve_sampling *ss, sl_sampler *smp, const sl_serve_params *p,
                           const float *logits, const int32_t *hist, size_t n_hist,
                           int32_t *tok, float *logprob, sl_serve_alt *alt, sl_error *err);

/* One served model (read-only once serving starts, but for what its runtime says). */
struct sl_serve_model {
    const char *name;           /* its id in the API: the requests' "model" */
    const char *path;
    sl_model *model;
    sl_model_info info;         /* at start-up */
    sl_chat_tmpl chat;          /* family used for chat prompts */
    char *chat_source;          /* the GGUF's template text (malloc'd), or NULL */
    sl_serve_pool *pool;
    sl_serve_pooling pooling;   /* --pooling, else the file's <arch>.pooling_type (none) */
    int32_t fim[SL_FIM_N];      /* serve_infill.c sl__serve_model_vocab_meta */
};

/* serve.c: the server as the endpoints see it (read-only once serving starts).
 * Invariants: n_models >= 1; names are distinct; rt != NULL <=> the models were opened in
 * a runtime (several models, NAME=PATH, --pin or --residency); held == the holds taken by
 * sl__serve_model_hold and not yet given back (res_mu). */
struct sl_serve {
    sl_serve_model *models;     /* [n_models]; models[0] answers requests without "model" */
    size_t n_models;
    sl_runtime *rt;
    bool external;              /* --residency external: requests never load a model */
    pthread_mutex_t res_mu;     /* guards held; res_cv: a hold was given back */
    pthread_cond_t res_cv;
    int held;
    pthread_mutex_t eval_mu;    /* the pools' evaluations, when they share a device */
    sl_sampler_options so_default;
    int32_t n_predict_default;
    size_t max_body_bytes;
    bool adds_bos;
    int64_t started;            /* unix time */
    pthread_mutex_t mu;         /* guards next_id and http_* */
    uint64_t next_id;
    uint64_t http_requests, http_errors;
    const char *api_key;        /* --api-key: Bearer KEY required (but on /health, /models) */
    bool hotswap;               /* /health reloads changed tensors (sl_reload_changed) */
    bool embedding;             /* --embedding: the embeddings endpoints (contexts keep hidden
                                   states) */
    int32_t embd_normalize;     /* the default of a request's embd_normalize (2) */
    int32_t n_batch;            /* -b (infill's prompt budget) */
    const char *slot_save_path; /* --slot-save-path DIR, or NULL: slot actions refused (501) */
    /* one slot save writes and renames its file at a time: the temporary is TARGET.partial
     * (base/file.h), so two saves to one name from two slots' workers renamed each other's
     * half-written file into place */
    pthread_mutex_t file_mu;
    uint64_t reloads, reloaded_tensors; /* /health reloads that changed something; tensors */
};

/* The most numbers one embeddings request may ask for (rows x n_embd over its prompts):
 * ~200 MB of reply text, or one prompt of the whole context if more; past it a 413 */
enum { SL__SERVE_MAX_EMBD_FLOATS = 1 << 24 };

/* serve_api.c / serve_metrics.c: a reply is a whole body or an SSE stream. */
typedef struct sl_serve_stream sl_serve_stream;
typedef struct sl_serve_reply {
    int status;
    const char *content_type;
    char *body;                 /* malloc'd, body_len bytes */
    size_t body_len;
    sl_serve_stream *stream;    /* set instead of body for SSE */
    const char *allow;          /* Allow header of a 405 */
} sl_serve_reply;

/* Whether the client went away (polled while a non-streaming request waits). */
typedef bool (*sl_serve_gone_fn)(void *user);

typedef enum sl_serve_route {
    SL_ROUTE_HEALTH,
    SL_ROUTE_COMPLETION,
    SL_ROUTE_OAI_COMPLETION,
    SL_ROUTE_OAI_CHAT,
    SL_ROUTE_MODELS,
    SL_ROUTE_PROPS,
    SL_ROUTE_METRICS,
    SL_ROUTE_TOKENIZE,
    SL_ROUTE_DETOKENIZE,
    SL_ROUTE_APPLY_TEMPLATE,
    SL_ROUTE_SLOTS,
    SL_ROUTE_ADMIN_PIN,
    SL_ROUTE_ADMIN_UNPIN,
    SL_ROUTE_ADMIN_LOAD,
    SL_ROUTE_ADMIN_UNLOAD,
    SL_ROUTE_ADMIN_COMPACT,
    SL_ROUTE_EMBEDDING,         /* /embedding: llama-server's own shape */
    SL_ROUTE_OAI_EMBEDDINGS,
    SL_ROUTE_INFILL,
    SL_ROUTE_SLOT_ACTION,       /* POST /slots/{id}?action= (sl__serve_slot_action) */
} sl_serve_route;

void sl__serve_api_handle(sl_serve *s, sl_serve_route route, const char *body, size_t len,
                          sl_serve_gone_fn gone, void *gone_user, sl_serve_reply *r);
/* Blocks until the job is done; false (the job cancelled) when the client went away. */
bool sl__serve_job_wait(sl_serve_job *j, sl_serve_gone_fn gone, void *user);
/* A memory stream for a reply body; NULL when out of memory. */
FILE *sl__serve_body_open(sl_serve_reply *r);
/* Closes the body as the reply (status, content type); a 500 with a fixed body when the
 * stream failed (out of memory). */
void sl__serve_body_close(sl_serve_reply *r, FILE *f, int status, const char *type);
/* The content type of every JSON reply, and build_info / system_fingerprint's text. */
#define SL__SERVE_JSON "application/json; charset=utf-8"
#define SL__SERVE_BUILD "sluice"
/* GET /health (the hot-swap point), /v1/models and /props (serve_info.c). */
void sl__serve_health(sl_serve *s, sl_serve_reply *r);
void sl__serve_models(sl_serve *s, sl_serve_reply *r);
void sl__serve_props(sl_serve *s, sl_serve_reply *r);
/* A JSON error {"error": {"code", "message", "type"}} as llama-server writes it. */
void sl__serve_error(sl_serve_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Blocks until stream bytes are ready; copies at most max. Returns the count, 0 at the end. */
size_t sl__serve_stream_read(sl_serve_stream *st, char *buf, size_t max);
/* The client is done with the stream (finished or gone): cancels its job if still running. */
void sl__serve_stream_close(sl_serve_stream *st);
void sl__serve_metrics(sl_serve *s, sl_serve_reply *r);

/* serve_req.c: a request's JSON body as the endpoints read it. Getters leave *out alone when
 * the field is absent or null and return false after a 400 reply naming the field. */
typedef enum sl_serve_api {
    SL_API_NATIVE,
    SL_API_OAI_TEXT,
    SL_API_OAI_CHAT,
    SL_API_INFILL,              /* /infill: /completion's fields and shapes, and its inputs */
} sl_serve_api;
typedef struct sl_serve_req {
    sl_serve *s;
    sl_serve_model *sm;         /* the request's model, once known */
    sl_jdoc *d;
    sl_jref root;
    sl_serve_reply *r;
} sl_serve_req;
sl_jref sl__serve_field(const sl_serve_req *q, const char *key); /* SL_JNONE: absent or null */
bool sl__serve_get_int(const sl_serve_req *q, const char *key, int64_t lo, int64_t hi,
                       int64_t *out);
bool sl__serve_get_bool(const sl_serve_req *q, const char *key, bool *out);
/* Every member of the body is a field the endpoint honours, or a known one at the value that
 * changes nothing; else a 400 naming it. names: the endpoint's own fields, NULL-terminated. */
bool sl__serve_check_fields(const sl_serve_req *q, const char *const *names);
/* The server's defaults (no stop strings, no bias: nothing to free). */
sl_serve_params sl__serve_params_default(const sl_serve *s);
/* The generation fields of a completion endpoint (and the check of every field). */
bool sl__serve_get_params(const sl_serve_req *q, sl_serve_api kind, sl_serve_params *p);
/* sl_tokenize into a malloc'd array (a 500 reply on failure). */
bool sl__serve_tokenize(const sl_serve_req *q, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **tok, size_t *n);
/* "prompt": a string, an array holding one string, or an array of token ids. */
bool sl__serve_get_prompt(const sl_serve_req *q, int32_t **tok, size_t *n);
/* Several prompts, llama-server's tokenize_input_prompts: a string or an array of token ids
 * (and strings) is one; any other array is one per element, each a string or such an array. */
typedef struct sl_serve_prompts {
    int32_t **tok;              /* [count] malloc'd arrays */
    size_t *n;
    size_t count;
} sl_serve_prompts;
/* The prompts of field key (a 400 naming it when absent or malformed); add_special: BOS as the
 * model says before each prompt that starts with text. */
bool sl__serve_get_prompts(const sl_serve_req *q, const char *key, bool add_special,
                           sl_serve_prompts *out);
/* One prompt from v: a string or an array of token ids and strings. what names it. */
bool sl__serve_prompt_of(const sl_serve_req *q, sl_jref v, const char *what, bool add_special,
                         int32_t **tok, size_t *n);
void sl__serve_prompts_free(sl_serve_prompts *p);
/* "messages" through the model's chat template: the prompt text (malloc'd). */
bool sl__serve_chat_text(const sl_serve_req *q, char **text, size_t *len);

/* The text of tokens (malloc'd, *len bytes + NUL); NULL when out of memory or invalid. */
char *sl__serve_detokenize(const sl_serve_model *sm, const int32_t *tok, size_t n, size_t *len);
/* The model the request names ("model"): absent, or any name when one model is served, the
 * first; NULL after an error reply (400, 404, 409). */
sl_serve_model *sl__serve_req_model(const sl_serve_req *q);
/* llama-server's generation settings object ({"n_predict", "seed", "temperature", ...}). */
void sl__serve_params_json(FILE *f, const sl_serve_params *p);

/* serve_text.c: POST /tokenize, /detokenize, /apply-template; GET /slots. */
void sl__serve_text_handle(const sl_serve_req *q, sl_serve_route route);
void sl__serve_slots(sl_serve *s, sl_serve_reply *r);
/* The JSON objects GET /slots lists for pool's slots (first: no comma before the first). */
void sl__serve_pool_slots_json(sl_serve_pool *pool, FILE *f, bool *first);

/* serve_models.c */
/* The model named name[0, len) (name NULL: the default, models[0], when there is one model;
 * NULL with several). NULL when there is none of that name. */
sl_serve_model *sl__serve_model_find(sl_serve *s, const char *name, size_t len);
/* Appends "'a', 'b'" (the names, for messages) to buf (cap bytes). */
void sl__serve_model_names(const sl_serve *s, char *buf, size_t cap);
/* The 404 of a name no model has, naming it and listing the served ones. */
void sl__serve_model_unknown(const sl_serve *s, sl_serve_reply *r, const char *name,
                             size_t len);
/* Holds sm for a request's run (sl_runtime_hold; without a runtime nothing to do). When the
 * arena is full of models other requests hold, waits until one is given back. 0, or the HTTP
 * status of a failure with err set: 409 (externally managed and not resident), 503. */
int sl__serve_model_hold(sl_serve *s, sl_serve_model *sm, sl_error *err);
void sl__serve_model_unhold(sl_serve *s, sl_serve_model *sm);
/* Its residency as "disk", "host", "device", "pinned" and its device bytes (without a
 * runtime: "device" and the model's own device bytes). */
const char *sl__serve_model_state(const sl_serve *s, const sl_serve_model *sm,
                                  uint64_t *device_bytes);
/* The JSON object /v1/models lists for sm. */
void sl__serve_model_json(FILE *f, const sl_serve *s, const sl_serve_model *sm);
/* Checks the invariants of sl_serve (and its runtime's); SL_ERR_INVALID naming the broken
 * one. */
sl_status sl__serve_validate(sl_serve *s, sl_error *err);
/* The list GET /v1/models answers: {"object":"list","data":[every model]}. */
void sl__serve_models_json(FILE *f, const sl_serve *s);

/* serve_api.c: a completion of kind (pre: its prompts, already built, or NULL: the body's) */
void sl__serve_completion(sl_serve_req *q, sl_serve_api kind, sl_serve_prompts *pre,
                          sl_serve_gone_fn gone, void *user);
/* The 400 of a prompt of n tokens longer than the context (exceed_context_size_error). */
void sl__serve_error_ctx(sl_serve_reply *r, size_t n, int32_t n_ctx);
/* An error reply of a given type ("not_supported_error" ...). */
void sl__serve_error_typed(sl_serve_reply *r, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* serve_embd.c */
void sl__serve_embeddings(sl_serve_req *q, bool oai, sl_serve_gone_fn gone, void *user);
/* SL_OP_EMBED on a slot (its worker) */
void sl__serve_embd_run(sl_serve_slot_kv *kv, sl_serve_job *j);

/* serve_infill.c */
/* sm's pooling type (<arch>.pooling_type) and FIM tokens from its file, as llama.cpp's vocab
 * reads them (the keys, then its fallback by token text). */
sl_status sl__serve_model_vocab_meta(sl_serve_model *sm, sl_error *err);
void sl__serve_infill(sl_serve_req *q, sl_serve_gone_fn gone, void *user);

/* serve_slot_file.c: POST /slots/{id}?action=save|restore|erase; id and action from the URL
 * (NULL: absent); body: {"filename"} (and "model" with several models). */
void sl__serve_slot_action(sl_serve *s, const char *id, const char *action, const char *body,
                           size_t len, sl_serve_gone_fn gone, void *user, sl_serve_reply *r);
/* SL_OP_SLOT_SAVE / _RESTORE / _ERASE on a slot (its worker) */
void sl__serve_slot_file_run(sl_serve_slot_kv *kv, sl_serve_job *j);

/* serve_admin.c: an admin route; d is the request body, already parsed; root its value. */
void sl__serve_admin(sl_serve *s, sl_serve_route route, const sl_jdoc *d, sl_jref root,
                     sl_serve_reply *r);

/* serve_http.c */
typedef struct sl_serve_http sl_serve_http;
/* Listens on host:port (port 0: any free port; *bound_port says which). */
sl_status sl__serve_http_start(sl_serve *s, const char *host, int port, int max_conn,
                               int timeout_s, sl_serve_http **out, int *bound_port,
                               sl_error *err);
void sl__serve_http_stop(sl_serve_http *h);

#endif
