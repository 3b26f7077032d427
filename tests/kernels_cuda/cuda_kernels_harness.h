/* tests/kernels_cuda/cuda_kernels_harness.h: what the kernels/cuda tests share (included by each
 * test program, static inline so each keeps its own counters): random data, device buffers and
 * copies, a capped failure report, and the device context with the no-GPU path.
 *
 * Each test runs in two modes:
 * - no usable GPU (CI, developer machines): its host-side checks (argument validation), then
 *   cuda_harness_main checks that CUDA failures come back as SL_ERR_DEVICE / SL_ERR_NOT_FOUND
 *   with CUDA's message and our file:line, prints "<test>: SKIPPED, no usable GPU (<reason>)"
 *   and the test passes;
 * - on the GPU machine (tools/gpu-test run): everything, on fresh random data.
 */
#ifndef SL_TESTS_CUDA_KERNELS_HARNESS_H
#define SL_TESTS_CUDA_KERNELS_HARNESS_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/ctx.h"
#include "base/status.h"
#include "tests/testing.h"

#include "tests/kernels_cuda/rng.h"

static inline void *dmalloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1); /* test harness only */
    }
    return p;
}
/* The kernels run on a non-blocking stream, which does not order with the legacy stream that
 * cudaMemcpy uses, and a pageable H2D may return before its DMA lands: fence the whole device on
 * both sides so an upload neither overwrites what a queued kernel still reads nor lands late. */
static inline void h2d(void *d, const void *h, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
static inline void d2h(void *h, const void *d, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) exit(1);
    return p;
}

/* REPORT: a CHECK that prints only the first failures (a broken kernel fails thousands): 30, or
 * SLUICE_TEST_REPORTS (1-100000) to see past a first broken type on a rare GPU run */
static int fails_reported;
static inline int report_cap(void)
{
    static int cap;
    if (!cap) {
        const char *v = getenv("SLUICE_TEST_REPORTS");
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 30;
        if (v && (end == v || *end || n < 1 || n > 100000)) {
            fprintf(stderr, "SLUICE_TEST_REPORTS='%s' is not 1-100000; using 30\n", v);
            n = 30;
        }
        cap = (int)n;
    }
    return cap;
}
#define REPORT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond) && fails_reported++ < report_cap()) CHECK_MSG(cond, __VA_ARGS__);      \
        else if (!(cond)) sl_test_g.failures++;                                            \
        else sl_test_g.checks++;                                                           \
    } while (0)

/* A test program's main: its host-side checks (argument validation, no GPU needed); then, with
 * a usable GPU, its device checks on a context over a fresh non-blocking stream, after which
 * every queued kernel must have finished cleanly. Without one: the clean-error checks and the
 * SKIPPED line. Returns sl_test_finish's status. */
static inline int cuda_harness_main(const char *test, void (*host_side)(void),
                                    void (*device)(sl_cuda_ctx *c))
{
    host_side();
    sl_error e;
    int n = 0;
    if (sl_cuda_probe(&n, &e) != SL_OK) {
        CHECK(e.code == SL_ERR_DEVICE || e.code == SL_ERR_NOT_FOUND);
        CHECK(e.msg[0] != '\0');
        sl_error e2;
        sl_cuda_ctx *c = (sl_cuda_ctx *)(uintptr_t)1;
        CHECK(sl_cuda_ctx_create(0, NULL, &c, &e2) != SL_OK);
        CHECK(c == NULL);
        CHECK_CONTAINS(e2.msg, "kernels/cuda/ctx.cu:");
        printf("%s: SKIPPED, no usable GPU (%s)\n", test, e.msg);
        return sl_test_finish(test);
    }
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    sl_cuda_ctx *c = NULL;
    if (sl_cuda_ctx_create(0, s, &c, &e) != SL_OK) {
        CHECK_MSG(false, "ctx: %s", e.msg);
        return sl_test_finish(test);
    }
    sl_cuda_ctx_info info;
    sl_cuda_ctx_info_get(c, &info);
    printf("%s: %s (cc %d.%d, %d SMs)\n", test, info.name, info.cc_major, info.cc_minor,
           info.sm_count);
    device(c);
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    sl_cuda_ctx_destroy(c);
    cudaStreamDestroy(s);
    return sl_test_finish(test);
}

#endif
