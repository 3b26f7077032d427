/* tests/kernels_cuda/rand_weights.h: random weight rows of
 * any type the CUDA decoders take, for the host tests (host_test.bzl).
 * A row of n values (whole blocks) of type T into w: quantized from random floats where
 * kernels/ref has a quantizer (rep varies the scale and adds an offset now and then), else
 * random codes (all valid) under a random finite block scale of either sign; MXFP4 random codes
 * with exponents near 1. f: n floats of scratch. False if a step failed.
 * rand_mat: such a matrix in its own allocation, at an offset (the kernels' unaligned paths),
 * with its dequantised values. */
#ifndef SL_TESTS_KERNELS_CUDA_RAND_WEIGHTS_H
#define SL_TESTS_KERNELS_CUDA_RAND_WEIGHTS_H

#include <cstdint>
#include <cstdlib>
#include <vector>

extern "C" {
#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
}

#include "tests/kernels_cuda/rng.h"

static inline bool rand_weights(uint32_t T, int64_t n, uint8_t *w, float *f, int rep)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(T);
    const size_t bytes = sl_quant_row_bytes(T, n);
    if (!ti || !bytes) return false;
    if (T == SL_GGML_MXFP4) {
        for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd_u32();
        for (size_t o = 0; o < bytes; o += ti->type_size) w[o] = (uint8_t)(118 + rnd_u32() % 12);
        return true;
    }
    if (!sl_quant_can_quantize(T)) {
        for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd_u32();
        for (size_t o = 0; o < bytes; o += ti->type_size) {
            const float d = rnd_f(-2.0f, 2.0f) * (rep % 3 == 2 ? 1e-3f : 1.0f);
            if (!sl_quant_block_set_scale(T, w + o, d, 0.0f)) return false;
        }
        return true;
    }
    const float scale = rep % 3 == 2 ? 1e-3f : 1.0f + (float)(rep % 5);
    for (int64_t i = 0; i < n; i++)
        f[i] = rnd_f(-1.0f, 1.0f) * scale * (1.0f + (float)(i % 7)) +
               (rep % 4 == 1 ? 0.5f * scale : 0.0f);
    sl_error e;
    return sl_quant_row(T, f, w, n, &e) == SL_OK;
}

/* A random rows x cols matrix of type T at `off` bytes into its own allocation of exactly
 * off + its bytes (so the ASan build flags a read past its end), and its dequantised values.
 * The allocation is 16-byte aligned (false if not: an "aligned" case would quietly take the
 * kernels' unaligned paths). */
struct rand_mat {
    uint8_t *mem = nullptr, *w = nullptr;
    std::vector<float> f;
    int64_t rows = 0, cols = 0;
    size_t rb = 0;
    bool make(uint32_t T, int64_t r, int64_t c, size_t off, int rep)
    {
        rows = r, cols = c;
        rb = sl_quant_row_bytes(T, c);
        f.assign((size_t)(r * c), 0.0f);
        mem = (uint8_t *)malloc(off + rb * (size_t)r);
        if (!mem || (uintptr_t)mem % 16) return false;
        w = mem + off;
        sl_error e;
        return rand_weights(T, r * c, w, f.data(), rep) &&
               sl_quant_dequant_row(T, w, f.data(), r * c, &e) == SL_OK;
    }
    ~rand_mat() { free(mem); }
};

#endif
