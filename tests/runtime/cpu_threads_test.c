/* runtime/engine/cpu_threads: the CPU threads' count and node on the facts of machines this one
 * is not - two sockets with the GPU's host pool on node 1, 16 or 2 CPUs, a CPU list - so every
 * branch of the rule is held here, not only the one this machine takes. */
#include "runtime/engine/cpu_threads.h"
#include "kernels/cpu/pool.h"
#include "tests/testing.h"

typedef struct want {
    int n_threads, numa_node;
    bool auto_node;
} want;

static void check(const char *what, sl__cpu_facts f, want w)
{
    const sl__cpu_plan p = sl__cpu_threads(&f);
    CHECK_MSG(p.n_threads == w.n_threads && p.numa_node == w.numa_node &&
                  p.auto_node == w.auto_node,
              "%s: %d threads on node %d (auto %d), want %d on %d (auto %d)", what, p.n_threads,
              p.numa_node, (int)p.auto_node, w.n_threads, w.numa_node, (int)w.auto_node);
}

int main(void)
{
    const sl__cpu_facts one_node = {.online = 16, .numa_node = -1, .pool_node = -1};
    sl__cpu_facts f = one_node;
    check("16 CPUs, all open", f, (want){16, -1, false});
    f.both_sides = true;
    check("16 CPUs, layers on both sides: one left to the device", f, (want){15, -1, false});
    f.online = 4;
    check("4 CPUs, both sides", f, (want){3, -1, false});
    f.online = 3;
    check("3 CPUs, both sides: all compute", f, (want){3, -1, false});
    f.online = 2;
    check("2 CPUs, both sides: all compute", f, (want){2, -1, false});
    f.online = 0;
    check("CPUs unknown", f, (want){1, -1, false});
    f = one_node;
    f.n_threads = 5;
    f.both_sides = true;
    check("an explicit count is kept beside a device", f, (want){5, -1, false});
    f.n_threads = SL_CPU_POOL_MAX_THREADS + 9;
    check("an explicit count is clamped", f, (want){SL_CPU_POOL_MAX_THREADS, -1, false});

    /* two sockets of 8, the weights' host pool on node 1 next to the GPU */
    const sl__cpu_facts two = {.online = 16, .numa_node = -1, .pool_node = 1, .pool_cpus = 8};
    f = two;
    check("two sockets: the pool's node and its CPUs", f, (want){8, 1, true});
    f.both_sides = true;
    check("two sockets, both sides", f, (want){7, 1, true});
    f.n_threads = 6;
    check("two sockets, an explicit count within the node: on the pool's node", f,
          (want){6, 1, true});
    f.n_threads = 12;
    check("two sockets, an explicit count past the node's CPUs: unbound", f,
          (want){12, -1, false});
    f = two;
    f.numa_node = 1;
    check("the options name the pool's node", f, (want){8, 1, false});
    f.numa_node = 0;
    check("the options name another node (no CPU count for it)", f, (want){16, 0, false});
    f = two;
    f.cpus_listed = 4;
    check("a CPU list: its CPUs, no node", f, (want){4, -1, false});
    f.n_threads = 2;
    f.both_sides = true;
    check("a CPU list and a count", f, (want){2, -1, false});
    f = two;
    f.pool_cpus = 0;
    check("a pool node without bindable CPUs (another machine's topology)", f,
          (want){16, -1, false});
    return sl_test_finish("cpu_threads_test");
}
