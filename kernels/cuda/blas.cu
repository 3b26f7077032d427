/* kernels/cuda/blas.cu: see blas.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "kernels/cuda/blas.h"
#include "kernels/cuda/ctx.h"

/* Written once by load() under `once`, read-only afterwards (see blas.h for why it is global).
 * Invariant after `once`: ok == (every api pointer is non-NULL); !ok => why holds the reason. */
static struct {
    pthread_once_t once;
    bool ok;
    sl__cublas_api api;
    char why[SL_ERROR_MSG_BYTES];
} g_cublas = {PTHREAD_ONCE_INIT, false, {}, {0}};

static const char *const k_tries[] = {SL_CUBLAS_SONAME,
                                      SL_CUBLAS_FALLBACK_DIR "/" SL_CUBLAS_SONAME};

/* The first of k_tries that dlopens (its index in *which), or NULL with the reasons in why. */
static void *open_lib(size_t *which)
{
    const size_t n = sizeof k_tries / sizeof k_tries[0];
    size_t used = (size_t)snprintf(g_cublas.why, sizeof g_cublas.why, "cuBLAS not found:");
    for (size_t i = 0; i < n; i++) {
        void *lib = dlopen(k_tries[i], RTLD_NOW | RTLD_LOCAL);
        *which = i;
        if (lib) return lib;
        const char *e = dlerror();
        if (used < sizeof g_cublas.why)
            used += (size_t)snprintf(g_cublas.why + used, sizeof g_cublas.why - used,
                                     "%s dlopen %s: %s", i ? ";" : "", k_tries[i],
                                     e ? e : "unknown error");
    }
    return NULL;
}

/* dlsym into a typed pointer; false (reason in g_cublas.why) when the symbol is missing. */
template <typename F>
static bool sym(void *lib, const char *path, F *out, const char *name)
{
    *out = (F)dlsym(lib, name);
    if (*out) return true;
    snprintf(g_cublas.why, sizeof g_cublas.why, "cuBLAS: %s has no %s", path, name);
    return false;
}

static void load(void)
{
    size_t which = 0;
    void *lib = open_lib(&which);
    if (!lib) return;
    const char *path = k_tries[which];
    sl__cublas_api a;
    /* the names go through the headers' macros: cublasCreate -> "cublasCreate_v2" */
    if (!sym(lib, path, &a.create, SL_CUBLAS_STR(cublasCreate)) ||
        !sym(lib, path, &a.destroy, SL_CUBLAS_STR(cublasDestroy)) ||
        !sym(lib, path, &a.set_stream, SL_CUBLAS_STR(cublasSetStream)) ||
        !sym(lib, path, &a.gemm_ex, SL_CUBLAS_STR(cublasGemmEx)) ||
        !sym(lib, path, &a.status_string, SL_CUBLAS_STR(cublasGetStatusString)))
        return; /* lib stays open: its constructors ran, unloading it is the riskier choice */
    g_cublas.api = a;
    g_cublas.ok = true;
}

sl_status sl__cublas(const sl__cublas_api **out, sl_error *err)
{
    *out = NULL;
    if (pthread_once(&g_cublas.once, load) != 0)
        return sl_error_set(err, SL_ERR_NOT_FOUND, "cuBLAS: pthread_once failed");
    if (!g_cublas.ok) return sl_error_set(err, SL_ERR_NOT_FOUND, "%s", g_cublas.why);
    *out = &g_cublas.api;
    return SL_OK;
}

extern "C" sl_status sl_cuda_blas_load(sl_error *err)
{
    const sl__cublas_api *b = NULL;
    return sl__cublas(&b, err);
}
