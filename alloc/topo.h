/* alloc/topo: the machine's NUMA topology as Sluice needs it, from hwloc.
 *
 * What it answers: how many NUMA nodes there are, each node's OS index, CPUs and memory; which
 * node a PCI device (the GPU) is attached to; and it binds the calling thread to a node's CPUs
 * or to an explicit CPU list. The host pool uses it to put pinned pages next to the GPU, and
 * worker pools use it to keep CPU compute on the GPU's node.
 *
 * Sources: this machine (default), a synthetic description ("pack:2 [numa] core:2 pu:1") or an
 * hwloc v2 XML file. Synthetic topologies contain no PCI devices; tests that need "GPU on the
 * second package" use XML fixtures (tests/alloc/topologies/). A topology that is not this
 * machine's answers every question but refuses to bind threads (SL_ERR_UNSUPPORTED): hwloc
 * would silently do nothing, and a bind that did nothing must not look like success.
 *
 * Node numbering: every `node` argument and result is the OS index (as numactl, libnuma and
 * /sys/devices/system/node use); sl_topo_node_at() walks nodes by position 0..count-1.
 *
 * Failure: loading fails with a status naming the source and hwloc's reason (errno); callers
 * (the host pool) treat that as "placement unavailable" and carry on with unplaced memory.
 *
 * Thread safety: a loaded sl_topo is immutable; every query may run from any thread. Binding
 * affects only the calling thread.
 */
#ifndef SL_TOPO_H
#define SL_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct sl_topo sl_topo;

typedef enum sl_topo_source {
    SL_TOPO_THIS_MACHINE = 0, /* hwloc discovery of the running machine */
    SL_TOPO_SYNTHETIC,        /* desc = hwloc synthetic description */
    SL_TOPO_XML,              /* desc = path of an hwloc XML export */
} sl_topo_source;

typedef struct sl_topo_options {
    sl_topo_source source;
    const char *desc;     /* synthetic description or XML path; unused for THIS_MACHINE */
    /* who chose this source, for messages ("SLUICE_TOPOLOGY": runtime/engine/env.c); NULL:
     * none. A source named so that cannot be loaded is the user's error: SL_ERR_INVALID
     * "NAMED_BY='SOURCE:DESC': why", not the machine's */
    const char *named_by;
} sl_topo_options;

/* Largest CPU OS index + 1 that CPU lists may name (sl_cpu_set capacity). */
enum { SL_TOPO_MAX_CPUS = 8192 };

/* A set of CPU OS indices, as parsed from "0-3,8". */
typedef struct sl_cpu_set {
    uint64_t bits[SL_TOPO_MAX_CPUS / 64];
    int count;            /* number of bits set */
} sl_cpu_set;

typedef struct sl_topo_node {
    int os_index;
    uint64_t memory_bytes;  /* local memory hwloc reports (0 if unknown) */
    int ncpus;
    const int *cpus;        /* ncpus OS CPU indices, ascending; owned by the topology */
} sl_topo_node;

/* Loads a topology. opt may be NULL (this machine). Reads no environment: SLUICE_TOPOLOGY
 * becomes options in runtime/engine/env.c. I/O discovery is on, so PCI devices are part of
 * the topology. *out is NULL on failure. */
sl_status sl_topo_load(const sl_topo_options *opt, sl_topo **out, sl_error *err);
void sl_topo_destroy(sl_topo *t);   /* NULL allowed */

/* "this machine", "xml:FILENAME" (directory dropped) or "synthetic:DESC" — what was actually
 * loaded; messages use the same label. Load errors carry the full path. Never NULL. */
const char *sl_topo_source_name(const sl_topo *t);
/* True when the topology describes the running machine (binding is possible). */
bool sl_topo_is_this_machine(const sl_topo *t);

/* Number of NUMA nodes (>= 1: a machine without NUMA information has one node). */
int sl_topo_node_count(const sl_topo *t);
/* The i-th node by position (0 <= i < count), NULL when out of range. */
const sl_topo_node *sl_topo_node_at(const sl_topo *t, int i);
/* The node with this OS index, NULL if none. */
const sl_topo_node *sl_topo_node_find(const sl_topo *t, int os_index);

/* OS index of the NUMA node nearest the PCI device `busid` ("0000:65:00.0"; the domain may be
 * omitted or 8 digits as NVML prints it). The device's first non-I/O ancestor (package, group,
 * ...) gives its nodeset; the lowest node in it is the answer. On failure *node = -1 and the
 * status says why: SL_ERR_INVALID (malformed id), SL_ERR_NOT_FOUND (no such device in this
 * topology), SL_ERR_UNSUPPORTED (the device hangs off the whole machine on a multi-node
 * topology, i.e. its locality is unknown). */
sl_status sl_topo_node_near_pci(const sl_topo *t, const char *busid, int *node, sl_error *err);

/* One line for logs: "2 NUMA nodes; GPU 0000:65:00.0 on node 1". gpu_busid may be NULL or ""
 * (then no GPU part). Truncates to n bytes (NUL included). */
void sl_topo_describe(const sl_topo *t, const char *gpu_busid, char *buf, size_t n);

/* Binds the calling thread to the CPUs of NUMA node `node` (OS index). SL_ERR_INVALID for an
 * unknown node or one without CPUs (memory-only), SL_ERR_UNSUPPORTED for a topology that is
 * not this machine's, SL_ERR_IO when the OS refuses (errno in the message). */
sl_status sl_topo_bind_thread_to_node(const sl_topo *t, int node, sl_error *err);
/* Binds the calling thread to an explicit list ("0-3,8", see sl_topo_parse_cpu_list). Every
 * CPU must exist and be allowed in the topology; the message names the first one that is not. */
sl_status sl_topo_bind_thread_to_cpus(const sl_topo *t, const char *list, sl_error *err);

/* Strict parse of a CPU list value: comma-separated tokens, each "N" or "N-M" with N <= M,
 * decimal digits only (no spaces, signs or empty tokens), every CPU < SL_TOPO_MAX_CPUS and
 * listed once. The message quotes the whole value and names the bad token. */
sl_status sl_topo_parse_cpu_list(const char *s, sl_cpu_set *out, sl_error *err);
/* Strict parse of a --numa-node value: a decimal integer in [0, 1023] (Linux's node limit),
 * no sign, spaces or trailing characters. Existence is checked later, against a topology. */
sl_status sl_topo_parse_numa_node(const char *s, int *out, sl_error *err);

static inline bool sl_cpu_set_has(const sl_cpu_set *s, int cpu)
{
    return cpu >= 0 && cpu < SL_TOPO_MAX_CPUS && ((s->bits[cpu / 64] >> (cpu % 64)) & 1u);
}

#endif
