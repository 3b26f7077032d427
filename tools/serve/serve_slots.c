/* The slots of `sluice serve` (llama-server's --parallel): N contexts, each owned by one worker
 * thread, fed from one FIFO queue of jobs. A job runs on one slot from start to end: the prompt is
 * evaluated in one prefill, then tokens are sampled and decoded one at a time — the same steps,
 * in the same order, as `sluice generate`, so that temperature 0 gives the same text for the
 * same prompt and n.
 *
 * Continuous batching (flat combining): a worker does not evaluate its step itself; it posts it
 * (its context and tokens: a prompt, or one token) and one of the posting workers becomes the
 * leader, waits a moment for the steps of the other workers inside a job (about one pass at
 * most: they come as soon as they have sampled), and runs every posted step that fits in n_batch in
 * one forward pass (sl_ctx_eval_batch; prompts join beside the decodes, a prompt longer than
 * n_batch runs alone, chunked). The others sleep until their step is done, then sample from
 * their own context's logits in their own thread. A step alone in its pass is sl_ctx_eval_sample
 * (a GPU's greedy pick brings back only the id). The engine's CPU kernels are batch-invariant,
 * so a sequence's text does not depend on its company (on a GPU within the GEMM's batch
 * tolerance). A failed pass of several steps is rerun one step at a time, so one bad step
 * fails alone. Each pass counts once in n_decode and its steps in busy_slots.
 *
 * Prompt cache (llama-server's cache_prompt, on by default): a slot keeps its KV cache and the
 * tokens in it (hist[0, n_kv)) after a job; the next job rewinds to the longest common prefix
 * with its prompt (at most n_prompt - 1: the last prompt token is always evaluated, for its
 * logits) and evaluates only the rest. A queued job goes to the idle slot with the longest
 * such prefix, then the least recently used. The cache is dropped when the weights may have
 * changed since (a --hotswap reload; with a runtime, any load, eviction or compaction).
 *
 * Streaming and stop strings: the text grows by one token's piece at a time; n_ready holds
 * back the bytes that could still turn out to begin a stop string, and an incomplete UTF-8
 * sequence at the end, so that a stream never sends what the final text will not contain.
 *
 * Invariants of the pool (under pool->mu): every job in the queue is QUEUED and referenced by
 * the queue; slot->job is RUNNING and referenced by the slot, or NULL; counters.busy is the
 * number of non-NULL slot->job and counters.queued the queue's length. hist and n_kv of a slot
 * are written by its worker while slot->job is set and read by the others only while it is
 * NULL (both under pool->mu). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common/cli.h"
#include "tools/common/json.h"
#include "tools/common/model_flags.h"
#include "tools/serve/serve_impl.h"

typedef struct slot {
    sl_serve_pool *pool;
    int id;
    sl_ctx *ctx;
    pthread_t thread;
    bool started;
    sl_serve_job *job;          /* running job (pool->mu) */
    int64_t id_task;            /* the running or last job's number, -1 before (pool->mu) */
    sl_ctx_stats stats;         /* the context's totals after its last job (pool->mu) */
    char *piece;                /* token text scratch, owned by the worker */
    size_t piece_cap;
    sl_serve_sampling *ss;      /* bias, penalties, probabilities (created at first need) */
    int32_t *hist;              /* [n_ctx] the tokens of the KV cache, by position */
    size_t n_kv;                /* positions of hist whose KV the context holds */
    uint64_t epoch;             /* kv_epoch when the KV was last written */
    sl_serve_alt alt[SL_SERVE_MAX_PROBS];
} slot;

typedef struct qnode {
    sl_serve_job *job;
    struct qnode *next;
} qnode;

/* How long a leader waits for the active workers' steps: about one pass (a straggler left
 * out waits that long for this pass, then runs its own), within these bounds. */
static const double GATHER_MIN_S = 0.005, GATHER_MAX_S = 0.1;

/* A worker's posted evaluation: ctx, tok[0, n); sampled by the pass (picked: next) when it ran
 * alone and the job needs no raw logits (smp set), else by the worker afterwards. The worker
 * owns it; the leader writes done, picked, next, st and err (under bmu). */
typedef struct step {
    sl_ctx *ctx;
    sl_sampler *smp;
    const int32_t *tok;
    size_t n;
    bool done, picked;
    int32_t next;
    sl_status st;
    sl_error err;
} step;

struct sl_serve_pool {
    sl_serve *s;
    sl_serve_model *sm;
    sl_model *m;
    sl_ctx_options co;          /* of the contexts created at a slot's first job */
    sl_model_info info;
    int32_t n_ctx;
    int n_slots;
    slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a job was queued, or stopping */
    bool stopping;
    qnode *head, *tail;
    pthread_mutex_t *eval_mu;   /* held around each eval, or NULL */
    sl_serve_counters c;
    int64_t n_tasks;            /* jobs started so far (mu) */
    /* the batcher (under bmu): posted[0, n_posted) wait for a pass, in posting order; n_active
     * workers are inside a job's evaluations (each will post before long); leading: a worker
     * runs a pass. bcv: a step was posted or done, a worker left its job. */
    pthread_mutex_t bmu;
    pthread_cond_t bcv;
    step **posted;
    int n_posted, n_active;
    bool leading;
    bool solo;                  /* the engine refused a pass of several (recurrent layers):
                                 * one step per pass from then on */
    double pass_s;              /* the passes' recent duration (a moving average; bmu) */
    /* the leader's arrays of a pass ([n_slots] each) */
    step **take;
    sl_ctx **ctxs;
    const int32_t **toks;
    size_t *ns;
};

/* ---- jobs --------------------------------------------------------------------------------- */

void sl__serve_params_free(sl_serve_params *p)
{
    for (size_t i = 0; i < p->n_stop; i++) free(p->stop[i]);
    p->n_stop = 0;
    free(p->bias);
    p->bias = NULL;
    p->n_bias = 0;
    free(p->grammar);
    p->grammar = NULL;
}

sl_status sl__serve_job_create(int32_t *prompt, size_t n_prompt, const sl_serve_params *p,
                               sl_serve_job **out, sl_error *err)
{
    sl_serve_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(prompt);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    }
    j->prompt = prompt;
    j->n_prompt = n_prompt;
    j->p = *p;
    j->refs = 1;
    j->stop_word = -1;
    j->slot = -1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    *out = j;
    return SL_OK;
}

void sl__serve_job_release(sl_serve_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int refs = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (refs) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    sl__serve_params_free(&j->p);
    free(j->prompt);
    free(j->text);
    free(j->toks);
    free(j->top);
    free(j->path);
    free(j->embd);
    free(j);
}

void sl__serve_job_cancel(sl_serve_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->cancel = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

sl_status sl__serve_job_validate(const sl_serve_job *j, sl_error *err)
{
    if (j->n_ready > j->n_text)
        return sl_error_set(err, SL_ERR_INVALID, "job: n_ready %zu > n_text %zu", j->n_ready,
                            j->n_text);
    if (j->state == SL_JOB_DONE && j->n_ready != j->n_text)
        return sl_error_set(err, SL_ERR_INVALID, "job: done with %zu bytes held back",
                            j->n_text - j->n_ready);
    if (j->refs < 1) return sl_error_set(err, SL_ERR_INVALID, "job: %d references", j->refs);
    if (j->text && j->text[j->n_text])
        return sl_error_set(err, SL_ERR_INVALID, "job: text not NUL-terminated");
    return SL_OK;
}

/* Bytes at the end of text[0, n) that may be the start of a stop string or an incomplete
 * UTF-8 sequence: a stream must not send them yet. */
static size_t held_back(const sl_serve_job *j)
{
    const char *t = j->text;
    const size_t n = j->n_text;
    size_t hold = 0;
    for (size_t s = 0; s < j->p.n_stop; s++) {
        const size_t len = strlen(j->p.stop[s]);
        for (size_t k = len - 1; k > hold; k--)
            if (k <= n && !memcmp(t + n - k, j->p.stop[s], k)) {
                hold = k;
                break;
            }
    }
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        const unsigned char b = (unsigned char)t[n - back];
        if ((b & 0xC0) == 0x80) continue; /* continuation byte */
        const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        if (need > back && back > hold) hold = back;
        break;
    }
    return hold;
}

/* Appends a token's text and applies the stop strings; under j->mu. false: out of memory. */
static bool job_append(sl_serve_job *j, const char *s, size_t n)
{
    const size_t old = j->n_text;
    if (sl_cli_append(&j->text, &j->n_text, &j->cap_text, s, n)) return false;
    /* the earliest stop string that now appears (it can only end inside the new piece) */
    size_t cut = SIZE_MAX;
    for (size_t k = 0; k < j->p.n_stop; k++) {
        const size_t len = strlen(j->p.stop[k]);
        const size_t from = old >= len - 1 ? old - (len - 1) : 0;
        const char *hit = memmem(j->text + from, j->n_text - from, j->p.stop[k], len);
        if (hit && (size_t)(hit - j->text) < cut) {
            cut = (size_t)(hit - j->text);
            j->stop_word = (int)k;
        }
    }
    if (cut != SIZE_MAX) {
        j->n_text = cut;
        j->text[cut] = 0;
        j->stop = SL_STOP_WORD;
    }
    const size_t ready = j->n_text - held_back(j);
    if (ready > j->n_ready) j->n_ready = ready;
    if (j->n_ready > j->n_text) j->n_ready = j->n_text;
    return true;
}

/* ---- the worker ----------------------------------------------------------------------------- */

/* Runs steps[0, k) in one pass (or one step alone: sl_ctx_eval_sample when it has a sampler),
 * the device's evaluations held; each step's status into it. Counts the pass. */
static sl_status run_pass(sl_serve_pool *pool, step *const *steps, int k, sl_error *err)
{
    sl_ctx **ctxs = pool->ctxs;
    const int32_t **toks = pool->toks;
    size_t *ns = pool->ns;
    for (int i = 0; i < k; i++) {
        ctxs[i] = steps[i]->ctx;
        toks[i] = steps[i]->tok;
        ns[i] = steps[i]->n;
    }
    if (pool->eval_mu) pthread_mutex_lock(pool->eval_mu);
    step *one = steps[0];
    sl_status st = k > 1     ? sl_ctx_eval_batch(ctxs, toks, ns, (size_t)k, err)
                   : one->smp ? sl_ctx_eval_sample(one->ctx, one->smp, one->tok, one->n,
                                                   &one->next, err)
                             : sl_ctx_eval(one->ctx, one->tok, one->n, err);
    if (pool->eval_mu) pthread_mutex_unlock(pool->eval_mu);
    if (k == 1) one->picked = !st && one->smp;
    pthread_mutex_lock(&pool->mu);
    pool->c.n_decode++;
    pool->c.busy_slots += (uint64_t)k;
    pthread_mutex_unlock(&pool->mu);
    return st;
}

/* The leader's turn (bmu held, leading set): gathers the active workers' steps, runs the
 * oldest ones that fit in one pass, and hands out the results. */
static void lead(sl_serve_pool *pool)
{
    const double wait = pool->pass_s < GATHER_MIN_S   ? GATHER_MIN_S
                        : pool->pass_s > GATHER_MAX_S ? GATHER_MAX_S
                                                      : pool->pass_s;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)(wait * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!pool->solo && pool->n_posted < pool->n_active &&
           pthread_cond_timedwait(&pool->bcv, &pool->bmu, &until) == 0) {
    }
    step **take = pool->take;
    int k = 0, kept = 0;
    const size_t cap = (size_t)sl_ctx_n_batch(pool->posted[0]->ctx);
    size_t total = 0;
    for (int i = 0; i < pool->n_posted; i++) {
        step *p = pool->posted[i];
        if (!k || (!pool->solo && total + p->n <= cap)) {
            take[k++] = p;
            total += p->n;
        } else {
            pool->posted[kept++] = p;
        }
    }
    pool->n_posted = kept;
    pthread_mutex_unlock(&pool->bmu);
    sl_error err = {0};
    const double t0 = sl_cli_now_s();
    sl_status st = run_pass(pool, take, k, &err);
    const double dt = sl_cli_now_s() - t0;
    for (int i = 0; i < k; i++) {
        take[i]->st = st;
        take[i]->err = err;
    }
    /* a failed pass of several: each step alone, so that only the bad one fails; a model
     * whose passes cannot carry several sequences runs one step per pass from now on */
    if (st == SL_ERR_UNSUPPORTED && k > 1) {
        pthread_mutex_lock(&pool->bmu);
        pool->solo = true;
        pthread_mutex_unlock(&pool->bmu);
    }
    for (int i = 0; st && k > 1 && i < k; i++) {
        take[i]->err = (sl_error){0};
        take[i]->st = run_pass(pool, &take[i], 1, &take[i]->err);
    }
    pthread_mutex_lock(&pool->bmu);
    pool->pass_s = pool->pass_s ? 0.75 * pool->pass_s + 0.25 * dt : dt;
    for (int i = 0; i < k; i++) take[i]->done = true;
    pool->leading = false;
    pthread_cond_broadcast(&pool->bcv);
}

/* Posts a step and returns when a pass (this worker's or another's) has run it. */
static void post(sl_serve_pool *pool, step *me)
{
    pthread_mutex_lock(&pool->bmu);
    pool->posted[pool->n_posted++] = me;
    pthread_cond_broadcast(&pool->bcv); /* a gathering leader counts it */
    while (!me->done) {
        if (!pool->leading) {
            pool->leading = true;
            lead(pool);
        } else {
            pthread_cond_wait(&pool->bcv, &pool->bmu);
        }
    }
    pthread_mutex_unlock(&pool->bmu);
}

/* Whether the worker takes part in the batcher's gathering (from its job's first evaluation
 * to its end). */
static void set_active(sl_serve_pool *pool, bool on)
{
    pthread_mutex_lock(&pool->bmu);
    pool->n_active += on ? 1 : -1;
    pthread_cond_broadcast(&pool->bcv); /* a leader no longer waits for this one */
    pthread_mutex_unlock(&pool->bmu);
}

/* Evaluates tok[0, n) on the slot's context in a pass of the batcher and samples the next
 * token (in the pass when it ran alone: a greedy pick happens where the output layer ran). */
static sl_status eval(slot *sl, sl_sampler *smp, const int32_t *tok, size_t n, int32_t *next,
                      float *logprob, double *secs, sl_error *err)
{
    sl_serve_pool *pool = sl->pool;
    const double t0 = sl_cli_now_s();
    const sl_serve_params *p = &sl->job->p;
    const bool raw = sl__serve_params_need_logits(p);
    step me = {.ctx = sl->ctx, .smp = raw ? NULL : smp, .tok = tok, .n = n};
    post(pool, &me);
    *secs += sl_cli_now_s() - t0;
    sl_status st = me.st;
    if (st && err) *err = me.err;
    const int32_t n_past = sl_ctx_n_past(sl->ctx);
    if (st || n_past < 0 || (size_t)n_past < n || n_past > pool->n_ctx) {
        sl->n_kv = 0; /* the cache's state is unknown: not reused */
        return st ? st : sl_error_set(err, SL_ERR_INVALID, "n_past %d after an eval", n_past);
    }
    const size_t n_hist = (size_t)n_past;
    memcpy(sl->hist + n_hist - n, tok, n * sizeof *tok);
    sl->n_kv = n_hist;
    if (me.picked) {
        *next = me.next;
        return SL_OK;
    }
    const float *logits = sl_ctx_logits(sl->ctx, -1);
    if (!logits) return sl_error_set(err, SL_ERR_INVALID, "no logits after the evaluation");
    if (!raw) return sl_sampler_sample(smp, logits, pool->info.n_vocab, next, err);
    return sl__serve_sample(sl->ss, smp, p, logits, sl->hist, n_hist, next, logprob, sl->alt,
                            err);
}

/* Records a generated token (its probabilities from the last sample); under j->mu. */
static bool job_push_tok(sl_serve_job *j, const slot *sl, int32_t tok, float logprob)
{
    const size_t k = (size_t)(j->p.probs ? j->p.n_probs : 0);
    if (j->n_toks == j->cap_toks) {
        const size_t cap = j->cap_toks ? 2 * j->cap_toks : 16;
        sl_serve_tok *t = realloc(j->toks, cap * sizeof *t);
        if (t) j->toks = t;
        sl_serve_alt *a = k ? realloc(j->top, cap * k * sizeof *a) : NULL;
        if (a) j->top = a;
        if (!t || (k && !a)) return false;
        j->cap_toks = cap;
    }
    j->toks[j->n_toks] = (sl_serve_tok){.id = tok, .logprob = logprob, .end = j->n_text};
    if (k) memcpy(j->top + j->n_toks * k, sl->alt, k * sizeof *sl->alt);
    j->n_toks++;
    return true;
}

static void job_fail(sl_serve_job *j, int status, const char *what, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    j->error_status = status;
    snprintf(j->error_msg, sizeof j->error_msg, "%s: %s", what, msg);
    pthread_mutex_unlock(&j->mu);
}

void sl__serve_job_failf(sl_serve_job *j, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&j->mu);
    j->error_status = status;
    vsnprintf(j->error_msg, sizeof j->error_msg, fmt, ap);
    pthread_mutex_unlock(&j->mu);
    va_end(ap);
}

/* What a slot's KV depends on besides its tokens: the --hotswap reloads and, with a runtime,
 * its loads, evictions and compactions (sums of counters that only grow: equal means none). */
static uint64_t kv_epoch(sl_serve *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t e = s->reloads;
    pthread_mutex_unlock(&s->mu);
    if (s->rt) {
        sl_runtime_stats st;
        sl_runtime_stats_get(s->rt, &st);
        e += st.loads + st.evictions + st.compactions;
    }
    return e;
}

/* The tokens of j's prompt the slot holds in its KV cache from position 0; 0 without
 * cache_prompt. Under pool->mu (another slot) or from its own worker. */
static size_t common_prefix(const slot *sl, const sl_serve_job *j)
{
    if (!j->p.cache_prompt || !sl->hist || !sl->ctx) return 0;
    const size_t lim = sl->n_kv < j->n_prompt ? sl->n_kv : j->n_prompt;
    size_t n = 0;
    while (n < lim && sl->hist[n] == j->prompt[n]) n++;
    return n;
}

/* Whether idle slot sl takes job j: of the idle slots, the one with the longest cached prefix
 * of its prompt, then the least recently used, then the lowest id (one winner). pool->mu. */
static bool slot_takes(const slot *sl, const sl_serve_job *j)
{
    const sl_serve_pool *pool = sl->pool;
    if (j->p.id_slot >= 0) return j->p.id_slot == sl->id; /* id_slot: that one, when idle */
    const size_t mine = common_prefix(sl, j);
    for (int i = 0; i < pool->n_slots; i++) {
        const slot *o = &pool->slots[i];
        if (o == sl || o->job) continue;
        const size_t theirs = common_prefix(o, j);
        if (theirs > mine ||
            (theirs == mine && (o->id_task < sl->id_task ||
                                (o->id_task == sl->id_task && o->id < sl->id))))
            return false;
    }
    return true;
}

/* A slot operation (serve_embd.c, serve_slot_file.c) on the slot's context; the KV it leaves
 * (an embedded prompt, a restored file) is as current as the weights. */
static void run_op(slot *sl, sl_serve_job *j)
{
    sl_serve_pool *pool = sl->pool;
    sl_serve_slot_kv kv = {.ctx = sl->ctx, .hist = sl->hist, .n_kv = sl->n_kv,
                           .n_ctx = pool->n_ctx, .id = sl->id, .eval_mu = pool->eval_mu,
                           .file_mu = &pool->s->file_mu, .sm = pool->sm};
    if (kv_epoch(pool->s) != sl->epoch) kv.n_kv = 0; /* stale: nothing worth saving */
    if (j->op == SL_OP_EMBED) sl__serve_embd_run(&kv, j);
    else sl__serve_slot_file_run(&kv, j);
    sl->n_kv = kv.n_kv;
    sl->epoch = kv_epoch(pool->s);
}

/* Runs one job on the slot's context, its model held from the first step to the last (so
 * that no other request evicts or moves it between two steps). Mirrors generate.c's loop
 * step for step. */
static void run_job(slot *sl, sl_serve_job *j)
{
    sl_serve_pool *pool = sl->pool;
    sl_error err = {0};
    sl_sampler *smp = NULL;
    sl_serve_stop stop = SL_STOP_LIMIT;
    bool active = false;
    const int held = sl__serve_model_hold(pool->s, pool->sm, &err);
    if (held) {
        job_fail(j, held, "model", err.msg);
        goto done;
    }
    if (!sl->ctx && sl_ctx_create(pool->m, &pool->co, &sl->ctx, &err)) {
        job_fail(j, 500, "context", err.msg);
        goto done;
    }
    if (!sl->hist && !(sl->hist = malloc((size_t)pool->n_ctx * sizeof *sl->hist))) {
        job_fail(j, 500, "context", "out of memory");
        goto done;
    }
    if (j->op != SL_OP_GENERATE) {
        run_op(sl, j);
        goto done;
    }
    /* the prompt cache: keep the KV of the common prefix (one token left to evaluate) */
    const uint64_t epoch = kv_epoch(pool->s);
    size_t keep = epoch == sl->epoch ? common_prefix(sl, j) : 0;
    if (keep && keep >= j->n_prompt) keep = j->n_prompt - 1;
    sl->n_kv = 0;
    /* a recurrent model (qwen3next) cannot drop tokens from its state: it keeps the whole
     * history or starts again from 0 (sluice.h sl_ctx_rewind) */
    if (keep && sl_ctx_rewind(sl->ctx, (int32_t)keep, &err) == SL_ERR_UNSUPPORTED) keep = 0;
    if (sl_ctx_rewind(sl->ctx, (int32_t)keep, &err)) {
        job_fail(j, 500, "rewind", err.msg);
        goto done;
    }
    sl->n_kv = keep;
    sl->epoch = epoch;
    j->n_cached = keep;
    if (sl_sampler_create(&j->p.so, &smp, &err) ||
        (j->p.grammar && sl_sampler_set_grammar(smp, pool->m, j->p.grammar, &err))) {
        job_fail(j, 500, "sampler", err.msg);
        goto done;
    }
    if (sl__serve_params_need_logits(&j->p) && !sl->ss &&
        sl__serve_sampling_create(pool->info.n_vocab, &sl->ss, &err)) {
        job_fail(j, 500, "sampler", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    int32_t next;
    float logprob = 0;
    set_active(pool, true);
    active = true;
    if (eval(sl, smp, j->prompt + keep, j->n_prompt - keep, &next, &logprob, &j->prompt_s,
             &err)) {
        job_fail(j, 500, "prefill", err.msg);
        goto done;
    }
    const int32_t max_gen = j->p.n_predict < 0 ? pool->n_ctx : j->p.n_predict;
    for (int32_t n_gen = 0; n_gen < max_gen;) {
        const int32_t tok = next;
        if (sl_token_is_eog(pool->m, tok) && !j->p.ignore_eos) {
            stop = SL_STOP_EOS;
            break;
        }
        n_gen++;
        size_t n;
        if (sl_cli_token_piece(pool->m, tok, &sl->piece, &sl->piece_cap, &n, &err)) {
            job_fail(j, 500, "detokenize", err.msg[0] ? err.msg : "out of memory");
            goto done;
        }
        pthread_mutex_lock(&j->mu);
        const bool ok = job_append(j, sl->piece, n) && job_push_tok(j, sl, tok, logprob) &&
                        !sl__serve_job_validate(j, &err);
        j->n_predicted = n_gen;
        const bool cancel = j->cancel, word = j->stop == SL_STOP_WORD;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        if (!ok) {
            job_fail(j, 500, "generate", err.msg[0] ? err.msg : "out of memory");
            goto done;
        }
        if (word) {
            stop = SL_STOP_WORD;
            break;
        }
        if (sl_sampler_grammar_done(smp) && !j->p.ignore_eos) { /* nothing more can follow */
            stop = SL_STOP_EOS;
            break;
        }
        if (cancel) {
            stop = SL_STOP_NONE;
            break;
        }
        if (n_gen == max_gen) break; /* the last token needs no eval */
        if (sl_ctx_n_past(sl->ctx) >= pool->n_ctx) break;
        if (eval(sl, smp, &tok, 1, &next, &logprob, &j->gen_s, &err)) {
            job_fail(j, 500, "decode", err.msg);
            goto done;
        }
        j->n_decoded++;
    }
done:
    if (active) set_active(pool, false);
    sl_sampler_destroy(smp);
    if (sl->ctx) j->n_past = sl_ctx_n_past(sl->ctx);
    if (!held) sl__serve_model_unhold(pool->s, pool->sm);
    pthread_mutex_lock(&j->mu);
    j->stop = j->error_status ? SL_STOP_NONE : stop;
    pthread_mutex_unlock(&j->mu);
}

/* The first queued job idle slot sl takes (slot_takes), *prev the node before it (NULL: the
 * head), or NULL: a job pinned to a busy slot (id_slot) waits for it without holding back the
 * jobs behind it. pool->mu. */
static qnode *next_for(const slot *sl, qnode **prev)
{
    *prev = NULL;
    for (qnode *q = sl->pool->head; q; *prev = q, q = q->next)
        if (slot_takes(sl, q->job)) return q;
    return NULL;
}

/* The job's end, published once the pool's counters include it (a client that reads /metrics
 * after its reply sees its tokens). */
static void job_done(sl_serve_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->n_ready = j->n_text;
    j->state = SL_JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void *worker(void *arg)
{
    slot *sl = arg;
    sl_serve_pool *pool = sl->pool;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        qnode *q = NULL, *prev = NULL;
        while (!pool->stopping && !(q = next_for(sl, &prev)))
            pthread_cond_wait(&pool->cv, &pool->mu);
        if (pool->stopping) break;
        if (prev) prev->next = q->next;
        else pool->head = q->next;
        if (pool->tail == q) pool->tail = prev;
        if (pool->head) pthread_cond_broadcast(&pool->cv); /* the next job's slot */
        sl_serve_job *j = q->job;
        free(q);
        pool->c.queued--;
        pool->c.busy++;
        sl->job = j;
        sl->id_task = pool->n_tasks++;
        pthread_mutex_unlock(&pool->mu);

        pthread_mutex_lock(&j->mu);
        const bool skip = j->cancel;
        j->state = SL_JOB_RUNNING;
        j->slot = sl->id;
        pthread_mutex_unlock(&j->mu);
        if (!skip) run_job(sl, j); /* skip: the client left while the job waited */
        sl_ctx_stats stats = sl->stats;
        if (sl->ctx) sl_ctx_stats_get(sl->ctx, &stats);
        sl_model_info info;
        if (pool->eval_mu) pthread_mutex_lock(pool->eval_mu);
        sl_model_info_get(pool->m, &info);
        if (pool->eval_mu) pthread_mutex_unlock(pool->eval_mu);

        pthread_mutex_lock(&j->mu);
        const bool failed = j->error_status != 0, cancelled = j->cancel;
        const int32_t n_predicted = j->n_predicted;
        pthread_mutex_unlock(&j->mu);
        pthread_mutex_lock(&pool->mu);
        sl->stats = stats;
        pool->c.model = info;
        pool->c.busy--;
        sl->job = NULL;
        if (pool->head) pthread_cond_broadcast(&pool->cv); /* an idle slot more to choose */
        pool->c.prompt_tokens += skip ? 0 : j->n_prompt - j->n_cached;
        pool->c.prompt_s += j->prompt_s;
        pool->c.predicted_tokens += (uint64_t)n_predicted;
        pool->c.predicted_s += j->gen_s;
        pool->c.decoded += (uint64_t)j->n_decoded;
        if (failed) pool->c.requests_failed++;
        else if (cancelled) pool->c.requests_cancelled++;
        else pool->c.requests_done++;
        job_done(j);
        sl__serve_job_release(j);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------------- */

sl_status sl__serve_pool_create(sl_serve *s, sl_serve_model *sm, const sl_ctx_options *co,
                                int n_slots, pthread_mutex_t *eval_mu, sl_serve_pool **out,
                                sl_error *err)
{
    *out = NULL;
    sl_serve_pool *pool = calloc(1, sizeof *pool);
    slot *slots = calloc((size_t)n_slots, sizeof *slots);
    if (!pool || !slots) {
        free(pool);
        free(slots);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    }
    sl_model *m = sm->model;
    pool->s = s;
    pool->sm = sm;
    pool->m = m;
    sl_model_info_get(m, &pool->info);
    pool->c.model = pool->info;
    pool->n_ctx = co->n_ctx ? co->n_ctx
                            : (pool->info.n_ctx_train < 4096 ? pool->info.n_ctx_train : 4096);
    pool->n_slots = n_slots;
    pool->slots = slots;
    pool->eval_mu = eval_mu;
    pool->co = *co;
    pool->co.n_ctx = pool->n_ctx;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    pthread_mutex_init(&pool->bmu, NULL);
    pthread_cond_init(&pool->bcv, NULL);
    sl_status st = SL_OK;
    const size_t ns = (size_t)n_slots;
    pool->posted = calloc(ns, sizeof *pool->posted);
    pool->take = calloc(ns, sizeof *pool->take);
    pool->ctxs = calloc(ns, sizeof *pool->ctxs);
    pool->toks = calloc(ns, sizeof *pool->toks);
    pool->ns = calloc(ns, sizeof *pool->ns);
    if (!pool->posted || !pool->take || !pool->ctxs || !pool->toks || !pool->ns) {
        sl__serve_pool_destroy(pool);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_slots && !st; i++) {
        slots[i] = (slot){.pool = pool, .id = i, .id_task = -1};
        if (!s->rt && (st = sl_ctx_create(m, &pool->co, &slots[i].ctx, err))) break;
        if (slots[i].ctx) sl_ctx_stats_get(slots[i].ctx, &slots[i].stats);
        if (pthread_create(&slots[i].thread, NULL, worker, &slots[i]))
            st = sl_error_set(err, SL_ERR_NOMEM, "slot %d: cannot start its thread", i);
        else
            slots[i].started = true;
    }
    if (st) {
        sl__serve_pool_destroy(pool);
        return st;
    }
    *out = pool;
    return SL_OK;
}

void sl__serve_pool_stop(sl_serve_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    if (pool->stopping) {
        pthread_mutex_unlock(&pool->mu);
        return;
    }
    pool->stopping = true;
    for (qnode *q = pool->head, *next; q; q = next) {
        next = q->next;
        sl_serve_job *j = q->job;
        pthread_mutex_lock(&j->mu);
        j->cancel = true;
        j->error_status = 503;
        snprintf(j->error_msg, sizeof j->error_msg, "the server is shutting down");
        j->state = SL_JOB_DONE;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        sl__serve_job_release(j);
        free(q);
    }
    pool->head = pool->tail = NULL;
    pool->c.queued = 0;
    for (int i = 0; i < pool->n_slots; i++)
        if (pool->slots[i].job) sl__serve_job_cancel(pool->slots[i].job);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_slots; i++) {
        slot *sl = &pool->slots[i];
        if (sl->started) pthread_join(sl->thread, NULL);
        sl->started = false;
    }
}

void sl__serve_pool_destroy(sl_serve_pool *pool)
{
    if (!pool) return;
    sl__serve_pool_stop(pool);
    for (int i = 0; i < pool->n_slots; i++) {
        sl_ctx_destroy(pool->slots[i].ctx);
        free(pool->slots[i].piece);
        sl__serve_sampling_destroy(pool->slots[i].ss);
        free(pool->slots[i].hist);
    }
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->bmu);
    pthread_cond_destroy(&pool->bcv);
    free(pool->posted);
    free(pool->take);
    free(pool->ctxs);
    free(pool->toks);
    free(pool->ns);
    free(pool->slots);
    free(pool);
}

int32_t sl__serve_pool_n_ctx(const sl_serve_pool *pool) { return pool->n_ctx; }
int sl__serve_pool_n_slots(const sl_serve_pool *pool) { return pool->n_slots; }

sl_status sl__serve_pool_submit(sl_serve_pool *pool, sl_serve_job *j, sl_error *err)
{
    qnode *q = malloc(sizeof *q);
    if (!q) return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&pool->mu);
    if (pool->stopping) {
        pthread_mutex_unlock(&pool->mu);
        free(q);
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "the server is shutting down");
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    *q = (qnode){.job = j};
    if (pool->tail) pool->tail->next = q;
    else pool->head = q;
    pool->tail = q;
    pool->c.queued++;
    pthread_cond_broadcast(&pool->cv); /* the slot that takes it decides (slot_takes) */
    pthread_mutex_unlock(&pool->mu);
    return SL_OK;
}

void sl__serve_pool_counters(sl_serve_pool *pool, sl_serve_counters *out)
{
    pthread_mutex_lock(&pool->mu);
    *out = pool->c;
    sl_ctx_stats *e = &out->engine;
    memset(e, 0, sizeof *e);
    double overlap = 0;
    for (int i = 0; i < pool->n_slots; i++) {
        const sl_ctx_stats *s = &pool->slots[i].stats;
        e->prefill_tokens += s->prefill_tokens;
        e->decode_tokens += s->decode_tokens;
        e->prefill_seconds += s->prefill_seconds;
        e->decode_seconds += s->decode_seconds;
        e->expert_calls_cpu += s->expert_calls_cpu;
        e->expert_calls_gpu += s->expert_calls_gpu;
        e->expert_fetches += s->expert_fetches;
        e->expert_fallbacks += s->expert_fallbacks;
        e->expert_cache_lookups += s->expert_cache_lookups;
        e->expert_cache_hits += s->expert_cache_hits;
        e->copies += s->copies;
        e->copy_bytes += s->copy_bytes;
        overlap += s->copy_overlap_pct * (double)s->copies;
        if (!e->moe_scheduler) e->moe_scheduler = s->moe_scheduler;
    }
    /* the copies' overlap, weighted by each slot's number of copies */
    e->copy_overlap_pct = e->copies ? overlap / (double)e->copies : 0;
    pthread_mutex_unlock(&pool->mu);
}

void sl__serve_pool_slots_json(sl_serve_pool *pool, FILE *f, bool *first)
{
    const sl_serve_params def = sl__serve_params_default(pool->s);
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->n_slots; i++) {
        const slot *sl = &pool->slots[i];
        sl_serve_job *j = sl->job;
        fprintf(f, "%s{\"id\":%d,\"id_task\":%" PRId64 ",\"n_ctx\":%" PRId32
                ",\"speculative\":false,\"is_processing\":%s,\"model\":", *first ? "" : ",",
                sl->id, sl->id_task, pool->n_ctx, j ? "true" : "false");
        *first = false;
        sl_json_cstr(f, pool->sm->name);
        fputs(",\"params\":", f);
        sl__serve_params_json(f, j ? &j->p : &def);
        int32_t n_decoded = 0, n_predict = j ? j->p.n_predict : def.n_predict;
        bool new_line = false;
        if (j) {
            pthread_mutex_lock(&j->mu);
            n_decoded = j->n_predicted;
            new_line = j->text && memchr(j->text, '\n', j->n_text);
            pthread_mutex_unlock(&j->mu);
        }
        fprintf(f, ",\"next_token\":{\"has_next_token\":%s,\"has_new_line\":%s,\"n_remain\":%"
                PRId32 ",\"n_decoded\":%" PRId32 "}}", j ? "true" : "false",
                new_line ? "true" : "false", n_predict < 0 ? -1 : n_predict - n_decoded,
                n_decoded);
    }
    pthread_mutex_unlock(&pool->mu);
}
