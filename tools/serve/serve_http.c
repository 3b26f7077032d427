/* HTTP of `sluice serve` on libmicrohttpd (Debian's libmicrohttpd-dev): one thread per
 * connection, so a handler may block while its job runs and a stream's reader may block until
 * the next token.
 *
 * Per request: the route is looked up on the first call (404 for an unknown path, 405 with an
 * Allow header for a known path and another method); a POST body is collected up to
 * max_body_bytes — a declared Content-Length over the limit is refused at once with 413
 * (libmicrohttpd then closes the connection unread); a chunked body past the limit is read and
 * dropped, then refused with 413, and the connection is dropped without a reply past 4 times
 * the limit; the endpoint runs on the last call. Every error is
 * llama-server's JSON {"error": {"code", "message", "type"}}. A client that disconnects is
 * noticed by polling its socket while a non-streaming request waits, and by libmicrohttpd
 * failing to write to it while streaming (it then frees the response, which cancels the job). */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <microhttpd.h>

#include "tools/common/cli.h"
#include "tools/serve/serve_impl.h"

/* A connection the daemon holds: busy from a request's first call to its completion;
 * uploading from then until its body has come whole (idle_since: when that began). */
typedef struct conn {
    struct MHD_Connection *c;
    int fd;
    bool busy, uploading;
    double idle_since;
    struct conn *next;
} conn;

/* Invariants (mu): conns lists every open connection once; n_conns its length. */
struct sl_serve_http {
    sl_serve *s;
    struct MHD_Daemon *d;
    int max_conn;
    int timeout_s;              /* --timeout: idle, and the most a request's body may take */
    pthread_mutex_t mu;
    conn *conns;
    int n_conns;
};

enum { HEADER_LIMIT = 16384 };  /* header bytes: more is a JSON 431 (the pool holds 1 MiB) */

typedef struct route {
    const char *path;
    const char *method;         /* "GET" (HEAD too) or "POST" */
    sl_serve_route route;
} route;

static const route k_routes[] = {
    {"/health", "GET", SL_ROUTE_HEALTH},
    {"/v1/health", "GET", SL_ROUTE_HEALTH},
    {"/completion", "POST", SL_ROUTE_COMPLETION},
    {"/completions", "POST", SL_ROUTE_COMPLETION},
    {"/v1/completions", "POST", SL_ROUTE_OAI_COMPLETION},
    {"/chat/completions", "POST", SL_ROUTE_OAI_CHAT},
    {"/v1/chat/completions", "POST", SL_ROUTE_OAI_CHAT},
    {"/models", "GET", SL_ROUTE_MODELS},
    {"/v1/models", "GET", SL_ROUTE_MODELS},
    {"/props", "GET", SL_ROUTE_PROPS},
    {"/metrics", "GET", SL_ROUTE_METRICS},
    {"/slots", "GET", SL_ROUTE_SLOTS},
    {"/tokenize", "POST", SL_ROUTE_TOKENIZE},
    {"/detokenize", "POST", SL_ROUTE_DETOKENIZE},
    {"/apply-template", "POST", SL_ROUTE_APPLY_TEMPLATE},
    {"/embedding", "POST", SL_ROUTE_EMBEDDING},
    {"/embeddings", "POST", SL_ROUTE_EMBEDDING},
    {"/v1/embeddings", "POST", SL_ROUTE_OAI_EMBEDDINGS},
    {"/infill", "POST", SL_ROUTE_INFILL},
    {"/slots/", "POST", SL_ROUTE_SLOT_ACTION}, /* a prefix: /slots/{id}?action=... */
    {"/models/pin", "POST", SL_ROUTE_ADMIN_PIN},
    {"/models/unpin", "POST", SL_ROUTE_ADMIN_UNPIN},
    {"/models/load", "POST", SL_ROUTE_ADMIN_LOAD},
    {"/models/unload", "POST", SL_ROUTE_ADMIN_UNLOAD},
    {"/models/compact", "POST", SL_ROUTE_ADMIN_COMPACT},
};

/* One request's state (libmicrohttpd's con_cls). Invariants: n <= max_body_bytes, n < cap
 * unless body == NULL; too_large => body == NULL. */
typedef struct request {
    const route *rt;
    char slot_id[24];           /* SL_ROUTE_SLOT_ACTION: the URL's {id} ("" if too long) */
    char *body;
    size_t n, cap;
    bool replied;               /* a reply was queued on the first call (404, 405, 413) */
    bool too_large;             /* the body passed the limit: the rest is dropped, then 413 */
    size_t dropped;             /* bytes dropped so far */
    double started;             /* when the headers came (the body's deadline counts from it) */
} request;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    const size_t n = sl__serve_stream_read(cls, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) { sl__serve_stream_close(cls); }

/* CORS as llama-server: the request's Origin reflected (credentials allowed), else "*". */
static void add_cors(struct MHD_Connection *c, struct MHD_Response *resp)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin ? origin : "*");
    if (!origin) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Vary", "Origin");
}

static enum MHD_Result send_reply(sl_serve *s, struct MHD_Connection *c, sl_serve_reply *r)
{
    struct MHD_Response *resp;
    if (r->stream) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader,
                                                 r->stream, stream_free);
        if (!resp) sl__serve_stream_close(r->stream);
    } else {
        resp = MHD_create_response_from_buffer(r->body_len, r->body, MHD_RESPMEM_MUST_FREE);
        if (!resp) free(r->body);
    }
    r->body = NULL;
    r->stream = NULL;
    if (!resp) return MHD_NO;
    if (r->content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    add_cors(c, resp);
    if (r->status == 204) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                    "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", h ? h : "*");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    if (r->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->content_type && !strcmp(r->content_type, "text/event-stream"))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    const enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    pthread_mutex_lock(&s->mu);
    s->http_requests++;
    s->http_errors += r->status >= 400;
    pthread_mutex_unlock(&s->mu);
    return ret;
}

/* Whether the peer closed its end: the socket reads as EOF, or is in error. */
static bool conn_gone(void *user)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(user, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    const ssize_t k = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result early_error(sl_serve *s, struct MHD_Connection *c, request *q, int status,
                                   const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Replies before the body is read (libmicrohttpd then drops the body and closes). */
static enum MHD_Result early_error(sl_serve *s, struct MHD_Connection *c, request *q, int status,
                                   const char *allow, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl_serve_reply r = {.allow = allow};
    sl__serve_error(&r, status, "%s", msg);
    q->replied = true;
    return send_reply(s, c, &r);
}

/* Paths answered without an API key (llama-server's public endpoints). */
static bool is_public(const char *url)
{
    return !strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/models") ||
           !strcmp(url, "/v1/models");
}

/* Equal strings, in time that depends on their lengths only. */
static bool same_key(const char *a, const char *b)
{
    const size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = na != nb;
    for (size_t i = 0; i < na; i++) diff |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return nb && !diff;
}

/* "Authorization: Bearer KEY" (or "X-Api-Key: KEY") matches --api-key. */
static bool authorized(const sl_serve *s, struct MHD_Connection *c)
{
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (auth && !strncasecmp(auth, "Bearer ", 7)) return same_key(auth + 7, s->api_key);
    return xkey && same_key(xkey, s->api_key);
}

static enum MHD_Result add_len(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* Marks c busy and uploading (a request began), busy only (its body came whole) or idle (it
 * ended). */
static void mark(sl_serve_http *h, struct MHD_Connection *c, bool busy, bool uploading)
{
    pthread_mutex_lock(&h->mu);
    for (conn *k = h->conns; k; k = k->next)
        if (k->c == c) {
            if (k->busy != busy) k->idle_since = sl_cli_now_s();
            k->busy = busy;
            k->uploading = uploading;
        }
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    sl_serve_http *h = cls;
    sl_serve *s = h->s;
    request *q = *con_cls;
    if (!q) {
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *con_cls = q;
        q->started = sl_cli_now_s();
        mark(h, c, true, true);
        size_t head = strlen(url) + strlen(method) + 16;
        MHD_get_connection_values(c, MHD_HEADER_KIND, add_len, &head);
        if (head > HEADER_LIMIT)
            return early_error(s, c, q, 431, NULL, "the request's headers are larger than %d "
                               "bytes", HEADER_LIMIT);
        if (!strcmp(method, "OPTIONS")) { /* CORS preflight, any path */
            sl_serve_reply r = {.status = 204, .body = strdup("")};
            q->replied = true;
            return r.body ? send_reply(s, c, &r) : MHD_NO;
        }
        if (s->api_key && !is_public(url) && !authorized(s, c)) {
            sl_serve_reply r = {0};
            sl__serve_error(&r, 401, "Invalid API Key");
            q->replied = true;
            return send_reply(s, c, &r);
        }
        const route *found = NULL;
        for (size_t i = 0; i < sizeof k_routes / sizeof *k_routes; i++) {
            const route *k = &k_routes[i];
            const size_t kl = strlen(k->path);
            const bool prefix = k->route == SL_ROUTE_SLOT_ACTION;
            if (prefix ? strncmp(url, k->path, kl) || !url[kl] : strcmp(url, k->path)) continue;
            if (prefix && strlen(url + kl) < sizeof q->slot_id) strcpy(q->slot_id, url + kl);
            found = k;
            break;
        }
        if (!found) return early_error(s, c, q, 404, NULL, "File Not Found: %s", url);
        const bool get = !strcmp(found->method, "GET");
        if (strcmp(method, found->method) && !(get && !strcmp(method, "HEAD")))
            return early_error(s, c, q, 405, get ? "GET, HEAD" : "POST",
                               "method %s not allowed on %s (allowed: %s)", method, url,
                               get ? "GET, HEAD" : "POST");
        q->rt = found;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end;
        errno = 0;
        const unsigned long long len = cl ? strtoull(cl, &end, 10) : 0;
        if (cl && !errno && *end == 0 && len > s->max_body_bytes)
            return early_error(s, c, q, 413, NULL, "the request body is larger than %zu bytes "
                               "(--max-body-bytes)", s->max_body_bytes);
        return MHD_YES;
    }
    if (*upload_size) {
        const size_t n = *upload_size;
        *upload_size = 0;
        /* a body trickling in holds its connection: it must come within --timeout of its
         * headers, not only with a byte every --timeout (no reply can be sent mid-body) */
        if (sl_cli_now_s() - q->started > h->timeout_s) return MHD_NO;
        if (q->too_large) {
            /* libmicrohttpd takes no reply in the middle of a body: drop the rest and answer
             * at its end, or hang up on a client that keeps sending far past the limit */
            q->dropped += n;
            return q->dropped / 4 > s->max_body_bytes ? MHD_NO : MHD_YES;
        }
        if (n > s->max_body_bytes - q->n) {
            q->too_large = true;
            q->dropped = q->n + n;
            free(q->body);
            q->body = NULL;
            q->n = q->cap = 0;
            return MHD_YES;
        }
        return sl_cli_append(&q->body, &q->n, &q->cap, upload, n) ? MHD_NO : MHD_YES;
    }
    mark(h, c, true, false);
    if (q->replied) return MHD_YES;
    if (q->too_large)
        return early_error(s, c, q, 413, NULL, "the request body is larger than %zu bytes "
                           "(--max-body-bytes)", s->max_body_bytes);
    sl_serve_reply r = {0};
    if (q->rt->route == SL_ROUTE_SLOT_ACTION)
        sl__serve_slot_action(s, q->slot_id,
                              MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action"),
                              q->body ? q->body : "", q->n, conn_gone, c, &r);
    else
        sl__serve_api_handle(s, q->rt->route, q->body ? q->body : "", q->n, conn_gone, c, &r);
    return send_reply(s, c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    request *q = *con_cls;
    if (!q) return;
    mark(cls, c, false, false);
    free(q->body);
    free(q);
    *con_cls = NULL;
}

static const char k_busy[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
    "Connection: close\r\nContent-Length: 113\r\n\r\n"
    "{\"error\":{\"code\":503,\"message\":\"too many connections (--max-connections), none "
    "idle\",\"type\":\"unavailable_error\"}}";

/* Connections opened and closed. Past --max-connections, the connection idle the longest is
 * closed to make room (keep-alive sockets must not lock clients out); with none idle the new
 * one gets a 503 and is closed. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)socket_context;
    sl_serve_http *h = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&h->mu);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        for (conn **pk = &h->conns; *pk; pk = &(*pk)->next)
            if ((*pk)->c == c) {
                conn *k = *pk;
                *pk = k->next;
                free(k);
                h->n_conns--;
                break;
            }
        pthread_mutex_unlock(&h->mu);
        return;
    }
    conn *k = calloc(1, sizeof *k);
    if (k) {
        *k = (conn){.c = c, .fd = ci ? ci->connect_fd : -1, .idle_since = sl_cli_now_s(),
                    .next = h->conns};
        h->conns = k;
        h->n_conns++;
    }
    int victim = -1;
    if (h->n_conns > h->max_conn) {
        const conn *old = NULL;
        /* the longest idle; none idle, the one sending its body the longest: a few clients
         * that send bodies a byte at a time do not lock everyone out */
        for (int pass = 0; pass < 2 && !old; pass++)
            for (const conn *o = h->conns; o; o = o->next)
                if (o != k && (pass ? o->uploading : !o->busy) && o->fd >= 0 &&
                    (!old || o->idle_since < old->idle_since))
                    old = o;
        if (old) {
            victim = old->fd;
        } else if (ci) {
            (void)!write(ci->connect_fd, k_busy, sizeof k_busy - 1);
            victim = ci->connect_fd;
        }
    }
    if (victim >= 0) shutdown(victim, SHUT_RDWR); /* its thread sees the end and closes it */
    pthread_mutex_unlock(&h->mu);
}

sl_status sl__serve_http_start(sl_serve *s, const char *host, int port, int max_conn,
                               int timeout_s, sl_serve_http **out, int *bound_port,
                               sl_error *err)
{
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    const int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai) return sl_error_set(err, SL_ERR_INVALID, "--host %s: %s", host, gai_strerror(gai));
    sl_serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    }
    h->s = s;
    h->max_conn = max_conn;
    h->timeout_s = timeout_s;
    pthread_mutex_init(&h->mu, NULL);
    /* libmicrohttpd's default SO_REUSEADDR (a restart binds past TIME_WAIT), not
     * LISTENING_ADDRESS_REUSE's SO_REUSEPORT: with it a second server bound a port still in
     * use and the kernel split the connections between the two */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)max_conn + 1,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)1 << 20,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return sl_error_set(err, SL_ERR_IO, "cannot listen on %s:%d (in use, or not an address "
                            "of this machine)", host, port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    *out = h;
    return SL_OK;
}

void sl__serve_http_stop(sl_serve_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d);
    while (h->conns) {
        conn *k = h->conns;
        h->conns = k->next;
        free(k);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}
