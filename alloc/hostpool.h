/* alloc/hostpool: page-locked host memory on the GPU's NUMA node, in large slabs.
 *
 * Why: H2D copies run at full PCIe speed only from page-locked memory, page-locking
 * (cudaHostRegister) costs milliseconds to seconds per call, and on a multi-socket machine
 * memory on the wrong socket crosses the inter-socket link on every copy. So the pool
 *   1. picks a NUMA node: the one nearest the device's PCI bus id (alloc/topo), or an explicit
 *      node; on a one-node machine that is trivially node 0;
 *   2. maps slabs (default 256 MiB) bound to that node (mbind MPOL_BIND), advises transparent
 *      huge pages, and touches every page from threads bound to the node's CPUs, so pages
 *      exist — on the right node — before they are locked;
 *   3. page-locks each slab once through sl_device_host_register (cuda: cudaHostRegister;
 *      sim: mlock);
 *   4. sub-allocates slabs with the BFC arena (alloc/bfc) over a host backend.
 * When placement is impossible (hwloc or libnuma fail at run time, the device has no PCI bus
 * id on a multi-node machine, the GPU's locality is unknown) the pool still works with plain
 * page-locked memory and says so in its placement report.
 *
 * Memory spaces: every pointer handed out is host memory (h_), valid from sl_hostpool_alloc
 * to sl_hostpool_free or sl_hostpool_destroy; the pool never compacts, so it never moves.
 *
 * Thread safety: alloc, free, ptr, stats and placement may be called from any thread at once
 * (the BFC serialises allocation); create/destroy are not concurrent with anything.
 */
#ifndef SL_HOSTPOOL_H
#define SL_HOSTPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/bfc.h"
#include "alloc/topo.h"
#include "base/device/device.h"
#include "base/status.h"

enum { SL_HOSTPOOL_NODE_AUTO = -1 };

typedef struct sl_hostpool_options {
    /* OS index of the NUMA node to use, or SL_HOSTPOOL_NODE_AUTO (nearest the device's GPU).
     * A zero-initialised struct means node 0: start from sl_hostpool_options_default(). A
     * node that does not exist is SL_ERR_INVALID naming it. */
    int numa_node;
    uint64_t slab_bytes;      /* slab (BFC region) size; 0 = 256 MiB; rounded up to 2 MiB */
    uint64_t max_bytes;       /* total over all slabs; 0 = no limit */
    int touch_threads;        /* threads pre-touching a slab; 0 = one per 64 MiB, at most 4
                                 and at most the node's CPUs */
    /* the topology loaded when sl_hostpool_create is given none (zero: this machine; the
     * engine passes SLUICE_TOPOLOGY's through runtime/engine/env.c) */
    sl_topo_options topology;
} sl_hostpool_options;

/* Defaults: auto node, 256 MiB slabs, no limit, automatic touch threads. */
sl_hostpool_options sl_hostpool_options_default(void);

typedef enum sl_hostpool_placement_kind {
    SL_HOSTPOOL_NEAR_GPU = 0,   /* bound to the node nearest the device's PCI bus id */
    SL_HOSTPOOL_EXPLICIT,       /* bound to the node the caller named */
    SL_HOSTPOOL_TRIVIAL,        /* one NUMA node: nothing to choose, no binding needed */
    SL_HOSTPOOL_UNAVAILABLE,    /* placement impossible: plain page-locked memory */
} sl_hostpool_placement_kind;

typedef struct sl_hostpool_placement {
    sl_hostpool_placement_kind kind;
    int node;            /* OS index pages are bound to (or lie on, TRIVIAL); -1 if unbound */
    /* CPUs of `node` that threads can be bound to (NEAR_GPU / EXPLICIT on this machine's
     * topology: compute beside the pages), else 0 */
    int node_cpus;
    char reason[320];    /* "nearest GPU 0000:65:00.0", "explicit --numa-node 1",
                            "trivial: one NUMA node", "unavailable: <why> — plain pinned memory" */
    char topology[256];  /* sl_topo_describe line, or "" when no topology could be loaded */
} sl_hostpool_placement;

typedef struct sl_hostpool sl_hostpool;

/* Creates a pool for `dev`. topo may be NULL (opt->topology's is loaded; failure to load it
 * only makes placement unavailable, except a source the user named: SL_ERR_INVALID); a given topo must outlive the pool. opt may be
 * NULL (defaults). No slab is mapped until the first allocation needs one. */
sl_status sl_hostpool_create(sl_device *dev, const sl_topo *topo, const sl_hostpool_options *opt,
                             sl_hostpool **out, sl_error *err);
/* Unregisters and unmaps every slab; blocks still allocated are dropped. NULL allowed. Copies
 * reading pool memory must have completed. */
void sl_hostpool_destroy(sl_hostpool *p);

/* Allocates at least `bytes` (rounded to SL_BFC_ALIGN) of page-locked memory; *h_ptr (may be
 * NULL) receives its address. A new slab is mapped, touched and registered when no free chunk
 * fits; a failure there (device registration, mapping, node out of memory, max_bytes) is the
 * status, and leaves nothing behind. */
sl_status sl_hostpool_alloc(sl_hostpool *p, uint64_t bytes, sl_block *out, void **h_ptr,
                            sl_error *err);
/* SL_BLOCK_NONE is a no-op; a stale or foreign handle is SL_ERR_INVALID. Slabs stay mapped. */
sl_status sl_hostpool_free(sl_hostpool *p, sl_block b, sl_error *err);
void *sl_hostpool_ptr(const sl_hostpool *p, sl_block b);       /* NULL for a bad handle */
uint64_t sl_hostpool_size(const sl_hostpool *p, sl_block b);   /* granted bytes, 0 if bad */

typedef struct sl_hostpool_stats {
    uint64_t slabs, slab_bytes;     /* live slabs and their mapped bytes */
    uint64_t in_use_bytes, peak_in_use_bytes, live_blocks;
    int node;                       /* as in the placement; -1 if unbound */
    double touch_s, register_s;     /* total seconds spent pre-touching and page-locking */
    double touch_s_per_gib, register_s_per_gib;  /* the same per GiB of slab (0 if no slab) */
    uint64_t slab_failures;         /* slabs that could not be mapped or registered */
} sl_hostpool_stats;
void sl_hostpool_stats_get(const sl_hostpool *p, sl_hostpool_stats *out);
void sl_hostpool_placement_get(const sl_hostpool *p, sl_hostpool_placement *out);
const char *sl_hostpool_placement_kind_name(sl_hostpool_placement_kind k);

/* NUMA node of the page holding h_ptr (get_mempolicy MPOL_F_NODE | MPOL_F_ADDR; touches the
 * page if it is not present). SL_ERR_UNSUPPORTED when the kernel refuses the query (no NUMA
 * support, seccomp), with errno's text. For tests and the placement check in stats tools. */
sl_status sl_hostpool_page_node(const void *h_ptr, int *node, sl_error *err);

#endif
