/* `bench copy`: H2D bandwidth by source memory, and what page-locking costs.
 *
 * Sources, all copied into one device region on one stream:
 *   pool      a block of the NUMA-aware host pool (alloc/hostpool): what Sluice copies from;
 *   pageable  malloc'd memory: what a naive loader copies from;
 *   peak      a plain page-locked buffer (2 MiB-aligned allocation, sl_device_host_register),
 *             measured in the same run as the reference the pool should match.
 * Sizes run from 64 KiB by powers of 4 up to --max-mib (default 256 MiB). Each figure is the
 * median of --reps copies timed with device events (sl_device_event_elapsed_ms), after one
 * untimed warm-up copy; ratio = source GB/s / peak GB/s at the same size.
 * Registration cost: sl_device_host_register on a fresh, touched --register-mib buffer
 * (default 256 MiB), wall-clock, reported per GiB — the number that justifies registering
 * large slabs once rather than buffers one by one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "alloc/hostpool.h"
#include "alloc/topo.h"
#include "base/device/device.h"
#include "tools/common/cli.h"
#include "tools/bench/bench.h"
#include "tools/common/json.h"
#include "runtime/engine/env.h"

enum { MIB = 1 << 20, MAX_SIZES = 16, MAX_REPS = 1000 };

typedef struct copy_ctx {
    sl_device *dev;
    sl_stream *stream;
    sl_event *start, *end;
    void *d_dst;
} copy_ctx;

/* Median GB/s of `reps` timed H2D copies of `bytes` from h_src (one warm-up first). */
static sl_status time_h2d(copy_ctx *c, const void *h_src, uint64_t bytes, int reps, double *gbs,
                          sl_error *err)
{
    double v[MAX_REPS];
    sl_status s;
    for (int r = -1; r < reps; r++) {
        if ((s = sl_device_event_record(c->dev, c->start, c->stream, err)) ||
            (s = sl_device_copy(c->dev, c->stream, c->d_dst, h_src, bytes, SL_COPY_H2D, err)) ||
            (s = sl_device_event_record(c->dev, c->end, c->stream, err)) ||
            (s = sl_device_event_sync(c->dev, c->end, err)))
            return s;
        float ms = 0;
        if ((s = sl_device_event_elapsed_ms(c->dev, c->start, c->end, &ms, err))) return s;
        /* Event timers resolve ~0.5 us on CUDA; a 0 would mean "infinitely fast". */
        if (r >= 0) v[r] = ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : 0;
    }
    qsort(v, (size_t)reps, sizeof v[0], sl_cli_cmp_f64);
    *gbs = reps % 2 ? v[reps / 2] : (v[reps / 2 - 1] + v[reps / 2]) / 2;
    return SL_OK;
}

/* Seconds per GiB to page-lock a fresh, already-touched buffer of `bytes`. */
static sl_status register_cost(sl_device *dev, uint64_t bytes, double *s_per_gib, sl_error *err)
{
    void *h = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED)
        return sl_error_set(err, SL_ERR_NOMEM, "cannot map %" PRIu64 " bytes to register", bytes);
    memset(h, 1, (size_t)bytes); /* the cost of faulting pages in is the pool's, not this */
    double t0 = sl_cli_now_s();
    sl_status s = sl_device_host_register(dev, h, bytes, err);
    double dt = sl_cli_now_s() - t0;
    if (!s) s = sl_device_host_unregister(dev, h, err);
    munmap(h, (size_t)bytes);
    *s_per_gib = dt / ((double)bytes / (double)(1ull << 30));
    return s;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tools/run bench copy [--device sim|cuda|auto] [--json] [--max-mib N]\n"
            "                            [--reps N] [--register-mib N] [--numa-node N]\n"
            "                            [--slab-mib N]\n"
            "  H2D GB/s from the NUMA-aware host pool, from pageable (malloc) memory and from a\n"
            "  plain page-locked buffer (peak reference, same run), 64 KiB .. --max-mib (default\n"
            "  256) by powers of 4, median of --reps (default 7) event-timed copies each;\n"
            "  page-locking cost per GiB on a fresh --register-mib (default 256) buffer.\n"
            "  --numa-node pins the pool to a node (default: nearest the GPU); --slab-mib sets\n"
            "  its slab size (default 256, raised to the largest copy).\n");
}

int sl_bench_copy(int argc, char **argv)
{
    const char *kind = NULL;
    bool json = false;
    long max_mib = 256, reps = 7, register_mib = 256, slab_mib = 256;
    int numa_node = SL_HOSTPOOL_NODE_AUTO;
    sl_error err = {0};
    sl_cli_args a;
    sl_cli_args_init(&a, "bench copy", argc, argv);
    while (sl_cli_args_next(&a)) {
        const char *v;
        if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else if (sl_cli_is(&a, "--device", NULL)) {
            if (!(kind = sl_cli_device_value(&a))) return 2;
        } else if (sl_cli_is(&a, "--max-mib", NULL)) {
            if (sl_bench_long_value(&a, 1, 16384, &max_mib)) return 2;
        } else if (sl_cli_is(&a, "--reps", NULL)) {
            if (sl_bench_long_value(&a, 1, MAX_REPS, &reps)) return 2;
        } else if (sl_cli_is(&a, "--register-mib", NULL)) {
            if (sl_bench_long_value(&a, 1, 1 << 20, &register_mib)) return 2;
        } else if (sl_cli_is(&a, "--slab-mib", NULL)) {
            if (sl_bench_long_value(&a, 2, 1 << 20, &slab_mib)) return 2;
        } else if (sl_cli_is(&a, "--numa-node", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (sl_topo_parse_numa_node(v, &numa_node, &err))
                return sl_cli_usage_error(a.cmd, "--numa-node: %s", err.msg);
        } else if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;

    uint64_t max_bytes = (uint64_t)max_mib * MIB;
    uint64_t sizes[MAX_SIZES];
    int n_sizes = 0;
    for (uint64_t sz = 64 * 1024; sz <= max_bytes && n_sizes < MAX_SIZES; sz *= 4)
        sizes[n_sizes++] = sz;
    if (n_sizes == 0 || sizes[n_sizes - 1] != max_bytes) sizes[n_sizes++] = max_bytes;

    int rc = 1;
    sl_device *dev = NULL;
    sl_hostpool *pool = NULL;
    sl_block blk = SL_BLOCK_NONE;
    void *h_pool = NULL, *h_pageable = NULL, *h_peak = NULL;
    bool peak_registered = false;
    copy_ctx c = {0};
    double gbs[3][MAX_SIZES] = {{0}};
    double reg_s_per_gib = 0;
    sl_device_props props;
    sl_hostpool_placement place;
    sl_hostpool_stats pst;

    sl_device_options dopt = {.kind = kind};
    if (sl_env_device_options(&dopt, &err) || sl_device_open(&dopt, &dev, &err)) goto done;
    c.dev = dev;
    if (sl_device_props_get(dev, &props, &err)) goto done;

    sl_hostpool_options popt = sl_hostpool_options_default();
    popt.numa_node = numa_node;
    popt.slab_bytes = (uint64_t)slab_mib * MIB;
    if (popt.slab_bytes < max_bytes) popt.slab_bytes = max_bytes;
    if (sl_env_topo_options(&popt.topology, &err)) goto done;
    if (sl_hostpool_create(dev, NULL, &popt, &pool, &err)) goto done;
    if (sl_hostpool_alloc(pool, max_bytes, &blk, &h_pool, &err)) goto done;
    sl_hostpool_placement_get(pool, &place);

    h_pageable = malloc((size_t)max_bytes);
    /* 2 MiB alignment gives the reference the same huge-page chance as the pool's slabs. */
    h_peak = aligned_alloc(2 * MIB, (size_t)((max_bytes + 2 * MIB - 1) / (2 * MIB) * (2 * MIB)));
    if (!h_pageable || !h_peak) {
        sl_error_set(&err, SL_ERR_NOMEM, "cannot allocate 2 x %" PRIu64 " host bytes", max_bytes);
        goto done;
    }
    /* Touch everything first: page-fault cost is not copy bandwidth. */
    memset(h_pool, 1, (size_t)max_bytes);
    memset(h_pageable, 2, (size_t)max_bytes);
    memset(h_peak, 3, (size_t)max_bytes);
    if (sl_device_host_register(dev, h_peak, max_bytes, &err)) goto done;
    peak_registered = true;

    if (sl_device_region_alloc(dev, max_bytes, &c.d_dst, &err) ||
        sl_device_stream_create(dev, &c.stream, &err) ||
        sl_device_event_create(dev, &c.start, &err) || sl_device_event_create(dev, &c.end, &err))
        goto done;

    const void *src[3] = {h_pool, h_pageable, h_peak};
    for (int k = 0; k < n_sizes; k++)
        for (int j = 0; j < 3; j++)
            if (time_h2d(&c, src[j], sizes[k], (int)reps, &gbs[j][k], &err)) goto done;

    if (register_cost(dev, (uint64_t)register_mib * MIB, &reg_s_per_gib, &err)) goto done;
    sl_hostpool_stats_get(pool, &pst);

    static const char *names[3] = {"pool", "pageable", "peak"};
    if (json) {
        printf("{\"device\": ");
        sl_json_cstr(stdout, props.name);
        printf(", \"kind\": \"%s\", \"pci_bus_id\": ", sl_device_kind_name(props.kind));
        sl_json_cstr(stdout, props.pci_bus_id);
        printf(", \"placement\": {\"kind\": \"%s\", \"node\": %d, \"reason\": ",
               sl_hostpool_placement_kind_name(place.kind), place.node);
        sl_json_cstr(stdout, place.reason);
        printf(", \"topology\": ");
        sl_json_cstr(stdout, place.topology);
        printf("}, \"reps\": %ld, \"sizes\": [", reps);
        for (int k = 0; k < n_sizes; k++) {
            printf("%s{\"bytes\": %" PRIu64, k ? ", " : "", sizes[k]);
            for (int j = 0; j < 3; j++) printf(", \"%s_gbs\": %.3f", names[j], gbs[j][k]);
            printf(", \"pool_ratio\": %.3f, \"pageable_ratio\": %.3f}",
                   gbs[2][k] > 0 ? gbs[0][k] / gbs[2][k] : 0,
                   gbs[2][k] > 0 ? gbs[1][k] / gbs[2][k] : 0);
        }
        printf("], \"register\": {\"mib\": %ld, \"s_per_gib\": %.4f}, "
               "\"pool\": {\"slabs\": %" PRIu64 ", \"slab_bytes\": %" PRIu64
               ", \"touch_s_per_gib\": %.4f, \"register_s_per_gib\": %.4f}}\n",
               register_mib, reg_s_per_gib, pst.slabs, pst.slab_bytes, pst.touch_s_per_gib,
               pst.register_s_per_gib);
    } else {
        printf("device: %s (%s%s%s)\n", props.name, sl_device_kind_name(props.kind),
               props.pci_bus_id[0] ? ", " : "", props.pci_bus_id);
        printf("host pool: %s, node %d: %s [%s]\n", sl_hostpool_placement_kind_name(place.kind),
               place.node, place.reason, place.topology);
        printf("H2D GB/s, median of %ld event-timed copies\n", reps);
        printf("  %10s  %8s  %8s  %8s  %10s  %10s\n", "size", "pool", "pageable", "peak",
               "pool/peak", "page/peak");
        for (int k = 0; k < n_sizes; k++) {
            char sz[32];
            if (sizes[k] >= MIB) snprintf(sz, sizeof sz, "%" PRIu64 " MiB", sizes[k] / MIB);
            else snprintf(sz, sizeof sz, "%" PRIu64 " KiB", sizes[k] / 1024);
            printf("  %10s  %8.2f  %8.2f  %8.2f  %10.3f  %10.3f\n", sz, gbs[0][k], gbs[1][k],
                   gbs[2][k], gbs[2][k] > 0 ? gbs[0][k] / gbs[2][k] : 0,
                   gbs[2][k] > 0 ? gbs[1][k] / gbs[2][k] : 0);
        }
        printf("page-locking: %.4f s/GiB (fresh %ld MiB buffer); pool: %" PRIu64
               " slab(s), %" PRIu64 " MiB, touch %.4f s/GiB, register %.4f s/GiB\n",
               reg_s_per_gib, register_mib, pst.slabs, pst.slab_bytes / MIB, pst.touch_s_per_gib,
               pst.register_s_per_gib);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "sluice bench copy: %s\n", err.msg);
    if (dev) {
        if (c.stream) sl_device_stream_sync(dev, c.stream, NULL);
        sl_device_event_destroy(dev, c.start);
        sl_device_event_destroy(dev, c.end);
        sl_device_stream_destroy(dev, c.stream);
        if (c.d_dst) sl_device_region_free(dev, c.d_dst, NULL);
        if (peak_registered) sl_device_host_unregister(dev, h_peak, NULL);
    }
    free(h_pageable);
    free(h_peak);
    if (pool) sl_hostpool_free(pool, blk, NULL);
    sl_hostpool_destroy(pool);
    sl_device_close(dev);
    return rc;
}
