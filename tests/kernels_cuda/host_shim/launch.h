/* tests/kernels_cuda/host_shim: a kernel launch on the host. Each block of the grid in turn, its
 * threads as host threads that share the block's __shared__ variables (static in the shim: one
 * block at a time) and meet at __syncthreads through a barrier; threadIdx / blockIdx are each
 * thread's own. Real concurrency, so a missing barrier between a shared write and another
 * thread's read shows as wrong results or a ThreadSanitizer report, as on the device. */
#ifndef SL_TESTS_HOST_SHIM_LAUNCH_H
#define SL_TESTS_HOST_SHIM_LAUNCH_H

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_runtime.h"

template <typename F> struct sl_shim_thread {
    F *body;
    pthread_barrier_t *bar;
    sl_shim_warp *warp;
    sl_shim_dim3 tid, bid, bdim, gdim;
    static void *run(void *arg)
    {
        const sl_shim_thread *t = (const sl_shim_thread *)arg;
        threadIdx = t->tid;
        blockIdx = t->bid;
        blockDim = t->bdim;
        gridDim = t->gdim;
        sl_shim_barrier = t->bar;
        sl_shim_warp_of = t->warp;
        (*t->body)();
        sl_shim_barrier = nullptr;
        sl_shim_warp_of = nullptr;
        return nullptr;
    }
};

/* Runs body() (which calls the kernel with its arguments) for every thread of grid x block
 * (pthreads, not std::thread, whose virtual state the UBSan build cannot link), and
 * before_block() before each block's threads start (a test poisons its dynamic shared memory
 * there, so a read before the block wrote it shows, as stale device memory would). False if
 * threads is not a positive multiple of 32 (whole warps: shuffles); a thread that cannot be
 * started aborts the test (its block's other threads would wait at the barrier forever). */
/* Blocks in reverse order (the last block of the grid first): a test of a last-block-done
 * epilogue (common.cuh sl_last_block) sets it, so that the block finishing last is not the
 * grid's last one */
static bool sl_shim_reverse_blocks = false;

template <typename F, typename G>
static bool sl_shim_launch(sl_shim_dim3 grid, unsigned threads, F body, G before_block)
{
    if (!threads || threads % 32) return false;
    std::vector<sl_shim_thread<F>> ts(threads);
    std::vector<pthread_t> hs(threads);
    std::vector<sl_shim_warp> warps(threads / 32);
    for (auto &w : warps) pthread_barrier_init(&w.bar, nullptr, 32);
    /* small stacks: a kernel's locals are registers' worth (the default 8 MiB a thread made
     * thread creation the cost of a launch) */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    const unsigned long n_blocks = (unsigned long)grid.x * grid.y * grid.z;
    for (unsigned long i = 0; i < n_blocks; i++) {
        const unsigned long b = sl_shim_reverse_blocks ? n_blocks - 1 - i : i;
        const sl_shim_dim3 bid{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                               (unsigned)(b / grid.x / grid.y)};
        before_block();
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, nullptr, threads);
        for (unsigned t = 0; t < threads; t++) {
            ts[t] = sl_shim_thread<F>{&body, &bar, &warps[t / 32], {t, 0, 0}, bid,
                                      {threads, 1, 1}, grid};
            if (pthread_create(&hs[t], &attr, sl_shim_thread<F>::run, &ts[t])) {
                fprintf(stderr, "sl_shim_launch: pthread_create failed\n");
                abort();
            }
        }
        for (unsigned t = 0; t < threads; t++) pthread_join(hs[t], nullptr);
        pthread_barrier_destroy(&bar);
    }
    for (auto &w : warps) pthread_barrier_destroy(&w.bar);
    pthread_attr_destroy(&attr);
    return true;
}

template <typename F> static bool sl_shim_launch(sl_shim_dim3 grid, unsigned threads, F body)
{
    return sl_shim_launch(grid, threads, body, [] {});
}

#endif
