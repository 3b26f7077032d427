/* base/device/cuda.c: the CUDA backend, plain C over the CUDA runtime API.
 *
 * Built and linked in every configuration (the toolkit is on CI machines too); without a GPU
 * every call returns SL_ERR_DEVICE carrying CUDA's own message, never a crash, and `auto`
 * (device.c) falls back to sim.
 *
 * - Each entry point first makes the device current on the calling thread (cudaSetDevice is
 *   per-thread state and the handle may be used from several threads).
 * - Streams are non-blocking (no implicit synchronisation with the legacy default stream).
 * - Events keep timing enabled so elapsed_ms works on any of them; the cost is negligible at
 *   our event rate (one per copy).
 * - Errors: "base/device/cuda.c:LINE: cudaXxx: <cudaGetErrorString>" as SL_ERR_DEVICE;
 *   cudaErrorMemoryAllocation from cudaMalloc is SL_ERR_NOMEM, like sim's capacity limit, so
 *   the arena above can tell "full" from "broken".
 */
#include <cuda_runtime.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/device/gather_plan.h"
#include "base/device/device_impl.h"

typedef struct cuda_dev {
    int ordinal;
} cuda_dev;

/* bounce: the D2D batches' gather buffer (cuda_copy_batch), bounce_bytes long, or NULL before
 * the first batch that needs one; mu guards both (a batch enqueues under it). */
typedef struct cuda_stream {
    sl_stream base;
    cudaStream_t s;
    pthread_mutex_t mu;
    void *bounce;
    uint64_t bounce_bytes;
} cuda_stream;

typedef struct cuda_event {
    sl_event base;
    cudaEvent_t e;
} cuda_event;

static sl_status cu_fail(sl_error *err, cudaError_t rc, const char *call, int line)
{
    /* reported here, so cleared: kernels/cuda's launch checks read the thread's last error,
     * and a failed allocation or registration (not sticky) would fail the next launch - the
     * compaction an allocation failure starts, for one */
    (void)cudaGetLastError();
    sl_status code = rc == cudaErrorMemoryAllocation ? SL_ERR_NOMEM : SL_ERR_DEVICE;
    return sl_error_set(err, code, "%s:%d: %s: %s", __FILE__, line, call,
                        cudaGetErrorString(rc));
}

/* Evaluates a CUDA call; on failure returns a status naming the call and CUDA's message. */
#define CU(err, call, name)                                                                \
    do {                                                                                   \
        cudaError_t cu_rc_ = (call);                                                       \
        if (cu_rc_ != cudaSuccess)                                                         \
            return cu_fail((err), cu_rc_, (name), __LINE__);                               \
    } while (0)

static int ORD(sl_device *d) { return ((cuda_dev *)d->impl)->ordinal; }

#define ENTER(d, err) CU(err, cudaSetDevice(ORD(d)), "cudaSetDevice")

sl_status sl__cuda_probe(int *count, sl_error *err)
{
    *count = 0;
    CU(err, cudaGetDeviceCount(count), "cudaGetDeviceCount");
    return SL_OK;
}

static sl_status cuda_open(sl_device *d, const sl_device_options *opt, sl_error *err)
{
    int count = 0;
    sl_status st = sl__cuda_probe(&count, err);
    if (st)
        return st;
    if (opt->cuda_ordinal >= count)
        return sl_error_set(err, SL_ERR_NOT_FOUND,
                            "cuda: options.cuda_ordinal=%d but %d device(s) present",
                            opt->cuda_ordinal, count);
    CU(err, cudaSetDevice(opt->cuda_ordinal), "cudaSetDevice");
    cuda_dev *c = calloc(1, sizeof *c);
    if (!c)
        return sl_error_set(err, SL_ERR_NOMEM, "cuda: out of host memory");
    c->ordinal = opt->cuda_ordinal;
    d->impl = c;
    return SL_OK;
}

static void cuda_close(sl_device *d)
{
    free(d->impl);
    d->impl = NULL;
}

static sl_status cuda_props(sl_device *d, sl_device_props *out, sl_error *err)
{
    ENTER(d, err);
    struct cudaDeviceProp p;
    CU(err, cudaGetDeviceProperties(&p, ORD(d)), "cudaGetDeviceProperties");
    size_t free_b = 0, total_b = 0;
    CU(err, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    snprintf(out->name, sizeof out->name, "%s", p.name);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x.0",
             (unsigned)p.pciDomainID, (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
    out->total_mem_bytes = (uint64_t)p.totalGlobalMem;
    out->free_mem_bytes = (uint64_t)free_b;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    return SL_OK;
}

static sl_status cuda_region_alloc(sl_device *d, uint64_t bytes, void **d_ptr, sl_error *err)
{
    ENTER(d, err);
    if (bytes > SIZE_MAX)
        return sl_error_set(err, SL_ERR_NOMEM, "cuda: region of %" PRIu64 " bytes", bytes);
    CU(err, cudaMalloc(d_ptr, (size_t)bytes), "cudaMalloc");
    return SL_OK;
}

static sl_status cuda_region_free(sl_device *d, void *d_ptr, uint64_t bytes, sl_error *err)
{
    (void)bytes;
    ENTER(d, err);
    CU(err, cudaFree(d_ptr), "cudaFree"); /* synchronises the device */
    return SL_OK;
}

static sl_status cuda_host_register(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t *flags,
                                    sl_error *err)
{
    *flags = 0;
    ENTER(d, err);
    CU(err, cudaHostRegister(h_ptr, (size_t)bytes, cudaHostRegisterDefault), "cudaHostRegister");
    return SL_OK;
}

static sl_status cuda_host_unregister(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t flags,
                                      sl_error *err)
{
    (void)bytes;
    (void)flags;
    ENTER(d, err);
    CU(err, cudaHostUnregister(h_ptr), "cudaHostUnregister");
    return SL_OK;
}

static void *cuda_stream_native(sl_stream *s) { return (void *)((cuda_stream *)s)->s; }

static sl_status cuda_stream_create(sl_device *d, sl_stream **out, sl_error *err)
{
    ENTER(d, err);
    cuda_stream *s = calloc(1, sizeof *s);
    if (!s)
        return sl_error_set(err, SL_ERR_NOMEM, "cuda: out of host memory for a stream");
    cudaError_t rc = cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking);
    if (rc != cudaSuccess) {
        free(s);
        return cu_fail(err, rc, "cudaStreamCreateWithFlags", __LINE__);
    }
    pthread_mutex_init(&s->mu, NULL);
    *out = &s->base;
    return SL_OK;
}

static void cuda_stream_destroy(sl_device *d, sl_stream *bs)
{
    cuda_stream *s = (cuda_stream *)bs;
    /* The interface returns nothing here: errors (a dead context) leave nothing to undo. */
    (void)cudaSetDevice(ORD(d));
    (void)cudaStreamSynchronize(s->s);
    (void)cudaStreamDestroy(s->s);
    if (s->bounce) (void)cudaFree(s->bounce);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static sl_status cuda_stream_sync(sl_device *d, sl_stream *bs, sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaStreamSynchronize(((cuda_stream *)bs)->s), "cudaStreamSynchronize");
    return SL_OK;
}

static sl_status cuda_event_create(sl_device *d, sl_event **out, sl_error *err)
{
    ENTER(d, err);
    cuda_event *e = calloc(1, sizeof *e);
    if (!e)
        return sl_error_set(err, SL_ERR_NOMEM, "cuda: out of host memory for an event");
    cudaError_t rc = cudaEventCreate(&e->e);
    if (rc != cudaSuccess) {
        free(e);
        return cu_fail(err, rc, "cudaEventCreate", __LINE__);
    }
    *out = &e->base;
    return SL_OK;
}

static void cuda_event_destroy(sl_device *d, sl_event *be)
{
    cuda_event *e = (cuda_event *)be;
    (void)cudaSetDevice(ORD(d));
    (void)cudaEventDestroy(e->e); /* CUDA defers the release past a pending record */
    free(e);
}

static sl_status cuda_event_record(sl_device *d, sl_event *be, sl_stream *bs, sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaEventRecord(((cuda_event *)be)->e, ((cuda_stream *)bs)->s), "cudaEventRecord");
    return SL_OK;
}

static sl_status cuda_event_query(sl_device *d, sl_event *be, bool *done, sl_error *err)
{
    ENTER(d, err);
    cudaError_t rc = cudaEventQuery(((cuda_event *)be)->e);
    if (rc == cudaErrorNotReady) {
        /* "not ready" is also left as the thread's last error: the next launch check on this
         * thread (a fetch job's GEMV) would report it as its own failure */
        (void)cudaGetLastError();
        *done = false;
        return SL_OK;
    }
    CU(err, rc, "cudaEventQuery");
    *done = true;
    return SL_OK;
}

static sl_status cuda_event_sync(sl_device *d, sl_event *be, sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaEventSynchronize(((cuda_event *)be)->e), "cudaEventSynchronize");
    return SL_OK;
}

static sl_status cuda_stream_wait(sl_device *d, sl_stream *bs, sl_event *be, sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaStreamWaitEvent(((cuda_stream *)bs)->s, ((cuda_event *)be)->e, 0),
       "cudaStreamWaitEvent");
    return SL_OK;
}

static sl_status cuda_event_elapsed_ms(sl_device *d, sl_event *a, sl_event *b, float *ms,
                                       sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaEventElapsedTime(ms, ((cuda_event *)a)->e, ((cuda_event *)b)->e),
       "cudaEventElapsedTime");
    return SL_OK;
}

static sl_status cuda_copy(sl_device *d, sl_stream *bs, void *dst, const void *src,
                           uint64_t bytes, sl_copy_kind kind, sl_error *err)
{
    static const enum cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                 cudaMemcpyDeviceToDevice};
    ENTER(d, err);
    CU(err, cudaMemcpyAsync(dst, src, (size_t)bytes, kinds[kind], ((cuda_stream *)bs)->s),
       "cudaMemcpyAsync");
    return SL_OK;
}

/* D2D batches: phases of small items as two gather kernels each (gather_plan.h, cuda_gather.h),
 * the other items (and a phase of one) as one cudaMemcpyAsync each, all in the batch's order.
 * The bounce is the stream's own (cuda_stream), allocated at its full SL__GATHER_BOUNCE_MAX the
 * first time a batch needs one and kept (a per-batch cudaMallocAsync would give the memory
 * back at every sync; growing it would cudaFree, which waits for the whole device); without
 * it (out of memory: compaction runs when memory is short) every item is a cudaMemcpyAsync.
 * cudaMemcpyBatchAsync is not used: it may run its copies in any order, and a batch's items
 * may depend on earlier ones (the pieces of a compaction slide). Nothing captures a batch into
 * a graph (a graph would keep the bounce's address). */
static sl_status cuda_copy_batch(sl_device *d, sl_stream *bs, const sl_copy_item *items, size_t n,
                                 sl_copy_kind kind, size_t *issued, size_t *calls, sl_error *err)
{
    cuda_stream *s = (cuda_stream *)bs;
    *issued = 0;
    *calls = 0;
    size_t n_small = 0;
    for (size_t i = 0; kind == SL_COPY_D2D && i < n && n_small < 2; i++)
        n_small += items[i].bytes <= SL__GATHER_ITEM_MAX;
    sl__gather *g = n_small >= 2 ? malloc(sizeof *g) : NULL;
    if (g) {
        const cudaError_t rc = cudaSetDevice(ORD(d));
        if (rc != cudaSuccess) {
            free(g);
            *calls = 1; /* refused */
            return cu_fail(err, rc, "cudaSetDevice", __LINE__);
        }
        pthread_mutex_lock(&s->mu);
        if (!s->bounce) {
            if (cudaMalloc(&s->bounce, (size_t)SL__GATHER_BOUNCE_MAX) == cudaSuccess) {
                s->bounce_bytes = SL__GATHER_BOUNCE_MAX;
            } else {
                (void)cudaGetLastError(); /* not sticky: the copies must not report it */
                s->bounce = NULL;
            }
        }
        if (!s->bounce) {
            pthread_mutex_unlock(&s->mu);
            free(g);
            g = NULL;
        }
    }
    sl_status st = SL_OK;
    for (size_t i = 0; !st && i < n;) {
        const size_t k = g ? sl__gather_phase(items + i, n - i, s->bounce_bytes, g) : 0;
        if (k <= 1) { /* alone: one call either way */
            ++*calls;
            if ((st = cuda_copy(d, bs, items[i].dst, items[i].src, items[i].bytes, kind, err)))
                break;
            *issued = ++i;
            continue;
        }
        *calls += 2;
        const int rc = sl__cuda_gather((void *)s->s, g, s->bounce);
        if (rc != cudaSuccess) {
            st = cu_fail(err, (cudaError_t)rc, "sl__cuda_gather", __LINE__);
            break;
        }
        *issued = i += k;
    }
    if (g) pthread_mutex_unlock(&s->mu);
    free(g);
    return st;
}

static sl_status cuda_launch_host(sl_device *d, sl_stream *bs, sl_host_fn fn, void *user,
                                  sl_error *err)
{
    ENTER(d, err);
    /* sl_host_fn and cudaHostFn_t are both void (*)(void *). */
    CU(err, cudaLaunchHostFunc(((cuda_stream *)bs)->s, fn, user), "cudaLaunchHostFunc");
    return SL_OK;
}

struct sl_graph {
    cudaGraphExec_t exec;
    sl_device *dev; /* the device it was captured on: launched there only */
};

/* Relaxed mode: the capturing thread may still make calls CUDA deems unsafe in a capture
 * (a cudaFuncSetAttribute before a kernel's first launch); anything that waits on the stream
 * still spoils it, which capture_end reports. */
static sl_status cuda_capture_begin(sl_device *d, sl_stream *bs, sl_error *err)
{
    ENTER(d, err);
    CU(err, cudaStreamBeginCapture(((cuda_stream *)bs)->s, cudaStreamCaptureModeRelaxed),
       "cudaStreamBeginCapture");
    return SL_OK;
}

static sl_status cuda_capture_end(sl_device *d, sl_stream *bs, sl_graph **out, sl_error *err)
{
    ENTER(d, err);
    cudaGraph_t g = NULL;
    cudaError_t rc = cudaStreamEndCapture(((cuda_stream *)bs)->s, &g);
    if (rc != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError(); /* a spoiled capture's error is not sticky: clear it */
        return cu_fail(err, rc, "cudaStreamEndCapture", __LINE__);
    }
    sl_graph *sg = calloc(1, sizeof *sg);
    if (!sg) {
        cudaGraphDestroy(g);
        return sl_error_set(err, SL_ERR_NOMEM, "graph: out of memory");
    }
    sg->dev = d;
    rc = cudaGraphInstantiate(&sg->exec, g, 0);
    cudaGraphDestroy(g); /* the executable graph keeps its own copy */
    if (rc != cudaSuccess) {
        free(sg);
        return cu_fail(err, rc, "cudaGraphInstantiate", __LINE__);
    }
    *out = sg;
    return SL_OK;
}

static sl_status cuda_graph_launch(sl_device *d, sl_graph *g, sl_stream *bs, sl_error *err)
{
    if (g->dev != d)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_graph_launch: the graph was "
                            "captured on another device");
    ENTER(d, err);
    CU(err, cudaGraphLaunch(g->exec, ((cuda_stream *)bs)->s), "cudaGraphLaunch");
    return SL_OK;
}

static void cuda_graph_destroy(sl_device *d, sl_graph *g)
{
    cudaSetDevice(ORD(d));
    cudaGraphExecDestroy(g->exec);
    free(g);
}

const sl__device_ops sl__cuda_ops = {
    .kind = SL_DEVICE_CUDA,
    .open = cuda_open,
    .close = cuda_close,
    .props = cuda_props,
    .region_alloc = cuda_region_alloc,
    .region_free = cuda_region_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .stream_create = cuda_stream_create,
    .stream_native = cuda_stream_native,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .stream_wait = cuda_stream_wait,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .copy = cuda_copy,
    .copy_batch = cuda_copy_batch,
    .launch_host = cuda_launch_host,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
};
