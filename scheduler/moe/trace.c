/* scheduler/moe/trace.c: spans of copy, device and CPU work, written as Chrome/Perfetto trace JSON.
 *
 * Spans are recorded by the scheduler's calling thread only (device spans are stamped by the
 * stream workers into job records and added after the stream is synchronised), so the buffer
 * needs no lock. The buffer is bounded (cap); later spans are counted as dropped, not stored.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "scheduler/moe/fetch_impl.h"

uint64_t sl__now_ns(void) { return sl_clock_ns(); }

void sl__trace_add(sl__trace *t, int tid, uint64_t t0_ns, uint64_t t1_ns, const char *fmt, ...)
{
    if (!t->on) return;
    if (t->n >= t->cap) {
        t->dropped++;
        return;
    }
    if (t->n % 4096 == 0) { /* grown in steps of 4096 spans, up to cap */
        sl__span *n = realloc(t->v, (size_t)(t->n + 4096) * sizeof *n);
        if (!n) {
            t->dropped++;
            return;
        }
        t->v = n;
    }
    sl__span *s = &t->v[t->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->t0_ns = t0_ns;
    s->t1_ns = t1_ns < t0_ns ? t0_ns : t1_ns;
    s->tid = tid;
}

sl_status sl__trace_write(const sl__trace *t, const char *path, sl_error *err)
{
    if (!path) return sl_error_set(err, SL_ERR_INVALID, "trace: NULL path");
    FILE *f = fopen(path, "w");
    if (!f) return sl_error_set(err, SL_ERR_IO, "trace: cannot create %s", path);
    static const char *const thread_name[3] = {"cpu (scheduler thread)", "copy stream",
                                               "compute stream"};
    fputs("{\"traceEvents\":[", f);
    for (int tid = 0; tid < 3; tid++)
        fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s\"}}",
                tid ? "," : "", tid, thread_name[tid]);
    for (uint64_t i = 0; i < t->n; i++) {
        const sl__span *s = &t->v[i];
        const uint64_t t0 = s->t0_ns > t->origin_ns ? s->t0_ns - t->origin_ns : 0;
        /* names are our own printf output: no quotes or backslashes to escape */
        fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,"
                   "\"tid\":%d}",
                s->name, (double)t0 / 1e3, (double)(s->t1_ns - s->t0_ns) / 1e3, s->tid);
    }
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_spans\":%llu}}\n",
            (unsigned long long)t->dropped);
    const bool bad = ferror(f) != 0;
    if (fclose(f) || bad) return sl_error_set(err, SL_ERR_IO, "trace: write to %s failed", path);
    return SL_OK;
}

void sl__trace_free(sl__trace *t)
{
    free(t->v);
    t->v = NULL;
    t->n = 0;
}
