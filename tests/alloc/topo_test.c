/* alloc/topo: XML fixtures (1 node; 2 packages with the GPU on the second; 4 nodes), this
 * machine's real topology, strict CPU-list / node parsing, and thread binding checked with
 * sched_getaffinity. */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/topo.h"
#include "tests/testing.h"

/* Tests run in the runfiles root (workspace "sluice"); outside Bazel, from the workspace root. */
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
    sl_status s = sl_topo_load(&o, &t, &e);
    CHECK_MSG(s == SL_OK && t, "%s: %s", name, e.msg);
    return t;
}

static void check_near(const sl_topo *t, const char *busid, sl_status want, int want_node,
                       const char *want_msg)
{
    int node = 123;
    sl_error e = {0};
    sl_status s = sl_topo_node_near_pci(t, busid, &node, &e);
    CHECK_MSG(s == want, "'%s': status %s, want %s (%s)", busid, sl_status_name(s),
              sl_status_name(want), e.msg);
    CHECK_MSG(node == want_node, "'%s': node %d, want %d", busid, node, want_node);
    if (want_msg) CHECK_CONTAINS(e.msg, want_msg);
}

static void test_one_node(void)
{
    sl_topo *t = load_xml("one_node.xml");
    if (!t) return;
    CHECK(sl_topo_node_count(t) == 1);
    CHECK(!sl_topo_is_this_machine(t));
    CHECK_CONTAINS(sl_topo_source_name(t), "xml:");
    const sl_topo_node *n = sl_topo_node_at(t, 0);
    CHECK(n && n->os_index == 0 && n->ncpus == 2 && n->cpus[0] == 0 && n->cpus[1] == 1);
    CHECK(n && n->memory_bytes == 256000000u);
    CHECK(sl_topo_node_at(t, 1) == NULL && sl_topo_node_at(t, -1) == NULL);
    CHECK(sl_topo_node_find(t, 0) == n && sl_topo_node_find(t, 1) == NULL);
    check_near(t, "0000:65:00.0", SL_OK, 0, NULL);
    check_near(t, "65:00.0", SL_OK, 0, NULL);          /* domain omitted */
    check_near(t, "00000000:65:00.0", SL_OK, 0, NULL); /* NVML's 8-digit domain */
    /* Not this machine: binding must refuse rather than silently do nothing. */
    sl_error e;
    CHECK(sl_topo_bind_thread_to_node(t, 0, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "not this machine");
    CHECK(sl_topo_bind_thread_to_cpus(t, "0", &e) == SL_ERR_UNSUPPORTED);
    char line[256];
    sl_topo_describe(t, "0000:65:00.0", line, sizeof line);
    CHECK_CONTAINS(line, "1 NUMA node; GPU 0000:65:00.0 on node 0");
    sl_topo_destroy(t);
}

static void test_two_packages(void)
{
    sl_topo *t = load_xml("two_packages_gpu_on_1.xml");
    if (!t) return;
    CHECK(sl_topo_node_count(t) == 2);
    const sl_topo_node *n1 = sl_topo_node_find(t, 1);
    CHECK(n1 && n1->ncpus == 2 && n1->cpus[0] == 2 && n1->cpus[1] == 3);
    check_near(t, "0000:65:00.0", SL_OK, 1, NULL); /* the GPU hangs off the second package */
    check_near(t, "0000:65:00.1", SL_ERR_NOT_FOUND, -1, "not in the topology");
    char line[256];
    sl_topo_describe(t, "0000:65:00.0", line, sizeof line);
    CHECK_CONTAINS(line, "2 NUMA nodes; GPU 0000:65:00.0 on node 1");
    CHECK_CONTAINS(line, "two_packages_gpu_on_1.xml");
    sl_topo_describe(t, NULL, line, sizeof line);
    CHECK_CONTAINS(line, "2 NUMA nodes");
    CHECK(strstr(line, "GPU") == NULL);
    sl_topo_describe(t, "0000:99:00.0", line, sizeof line);
    CHECK_CONTAINS(line, "GPU 0000:99:00.0 not in topology");
    char tiny[8];
    sl_topo_describe(t, "0000:65:00.0", tiny, sizeof tiny); /* truncates, stays terminated */
    CHECK(strlen(tiny) == sizeof tiny - 1);
    sl_topo_destroy(t);
}

static void test_four_nodes(void)
{
    sl_topo *t = load_xml("four_nodes_gpu_on_2.xml");
    if (!t) return;
    CHECK(sl_topo_node_count(t) == 4);
    for (int i = 0; i < 4; i++) {
        const sl_topo_node *n = sl_topo_node_at(t, i);
        CHECK(n && n->os_index == i && n->ncpus == 2 && n->cpus[0] == 2 * i);
    }
    check_near(t, "0000:b1:00.0", SL_OK, 2, NULL);
    check_near(t, "0000:B1:00.0", SL_OK, 2, NULL); /* nvidia-smi prints upper case */
    /* The NIC hangs off the machine root: locality unknown, not "node 0". */
    check_near(t, "0000:17:00.0", SL_ERR_UNSUPPORTED, -1, "unknown NUMA locality");
    /* GPU absent: -1 and a reason naming the device. */
    check_near(t, "0000:65:00.0", SL_ERR_NOT_FOUND, -1, "PCI device 0000:65:00.0 is not in");
    /* Malformed ids are invalid, not "absent". */
    const char *bad[] = {"",           "65:00",          "0000:65:00.0x", "zz:00.0",
                         "0000:65:20.0", "0000:65:00.8", "0000:165:00.0", "0000:65::00.0",
                         "0000:65:00.",  ":65:00.0",      "123456789:65:00.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_near(t, bad[i], SL_ERR_INVALID, -1, "is not of the form");
    sl_error e;
    CHECK(sl_topo_node_near_pci(t, NULL, NULL, &e) == SL_ERR_INVALID);
    sl_topo_destroy(t);
}

static void test_sources(void)
{
    sl_topo *t = NULL;
    sl_error e;
    sl_topo_options syn = {.source = SL_TOPO_SYNTHETIC, .desc = "pack:2 [numa] core:1 pu:1"};
    CHECK_MSG(sl_topo_load(&syn, &t, &e) == SL_OK, "%s", e.msg);
    CHECK(sl_topo_node_count(t) == 2);
    /* Synthetic topologies have no PCI devices. */
    check_near(t, "0000:65:00.0", SL_ERR_NOT_FOUND, -1, "0 PCI devices");
    sl_topo_destroy(t);

    syn.desc = "pack:x";
    CHECK(sl_topo_load(&syn, &t, &e) == SL_ERR_INVALID && t == NULL);
    CHECK_CONTAINS(e.msg, "pack:x");
    syn.desc = NULL;
    CHECK(sl_topo_load(&syn, &t, &e) == SL_ERR_INVALID);

    sl_topo_options xml = {.source = SL_TOPO_XML, .desc = "/nonexistent/topo.xml"};
    CHECK(sl_topo_load(&xml, &t, &e) != SL_OK && t == NULL);
    CHECK_CONTAINS(e.msg, "/nonexistent/topo.xml");

    /* A source the user named (named_by) that does not load is the user's error, naming
     * what named it; the environment itself is not read here (SLUICE_TOPOLOGY: env.c). */
    sl_topo_options named = {.source = SL_TOPO_XML, .desc = "/no/such.xml", .named_by = "VAR"};
    CHECK(sl_topo_load(&named, &t, &e) == SL_ERR_INVALID && t == NULL);
    CHECK_CONTAINS(e.msg, "VAR='xml:/no/such.xml'");
    named = (sl_topo_options){SL_TOPO_SYNTHETIC, "junk", "VAR"};
    CHECK(sl_topo_load(&named, &t, &e) == SL_ERR_INVALID && t == NULL);
    CHECK_CONTAINS(e.msg, "VAR='synthetic:junk'");
    setenv("SLUICE_TOPOLOGY", "json:foo", 1);
    CHECK_MSG(sl_topo_load(NULL, &t, &e) == SL_OK, "%s", e.msg);
    CHECK(sl_topo_is_this_machine(t));
    sl_topo_destroy(t);
    unsetenv("SLUICE_TOPOLOGY");
}

static void test_cpu_list_parse(void)
{
    sl_cpu_set *cs = malloc(sizeof *cs);
    sl_error e;
    CHECK(sl_topo_parse_cpu_list("0-3,8", cs, &e) == SL_OK);
    CHECK(cs->count == 5);
    for (int c = 0; c < 10; c++) CHECK(sl_cpu_set_has(cs, c) == (c <= 3 || c == 8));
    CHECK(sl_topo_parse_cpu_list("7", cs, &e) == SL_OK && cs->count == 1 && sl_cpu_set_has(cs, 7));
    CHECK(sl_topo_parse_cpu_list("8191", cs, &e) == SL_OK && sl_cpu_set_has(cs, 8191));
    CHECK(sl_topo_parse_cpu_list("2-2", cs, &e) == SL_OK && cs->count == 1);

    struct {
        const char *in, *msg;
    } bad[] = {
        {"", "is empty"},
        {"0-3,,8", "token 2 is empty"},
        {"0-3,", "token 2 is empty"},
        {",1", "token 1 is empty"},
        {"0-3,x", "token 2 'x'"},
        {"0-", "token 1 '0-'"},
        {"-1", "token 1 '-1'"},
        {" 1", "token 1 ' 1'"},
        {"1 ", "token 1 '1 '"},
        {"+1", "token 1 '+1'"},
        {"1-2-3", "token 1 '1-2-3'"},
        {"0x3", "token 1 '0x3'"},
        {"3-1", "token 1 '3-1' is a reversed range"},
        {"1,2,1", "token 3 '1' repeats CPU 1"},
        {"0-4,3", "token 2 '3' repeats CPU 3"},
        {"8192", "token 1 '8192' names a CPU above 8191"},
        {"0,99999999999999999999", "token 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_status s = sl_topo_parse_cpu_list(bad[i].in, cs, &e);
        CHECK_MSG(s == SL_ERR_INVALID || s == SL_ERR_RANGE, "'%s' accepted", bad[i].in);
        CHECK_CONTAINS(e.msg, bad[i].msg);
    }
    free(cs);

    int n = -1;
    CHECK(sl_topo_parse_numa_node("0", &n, &e) == SL_OK && n == 0);
    CHECK(sl_topo_parse_numa_node("1023", &n, &e) == SL_OK && n == 1023);
    const char *bad_nodes[] = {"", "-1", "1024", "1x", " 1", "+1", "0x1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_nodes / sizeof bad_nodes[0]; i++) {
        CHECK_MSG(sl_topo_parse_numa_node(bad_nodes[i], &n, &e) == SL_ERR_INVALID, "'%s'",
                  bad_nodes[i]);
        char want[64];
        snprintf(want, sizeof want, "NUMA node '%s'", bad_nodes[i]);
        CHECK_CONTAINS(e.msg, want);
    }
}

static bool affinity_is(const int *cpus, int n)
{
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) != 0) return false;
    if (CPU_COUNT(&cur) != n) return false;
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET(cpus[i], &cur)) return false;
    return true;
}

static void test_this_machine_and_binding(void)
{
    sl_topo_options o = {.source = SL_TOPO_THIS_MACHINE};
    sl_topo *t = NULL;
    sl_error e;
    CHECK_MSG(sl_topo_load(&o, &t, &e) == SL_OK, "%s", e.msg);
    if (!t) return;
    CHECK(sl_topo_is_this_machine(t));
    CHECK(strcmp(sl_topo_source_name(t), "this machine") == 0);
    int nn = sl_topo_node_count(t);
    CHECK(nn >= 1);
    char line[256];
    sl_topo_describe(t, NULL, line, sizeof line);
    printf("this machine: %s\n", line);
    /* I/O discovery works: every storage, network or display PCI function in sysfs (the
     * classes hwloc keeps as important) is found, with a node or an honest "unknown". */
    DIR *dir = opendir("/sys/bus/pci/devices");
    int seen = 0;
    for (struct dirent *de; dir && (de = readdir(dir));) {
        if (de->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/class", de->d_name);
        FILE *f = fopen(path, "r");
        unsigned cls = 0;
        bool ok = f && fscanf(f, "%x", &cls) == 1;
        if (f) fclose(f);
        unsigned base = cls >> 16;
        if (!ok || (base != 0x01 && base != 0x02 && base != 0x03)) continue;
        int node;
        sl_status s = sl_topo_node_near_pci(t, de->d_name, &node, &e);
        CHECK_MSG(s == SL_OK || s == SL_ERR_UNSUPPORTED, "%s: %s", de->d_name, e.msg);
        if (s == SL_OK) CHECK(sl_topo_node_find(t, node) != NULL);
        printf("  PCI %s (class %06x): %s\n", de->d_name, cls,
               s == SL_OK ? "node found" : e.msg);
        seen++;
    }
    if (dir) closedir(dir);
    printf("  %d important PCI devices checked\n", seen);

    const sl_topo_node *n0 = sl_topo_node_at(t, 0);
    CHECK(n0 && n0->ncpus >= 1);
    if (!n0 || n0->ncpus < 1) {
        sl_topo_destroy(t);
        return;
    }

    cpu_set_t saved;
    CHECK(sched_getaffinity(0, sizeof saved, &saved) == 0);

    char one[16];
    snprintf(one, sizeof one, "%d", n0->cpus[0]);
    CHECK_MSG(sl_topo_bind_thread_to_cpus(t, one, &e) == SL_OK, "%s", e.msg);
    CHECK(affinity_is(&n0->cpus[0], 1));

    CHECK_MSG(sl_topo_bind_thread_to_node(t, n0->os_index, &e) == SL_OK, "%s", e.msg);
    CHECK(affinity_is(n0->cpus, n0->ncpus));

    /* A CPU that does not exist here, a node that does not exist, a bad list: errors naming
     * the value, affinity unchanged. */
    CHECK(sl_topo_bind_thread_to_cpus(t, "0,8000", &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "CPU 8000");
    CHECK(sl_topo_bind_thread_to_cpus(t, "0-x", &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "'0-x'");
    CHECK(sl_topo_bind_thread_to_node(t, 999, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "NUMA node 999 does not exist");
    CHECK(affinity_is(n0->cpus, n0->ncpus));

    CHECK(sched_setaffinity(0, sizeof saved, &saved) == 0);
    sl_topo_destroy(t);
}

int main(void)
{
    test_one_node();
    test_two_packages();
    test_four_nodes();
    test_sources();
    test_cpu_list_parse();
    test_this_machine_and_binding();
    return sl_test_finish("topo_test");
}
