/* tests/kernels_cuda/gather_host_test: the batched D2D copy's kernel (base/device/cuda_gather.cuh,
 * both directions of sl__cuda_gather) run on the CPU, each thread of a block a host thread
 * (host_shim/launch.h), launched as sl__cuda_gather launches it: the IN kernel (sources ->
 * bounce) over the bounce's tiles, then the OUT kernel (bounce -> destinations). Why: CI has no
 * GPU, and every compaction move of the cuda backend goes through it. Phases of items of 1 to
 * more than a tile's bytes (an item's tail, an item across tiles, a tile across items), at
 * 16-byte aligned and misaligned sources and destinations (the vector and the bytewise paths),
 * up to SL__GATHER_MAX_ITEMS items, with destinations over other items' sources (a phase reads
 * everything first: cuda_gather.h). After both kernels the whole arena equals its copy with each
 * destination overwritten by its source's original bytes: every destination byte right, and
 * none outside them (the gaps between destinations are guard bytes). The bounce starts
 * poisoned and is allocated to its size (the ASan build flags a write past it); no vector load
 * at an address that faults on the device. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"                             /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/cuda_gather_cuh.h" /* base/device/cuda_gather.cuh (BUILD) */
#include "tests/kernels_cuda/rng.h"

extern "C" {
#include "tests/testing.h"
}

/* The sizes that take each path: a byte, a tail alone, one vector, a vector and a tail, tails
 * of a 4 KiB run, a tile and 3 over (in two tiles unless its offset is 0), more than two tiles. */
static const uint32_t SIZES[] = {1, 15, 16, 17, 4095, GK_TILE + 3, 2 * GK_TILE + 100};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

struct item {
    uint64_t src, dst; /* offsets into the arena */
    uint32_t bytes;
};

static int n_phases = 0;
static long n_bytes = 0;

/* Runs the phase of `items` over arena (arena_bytes) and checks it. */
static void run_phase(const char *what, uint8_t *arena, uint64_t arena_bytes,
                      const std::vector<item> &items)
{
    static sl__gather g; /* 3.3 KB */
    memset(&g, 0, sizeof g);
    g.n = (int32_t)items.size();
    for (size_t i = 0; i < items.size(); i++) {
        g.src[i] = arena + items[i].src;
        g.dst[i] = arena + items[i].dst;
        g.bytes[i] = items[i].bytes;
        g.off[i + 1] = g.off[i] + (items[i].bytes + 15) / 16 * 16;
    }
    CHECK_MSG(sl__gather_validate(&g) == 0, "%s: item %d breaks the phase's invariants", what,
              sl__gather_validate(&g));
    std::vector<uint8_t> want(arena, arena + arena_bytes);
    for (const item &it : items) memcpy(&want[it.dst], arena + it.src, it.bytes);

    const uint64_t bb = g.off[g.n];
    uint8_t *bounce = (uint8_t *)aligned_alloc(16, bb); /* bb: a multiple of 16 */
    if (!bounce) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    memset(bounce, 0xA5, bb);
    const long faults0 = sl_shim_align_faults.load();
    /* sl__cuda_gather's grid: one block a tile of the bounce */
    const sl_shim_dim3 grid{(unsigned)((bb + GK_TILE - 1) / GK_TILE), 1, 1};
    CHECK(sl_shim_launch(grid, GK_THREADS, [&] { gk_tile<false>(g, bounce); }));
    CHECK(sl_shim_launch(grid, GK_THREADS, [&] { gk_tile<true>(g, bounce); }));
    const long faults = sl_shim_align_faults.load() - faults0;
    CHECK_MSG(faults == 0, "%s: %ld loads at addresses that fault on the device", what, faults);
    free(bounce);

    uint64_t bad = 0, first = 0;
    for (uint64_t k = 0; k < arena_bytes; k++)
        if (arena[k] != want[k] && !bad++) first = k;
    CHECK_MSG(bad == 0, "%s: %zu items, %llu bytes: %llu arena bytes wrong, the first at %llu",
              what, items.size(), (unsigned long long)bb, (unsigned long long)bad,
              (unsigned long long)first);
    n_phases++;
    n_bytes += (long)bb;
}

/* An arena of random bytes holding `sizes`' destinations one after another, each at `dal`
 * bytes past a 16-byte boundary (-1: any) with a gap of guard bytes before it, and each
 * source anywhere in the arena at `sal` past a boundary (-1: any) but not over its own
 * destination: a source may lie over other items' destinations. */
static void phase(const char *what, const std::vector<uint32_t> &sizes, int dal, int sal)
{
    std::vector<item> items;
    uint64_t at = 0, most = 0;
    for (uint32_t b : sizes) {
        most = b > most ? b : most;
        at += 1 + rnd_u32() % 40;
        const uint64_t a = dal >= 0 ? (uint64_t)dal : rnd_u32() % 16;
        at = (at + 15 - a) / 16 * 16 + a;
        items.push_back(item{0, at, b});
        at += b;
    }
    /* room for any source past the last destination; 16-byte aligned (aligned_alloc) to its
     * end, so the alignments above are the addresses' */
    const uint64_t arena_bytes = (at + most + 64) / 16 * 16;
    uint8_t *arena = (uint8_t *)aligned_alloc(16, arena_bytes);
    if (!arena) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    for (uint64_t k = 0; k < arena_bytes; k++) arena[k] = (uint8_t)rnd_u32();
    for (item &it : items) {
        const uint64_t a = sal >= 0 ? (uint64_t)sal : rnd_u32() % 16;
        do {
            it.src = (rnd_u32() % (arena_bytes - it.bytes - 16)) / 16 * 16 + a;
        } while (it.src < it.dst + it.bytes && it.dst < it.src + it.bytes);
    }
    run_phase(what, arena, arena_bytes, items);
    free(arena);
}

int main(void)
{
    /* every size at each pair of alignments: vectors both ways, bytewise one way or both */
    const int als[4][2] = {{0, 0}, {0, 1}, {15, 0}, {8, 7}};
    for (int k = 0; k < 4; k++) {
        std::vector<uint32_t> sizes(SIZES, SIZES + N_SIZES);
        char what[64];
        snprintf(what, sizeof what, "sizes dst%%16=%d src%%16=%d", als[k][0], als[k][1]);
        phase(what, sizes, als[k][0], als[k][1]);
    }
    /* a lone byte (one tile, one item); each size alone (the binary search over one item) */
    phase("one byte", {1}, 3, 5);
    for (uint32_t b : SIZES) phase("one item", {b}, -1, -1);
    /* random phases up to the most items: mostly small items (many per tile), some listed */
    const int counts[4] = {2, 33, SL__GATHER_MAX_ITEMS, SL__GATHER_MAX_ITEMS};
    for (int t = 0; t < 4; t++) {
        std::vector<uint32_t> sizes;
        for (int i = 0; i < counts[t]; i++)
            sizes.push_back(rnd_u32() % 4 == 0 ? SIZES[rnd_u32() % N_SIZES]
                                               : 1 + rnd_u32() % (t < 2 ? 600 : 200));
        phase("random", sizes, -1, -1);
    }
    printf("gather_host_test: %d phases, %ld bounce bytes\n", n_phases, n_bytes);
    return sl_test_finish("gather_host_test");
}
