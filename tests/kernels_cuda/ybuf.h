/* tests/kernels_cuda/ybuf.h: the output buffer of a kernel host test that holds what a launch
 * must not write (gemv_host_test, gemv_multi_host_test): exactly n floats (a write past them:
 * ASan), YBUF_SENTINEL at first; at() reads an entry a case checks and marks it, and
 * each_unseen() hands the test every other entry, each of which must still be the sentinel
 * (the gaps a case leaves between rows, batches, heads and matrices). One helper, so that the
 * tests agree on what "untouched" means. */
#ifndef SL_TESTS_KERNELS_CUDA_YBUF_H
#define SL_TESTS_KERNELS_CUDA_YBUF_H

#include <cstddef>
#include <vector>

static const float YBUF_SENTINEL = -12345.0f; /* an output a launch did not write */

struct ybuf {
    std::vector<float> y;
    std::vector<bool> seen;
    explicit ybuf(size_t n) : y(n, YBUF_SENTINEL), seen(n, false) {}
    float at(size_t i)
    {
        seen[i] = true;
        return y[i];
    }
    /* f(i, y[i]) for each entry no check read */
    template <typename F> void each_unseen(F f) const
    {
        for (size_t i = 0; i < y.size(); i++)
            if (!seen[i]) f(i, y[i]);
    }
};

#endif
