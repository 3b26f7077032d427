/* POST /slots/{id}?action=save|restore|erase (llama-server's slot actions, with
 * --slot-save-path DIR): a slot's prompt cache to a file, back from one, or dropped.
 *
 * Body {"filename": NAME} for save and restore: NAME is a plain file name in DIR (1 to 255
 * bytes, no '/', '\\', control bytes, no "..", not starting with '.'), else 400 "Invalid
 * filename". The job waits for that slot (id_slot) like any other; ids outside the model's
 * slots are a 400 (llama-server wraps them around). Without --slot-save-path every action is a
 * 501; an unknown action a 400. Answers: save {"id_slot", "filename", "n_saved", "n_written",
 * "timings": {"save_ms"}}, restore {"id_slot", "filename", "n_restored", "n_read", "timings":
 * {"restore_ms"}}, erase {"id_slot", "n_erased"}.
 *
 * The file, Sluice's own (little-endian): the magic "SLSLOT01", then u64 words — version,
 * the slot's n_ctx, n_vocab, n_embd, n_layer, n_params (the model it was saved from), the
 * token count, the KV state's bytes — the architecture (32 bytes, NUL-padded), the tokens
 * (int32), then the KV state (sl_ctx_state_get). Written to NAME.partial and renamed. A
 * restore checks every part before the cache changes and names what differs (another model,
 * more tokens than this slot's n_ctx, another KV type or layout, a size that does not add
 * up, a token outside the vocabulary): 400 "Unable to restore slot: ...", the slot's cache
 * then empty. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "tools/common/cli.h"
#include "tools/common/json.h"
#include "tools/serve/serve_impl.h"

static const char k_magic[8] = {'S', 'L', 'S', 'L', 'O', 'T', '0', '1'};
enum { FILE_VERSION = 1, N_WORDS = 8, ARCH_BYTES = 32 };
enum { W_VERSION, W_N_CTX, W_N_VOCAB, W_N_EMBD, W_N_LAYER, W_N_PARAMS, W_N_TOKENS, W_STATE };
enum { HEAD_BYTES = 8 + N_WORDS * 8 + ARCH_BYTES };

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        const ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static void head_fill(const sl_serve_slot_kv *kv, uint64_t n_tokens, uint64_t state,
                      uint8_t *h)
{
    const sl_model_info *mi = &kv->sm->info;
    const uint64_t w[N_WORDS] = {FILE_VERSION, (uint64_t)kv->n_ctx, (uint64_t)mi->n_vocab,
                                 (uint64_t)mi->n_embd, (uint64_t)mi->n_layer, mi->n_params,
                                 n_tokens, state};
    memcpy(h, k_magic, 8);
    memcpy(h + 8, w, sizeof w);
    memset(h + 8 + sizeof w, 0, ARCH_BYTES);
    strncpy((char *)h + 8 + sizeof w, mi->arch, ARCH_BYTES - 1);
}

static void save(sl_serve_slot_kv *kv, sl_serve_job *j)
{
    sl_error err = {0};
    size_t n_state = 0;
    /* the KV the slot's tokens describe (a failed job may have left other positions) */
    if (sl_ctx_rewind(kv->ctx, (int32_t)kv->n_kv, &err) ||
        sl_ctx_state_get(kv->ctx, NULL, 0, &n_state, &err)) {
        sl__serve_job_failf(j, 500, "Unable to save slot: %s", err.msg);
        return;
    }
    uint8_t *buf = malloc(HEAD_BYTES + kv->n_kv * sizeof(int32_t) + n_state);
    if (!buf) {
        sl__serve_job_failf(j, 500, "Unable to save slot: out of memory");
        return;
    }
    head_fill(kv, kv->n_kv, n_state, buf);
    memcpy(buf + HEAD_BYTES, kv->hist, kv->n_kv * sizeof(int32_t));
    uint8_t *state = buf + HEAD_BYTES + kv->n_kv * sizeof(int32_t);
    size_t got = 0;
    if (kv->eval_mu) pthread_mutex_lock(kv->eval_mu);
    const sl_status st = sl_ctx_state_get(kv->ctx, state, n_state, &got, &err);
    if (kv->eval_mu) pthread_mutex_unlock(kv->eval_mu);
    const size_t total = HEAD_BYTES + kv->n_kv * sizeof(int32_t) + n_state;
    char *target = NULL, *tmp = NULL;
    bool exists;
    struct stat sb;
    int fd = -1;
    pthread_mutex_lock(kv->file_mu);
    if (st || sl_file_output_resolve(j->path, &target, &exists, &sb, &err) ||
        sl_file_temp_create(target, &tmp, &fd, &err)) {
        sl__serve_job_failf(j, 500, "Unable to save slot: %s", err.msg);
    } else {
        bool ok = write_all(fd, buf, total) && !fsync(fd);
        ok = !close(fd) && ok && !rename(tmp, target);
        if (ok) {
            j->io_tokens = kv->n_kv;
            j->io_bytes = total;
        } else {
            sl__serve_job_failf(j, 500, "Unable to save slot: %s: %s", tmp, strerror(errno));
            unlink(tmp);
        }
    }
    pthread_mutex_unlock(kv->file_mu);
    free(target);
    free(tmp);
    free(buf);
}

static size_t read_all(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

/* Why the header h of a file of size bytes cannot be restored into kv ("" when it can). */
static void check_head(const sl_serve_slot_kv *kv, const uint8_t *h, size_t size, uint64_t *w,
                       char *why, size_t cap)
{
    const sl_model_info *mi = &kv->sm->info;
    char arch[ARCH_BYTES + 1] = "";
    memcpy(w, h + 8, N_WORDS * sizeof *w);
    memcpy(arch, h + 8 + N_WORDS * sizeof *w, ARCH_BYTES);
    if (memcmp(h, k_magic, 8) || w[W_VERSION] != FILE_VERSION)
        snprintf(why, cap, "not a Sluice slot file of version %d", FILE_VERSION);
    else if (strcmp(arch, mi->arch) || w[W_N_VOCAB] != (uint64_t)mi->n_vocab ||
             w[W_N_EMBD] != (uint64_t)mi->n_embd || w[W_N_LAYER] != (uint64_t)mi->n_layer ||
             w[W_N_PARAMS] != mi->n_params)
        snprintf(why, cap, "saved from another model (%.32s, %" PRIu64 " parameters, n_vocab %"
                 PRIu64 ", n_embd %" PRIu64 ", %" PRIu64 " layers; this one: %s, %" PRIu64 ", %d, "
                 "%d, %d)", arch, w[W_N_PARAMS], w[W_N_VOCAB], w[W_N_EMBD], w[W_N_LAYER],
                 mi->arch, mi->n_params, mi->n_vocab, mi->n_embd, mi->n_layer);
    else if (w[W_N_TOKENS] > (uint64_t)kv->n_ctx)
        snprintf(why, cap, "%" PRIu64 " tokens (saved with n_ctx %" PRIu64 ") do not fit this "
                 "slot's n_ctx %" PRId32, w[W_N_TOKENS], w[W_N_CTX], kv->n_ctx);
    else if (w[W_STATE] > size || size != HEAD_BYTES + w[W_N_TOKENS] * 4 + w[W_STATE])
        snprintf(why, cap, "%zu bytes, its header says %" PRIu64 " tokens and a KV state of %"
                 PRIu64 " bytes", size, w[W_N_TOKENS], w[W_STATE]);
}

static void restore(sl_serve_slot_kv *kv, sl_serve_job *j)
{
    sl_error err = {0};
    int fd = -1;
    struct stat sb;
    uint8_t head[HEAD_BYTES], *buf = NULL; /* buf: the tokens, then the KV state */
    if (sl_file_open_input(j->path, &fd, &sb, &err)) {
        sl__serve_job_failf(j, 400, "Unable to restore slot: %s", err.msg);
        return;
    }
    const size_t size = (size_t)sb.st_size;
    const sl_model_info *mi = &kv->sm->info;
    uint64_t w[N_WORDS] = {0};
    char why[240] = "";
    if (size < HEAD_BYTES)
        snprintf(why, sizeof why, "%zu bytes: not a Sluice slot file", size);
    else if (read_all(fd, head, HEAD_BYTES) != HEAD_BYTES)
        snprintf(why, sizeof why, "cannot read its header");
    else
        check_head(kv, head, size, w, why, sizeof why);
    const size_t body = size - HEAD_BYTES;
    if (!why[0] && !(buf = malloc(body ? body : 1)))
        snprintf(why, sizeof why, "out of memory (%zu bytes)", body);
    else if (!why[0] && read_all(fd, buf, body) != body)
        snprintf(why, sizeof why, "cannot read its %zu bytes", size);
    close(fd);
    const int32_t *tok = why[0] ? NULL : (const int32_t *)(void *)buf;
    for (uint64_t i = 0; tok && !why[0] && i < w[W_N_TOKENS]; i++)
        if (tok[i] < 0 || tok[i] >= mi->n_vocab)
            snprintf(why, sizeof why, "token %" PRIu64 " is %" PRId32 ", outside the vocabulary "
                     "(%d)", i, tok[i], mi->n_vocab);
    if (!why[0]) {
        kv->n_kv = 0;
        if (kv->eval_mu) pthread_mutex_lock(kv->eval_mu);
        const sl_status st = sl_ctx_state_set(kv->ctx, buf + w[W_N_TOKENS] * 4, w[W_STATE],
                                              &err);
        if (kv->eval_mu) pthread_mutex_unlock(kv->eval_mu);
        if (st) snprintf(why, sizeof why, "%s", err.msg);
        else if (sl_ctx_n_past(kv->ctx) != (int32_t)w[W_N_TOKENS])
            snprintf(why, sizeof why, "its KV state holds %d positions, its tokens %" PRIu64,
                     sl_ctx_n_past(kv->ctx), w[W_N_TOKENS]);
    }
    if (why[0]) {
        kv->n_kv = 0; /* llama-server clears the slot's prompt on a failed restore */
        sl_ctx_rewind(kv->ctx, 0, NULL);
        sl__serve_job_failf(j, 400, "Unable to restore slot: %s", why);
    } else {
        memcpy(kv->hist, tok, w[W_N_TOKENS] * sizeof *tok);
        kv->n_kv = (size_t)w[W_N_TOKENS];
        j->io_tokens = w[W_N_TOKENS];
        j->io_bytes = size;
    }
    free(buf);
}

void sl__serve_slot_file_run(sl_serve_slot_kv *kv, sl_serve_job *j)
{
    const double t0 = sl_cli_now_s();
    if (j->op == SL_OP_SLOT_SAVE) {
        save(kv, j);
    } else if (j->op == SL_OP_SLOT_RESTORE) {
        restore(kv, j);
    } else {
        j->io_tokens = kv->n_kv;
        kv->n_kv = 0;
        sl_ctx_rewind(kv->ctx, 0, NULL);
    }
    j->io_ms = (sl_cli_now_s() - t0) * 1e3;
}

/* ---- the endpoint --------------------------------------------------------------------------- */

/* llama.cpp's fs_validate_filename, without subdirectories. */
static bool valid_name(const char *s, size_t n)
{
    if (!n || n > 255 || s[0] == '.' || memmem(s, n, "..", 2)) return false;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == ':') return false;
    }
    return true;
}

void sl__serve_slot_action(sl_serve *s, const char *id, const char *action, const char *body,
                           size_t len, sl_serve_gone_fn gone, void *user, sl_serve_reply *r)
{
    if (!s->slot_save_path) {
        sl__serve_error_typed(r, 501, "not_supported_error", "This server does not support "
                              "slots action. Start it with `--slot-save-path`");
        return;
    }
    char *end = NULL;
    errno = 0;
    const long idl = id && *id ? strtol(id, &end, 10) : -1;
    if (!id || !*id || *end || errno || idl < 0 || idl > INT32_MAX) {
        sl__serve_error(r, 400, "Invalid slot ID");
        return;
    }
    sl_serve_op op = SL_OP_SLOT_ERASE;
    if (action && !strcmp(action, "save")) op = SL_OP_SLOT_SAVE;
    else if (action && !strcmp(action, "restore")) op = SL_OP_SLOT_RESTORE;
    else if (!action || strcmp(action, "erase")) {
        sl__serve_error(r, 400, "Invalid action");
        return;
    }
    sl_error err = {0};
    sl_serve_req q = {.s = s, .r = r};
    if (sl_jdoc_parse(len ? body : "{}", len ? len : 2, 64, &q.d, &err)) {
        sl__serve_error(r, err.code == SL_ERR_NOMEM ? 500 : 400, "%s", err.msg);
        return;
    }
    char *path = NULL;
    sl_serve_job *j = NULL;
    size_t flen = 0;
    const char *fname = NULL;
    static const char *const k_fields[] = {"filename", "model", NULL};
    if (sl_jdoc_kind(q.d, q.root) != SL_JOBJ) {
        sl__serve_error(r, 400, "the request body must be a JSON object");
        goto out;
    }
    if (!(q.sm = sl__serve_req_model(&q)) || !sl__serve_check_fields(&q, k_fields)) goto out;
    const int n_slots = sl__serve_pool_n_slots(q.sm->pool);
    if (idl >= n_slots) {
        sl__serve_error(r, 400, "Invalid slot ID: %ld (the model has %d slot%s)", idl, n_slots,
                        n_slots > 1 ? "s" : "");
        goto out;
    }
    if (op != SL_OP_SLOT_ERASE) {
        fname = sl_jdoc_str(q.d, sl__serve_field(&q, "filename"), &flen);
        if (!fname || !valid_name(fname, flen) || strlen(fname) != flen) {
            sl__serve_error(r, 400, "Invalid filename");
            goto out;
        }
        const size_t dl = strlen(s->slot_save_path);
        if (!(path = malloc(dl + flen + 2))) {
            sl__serve_error(r, 500, "out of memory");
            goto out;
        }
        snprintf(path, dl + flen + 2, "%s%s%s", s->slot_save_path,
                 dl && s->slot_save_path[dl - 1] == '/' ? "" : "/", fname);
    }
    sl_serve_params p = sl__serve_params_default(s);
    p.id_slot = (int32_t)idl;
    if (sl__serve_job_create(NULL, 0, &p, &j, &err)) {
        sl__serve_error(r, 500, "%s", err.msg);
        goto out;
    }
    j->op = op;
    j->path = path;
    path = NULL;
    if (sl__serve_pool_submit(q.sm->pool, j, &err)) {
        sl__serve_error(r, 503, "%s", err.msg);
        goto out;
    }
    if (!sl__serve_job_wait(j, gone, user)) {
        sl__serve_error(r, 400, "the client closed the connection");
        goto out;
    }
    if (j->error_status) {
        sl__serve_error(r, j->error_status, "%s", j->error_msg);
        goto out;
    }
    FILE *f = sl__serve_body_open(r);
    if (f) {
        fprintf(f, "{\"id_slot\":%ld,", idl);
        if (op == SL_OP_SLOT_ERASE) {
            fprintf(f, "\"n_erased\":%" PRIu64 "}", j->io_tokens);
        } else {
            const bool sv = op == SL_OP_SLOT_SAVE;
            fputs("\"filename\":", f);
            sl_json_str(f, fname, flen);
            fprintf(f, ",\"%s\":%" PRIu64 ",\"%s\":%" PRIu64 ",\"timings\":{\"%s\":",
                    sv ? "n_saved" : "n_restored", j->io_tokens, sv ? "n_written" : "n_read",
                    j->io_bytes, sv ? "save_ms" : "restore_ms");
            sl_json_f64(f, j->io_ms);
            fputs("}}", f);
        }
    }
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
out:
    if (j) sl__serve_job_release(j);
    free(path);
    sl_jdoc_free(q.d);
}
