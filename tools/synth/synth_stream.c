/* The threaded writer: rows are made on worker threads and written in file order by the
 * calling thread, with bounded memory.
 *
 * Work is a sequence of items in file order, handed out under one mutex by a cursor that walks
 * the tensors:
 *   - prep items: step k of tensor i's sl__synth_prep (pool chunks, router biases, neuron
 *     table); a tensor's prep items come before its rows, so they are claimed first;
 *   - row items: rows [r0, r1) of tensor i, at most ITEM_BYTES of output and, for rows made
 *     exactly, ITEM_WEIGHTS weights, so that a small but slow tensor (attention at dim 2048)
 *     still spreads over the threads.
 * Row items are numbered seq = 0, 1, ...; item seq is made into slot seq % n_slots and the
 * caller writes slot after slot in seq order. Invariants, under the mutex:
 *   written <= seq < written + n_slots for every row item being made or waiting to be written
 *     (so a slot has one owner at a time);
 *   slot[seq % n_slots].done  <=>  item seq is made and not yet written;
 *   a tensor's rows are made only when its prep_done == prep.n_steps;
 *   a tensor's prep buffers are freed when its last row item is written.
 * Every wait is for an item claimed earlier (a row item waits for the slot of seq - n_slots and
 * for its own tensor's prep items), and an item never waits for a later one, so the pipeline
 * always progresses. A failure anywhere sets `failed`, wakes everyone, and is reported once.
 *
 * Item boundaries do not change any byte (synth_impl.h's determinism contract), so the file is
 * the same for every thread count.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/quant.h"
#include "tools/synth/synth_impl.h"

enum {
    ITEM_BYTES = 1 << 20,
    ITEM_WEIGHTS = 1 << 18, /* ~25 ms of the reference Q4_K quantizer */
};

typedef struct tstate {
    sl__synth_prep prep;
    bool inited;
    uint32_t prep_claimed, prep_done;
    int64_t rows, rows_per_item;
} tstate;

typedef struct slot {
    uint8_t *buf;
    size_t bytes;
    uint32_t tensor;
    bool done, last; /* last: the tensor's final row item */
} slot;

typedef struct item {
    bool prep;
    uint32_t tensor;
    uint32_t step;      /* prep */
    int64_t r0, r1;     /* rows */
    uint64_t seq;       /* rows */
} item;

typedef struct stream {
    const sl_synth_params *p;
    const sl__synth_tensor *t;
    uint32_t n_t;
    tstate *ts;
    slot *slots;
    uint64_t n_slots;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: a slot was freed, a prep finished, or failure */
    pthread_cond_t done_cv;  /* writer: an item was made, or failure */
    uint32_t cur;            /* cursor: tensor, next row */
    int64_t cur_row;
    uint64_t next_seq, written;
    bool failed;
    sl_status st;
    sl_error err;            /* the first failure */
} stream;

typedef struct worker {
    stream *q;
    float *scratch;          /* max ne[0] floats */
    pthread_t tid;
} worker;

/* Under the mutex: records the first failure and wakes every waiter. */
static void fail(stream *q, sl_status st, const sl_error *e)
{
    if (!q->failed) {
        q->failed = true;
        q->st = st;
        q->err = *e;
    }
    pthread_cond_broadcast(&q->work_cv);
    pthread_cond_broadcast(&q->done_cv);
}

/* Under the mutex: the next item in file order; false when none is left (or on failure). */
static bool claim(stream *q, item *it)
{
    while (!q->failed && q->cur < q->n_t) {
        const uint32_t i = q->cur;
        tstate *s = &q->ts[i];
        if (!s->inited) {
            sl_error e;
            const sl_status st = sl__synth_prep_init(q->p, &q->t[i], &s->prep, &e);
            if (st) {
                fail(q, st, &e);
                return false;
            }
            s->inited = true;
        }
        if (s->prep_claimed < s->prep.n_steps) {
            *it = (item){.prep = true, .tensor = i, .step = s->prep_claimed++};
            return true;
        }
        const int64_t r0 = q->cur_row;
        const int64_t r1 = r0 + s->rows_per_item < s->rows ? r0 + s->rows_per_item : s->rows;
        *it = (item){.prep = false, .tensor = i, .r0 = r0, .r1 = r1, .seq = q->next_seq++};
        q->cur_row = r1;
        if (r1 == s->rows) q->cur++, q->cur_row = 0;
        return true;
    }
    return false;
}

static void *work(void *arg)
{
    worker *wk = arg;
    stream *q = wk->q;
    sl_error e;
    pthread_mutex_lock(&q->mu);
    item it;
    while (claim(q, &it)) {
        tstate *s = &q->ts[it.tensor];
        const sl__synth_tensor *t = &q->t[it.tensor];
        sl_status st;
        if (it.prep) {
            pthread_mutex_unlock(&q->mu);
            st = sl__synth_prep_step(q->p, t, &s->prep, it.step, wk->scratch, &e);
            pthread_mutex_lock(&q->mu);
            if (st) fail(q, st, &e);
            s->prep_done++;
            pthread_cond_broadcast(&q->work_cv);
            continue;
        }
        while (!q->failed &&
               (it.seq - q->written >= q->n_slots || s->prep_done < s->prep.n_steps))
            pthread_cond_wait(&q->work_cv, &q->mu);
        if (q->failed) break;
        slot *sl = &q->slots[it.seq % q->n_slots];
        pthread_mutex_unlock(&q->mu);
        st = sl__synth_rows(q->p, t, &s->prep, it.r0, it.r1, sl->buf, wk->scratch, &e);
        pthread_mutex_lock(&q->mu);
        if (st) {
            fail(q, st, &e);
            break;
        }
        sl->bytes = (size_t)(it.r1 - it.r0) * s->prep.row_bytes;
        sl->tensor = it.tensor;
        sl->last = it.r1 == s->rows;
        sl->done = true;
        pthread_cond_broadcast(&q->done_cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* The calling thread: writes items 0 .. n_items-1 in order as they are made. */
static void write_all(stream *q, sl_gguf_writer *w, uint64_t n_items)
{
    for (uint64_t seq = 0; seq < n_items; seq++) {
        slot *sl = &q->slots[seq % q->n_slots];
        pthread_mutex_lock(&q->mu);
        while (!q->failed && !sl->done) pthread_cond_wait(&q->done_cv, &q->mu);
        const bool failed = q->failed;
        pthread_mutex_unlock(&q->mu);
        if (failed) return;
        sl_error e;
        const sl_status st = sl_gguf_writer_write(w, sl->buf, sl->bytes, &e);
        pthread_mutex_lock(&q->mu);
        if (st) {
            fail(q, st, &e);
            pthread_mutex_unlock(&q->mu);
            return;
        }
        sl->done = false;
        q->written++;
        if (sl->last) sl__synth_prep_free(&q->ts[sl->tensor].prep);
        pthread_cond_broadcast(&q->work_cv);
        pthread_mutex_unlock(&q->mu);
    }
}

sl_status sl__synth_stream(const sl_synth_params *p, const sl__synth_tensor *t, uint32_t n_t,
                           sl_gguf_writer *w, int n_threads, sl_error *err)
{
    if (n_threads < 1)
        return sl_error_set(err, SL_ERR_INVALID, "mkmodel: %d threads (need at least 1)",
                            n_threads);
    stream q = {.p = p, .t = t, .n_t = n_t, .n_slots = 2 * (uint64_t)n_threads + 2};
    worker *wk = calloc((size_t)n_threads, sizeof *wk);
    q.ts = calloc(n_t ? n_t : 1, sizeof *q.ts);
    q.slots = calloc(q.n_slots, sizeof *q.slots);
    sl_status st = SL_OK;
    if (!wk || !q.ts || !q.slots) {
        st = sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (writer state)");
        goto free_all;
    }

    /* item sizes, the number of row items, the slot size and the longest row */
    uint64_t n_items = 0;
    size_t slot_bytes = 0;
    int64_t max_ne0 = 1;
    for (uint32_t i = 0; i < n_t; i++) {
        tstate *s = &q.ts[i];
        const size_t rb = sl_quant_row_bytes(t[i].type, t[i].ne[0]);
        s->rows = t[i].ne[1] * t[i].ne[2];
        int64_t rpi = rb >= ITEM_BYTES ? 1 : (int64_t)(ITEM_BYTES / rb);
        if (!sl__synth_pooled(p, &t[i]) && rpi > ITEM_WEIGHTS / t[i].ne[0])
            rpi = ITEM_WEIGHTS / t[i].ne[0] > 1 ? ITEM_WEIGHTS / t[i].ne[0] : 1;
        s->rows_per_item = rpi;
        n_items += (uint64_t)((s->rows + rpi - 1) / rpi);
        if ((size_t)rpi * rb > slot_bytes) slot_bytes = (size_t)rpi * rb;
        if (t[i].ne[0] > max_ne0) max_ne0 = t[i].ne[0];
    }
    for (uint64_t k = 0; k < q.n_slots; k++)
        if (!(q.slots[k].buf = malloc(slot_bytes))) {
            st = sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (%llu write buffers "
                              "of %zu bytes)", (unsigned long long)q.n_slots, slot_bytes);
            goto free_all;
        }
    for (int k = 0; k < n_threads; k++) {
        wk[k].q = &q;
        if (!(wk[k].scratch = malloc((size_t)max_ne0 * sizeof(float)))) {
            st = sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (row buffers)");
            goto free_all;
        }
    }

    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.work_cv, NULL);
    pthread_cond_init(&q.done_cv, NULL);
    int started = 0;
    for (; started < n_threads; started++) {
        const int rc = pthread_create(&wk[started].tid, NULL, work, &wk[started]);
        if (rc) {
            sl_error e;
            sl_error_set(&e, SL_ERR_IO, "mkmodel: cannot start thread %d of %d: %s",
                         started + 1, n_threads, strerror(rc));
            pthread_mutex_lock(&q.mu);
            fail(&q, SL_ERR_IO, &e);
            pthread_mutex_unlock(&q.mu);
            break;
        }
    }
    write_all(&q, w, n_items);
    for (int k = 0; k < started; k++) pthread_join(wk[k].tid, NULL);
    pthread_cond_destroy(&q.done_cv);
    pthread_cond_destroy(&q.work_cv);
    pthread_mutex_destroy(&q.mu);
    if (q.failed) {
        st = q.st;
        if (err) *err = q.err;
    }

free_all:
    for (uint32_t i = 0; q.ts && i < n_t; i++) sl__synth_prep_free(&q.ts[i].prep);
    for (uint64_t k = 0; q.slots && k < q.n_slots; k++) free(q.slots[k].buf);
    for (int k = 0; wk && k < n_threads; k++) free(wk[k].scratch);
    free(q.slots);
    free(q.ts);
    free(wk);
    return st;
}
