/* alloc/topo: hwloc behind a small, immutable snapshot.
 *
 * Design: sl_topo_load() runs hwloc discovery (with I/O objects, so PCI devices are present)
 * and copies what Sluice asks about — the NUMA nodes with their CPU lists — into plain arrays,
 * so queries need no hwloc calls and are safe from any thread. The hwloc topology is kept for
 * the two things that need it: PCI lookups and thread binding.
 *
 * Invariants: nodes[] is ordered by hwloc's logical index (ascending OS index in practice);
 *   node_count >= 1; nodes[i].cpus has nodes[i].ncpus ascending entries, all in the
 *   topology's allowed cpuset; sum over i of ncpus <= number of PUs (memory-only nodes have 0).
 */
#include "alloc/topo.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sl_topo {
    hwloc_topology_t h;
    bool this_machine;
    char source[512];        /* "this machine", "xml:PATH", "synthetic:DESC": load errors */
    char label[160];         /* the same with the XML file name only: every other message */
    int node_count;
    sl_topo_node *nodes;     /* node_count entries */
    int *cpu_storage;        /* backing store of every nodes[i].cpus */
};

/* ---- CPU list and node parsing ---------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Parses decimal digits [p, end) into *v, refusing values >= limit (and so overflow). */
static bool parse_dec(const char *p, const char *end, long limit, long *v)
{
    if (p == end) return false;
    long x = 0;
    for (; p < end; p++) {
        if (!is_digit(*p)) return false;
        x = x * 10 + (*p - '0');
        if (x >= limit) return false;
    }
    *v = x;
    return true;
}

sl_status sl_topo_parse_cpu_list(const char *s, sl_cpu_set *out, sl_error *err)
{
    if (!s || !out) return sl_error_set(err, SL_ERR_INVALID, "CPU list: NULL argument");
    memset(out, 0, sizeof *out);
    if (!*s) return sl_error_set(err, SL_ERR_INVALID, "CPU list '' is empty");
    int tok_no = 0;
    const char *p = s;
    for (;;) {
        const char *tok = p;
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        int len = (int)(end - tok);
        tok_no++;
        if (len == 0)
            return sl_error_set(err, SL_ERR_INVALID, "CPU list '%s': token %d is empty", s, tok_no);
        const char *dash = memchr(tok, '-', (size_t)len);
        long lo, hi;
        /* The limit check is separate from the syntax check so the message says which. */
        bool syntax_ok;
        if (dash) {
            syntax_ok = dash > tok && dash + 1 < end;
            for (const char *q = tok; syntax_ok && q < end; q++)
                if (q != dash && !is_digit(*q)) syntax_ok = false;
        } else {
            syntax_ok = true;
            for (const char *q = tok; syntax_ok && q < end; q++)
                if (!is_digit(*q)) syntax_ok = false;
        }
        if (!syntax_ok)
            return sl_error_set(err, SL_ERR_INVALID,
                                "CPU list '%s': token %d '%.*s' is not N or N-M "
                                "(decimal CPU numbers)",
                                s, tok_no, len, tok);
        const char *lo_end = dash ? dash : end;
        if (!parse_dec(tok, lo_end, SL_TOPO_MAX_CPUS, &lo) ||
            (dash && !parse_dec(dash + 1, end, SL_TOPO_MAX_CPUS, &hi)))
            return sl_error_set(err, SL_ERR_RANGE,
                                "CPU list '%s': token %d '%.*s' names a CPU above %d", s, tok_no,
                                len, tok, SL_TOPO_MAX_CPUS - 1);
        if (!dash) hi = lo;
        if (hi < lo)
            return sl_error_set(err, SL_ERR_INVALID,
                                "CPU list '%s': token %d '%.*s' is a reversed range", s, tok_no,
                                len, tok);
        for (long c = lo; c <= hi; c++) {
            if (sl_cpu_set_has(out, (int)c))
                return sl_error_set(err, SL_ERR_INVALID,
                                    "CPU list '%s': token %d '%.*s' repeats CPU %ld", s, tok_no,
                                    len, tok, c);
            out->bits[c / 64] |= (uint64_t)1 << (c % 64);
            out->count++;
        }
        if (!*end) break;
        p = end + 1;
    }
    return SL_OK;
}

sl_status sl_topo_parse_numa_node(const char *s, int *out, sl_error *err)
{
    long v;
    if (!s || !out) return sl_error_set(err, SL_ERR_INVALID, "NUMA node: NULL argument");
    if (!parse_dec(s, s + strlen(s), 1024, &v))
        return sl_error_set(err, SL_ERR_INVALID,
                            "NUMA node '%s' is not a decimal node number in [0, 1023]", s);
    *out = (int)v;
    return SL_OK;
}

/* ---- loading ---------------------------------------------------------------------------- */

static sl_status snapshot_nodes(sl_topo *t, sl_error *err)
{
    int n = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE);
    if (n <= 0)
        /* hwloc always creates at least one NUMA node; anything else is a broken input. */
        return sl_error_set(err, SL_ERR_FORMAT, "topology %s has no NUMA node", t->source);
    int pus = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_PU);
    t->nodes = calloc((size_t)n, sizeof *t->nodes);
    /* A node's cpuset may overlap another's only in odd fake topologies; size for the worst. */
    t->cpu_storage = calloc((size_t)(pus > 0 ? pus : 1) * (size_t)n, sizeof *t->cpu_storage);
    if (!t->nodes || !t->cpu_storage)
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory for %d NUMA nodes", n);
    int *store = t->cpu_storage;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t->h, HWLOC_OBJ_NUMANODE, (unsigned)i);
        sl_topo_node *nd = &t->nodes[i];
        nd->os_index = (int)o->os_index;
        nd->memory_bytes = o->attr ? o->attr->numanode.local_memory : 0;
        nd->cpus = store;
        unsigned cpu;
        if (o->cpuset) {
            hwloc_bitmap_foreach_begin(cpu, o->cpuset)
            {
                if (nd->ncpus < pus) store[nd->ncpus++] = (int)cpu;
            }
            hwloc_bitmap_foreach_end();
        }
        store += nd->ncpus;
    }
    t->node_count = n;
    return SL_OK;
}

sl_status sl_topo_load(const sl_topo_options *opt, sl_topo **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_topo_load: out is NULL");
    *out = NULL;
    sl_topo_options o = {0};
    if (opt) o = *opt;
    sl_status s = SL_OK;
    /* a topology the user named that cannot be loaded is the user's error (SL_ERR_INVALID
     * naming what named it), not the machine's */
    const char *named = o.source != SL_TOPO_THIS_MACHINE ? o.named_by : NULL;
    if (o.source != SL_TOPO_THIS_MACHINE && (!o.desc || !*o.desc))
        return sl_error_set(err, SL_ERR_INVALID, "topology source %s needs a description",
                            o.source == SL_TOPO_XML ? "xml" : "synthetic");
    if (o.source > SL_TOPO_XML)
        return sl_error_set(err, SL_ERR_INVALID, "topology source %d is not a known source",
                            (int)o.source);

    sl_topo *t = calloc(1, sizeof *t);
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for a topology");
    switch (o.source) {
    case SL_TOPO_THIS_MACHINE: snprintf(t->source, sizeof t->source, "this machine"); break;
    case SL_TOPO_SYNTHETIC: snprintf(t->source, sizeof t->source, "synthetic:%s", o.desc); break;
    case SL_TOPO_XML: snprintf(t->source, sizeof t->source, "xml:%s", o.desc); break;
    }
    const char *slash = o.source == SL_TOPO_XML ? strrchr(o.desc, '/') : NULL;
    if (slash)
        snprintf(t->label, sizeof t->label, "xml:%.150s", slash + 1);
    else
        snprintf(t->label, sizeof t->label, "%.159s", t->source);
    if (hwloc_topology_init(&t->h) != 0) {
        s = sl_error_set(err, SL_ERR_UNSUPPORTED, "hwloc_topology_init failed: %s",
                         strerror(errno));
        free(t);
        return s;
    }
    /* KEEP_IMPORTANT keeps GPUs, NICs, storage and the bridges above them, which is all the
     * locality questions need; ALL would add every PCI function for no benefit. */
    if (hwloc_topology_set_io_types_filter(t->h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
        s = sl_error_set(err, SL_ERR_UNSUPPORTED, "hwloc: cannot enable I/O discovery: %s",
                         strerror(errno));
        goto fail;
    }
    /* Leave out the "pci" component (libpciaccess): it leaks ~1 KiB per load (LeakSanitizer
     * sees it) and adds nothing on Linux, where the linux component reads the same PCI
     * devices and their locality from sysfs. Failure only means the component stays. */
    if (o.source == SL_TOPO_THIS_MACHINE)
        (void)hwloc_topology_set_components(t->h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    if (o.source == SL_TOPO_SYNTHETIC && hwloc_topology_set_synthetic(t->h, o.desc) != 0) {
        s = sl_error_set(err, SL_ERR_INVALID, "hwloc refuses synthetic topology '%s'", o.desc);
        goto fail;
    }
    if (o.source == SL_TOPO_XML && hwloc_topology_set_xml(t->h, o.desc) != 0) {
        s = sl_error_set(err, SL_ERR_IO, "hwloc cannot read XML topology '%s': %s", o.desc,
                         strerror(errno));
        goto fail;
    }
    if (hwloc_topology_load(t->h) != 0) {
        s = sl_error_set(err, o.source == SL_TOPO_THIS_MACHINE ? SL_ERR_UNSUPPORTED : SL_ERR_FORMAT,
                         "hwloc cannot load topology (%s): %s", t->source, strerror(errno));
        goto fail;
    }
    t->this_machine = hwloc_topology_is_thissystem(t->h) != 0;
    if ((s = snapshot_nodes(t, err))) goto fail;
    *out = t;
    return SL_OK;
fail:
    sl_topo_destroy(t);
    if (named) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        s = sl_error_set(err, SL_ERR_INVALID, "%s='%s:%s': %s", named,
                         o.source == SL_TOPO_XML ? "xml" : "synthetic", o.desc, why);
    }
    return s;
}

void sl_topo_destroy(sl_topo *t)
{
    if (!t) return;
    if (t->h) hwloc_topology_destroy(t->h);
    free(t->nodes);
    free(t->cpu_storage);
    free(t);
}

const char *sl_topo_source_name(const sl_topo *t) { return t ? t->label : "none"; }
bool sl_topo_is_this_machine(const sl_topo *t) { return t && t->this_machine; }
int sl_topo_node_count(const sl_topo *t) { return t ? t->node_count : 0; }

const sl_topo_node *sl_topo_node_at(const sl_topo *t, int i)
{
    return t && i >= 0 && i < t->node_count ? &t->nodes[i] : NULL;
}

const sl_topo_node *sl_topo_node_find(const sl_topo *t, int os_index)
{
    for (int i = 0; t && i < t->node_count; i++)
        if (t->nodes[i].os_index == os_index) return &t->nodes[i];
    return NULL;
}

/* ---- PCI locality ----------------------------------------------------------------------- */

/* Reads 1..max_digits hex digits at *p into *v, advancing *p. */
static bool read_hex(const char **p, int max_digits, unsigned *v)
{
    unsigned x = 0;
    int nd = 0;
    for (const char *q = *p;; q++, nd++) {
        char c = *q;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            *p = q;
            break;
        }
        if (nd == max_digits) return false;
        x = x * 16 + (unsigned)d;
    }
    *v = x;
    return nd > 0;
}

/* Parses "[domain:]bus:dev.fn" (hex; domain up to 8 digits as NVML prints it) strictly:
 * hwloc's own parser is sscanf-based and would accept trailing garbage. */
static bool parse_busid(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    const char *p = s;
    unsigned a, b;
    if (!read_hex(&p, 8, &a) || *p++ != ':' || !read_hex(&p, 4, &b)) return false;
    if (*p == ':') {   /* domain:bus:dev.fn */
        p++;
        *dom = a;
        *bus = b;
        if (!read_hex(&p, 2, dev)) return false;
    } else {           /* bus:dev.fn */
        *dom = 0;
        *bus = a;
        *dev = b;
    }
    if (*p++ != '.' || !read_hex(&p, 1, fn) || *p) return false;
    return *bus <= 0xff && *dev <= 0x1f && *fn <= 7;
}

sl_status sl_topo_node_near_pci(const sl_topo *t, const char *busid, int *node, sl_error *err)
{
    if (node) *node = -1;
    if (!t || !busid || !node)
        return sl_error_set(err, SL_ERR_INVALID, "sl_topo_node_near_pci: NULL argument");
    unsigned dom, bus, dev, fn;
    if (!parse_busid(busid, &dom, &bus, &dev, &fn))
        return sl_error_set(err, SL_ERR_INVALID,
                            "PCI bus id '%s' is not of the form [domain:]bus:device.function",
                            busid);
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(t->h, dom, bus, dev, fn);
    if (!pci) {
        int npci = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_PCI_DEVICE);
        return sl_error_set(err, SL_ERR_NOT_FOUND,
                            "PCI device %s is not in the topology (%s, %d PCI device%s found)",
                            busid, t->label, npci, npci == 1 ? "" : "s");
    }
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t->h, pci);
    if (!anc || !anc->nodeset || hwloc_bitmap_iszero(anc->nodeset))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "PCI device %s has no NUMA locality in %s",
                            busid, t->label);
    /* Attached to the machine root on a multi-node topology: the firmware did not say where
     * the device is (sysfs numa_node = -1); "node 0" would be a guess dressed as a fact. */
    if (anc->type == HWLOC_OBJ_MACHINE && t->node_count > 1)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "PCI device %s has unknown NUMA locality (attached to the whole "
                            "machine in %s)",
                            busid, t->label);
    *node = hwloc_bitmap_first(anc->nodeset);
    return SL_OK;
}

void sl_topo_describe(const sl_topo *t, const char *gpu_busid, char *buf, size_t n)
{
    if (!buf || !n) return;
    if (!t) {
        snprintf(buf, n, "no topology");
        return;
    }
    int len = snprintf(buf, n, "%d NUMA node%s", t->node_count, t->node_count == 1 ? "" : "s");
    if (gpu_busid && *gpu_busid && len >= 0 && (size_t)len < n) {
        int node;
        sl_error e;
        sl_status s = sl_topo_node_near_pci(t, gpu_busid, &node, &e);
        const char *what = s == SL_OK ? NULL
                           : s == SL_ERR_NOT_FOUND ? "not in topology"
                           : s == SL_ERR_INVALID   ? "is not a valid PCI bus id"
                                                   : "locality unknown";
        if (s == SL_OK)
            len += snprintf(buf + len, n - (size_t)len, "; GPU %s on node %d", gpu_busid, node);
        else
            len += snprintf(buf + len, n - (size_t)len, "; GPU %s %s", gpu_busid, what);
    }
    if (!t->this_machine && len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " (topology %s)", t->label);
}

/* ---- binding ---------------------------------------------------------------------------- */

static sl_status bind_bitmap(const sl_topo *t, hwloc_const_bitmap_t set, const char *what,
                             sl_error *err)
{
    if (!t->this_machine)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "cannot bind to %s: topology %s is not this machine's", what,
                            t->label);
    if (hwloc_set_cpubind(t->h, set, HWLOC_CPUBIND_THREAD) != 0)
        return sl_error_set(err, SL_ERR_IO, "binding the thread to %s failed: %s", what,
                            strerror(errno));
    return SL_OK;
}

sl_status sl_topo_bind_thread_to_node(const sl_topo *t, int node, sl_error *err)
{
    if (!t) return sl_error_set(err, SL_ERR_INVALID, "bind to node %d: no topology", node);
    const sl_topo_node *nd = sl_topo_node_find(t, node);
    if (!nd)
        return sl_error_set(err, SL_ERR_INVALID, "NUMA node %d does not exist (%d node%s in %s)",
                            node, t->node_count, t->node_count == 1 ? "" : "s", t->label);
    if (nd->ncpus == 0)
        return sl_error_set(err, SL_ERR_INVALID, "NUMA node %d has no CPUs to bind to", node);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for a cpuset");
    for (int i = 0; i < nd->ncpus; i++) hwloc_bitmap_set(set, (unsigned)nd->cpus[i]);
    char what[64];
    snprintf(what, sizeof what, "NUMA node %d's CPUs", node);
    sl_status s = bind_bitmap(t, set, what, err);
    hwloc_bitmap_free(set);
    return s;
}

sl_status sl_topo_bind_thread_to_cpus(const sl_topo *t, const char *list, sl_error *err)
{
    if (!t) return sl_error_set(err, SL_ERR_INVALID, "bind to CPUs: no topology");
    sl_cpu_set *cs = malloc(sizeof *cs);
    if (!cs) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for a CPU set");
    sl_status s = sl_topo_parse_cpu_list(list, cs, err);
    hwloc_bitmap_t set = s ? NULL : hwloc_bitmap_alloc();
    if (!s && !set) s = sl_error_set(err, SL_ERR_NOMEM, "out of memory for a cpuset");
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t->h);
    for (int c = 0; !s && c < SL_TOPO_MAX_CPUS; c++) {
        if (!sl_cpu_set_has(cs, c)) continue;
        if (!hwloc_bitmap_isset(allowed, (unsigned)c)) {
            char *al = NULL;
            hwloc_bitmap_list_asprintf(&al, allowed);
            s = sl_error_set(err, SL_ERR_INVALID,
                             "CPU list '%s': CPU %d is not an allowed CPU of %s (allowed: %s)",
                             list, c, t->label, al ? al : "?");
            free(al);
            break;
        }
        hwloc_bitmap_set(set, (unsigned)c);
    }
    if (!s) {
        char what[128];
        snprintf(what, sizeof what, "CPUs %.100s", list);
        s = bind_bitmap(t, set, what, err);
    }
    hwloc_bitmap_free(set);
    free(cs);
    return s;
}
