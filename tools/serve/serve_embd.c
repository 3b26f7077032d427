/* POST /embedding and /v1/embeddings of `sluice serve --embedding` (llama-server's
 * handle_embeddings_impl and send_embedding): the final hidden state of a prompt's tokens
 * (after the output norm: sl_ctx_embeddings), pooled as the model's <arch>.pooling_type or
 * --pooling says — mean over the tokens, cls the first, last the last, none every token — and,
 * when pooled, normalised with embd_normalize (llama.cpp's common_embd_normalize: -1 none,
 * 0 max-abs scaled to int16, 1 taxicab, 2 Euclidean (default), p > 2 the p-norm).
 *
 * Input: "input" (or "content", which answers in /embedding's shape on both routes): a string,
 * an array of token ids (and strings), or an array of such prompts, one result each, BOS as
 * the model says. /embedding answers [{"index", "embedding": [[...], ...]}] (one row pooled,
 * a row per token with pooling none); /v1/embeddings OpenAI's {"object": "list", "data":
 * [{"embedding", "index", "object": "embedding"}], "model", "usage"} and refuses pooling none
 * (400), as llama-server. Without --embedding both are a 501. encoding_format "base64" gives
 * each vector as the base64 of its little-endian float32 bytes. A prompt is evaluated whole
 * from position 0 in the slot that takes it (its KV then holds that prompt: a later
 * completion with the same prefix reuses it). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/cli.h"
#include "tools/common/json.h"
#include "tools/serve/serve_impl.h"


/* ---- on the slot ---------------------------------------------------------------------------- */

static void normalize(float *v, int32_t n, int32_t norm)
{
    double sum = 0;
    if (norm == -1) {
        sum = 1;
    } else if (norm == 0) {
        for (int32_t i = 0; i < n; i++) sum = fabs(v[i]) > sum ? fabs(v[i]) : sum;
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += (double)v[i] * v[i];
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabs(v[i]), norm);
        sum = pow(sum, 1.0 / norm);
    }
    const float k = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) v[i] *= k;
}

void sl__serve_embd_run(sl_serve_slot_kv *kv, sl_serve_job *j)
{
    const int32_t E = kv->sm->info.n_embd;
    const size_t n = j->n_prompt;
    sl_error err = {0};
    if (kv->eval_mu) pthread_mutex_lock(kv->eval_mu);
    const double t0 = sl_cli_now_s();
    kv->n_kv = 0;
    sl_status st = sl_ctx_rewind(kv->ctx, 0, &err);
    if (!st) st = sl_ctx_eval(kv->ctx, j->prompt, n, &err);
    j->prompt_s = sl_cli_now_s() - t0;
    if (kv->eval_mu) pthread_mutex_unlock(kv->eval_mu);
    if (st) {
        sl__serve_job_failf(j, 500, "embedding: %s", err.msg);
        return;
    }
    memcpy(kv->hist, j->prompt, n * sizeof *j->prompt);
    kv->n_kv = n;
    j->n_past = (int32_t)n;
    const size_t rows = j->pooling == SL_POOL_NONE ? n : 1;
    float *out = calloc(rows * (size_t)E, sizeof *out);
    if (!out) {
        sl__serve_job_failf(j, 500, "embedding: out of memory");
        return;
    }
    for (size_t t = 0; t < n; t++) {
        const bool take = j->pooling == SL_POOL_NONE || j->pooling == SL_POOL_MEAN ||
                          (j->pooling == SL_POOL_CLS && t == 0) ||
                          (j->pooling == SL_POOL_LAST && t == n - 1);
        const float *h = take ? sl_ctx_embeddings(kv->ctx, (int64_t)t) : NULL;
        if (take && !h) {
            free(out);
            sl__serve_job_failf(j, 500, "embedding: the context kept no hidden state");
            return;
        }
        float *dst = out + (j->pooling == SL_POOL_NONE ? t * (size_t)E : 0);
        for (int32_t i = 0; take && i < E; i++) dst[i] += h[i];
    }
    if (j->pooling == SL_POOL_MEAN)
        for (int32_t i = 0; i < E; i++) out[i] /= (float)n;
    if (j->pooling != SL_POOL_NONE) normalize(out, E, j->embd_normalize);
    pthread_mutex_lock(&j->mu);
    j->embd = out;
    j->n_embd_rows = rows;
    pthread_mutex_unlock(&j->mu);
}

/* ---- the endpoint --------------------------------------------------------------------------- */

static void put_b64(FILE *f, const float *v, int32_t n)
{
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v; /* little-endian float32: x86, arm64 */
    const size_t len = (size_t)n * sizeof *v;
    fputc('"', f);
    for (size_t i = 0; i < len; i += 3) {
        const uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) |
                           (i + 2 < len ? b[i + 2] : 0);
        fputc(k[w >> 18 & 63], f);
        fputc(k[w >> 12 & 63], f);
        fputc(i + 1 < len ? k[w >> 6 & 63] : '=', f);
        fputc(i + 2 < len ? k[w & 63] : '=', f);
    }
    fputc('"', f);
}

static void put_row(FILE *f, const float *v, int32_t n, bool b64)
{
    if (b64) {
        put_b64(f, v, n);
        return;
    }
    fputc('[', f);
    for (int32_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        sl_json_f32(f, v[i]);
    }
    fputc(']', f);
}

static const char *const k_fields[] = {"input", "content", "model", "encoding_format",
                                       "embd_normalize", "user", NULL};

void sl__serve_embeddings(sl_serve_req *q, bool oai, sl_serve_gone_fn gone, void *user)
{
    sl_serve *s = q->s;
    if (!s->embedding) {
        sl__serve_error_typed(q->r, 501, "not_supported_error", "This server does not support "
                              "embeddings. Start it with `--embeddings`");
        return;
    }
    if (!(q->sm = sl__serve_req_model(q))) return;
    const sl_serve_pooling pooling = q->sm->pooling;
    if (oai && pooling == SL_POOL_NONE) {
        sl__serve_error(q->r, 400, "Pooling type 'none' is not OAI compatible. Please use a "
                        "different pooling type");
        return;
    }
    if (!sl__serve_check_fields(q, k_fields)) return;
    const bool has_input = sl__serve_field(q, "input") != SL_JNONE;
    if (!has_input && sl__serve_field(q, "content") == SL_JNONE) {
        sl__serve_error(q->r, 400, "\"input\" or \"content\" must be provided");
        return;
    }
    if (!has_input) oai = false; /* "content" is not OpenAI's: /embedding's shape */
    bool b64 = false;
    const sl_jref fmt = sl__serve_field(q, "encoding_format");
    if (fmt != SL_JNONE) {
        size_t len;
        const char *v = sl_jdoc_str(q->d, fmt, &len);
        b64 = v && len == 6 && !memcmp(v, "base64", 6);
        if (!b64 && !(v && len == 5 && !memcmp(v, "float", 5))) {
            sl__serve_error(q->r, 400, "'encoding_format': the format to return the embeddings "
                            "in. Can be either float or base64");
            return;
        }
    }
    int64_t norm = s->embd_normalize;
    if (!sl__serve_get_int(q, "embd_normalize", -1, 64, &norm)) return;
    const sl_jref u = sl__serve_field(q, "user");
    if (u != SL_JNONE && sl_jdoc_kind(q->d, u) != SL_JSTR) {
        sl__serve_error(q->r, 400, "'user' must be a string");
        return;
    }
    sl_serve_prompts pr;
    if (!sl__serve_get_prompts(q, has_input ? "input" : "content", true, &pr)) return;
    const int32_t n_ctx = sl__serve_pool_n_ctx(q->sm->pool), E = q->sm->info.n_embd;
    sl_serve_job **jobs = calloc(pr.count, sizeof *jobs);
    bool ok = jobs != NULL;
    if (!ok) sl__serve_error(q->r, 500, "out of memory");
    size_t floats = 0; /* the reply's numbers: a row per token unpooled, per prompt pooled */
    for (size_t i = 0; ok && i < pr.count; i++) {
        if (!pr.n[i]) {
            sl__serve_error(q->r, 400, "Input content cannot be empty");
            ok = false;
        } else if (pr.n[i] > (size_t)n_ctx) {
            sl__serve_error_ctx(q->r, pr.n[i], n_ctx);
            ok = false;
        }
        floats += (pooling == SL_POOL_NONE ? pr.n[i] : 1) * (size_t)E;
    }
    /* all rows are held until the last prompt's, then written as text (~12 bytes a number):
     * a 49 KB body of token arrays asked for 13 MB at n_embd 64, tens of GB at 4096 */
    /* one prompt of the whole context always fits, as llama-server answers it */
    const size_t cap = (size_t)n_ctx * (size_t)E > SL__SERVE_MAX_EMBD_FLOATS
                           ? (size_t)n_ctx * (size_t)E : SL__SERVE_MAX_EMBD_FLOATS;
    if (ok && floats > cap) {
        sl__serve_error(q->r, 413, "the embeddings asked for are %zu numbers (%zu prompts, "
                        "pooling %s, n_embd %d), more than %zu in one request: send fewer tokens "
                        "or prompts per request%s", floats, pr.count,
                        pooling == SL_POOL_NONE ? "none" : "on", (int)E, cap,
                        pooling == SL_POOL_NONE ? ", or pool them (--pooling)" : "");
        ok = false;
    }
    size_t made = 0;
    sl_error err = {0};
    for (size_t i = 0; ok && i < pr.count; i++) {
        sl_serve_params p = sl__serve_params_default(s);
        if (sl__serve_job_create(pr.tok[i], pr.n[i], &p, &jobs[i], &err)) {
            pr.tok[i] = NULL;
            sl__serve_error(q->r, 500, "%s", err.msg);
            ok = false;
            break;
        }
        pr.tok[i] = NULL;
        made++;
        jobs[i]->op = SL_OP_EMBED;
        jobs[i]->pooling = pooling;
        jobs[i]->embd_normalize = (int32_t)norm;
        if (sl__serve_pool_submit(q->sm->pool, jobs[i], &err)) {
            sl__serve_error(q->r, 503, "%s", err.msg);
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < made; i++)
        if (!sl__serve_job_wait(jobs[i], gone, user)) {
            sl__serve_error(q->r, 400, "the client closed the connection");
            ok = false;
        } else if (jobs[i]->error_status || !jobs[i]->embd) {
            sl__serve_error(q->r, jobs[i]->error_status ? jobs[i]->error_status : 503, "%s",
                            jobs[i]->error_status ? jobs[i]->error_msg : "cancelled");
            ok = false;
        }
    FILE *f = ok ? sl__serve_body_open(q->r) : NULL;
    if (f) {
        size_t n_tokens = 0;
        fputs(oai ? "{\"object\":\"list\",\"data\":[" : "[", f);
        for (size_t i = 0; i < made; i++) {
            const sl_serve_job *j = jobs[i];
            n_tokens += j->n_prompt;
            if (i) fputc(',', f);
            if (oai) {
                fputs("{\"embedding\":", f);
                put_row(f, j->embd, E, b64);
                fprintf(f, ",\"index\":%zu,\"object\":\"embedding\"%s}", i,
                        b64 ? ",\"encoding_format\":\"base64\"" : "");
                continue;
            }
            fprintf(f, "{\"index\":%zu,\"embedding\":[", i);
            for (size_t r = 0; r < j->n_embd_rows; r++) {
                if (r) fputc(',', f);
                put_row(f, j->embd + r * (size_t)E, E, b64);
            }
            fputs("]}", f);
        }
        if (oai) {
            size_t len = 0;
            const char *name = sl_jdoc_str(q->d, sl__serve_field(q, "model"), &len);
            fputs("],\"model\":", f);
            if (name) sl_json_str(f, name, len);
            else sl_json_cstr(f, q->sm->name);
            fprintf(f, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}", n_tokens,
                    n_tokens);
        } else {
            fputc(']', f);
        }
        sl__serve_body_close(q->r, f, 200, SL__SERVE_JSON);
    }
    for (size_t i = 0; jobs && i < made; i++) {
        if (!ok) sl__serve_job_cancel(jobs[i]);
        sl__serve_job_release(jobs[i]);
    }
    free(jobs);
    sl__serve_prompts_free(&pr);
}
