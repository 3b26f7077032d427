/* alloc/hostpool on the sim device: placement decisions (this machine, XML fixtures), mixed
 * allocations with content checks, one registration per slab, page-node verification with
 * get_mempolicy on every slab, fault injection on host registration, invalid nodes.
 *
 * Slabs are small (4-16 MiB) to keep the test quick under ASan; the sim device's mlock may be
 * refused by RLIMIT_MEMLOCK, which the device records without failing. */
#include <inttypes.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/hostpool.h"
#include "alloc/hostpool_impl.h"
#include "alloc/topo.h"
#include "base/device/device.h"
#include "tests/testing.h"

enum { MIB = 1 << 20 };

static const char *fixture(const char *name, char *buf, size_t n)
{
    const char *srcdir = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
    if (srcdir && ws)
        snprintf(buf, n, "%s/%s/tests/alloc/topologies/%s", srcdir, ws, name);
    else
        snprintf(buf, n, "tests/alloc/topologies/%s", name);
    return buf;
}

static sl_topo *load_xml(const char *name)
{
    char path[4096];
    sl_topo_options o = {.source = SL_TOPO_XML, .desc = fixture(name, path, sizeof path)};
    sl_topo *t = NULL;
    sl_error e;
    CHECK_MSG(sl_topo_load(&o, &t, &e) == SL_OK, "%s: %s", name, e.msg);
    return t;
}

static sl_device *open_sim(const char *busid, uint64_t fault_register_at)
{
    sl_device_options o = {.kind = "sim"};
    o.sim.pci_bus_id = busid;
    o.faults.host_register_at = fault_register_at;
    sl_device *d = NULL;
    sl_error e;
    CHECK_MSG(sl_device_open(&o, &d, &e) == SL_OK, "%s", e.msg);
    return d;
}

static uint64_t registrations_live(const sl_device *d)
{
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    return c.registrations_live;
}

static void check_valid(const sl_hostpool *p, const char *where)
{
    sl_error e;
    uint64_t pages = 0;
    sl_status s = sl__hostpool_validate(p, &pages, &e);
    CHECK_MSG(s == SL_OK, "%s: %s", where, e.msg);
}

static unsigned char pattern(size_t block, uint64_t i)
{
    return (unsigned char)(block * 37 + i * 13 + 1);
}

/* Mixed sizes, contents, frees and re-allocations on one pool; checks registration count and
 * page placement after each phase. */
static void exercise(sl_device *d, sl_hostpool *p, uint64_t slab_bytes)
{
    static const uint64_t sizes[] = {1,      255,     256,     257,      4096,    100000,
                                     1 * MIB, 3 * MIB, 64,      2 * MIB,  777,     12345,
                                     5 * MIB, 300,     1 * MIB, 17 * MIB, 4 * MIB, 9};
    enum { N = sizeof sizes / sizeof sizes[0] };
    sl_block b[N];
    unsigned char *ptr[N];
    sl_error e;
    for (size_t i = 0; i < N; i++) {
        void *h = NULL;
        sl_status s = sl_hostpool_alloc(p, sizes[i], &b[i], &h, &e);
        CHECK_MSG(s == SL_OK, "alloc %" PRIu64 ": %s", sizes[i], e.msg);
        ptr[i] = h;
        if (s) continue;
        CHECK(h == sl_hostpool_ptr(p, b[i]));
        CHECK((uintptr_t)h % SL_BFC_ALIGN == 0);
        CHECK(sl_hostpool_size(p, b[i]) >= sizes[i]);
        for (uint64_t k = 0; k < sizes[i]; k++) ptr[i][k] = pattern(i, k);
    }
    check_valid(p, "after allocations");
    sl_hostpool_stats st;
    sl_hostpool_stats_get(p, &st);
    CHECK(st.slabs >= 2);                       /* 17 MiB needs its own slab at least */
    CHECK(st.slab_bytes >= st.slabs * 2 * MIB);
    CHECK_MSG(registrations_live(d) == st.slabs, "registrations %" PRIu64 " != slabs %" PRIu64,
              registrations_live(d), st.slabs);
    CHECK(st.live_blocks == N);
    CHECK(st.touch_s > 0 && st.touch_s_per_gib > 0 && st.register_s >= 0);
    (void)slab_bytes;

    /* Every block intact: no two blocks overlap. */
    for (size_t i = 0; i < N; i++) {
        bool ok = true;
        for (uint64_t k = 0; ptr[i] && k < sizes[i]; k++) ok &= ptr[i][k] == pattern(i, k);
        CHECK_MSG(ok, "block %zu (%" PRIu64 " bytes) corrupted", i, sizes[i]);
    }
    /* Free every other block, refill with new ones, check survivors. */
    for (size_t i = 0; i < N; i += 2) CHECK(sl_hostpool_free(p, b[i], &e) == SL_OK);
    uint64_t slabs_before = st.slabs;
    sl_block extra[N / 2 + 1];
    size_t n_extra = 0;
    for (size_t i = 0; i < N; i += 2) {
        void *h;
        if (sl_hostpool_alloc(p, sizes[i] / 2 + 1, &extra[n_extra], &h, &e) == SL_OK) {
            memset(h, 0xAB, sizes[i] / 2 + 1);
            n_extra++;
        } else {
            CHECK_MSG(false, "re-alloc: %s", e.msg);
        }
    }
    sl_hostpool_stats_get(p, &st);
    CHECK_MSG(st.slabs == slabs_before, "smaller re-allocations needed new slabs (%" PRIu64
              " -> %" PRIu64 ")", slabs_before, st.slabs);
    CHECK(registrations_live(d) == st.slabs);
    for (size_t i = 1; i < N; i += 2) {
        bool ok = true;
        for (uint64_t k = 0; ptr[i] && k < sizes[i]; k++) ok &= ptr[i][k] == pattern(i, k);
        CHECK_MSG(ok, "surviving block %zu corrupted", i);
    }
    check_valid(p, "after refill");
    CHECK(sl_hostpool_free(p, SL_BLOCK_NONE, &e) == SL_OK);
    for (size_t i = 1; i < N; i += 2) CHECK(sl_hostpool_free(p, b[i], &e) == SL_OK);
    for (size_t i = 0; i < n_extra; i++) CHECK(sl_hostpool_free(p, extra[i], &e) == SL_OK);
    CHECK(sl_hostpool_free(p, b[1], &e) == SL_ERR_INVALID); /* stale handle */
    sl_hostpool_stats_get(p, &st);
    CHECK(st.in_use_bytes == 0 && st.live_blocks == 0);
    CHECK(registrations_live(d) == st.slabs); /* slabs stay mapped and registered */
}

static void print_placement(const char *what, const sl_hostpool *p)
{
    sl_hostpool_placement pl;
    sl_hostpool_placement_get(p, &pl);
    printf("%s: %s node %d: %s [%s]\n", what, sl_hostpool_placement_kind_name(pl.kind), pl.node,
           pl.reason, pl.topology);
}

/* This machine, automatic placement: trivial on one node; on several nodes the sim device
 * has no PCI bus id, so placement is unavailable. */
static void test_this_machine_auto(void)
{
    sl_device *d = open_sim(NULL, 0);
    if (!d) return;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.slab_bytes = 4 * MIB;
    sl_hostpool *p = NULL;
    sl_error e;
    CHECK_MSG(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_OK, "%s", e.msg);
    if (p) {
        print_placement("this machine, auto", p);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        if (numa_available() >= 0 && numa_max_node() == 0) {
            CHECK(pl.kind == SL_HOSTPOOL_TRIVIAL && pl.node == 0);
            CHECK(strcmp(pl.reason, "trivial: one NUMA node") == 0);
            CHECK(pl.node_cpus == 0); /* nothing bound: compute threads stay unbound too */
        } else if (numa_available() >= 0) {
            CHECK(pl.kind == SL_HOSTPOOL_UNAVAILABLE && pl.node == -1);
            CHECK_CONTAINS(pl.reason, "reports no PCI bus id");
            CHECK(pl.node_cpus == 0);
        }
        exercise(d, p, o.slab_bytes);
        sl_hostpool_stats st;
        sl_hostpool_stats_get(p, &st);
        printf("  %" PRIu64 " slabs, %" PRIu64 " bytes; touch %.3f s/GiB, register %.3f s/GiB\n",
               st.slabs, st.slab_bytes, st.touch_s_per_gib, st.register_s_per_gib);
    }
    sl_hostpool_destroy(p);
    CHECK(registrations_live(d) == 0);
    sl_device_close(d);
}

/* Explicit node 0 on this machine: memory is mbind()ed; every slab's pages must be on node 0
 * (validate checks first/middle/last page of each slab with get_mempolicy). */
static void test_explicit_node0(void)
{
    sl_device *d = open_sim("0000:65:00.0", 0);
    if (!d) return;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.numa_node = 0;
    o.slab_bytes = 8 * MIB;
    o.touch_threads = 2; /* exercise the parallel, bound touch path */
    sl_hostpool *p = NULL;
    sl_error e;
    sl_status s = sl_hostpool_create(d, NULL, &o, &p, &e);
    if (numa_available() < 0) {
        CHECK(s == SL_ERR_UNSUPPORTED); /* an explicit node cannot be honoured */
        printf("explicit node 0: skipped, %s\n", e.msg);
        sl_device_close(d);
        return;
    }
    CHECK_MSG(s == SL_OK, "%s", e.msg);
    if (p) {
        print_placement("this machine, explicit node 0", p);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        CHECK(pl.kind == SL_HOSTPOOL_EXPLICIT && pl.node == 0);
        CHECK(strcmp(pl.reason, "explicit --numa-node 0") == 0);
        /* the CPUs compute threads can be bound to beside those pages: node 0's, this
         * machine's topology */
        sl_topo *t0 = NULL;
        CHECK_MSG(sl_topo_load(NULL, &t0, &e) == SL_OK, "%s", e.msg);
        const sl_topo_node *n0 = t0 ? sl_topo_node_find(t0, 0) : NULL;
        CHECK_MSG(n0 && pl.node_cpus == n0->ncpus && pl.node_cpus > 0, "node_cpus %d",
                  pl.node_cpus);
        sl_topo_destroy(t0);
        exercise(d, p, o.slab_bytes);
        /* Every slab, page by page (not only the validator's probes). */
        sl_hostpool_stats st;
        sl_hostpool_stats_get(p, &st);
        uint64_t pages = 0, wrong = 0;
        for (size_t i = 0; i < st.slabs; i++) {
            void *base;
            uint64_t bytes;
            CHECK(sl__hostpool_slab(p, i, &base, &bytes));
            for (uint64_t off = 0; off < bytes; off += 64 * 1024) {
                int node;
                CHECK(sl_hostpool_page_node((char *)base + off, &node, &e) == SL_OK);
                pages++;
                wrong += node != 0;
            }
        }
        CHECK(pages > 0);
        CHECK_MSG(wrong == 0, "%" PRIu64 " of %" PRIu64 " pages off node 0", wrong, pages);
        printf("  %" PRIu64 " pages across %" PRIu64 " slabs checked on node 0\n", pages,
               st.slabs);
    }
    sl_hostpool_destroy(p);
    CHECK(registrations_live(d) == 0);
    sl_device_close(d);
}

/* Decisions on fake topologies. The memory itself must still come from this machine. */
static void test_fixture_placements(void)
{
    sl_error e;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.slab_bytes = 4 * MIB;
    bool numa = numa_available() >= 0;

    /* 2 packages, GPU on the second: node 1 chosen. Here node 1 does not exist, so the pool
     * says so and falls back; on a real two-node machine it binds to node 1. */
    sl_topo *t2 = load_xml("two_packages_gpu_on_1.xml");
    sl_device *d = open_sim("0000:65:00.0", 0);
    sl_hostpool *p = NULL;
    if (t2 && d) {
        CHECK_MSG(sl_hostpool_create(d, t2, &o, &p, &e) == SL_OK, "%s", e.msg);
        print_placement("xml 2 packages", p);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        CHECK_CONTAINS(pl.topology, "2 NUMA nodes; GPU 0000:65:00.0 on node 1");
        if (numa && numa_max_node() >= 1) {
            CHECK(pl.kind == SL_HOSTPOOL_NEAR_GPU && pl.node == 1);
            CHECK(strcmp(pl.reason, "nearest GPU 0000:65:00.0") == 0);
        } else if (numa) {
            CHECK(pl.kind == SL_HOSTPOOL_UNAVAILABLE && pl.node == -1 && pl.node_cpus == 0);
            CHECK_CONTAINS(pl.reason, "unavailable: NUMA node 1 (nearest GPU 0000:65:00.0) is "
                                      "not a memory node of this machine");
            CHECK_CONTAINS(pl.reason, "plain pinned memory");
        }
        void *h;
        sl_block b;
        CHECK(sl_hostpool_alloc(p, 1000, &b, &h, &e) == SL_OK);
        if (h) memset(h, 1, 1000);
        check_valid(p, "xml 2 packages");
        sl_hostpool_destroy(p);
        p = NULL;

        /* Explicit node 1 from the fixture: exists in the topology; on this machine only if
         * it has a node 1. */
        o.numa_node = 1;
        sl_status s = sl_hostpool_create(d, t2, &o, &p, &e);
        if (numa && numa_max_node() >= 1) {
            CHECK(s == SL_OK);
        } else if (numa) {
            CHECK(s == SL_ERR_INVALID && p == NULL);
            CHECK_CONTAINS(e.msg, "NUMA node 1");
        }
        sl_hostpool_destroy(p);
        p = NULL;
        o.numa_node = SL_HOSTPOOL_NODE_AUTO;
    }
    sl_device_close(d);
    sl_topo_destroy(t2);

    /* 4 nodes: device without bus id, NIC with unknown locality, absent GPU. */
    sl_topo *t4 = load_xml("four_nodes_gpu_on_2.xml");
    struct {
        const char *busid, *reason;
    } cases[] = {
        {NULL, "reports no PCI bus id"},
        {"0000:17:00.0", "unknown NUMA locality"},
        {"0000:65:00.0", "PCI device 0000:65:00.0 is not in the topology"},
    };
    for (size_t i = 0; t4 && i < sizeof cases / sizeof cases[0]; i++) {
        d = open_sim(cases[i].busid, 0);
        if (!d) continue;
        CHECK_MSG(sl_hostpool_create(d, t4, &o, &p, &e) == SL_OK, "%s", e.msg);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        print_placement("xml 4 nodes", p);
        CHECK(pl.kind == SL_HOSTPOOL_UNAVAILABLE && pl.node == -1);
        CHECK_CONTAINS(pl.reason, cases[i].reason);
        CHECK_CONTAINS(pl.reason, "plain pinned memory");
        sl_block b;
        CHECK(sl_hostpool_alloc(p, 5000, &b, NULL, &e) == SL_OK);
        sl_hostpool_destroy(p);
        p = NULL;
        sl_device_close(d);
    }
    /* 4 nodes, GPU on node 2. */
    d = open_sim("0000:b1:00.0", 0);
    if (t4 && d) {
        CHECK(sl_hostpool_create(d, t4, &o, &p, &e) == SL_OK);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        print_placement("xml 4 nodes, GPU b1", p);
        CHECK_CONTAINS(pl.topology, "4 NUMA nodes; GPU 0000:b1:00.0 on node 2");
        CHECK(numa_max_node() >= 2 ? pl.node == 2 : pl.kind == SL_HOSTPOOL_UNAVAILABLE);
        sl_hostpool_destroy(p);
        p = NULL;
    }
    sl_device_close(d);

    /* Explicit node absent from the topology: error naming it. */
    d = open_sim(NULL, 0);
    o.numa_node = 7;
    if (t4 && d) {
        CHECK(sl_hostpool_create(d, t4, &o, &p, &e) == SL_ERR_INVALID && p == NULL);
        CHECK_CONTAINS(e.msg, "NUMA node 7 does not exist");
    }
    sl_device_close(d);
    sl_topo_destroy(t4);

    /* One node: trivial. */
    sl_topo *t1 = load_xml("one_node.xml");
    d = open_sim("0000:65:00.0", 0);
    o.numa_node = SL_HOSTPOOL_NODE_AUTO;
    if (t1 && d) {
        CHECK(sl_hostpool_create(d, t1, &o, &p, &e) == SL_OK);
        sl_hostpool_placement pl;
        sl_hostpool_placement_get(p, &pl);
        CHECK(pl.kind == SL_HOSTPOOL_TRIVIAL && pl.node == 0);
        CHECK_CONTAINS(pl.topology, "1 NUMA node; GPU 0000:65:00.0 on node 0");
        sl_hostpool_destroy(p);
        p = NULL;
    }
    sl_device_close(d);
    sl_topo_destroy(t1);
}

static void test_invalid_options(void)
{
    sl_device *d = open_sim(NULL, 0);
    if (!d) return;
    sl_hostpool *p = NULL;
    sl_error e;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.numa_node = 999; /* this machine's topology */
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_ERR_INVALID && p == NULL);
    CHECK_CONTAINS(e.msg, "NUMA node 999 does not exist");
    o.numa_node = -2;
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "numa_node -2");
    o.numa_node = SL_HOSTPOOL_NODE_AUTO;
    o.touch_threads = -1;
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_ERR_INVALID);
    CHECK(sl_hostpool_create(NULL, NULL, NULL, &p, &e) == SL_ERR_INVALID);
    /* a topology the user named that does not load fails the pool, naming it */
    o = sl_hostpool_options_default();
    o.topology = (sl_topo_options){SL_TOPO_SYNTHETIC, "junk", "SLUICE_TOPOLOGY"};
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_ERR_INVALID && p == NULL);
    CHECK_CONTAINS(e.msg, "SLUICE_TOPOLOGY='synthetic:junk'");

    /* Defaults (256 MiB slabs): created lazily, so creating costs nothing. */
    CHECK(sl_hostpool_create(d, NULL, NULL, &p, &e) == SL_OK);
    sl_hostpool_stats st;
    sl_hostpool_stats_get(p, &st);
    CHECK(st.slabs == 0 && st.slab_bytes == 0);
    sl_block b;
    CHECK(sl_hostpool_alloc(p, 0, &b, NULL, &e) == SL_ERR_INVALID);
    sl_hostpool_destroy(p);

    int node;
    CHECK(sl_hostpool_page_node(NULL, &node, &e) == SL_ERR_INVALID && node == -1);
    sl_device_close(d);
}

/* max_bytes bounds the slabs; the failing request leaves nothing behind. */
static void test_max_bytes(void)
{
    sl_device *d = open_sim(NULL, 0);
    if (!d) return;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.slab_bytes = 4 * MIB;
    o.max_bytes = 8 * MIB;
    sl_hostpool *p = NULL;
    sl_error e;
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_OK);
    sl_block b[3];
    CHECK(sl_hostpool_alloc(p, 3 * MIB, &b[0], NULL, &e) == SL_OK);
    CHECK(sl_hostpool_alloc(p, 3 * MIB, &b[1], NULL, &e) == SL_OK);
    CHECK(sl_hostpool_alloc(p, 3 * MIB, &b[2], NULL, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "max_bytes");
    sl_hostpool_stats st;
    sl_hostpool_stats_get(p, &st);
    CHECK(st.slabs == 2 && registrations_live(d) == 2);
    check_valid(p, "max_bytes");
    sl_hostpool_destroy(p);
    CHECK(registrations_live(d) == 0);
    sl_device_close(d);
}

/* The device refuses the 2nd host registration: that slab is unmapped, the error names the
 * page-locking step, the pool goes on; ASan's leak check covers the cleanup. */
static void test_register_fault(void)
{
    sl_device *d = open_sim(NULL, 2);
    if (!d) return;
    sl_hostpool_options o = sl_hostpool_options_default();
    o.slab_bytes = 4 * MIB;
    sl_hostpool *p = NULL;
    sl_error e;
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_OK);
    sl_block a, b, c;
    CHECK(sl_hostpool_alloc(p, 3 * MIB, &a, NULL, &e) == SL_OK);       /* registration 1 */
    sl_status s = sl_hostpool_alloc(p, 3 * MIB, &b, NULL, &e);        /* registration 2 fails */
    CHECK(s != SL_OK && b == SL_BLOCK_NONE);
    CHECK_CONTAINS(e.msg, "page-locking a 4194304-byte slab failed");
    printf("injected fault: %s\n", e.msg);
    sl_hostpool_stats st;
    sl_hostpool_stats_get(p, &st);
    CHECK(st.slabs == 1 && st.slab_failures == 1 && registrations_live(d) == 1);
    check_valid(p, "after fault");
    CHECK(sl_hostpool_alloc(p, 3 * MIB, &c, NULL, &e) == SL_OK);       /* registration 3 */
    sl_hostpool_stats_get(p, &st);
    CHECK(st.slabs == 2 && registrations_live(d) == 2);
    sl_hostpool_destroy(p);
    CHECK(registrations_live(d) == 0);
    sl_device_close(d);

    /* First registration fails: nothing is ever live. */
    d = open_sim(NULL, 1);
    if (!d) return;
    CHECK(sl_hostpool_create(d, NULL, &o, &p, &e) == SL_OK);
    CHECK(sl_hostpool_alloc(p, 100, &a, NULL, &e) != SL_OK);
    CHECK(registrations_live(d) == 0);
    sl_hostpool_destroy(p);
    sl_device_close(d);
}

int main(void)
{
    test_this_machine_auto();
    test_explicit_node0();
    test_fixture_placements();
    test_invalid_options();
    test_max_bytes();
    test_register_fault();
    return sl_test_finish("hostpool_test");
}
