/* tests/kernels_cuda/cublas_load_test.c: cuBLAS is loaded on first use, not at start-up
 * (kernels/cuda/blas.h), and the loader finds it. Needs no GPU, so it runs fully in CI (where
 * libcublas is only in /usr/local/cuda/lib64, outside ld.so.cache: the fallback path) and on
 * the GPU machine (tools/gpu-test: there it is the check that GEMMs will find cuBLAS).
 *
 * Reads /proc/self/maps: what the process has mapped is the thing being promised. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/ctx.h"
#include "tests/testing.h"

/* Whether a file whose path contains `needle` is mapped into this process; its path into
 * found (when not NULL). */
static bool mapped_at(const char *needle, char *found, size_t found_bytes)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f)) {
        const char *path = strchr(line, '/');
        hit = path && strstr(path, needle);
        if (hit && found) snprintf(found, found_bytes, "%.*s", (int)strcspn(path, "\n"), path);
    }
    fclose(f);
    return hit;
}

static bool mapped(const char *needle) { return mapped_at(needle, NULL, 0); }

int main(void)
{
    CHECK_MSG(mapped("libc.so") || mapped("libc-"), "/proc/self/maps lists no libc: unreadable?");
    CHECK_MSG(!mapped("libcublas"), "cuBLAS mapped at start-up");
    CHECK_MSG(!mapped("libcudart"), "the CUDA runtime is a shared library (expected static)");
    CHECK_MSG(!mapped("libcuda.so"), "the CUDA driver loaded before any CUDA call");

    sl_error err = {0};
    sl_status st = sl_cuda_blas_load(&err);
    CHECK_MSG(st == SL_OK, "sl_cuda_blas_load: %s: %s", sl_status_name(st), err.msg);
    if (st == SL_OK) {
        char path[4096] = "";
        CHECK_MSG(mapped_at("libcublas.so.", path, sizeof path), "cuBLAS loaded but not mapped");
        printf("cublas_load_test: cuBLAS loaded from %s\n", path);
        CHECK_MSG(!mapped("libcudart"), "cuBLAS pulled in the shared CUDA runtime");
        /* whether the driver is mapped now is cuBLAS's business: cuBLAS 13 maps libcuda.so
         * while loading where a driver is installed (H200, 2026-11-30), and there it is
         * harmless; the promise is only that nothing CUDA loads before the first use */
    }
    /* the answer is remembered */
    sl_error err2 = {0};
    CHECK(sl_cuda_blas_load(&err2) == st);
    CHECK(!strcmp(err2.msg, err.msg));

    /* a CUDA call after it: a GPU, or the usual clean "no device" error, never a crash */
    int n = 0;
    sl_error perr = {0};
    st = sl_cuda_probe(&n, &perr);
    CHECK_MSG(st == SL_OK ? n > 0 : perr.msg[0] != '\0', "probe: %s, %d device(s)",
              sl_status_name(st), n);
    printf("cublas_load_test: probe after loading cuBLAS: %s (%s)\n", sl_status_name(st),
           st == SL_OK ? "GPU present" : perr.msg);
    return sl_test_finish("cublas_load_test");
}
