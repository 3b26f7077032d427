/* alloc/hostpool: NUMA-placed, page-locked slabs sub-allocated by the BFC arena.
 *
 * Design
 * - Placement is decided once, in sl_hostpool_create (choose_placement), and never changes:
 *   a node (bind_memory: every slab is mbind()ed MPOL_BIND to it) or none (plain memory).
 * - A slab is born in slab_create, called by the BFC through the host backend when no free
 *   chunk fits: mmap (2 MiB aligned, so transparent huge pages can back it) → madvise
 *   MADV_HUGEPAGE → mbind → pre-touch → sl_device_host_register. The order matters: the policy
 *   must be set before the first touch places the pages, and registering untouched memory would
 *   make the driver fault every page in from one thread (the slow path public reports measure
 *   at minutes for hundreds of GB). It dies in slab_destroy: unregister → munmap.
 * - Why MPOL_BIND and a free-memory check: with MPOL_PREFERRED the kernel silently falls back
 *   to another node and the pool would report a placement it does not have; with MPOL_BIND an
 *   exhausted node makes the touch OOM-kill the process, so the slab is refused up front
 *   when the node reports less free memory than the slab.
 *
 * Invariants (checked by the tests through the public API and device counters):
 *   slabs[0..n_slabs) are disjoint mappings, each registered exactly once with the device:
 *     device registrations made by this pool == n_slabs;
 *   stats.slab_bytes == sum(slabs[i].map_bytes) >= BFC total_bytes;
 *   bind_memory implies place.node >= 0 and place.kind is NEAR_GPU or EXPLICIT.
 */
#include "base/clock.h"
#include "alloc/hostpool.h"
#include "alloc/hostpool_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum {
    DEFAULT_SLAB_BYTES = 256u << 20,
    HUGE_PAGE_BYTES = 2u << 20,     /* x86-64 THP size; alignment only, correct on any size */
    TOUCH_BYTES_PER_THREAD = 64u << 20,
    MAX_TOUCH_THREADS = 4,          /* page zeroing saturates a socket's bandwidth by then */
};

typedef struct slab {
    void *base;
    uint64_t map_bytes;
} slab;

struct sl_hostpool {
    sl_device *dev;
    const sl_topo *topo;        /* may be NULL: placement unavailable */
    sl_topo *owned_topo;        /* loaded by create (topo == owned_topo), else NULL */
    sl_hostpool_options opt;
    sl_hostpool_placement place;
    bool bind_memory;           /* mbind every slab to place.node */
    bool bind_threads;          /* touch threads bind to place.node's CPUs */
    sl_bfc_backend backend;
    sl_bfc *bfc;

    pthread_mutex_t mu;         /* guards everything below */
    slab *slabs;
    size_t n_slabs, cap_slabs;
    uint64_t slab_bytes_live;
    uint64_t bytes_prepared;    /* all slab bytes ever touched + registered (for per-GiB) */
    double touch_s, register_s;
    uint64_t slab_failures;
};

sl_hostpool_options sl_hostpool_options_default(void)
{
    return (sl_hostpool_options){.numa_node = SL_HOSTPOOL_NODE_AUTO};
}

const char *sl_hostpool_placement_kind_name(sl_hostpool_placement_kind k)
{
    switch (k) {
    case SL_HOSTPOOL_NEAR_GPU: return "near-gpu";
    case SL_HOSTPOOL_EXPLICIT: return "explicit";
    case SL_HOSTPOOL_TRIVIAL: return "trivial";
    case SL_HOSTPOOL_UNAVAILABLE: return "unavailable";
    }
    return "?";
}

/* ---- placement -------------------------------------------------------------------------- */

static void set_unavailable(sl_hostpool *p, const char *why)
{
    p->place.kind = SL_HOSTPOOL_UNAVAILABLE;
    p->place.node = -1;
    p->place.node_cpus = 0;
    p->bind_memory = p->bind_threads = false;
    snprintf(p->place.reason, sizeof p->place.reason,
             "unavailable: %.240s \xe2\x80\x94 plain pinned memory", why);
}

static bool numa_node_is_memory_node(int node)
{
    return node >= 0 && node <= numa_max_node() &&
           numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node);
}

/* Binds to `node` if this machine can: libnuma works and the node is one of its memory nodes.
 * Failing that, an explicit request is an error; an automatic one degrades. */
static sl_status bind_to(sl_hostpool *p, int node, sl_hostpool_placement_kind kind,
                         const char *reason, sl_error *err)
{
    bool expl = kind == SL_HOSTPOOL_EXPLICIT;
    char why[300];
    if (numa_available() < 0) {
        snprintf(why, sizeof why, "libnuma reports no NUMA support (numa_available() < 0)");
        if (expl)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "cannot place the host pool on NUMA "
                                "node %d: %s", node, why);
        set_unavailable(p, why);
        return SL_OK;
    }
    if (!numa_node_is_memory_node(node)) {
        /* Only reachable with a topology that is not this machine's (XML, synthetic). */
        snprintf(why, sizeof why, "NUMA node %d (%s) is not a memory node of this machine "
                 "(topology %s)", node, reason, sl_topo_source_name(p->topo));
        if (expl) return sl_error_set(err, SL_ERR_INVALID, "host pool: %s", why);
        set_unavailable(p, why);
        return SL_OK;
    }
    const sl_topo_node *tn = sl_topo_node_find(p->topo, node);
    p->place.kind = kind;
    p->place.node = node;
    p->bind_memory = true;
    p->bind_threads = sl_topo_is_this_machine(p->topo) && tn && tn->ncpus > 0;
    p->place.node_cpus = p->bind_threads ? tn->ncpus : 0;
    snprintf(p->place.reason, sizeof p->place.reason, "%s", reason);
    return SL_OK;
}

static sl_status choose_placement(sl_hostpool *p, const char *topo_error, sl_error *err)
{
    char busid[32] = "", devname[64] = "device";
    sl_device_props props;
    sl_error e;
    if (sl_device_props_get(p->dev, &props, &e) == SL_OK) {
        snprintf(busid, sizeof busid, "%s", props.pci_bus_id);
        snprintf(devname, sizeof devname, "%s", props.name);
    }
    const sl_topo *t = p->topo;
    if (t) sl_topo_describe(t, busid, p->place.topology, sizeof p->place.topology);
    p->place.node = -1;

    char reason[128];
    int want = p->opt.numa_node;
    if (want >= 0) {
        if (t && !sl_topo_node_find(t, want))
            return sl_error_set(err, SL_ERR_INVALID,
                                "host pool: NUMA node %d does not exist (%s)", want,
                                p->place.topology);
        if (!t && numa_available() >= 0 && !numa_node_is_memory_node(want))
            return sl_error_set(err, SL_ERR_INVALID,
                                "host pool: NUMA node %d does not exist (libnuma: nodes 0-%d; "
                                "no topology: %s)", want, numa_max_node(), topo_error);
        snprintf(reason, sizeof reason, "explicit --numa-node %d", want);
        return bind_to(p, want, SL_HOSTPOOL_EXPLICIT, reason, err);
    }
    if (!t) {
        set_unavailable(p, topo_error);
        return SL_OK;
    }
    if (sl_topo_node_count(t) == 1) {
        /* Nothing to choose: every page is on the one node; binding would only add calls that
         * seccomp-restricted containers refuse. */
        p->place.kind = SL_HOSTPOOL_TRIVIAL;
        p->place.node = sl_topo_node_at(t, 0)->os_index;
        snprintf(p->place.reason, sizeof p->place.reason, "trivial: one NUMA node");
        return SL_OK;
    }
    if (!busid[0]) {
        char why[128];
        snprintf(why, sizeof why, "%.60s reports no PCI bus id", devname);
        set_unavailable(p, why);
        return SL_OK;
    }
    int node;
    if (sl_topo_node_near_pci(t, busid, &node, &e) != SL_OK) {
        set_unavailable(p, e.msg);
        return SL_OK;
    }
    snprintf(reason, sizeof reason, "nearest GPU %s", busid);
    return bind_to(p, node, SL_HOSTPOOL_NEAR_GPU, reason, err);
}

/* ---- slabs ------------------------------------------------------------------------------ */

typedef struct touch_job {
    const sl_hostpool *pool;
    char *begin, *end;
    size_t page;
} touch_job;

static void touch_range(const touch_job *j)
{
    /* One write per base page: with THP one per 2 MiB would do, but THP is advice the kernel
     * may ignore, and a missed 4 KiB page would be faulted in later by cudaHostRegister. */
    for (volatile char *q = j->begin; q < (volatile char *)j->end; q += j->page) *q = 0;
}

static void *touch_main(void *arg)
{
    touch_job *j = arg;
    /* Binding is for speed (zeroing local memory); mbind already decides where pages go, so a
     * refused bind is harmless and not reported. */
    if (j->pool->bind_threads)
        sl_topo_bind_thread_to_node(j->pool->topo, j->pool->place.node, NULL);
    touch_range(j);
    return NULL;
}

static int touch_thread_count(const sl_hostpool *p, uint64_t bytes)
{
    int n = p->opt.touch_threads;
    if (n <= 0) {
        uint64_t auto_n = bytes / TOUCH_BYTES_PER_THREAD;
        n = auto_n < 1 ? 1 : auto_n > MAX_TOUCH_THREADS ? MAX_TOUCH_THREADS : (int)auto_n;
    }
    int cpus = 0;
    const sl_topo_node *tn = p->bind_threads ? sl_topo_node_find(p->topo, p->place.node) : NULL;
    if (tn) cpus = tn->ncpus;
    else cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && n > cpus) n = cpus;
    return n < 1 ? 1 : n;
}

/* Touches [base, base + bytes) from threads bound to the pool's node (when binding). Thread
 * creation failures are absorbed: the calling thread touches those parts itself. */
static void touch_slab(const sl_hostpool *p, char *base, uint64_t bytes)
{
    enum { MAX_THREADS = 64 };
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int n = touch_thread_count(p, bytes);
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n == 1 && !p->bind_threads) {
        touch_range(&(touch_job){p, base, base + bytes, page});
        return;
    }
    touch_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS];
    uint64_t per = (bytes / (uint64_t)n + page - 1) / page * page;
    for (int i = 0; i < n; i++) {
        uint64_t lo = per * (uint64_t)i, hi = lo + per;
        if (lo > bytes) lo = bytes;
        if (hi > bytes || i == n - 1) hi = bytes;
        jobs[i] = (touch_job){p, base + lo, base + hi, page};
        started[i] = pthread_create(&th[i], NULL, touch_main, &jobs[i]) == 0;
        if (!started[i]) touch_range(&jobs[i]);
    }
    for (int i = 0; i < n; i++)
        if (started[i]) pthread_join(th[i], NULL);
}

static sl_status node_has_room(int node, uint64_t bytes, sl_error *err)
{
    long long free_b = 0;
    if (numa_node_size64(node, &free_b) < 0) return SL_OK; /* unknown: let mbind decide */
    if ((uint64_t)free_b < bytes)
        return sl_error_set(err, SL_ERR_NOMEM,
                            "NUMA node %d has %lld bytes free, less than a slab of %" PRIu64
                            " bytes", node, free_b, bytes);
    return SL_OK;
}

static sl_status bind_range(void *base, uint64_t bytes, int node, sl_error *err)
{
    struct bitmask *mask = numa_allocate_nodemask();
    if (!mask) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for a node mask");
    numa_bitmask_setbit(mask, (unsigned)node);
    /* maxnode is size + 1: the kernel drops the last bit (libnuma passes the same). */
    long r = mbind(base, bytes, MPOL_BIND, mask->maskp, mask->size + 1, 0);
    int e = errno;
    numa_free_nodemask(mask);
    if (r != 0)
        return sl_error_set(err, SL_ERR_IO, "mbind of %" PRIu64 " bytes to NUMA node %d failed: %s",
                            bytes, node, strerror(e));
    return SL_OK;
}

/* Maps, places, touches and page-locks one slab of at least `bytes`. */
static sl_status slab_create(sl_hostpool *p, uint64_t bytes, slab *out, sl_error *err)
{
    uint64_t size = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    if (size < bytes || size > SIZE_MAX - HUGE_PAGE_BYTES)
        return sl_error_set(err, SL_ERR_RANGE, "slab of %" PRIu64 " bytes is too large", bytes);
    sl_status s;
    if (p->bind_memory && (s = node_has_room(p->place.node, size, err))) return s;

    /* Over-map by one huge page and trim, so the slab starts on a 2 MiB boundary. */
    size_t span = (size_t)size + HUGE_PAGE_BYTES;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return sl_error_set(err, SL_ERR_NOMEM, "mmap of a %" PRIu64 "-byte slab failed: %s", size,
                            strerror(errno));
    uintptr_t a = ((uintptr_t)raw + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    char *base = (char *)a;
    size_t head = (size_t)(base - raw), tail = span - head - (size_t)size;
    if (head) munmap(raw, head);
    if (tail) munmap(base + size, tail);

    /* Advice only: EINVAL when THP is compiled out or disabled is not an error. */
    (void)madvise(base, (size_t)size, MADV_HUGEPAGE);
    if (p->bind_memory && (s = bind_range(base, size, p->place.node, err))) {
        munmap(base, (size_t)size);
        return s;
    }
    double t0 = sl_clock_s();
    touch_slab(p, base, size);
    double t1 = sl_clock_s();
    sl_error e;
    sl_error_clear(&e);
    s = sl_device_host_register(p->dev, base, size, &e);
    double t2 = sl_clock_s();
    if (s) {
        munmap(base, (size_t)size);
        return sl_error_set(err, s, "host pool: page-locking a %" PRIu64 "-byte slab failed: %s",
                            size, e.msg);
    }
    pthread_mutex_lock(&p->mu);
    p->touch_s += t1 - t0;
    p->register_s += t2 - t1;
    p->bytes_prepared += size;
    pthread_mutex_unlock(&p->mu);
    *out = (slab){base, size};
    return SL_OK;
}

static void slab_destroy(sl_hostpool *p, const slab *sb)
{
    /* Unregister failures cannot be reported from here (BFC's region_free is void); the
     * device's registrations_live counter exposes them to tests. */
    sl_device_host_unregister(p->dev, sb->base, NULL);
    munmap(sb->base, (size_t)sb->map_bytes);
}

/* ---- the BFC host backend --------------------------------------------------------------- */

static sl_status be_region_alloc(void *ctx, uint64_t bytes, void **base, sl_error *err)
{
    sl_hostpool *p = ctx;
    *base = NULL;
    pthread_mutex_lock(&p->mu);
    bool room = true;
    if (p->n_slabs == p->cap_slabs) {
        size_t cap = p->cap_slabs ? p->cap_slabs * 2 : 8;
        slab *ns = realloc(p->slabs, cap * sizeof *ns);
        if (ns) {
            p->slabs = ns;
            p->cap_slabs = cap;
        } else {
            room = false;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (!room) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for the slab table");

    slab sb;
    sl_status s = slab_create(p, bytes, &sb, err);
    pthread_mutex_lock(&p->mu);
    if (s) {
        p->slab_failures++;
    } else {
        p->slabs[p->n_slabs++] = sb;
        p->slab_bytes_live += sb.map_bytes;
        *base = sb.base;
    }
    pthread_mutex_unlock(&p->mu);
    return s;
}

static void be_region_free(void *ctx, void *base)
{
    sl_hostpool *p = ctx;
    slab sb = {0};
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_slabs; i++) {
        if (p->slabs[i].base != base) continue;
        sb = p->slabs[i];
        p->slabs[i] = p->slabs[--p->n_slabs];
        p->slab_bytes_live -= sb.map_bytes;
        break;
    }
    pthread_mutex_unlock(&p->mu);
    if (sb.base) slab_destroy(p, &sb);
}

static sl_status be_move(void *ctx, void *dst, const void *src, uint64_t bytes, sl_error *err)
{
    (void)ctx;
    (void)err;
    memmove(dst, src, (size_t)bytes);
    return SL_OK;
}

static sl_status be_sync(void *ctx, sl_error *err)
{
    (void)ctx;
    (void)err;
    return SL_OK; /* memmove is synchronous */
}

/* ---- public API ------------------------------------------------------------------------- */

sl_status sl_hostpool_create(sl_device *dev, const sl_topo *topo, const sl_hostpool_options *opt,
                             sl_hostpool **out, sl_error *err)
{
    if (out) *out = NULL;
    if (!dev || !out) return sl_error_set(err, SL_ERR_INVALID, "host pool: NULL device or out");
    sl_hostpool_options o = opt ? *opt : sl_hostpool_options_default();
    if (o.numa_node < SL_HOSTPOOL_NODE_AUTO)
        return sl_error_set(err, SL_ERR_INVALID, "host pool: numa_node %d is neither a node nor "
                            "SL_HOSTPOOL_NODE_AUTO (-1)", o.numa_node);
    if (o.touch_threads < 0)
        return sl_error_set(err, SL_ERR_INVALID, "host pool: touch_threads %d is negative",
                            o.touch_threads);
    if (o.slab_bytes == 0) o.slab_bytes = DEFAULT_SLAB_BYTES;
    if (o.slab_bytes > UINT64_MAX / 2)
        return sl_error_set(err, SL_ERR_INVALID, "host pool: slab_bytes %" PRIu64 " is too large",
                            o.slab_bytes);
    o.slab_bytes = (o.slab_bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;

    sl_hostpool *p = calloc(1, sizeof *p);
    if (!p) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for a host pool");
    p->dev = dev;
    p->opt = o;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return sl_error_set(err, SL_ERR_NOMEM, "host pool: cannot create a mutex");
    }

    sl_status s = SL_OK;
    sl_error te;
    sl_error_clear(&te);
    if (topo) {
        p->topo = topo;
    } else {
        s = sl_topo_load(&o.topology, &p->owned_topo, &te);
        /* A topology the user named that does not load is the user's error; hwloc failing is
         * the machine's, and only costs placement. */
        if (s == SL_ERR_INVALID) {
            sl_error_set(err, s, "host pool: %s", te.msg);
            goto fail;
        }
        s = SL_OK;
        p->topo = p->owned_topo;
    }
    if ((s = choose_placement(p, te.msg, err))) goto fail;

    p->backend = (sl_bfc_backend){.ctx = p,
                                  .region_alloc = be_region_alloc,
                                  .region_free = be_region_free,
                                  .move = be_move,
                                  .sync = be_sync,
                                  .kind = "host"};
    /* No compaction: callers hold raw host pointers (staging buffers, host-resident weights). */
    sl_bfc_options bo = {.region_bytes = o.slab_bytes, .max_bytes = o.max_bytes};
    if ((s = sl_bfc_create(&p->backend, &bo, &p->bfc, err))) goto fail;
    *out = p;
    return SL_OK;
fail:
    sl_hostpool_destroy(p);
    return s;
}

void sl_hostpool_destroy(sl_hostpool *p)
{
    if (!p) return;
    sl_bfc_destroy(p->bfc); /* region_free for every slab */
    for (size_t i = 0; i < p->n_slabs; i++) slab_destroy(p, &p->slabs[i]);
    free(p->slabs);
    sl_topo_destroy(p->owned_topo);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

sl_status sl_hostpool_alloc(sl_hostpool *p, uint64_t bytes, sl_block *out, void **h_ptr,
                            sl_error *err)
{
    if (h_ptr) *h_ptr = NULL;
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "host pool: alloc on a NULL pool");
    sl_status s = sl_bfc_alloc(p->bfc, bytes, 0, out, err);
    if (!s && h_ptr) *h_ptr = sl_bfc_ptr(p->bfc, *out);
    return s;
}

sl_status sl_hostpool_free(sl_hostpool *p, sl_block b, sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "host pool: free on a NULL pool");
    return sl_bfc_free(p->bfc, b, err);
}

void *sl_hostpool_ptr(const sl_hostpool *p, sl_block b) { return p ? sl_bfc_ptr(p->bfc, b) : NULL; }
uint64_t sl_hostpool_size(const sl_hostpool *p, sl_block b)
{
    return p ? sl_bfc_size(p->bfc, b) : 0;
}

void sl_hostpool_stats_get(const sl_hostpool *p, sl_hostpool_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!p) return;
    sl_bfc_stats bs;
    sl_bfc_stats_get(p->bfc, &bs);
    sl_hostpool *mp = (sl_hostpool *)p; /* the mutex is not part of the logical state */
    pthread_mutex_lock(&mp->mu);
    out->slabs = p->n_slabs;
    out->slab_bytes = p->slab_bytes_live;
    out->touch_s = p->touch_s;
    out->register_s = p->register_s;
    double gib = (double)p->bytes_prepared / (double)(1ull << 30);
    out->touch_s_per_gib = gib > 0 ? p->touch_s / gib : 0;
    out->register_s_per_gib = gib > 0 ? p->register_s / gib : 0;
    out->slab_failures = p->slab_failures;
    pthread_mutex_unlock(&mp->mu);
    out->in_use_bytes = bs.in_use_bytes;
    out->peak_in_use_bytes = bs.peak_in_use_bytes;
    out->live_blocks = bs.live_blocks;
    out->node = p->place.node;
}

void sl_hostpool_placement_get(const sl_hostpool *p, sl_hostpool_placement *out)
{
    if (p) *out = p->place;
    else memset(out, 0, sizeof *out);
}

sl_status sl_hostpool_page_node(const void *h_ptr, int *node, sl_error *err)
{
    if (node) *node = -1;
    if (!h_ptr || !node) return sl_error_set(err, SL_ERR_INVALID, "page node: NULL argument");
    int n = -1;
    if (get_mempolicy(&n, NULL, 0, (void *)h_ptr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "get_mempolicy(%p) failed: %s", h_ptr,
                            strerror(errno));
    *node = n;
    return SL_OK;
}

/* ---- checker (hostpool_impl.h) ---------------------------------------------------------- */

bool sl__hostpool_slab(const sl_hostpool *p, size_t i, void **base, uint64_t *bytes)
{
    sl_hostpool *mp = (sl_hostpool *)p;
    pthread_mutex_lock(&mp->mu);
    bool ok = i < p->n_slabs;
    if (ok) {
        *base = p->slabs[i].base;
        *bytes = p->slabs[i].map_bytes;
    }
    pthread_mutex_unlock(&mp->mu);
    return ok;
}

sl_status sl__hostpool_validate(const sl_hostpool *p, uint64_t *pages_checked, sl_error *err)
{
    if (pages_checked) *pages_checked = 0;
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "host pool validate: NULL pool");
    sl_hostpool *mp = (sl_hostpool *)p;
    sl_bfc_stats bs;
    sl_bfc_stats_get(p->bfc, &bs);
    sl_status s = SL_OK;
    pthread_mutex_lock(&mp->mu);
    uint64_t sum = 0;
    for (size_t i = 0; i < p->n_slabs; i++) {
        sum += p->slabs[i].map_bytes;
        if ((uintptr_t)p->slabs[i].base % HUGE_PAGE_BYTES ||
            p->slabs[i].map_bytes % HUGE_PAGE_BYTES)
            s = sl_error_set(err, SL_ERR_RANGE, "slab %zu (%p + %" PRIu64 ") is not 2 MiB aligned",
                             i, p->slabs[i].base, p->slabs[i].map_bytes);
        for (size_t j = 0; !s && j < i; j++) {
            const char *a = p->slabs[i].base, *b = p->slabs[j].base;
            if (a < b + p->slabs[j].map_bytes && b < a + p->slabs[i].map_bytes)
                s = sl_error_set(err, SL_ERR_RANGE, "slabs %zu and %zu overlap", j, i);
        }
    }
    if (!s && sum != p->slab_bytes_live)
        s = sl_error_set(err, SL_ERR_RANGE, "slab bytes %" PRIu64 " != recorded %" PRIu64, sum,
                         p->slab_bytes_live);
    if (!s && bs.regions != p->n_slabs)
        s = sl_error_set(err, SL_ERR_RANGE, "BFC has %" PRIu64 " regions, pool %zu slabs",
                         bs.regions, p->n_slabs);
    if (!s && bs.total_bytes > sum)
        s = sl_error_set(err, SL_ERR_RANGE, "BFC total %" PRIu64 " exceeds slab bytes %" PRIu64,
                         bs.total_bytes, sum);
    if (!s && p->bind_memory &&
        (p->place.node < 0 ||
         (p->place.kind != SL_HOSTPOOL_NEAR_GPU && p->place.kind != SL_HOSTPOOL_EXPLICIT)))
        s = sl_error_set(err, SL_ERR_RANGE, "pool binds memory with placement %s node %d",
                         sl_hostpool_placement_kind_name(p->place.kind), p->place.node);
    bool check_pages = p->bind_memory || p->place.kind == SL_HOSTPOOL_TRIVIAL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; !s && check_pages && i < p->n_slabs; i++) {
        const char *base = p->slabs[i].base;
        uint64_t n = p->slabs[i].map_bytes;
        const char *probe[3] = {base, base + n / 2 / page * page, base + n - page};
        for (int k = 0; !s && k < 3; k++) {
            int node;
            sl_error e;
            if (sl_hostpool_page_node(probe[k], &node, &e) != SL_OK) {
                check_pages = false; /* the kernel refuses the query: nothing to check */
                break;
            }
            if (pages_checked) (*pages_checked)++;
            if (node != p->place.node)
                s = sl_error_set(err, SL_ERR_RANGE,
                                 "slab %zu page at +%td lies on NUMA node %d, placement says %d",
                                 i, probe[k] - base, node, p->place.node);
        }
    }
    pthread_mutex_unlock(&mp->mu);
    return s;
}
