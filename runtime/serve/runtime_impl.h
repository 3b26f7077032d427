/* runtime/serve/runtime_impl.h: the runtime's private structures (runtime.c, runtime_reload.c).
 * Contract: only those two files include it; every field is read and written under rt->mu
 * (sl_runtime.mu); the invariants are runtime.c's (its opening comment, sl_runtime_validate).
 */
#ifndef SL_RUNTIME_RUNTIME_IMPL_H
#define SL_RUNTIME_RUNTIME_IMPL_H

#include <pthread.h>

#include "alloc/shm_floor.h"
#include "runtime/engine/model.h"
#include "scheduler/policy/residency.h"

struct sl__resident {
    sl_res_state state;
    uint64_t device_bytes;      /* granted arena bytes of its device weights */
    uint64_t scratch_bytes;     /* its contexts' device estimate (sl__model_reserve_bytes) */
    uint64_t last_use;          /* runtime tick of its last acquire */
    uint64_t epoch;             /* bumped when any weight's data pointer may have changed */
    uint64_t layout_epoch;      /* bumped when any weight's type, size or bytes may have
                                 * changed (read from its files, a live reload): epoch too */
    int busy;                   /* contexts evaluating it */
    int holds;                  /* sl_runtime_hold without its unhold yet: busy as well */
    bool registered;            /* in rt->models */
    sl__floor *floor;           /* [n_w] */
    /* a shared host floor (rt->opt.shared_floor, state >= HOST): the region, each weight's
     * data offset in its payload, whether this process filled it and registered it */
    sl_shm_floor *shm;
    uint64_t *shm_off;
    bool shm_made, shm_registered, shm_checked;
    /* a live reload changed its weights since its file view was last refreshed: going back to
     * DISK refreshes it first (sl__model_files_parse, _bind), or stays if the files moved on */
    bool reloaded;
};

struct sl_runtime {
    sl_runtime_options opt;     /* the caller's, with shm_prefix pointing at the copy below */
    char *shm_prefix;           /* owned copy of opt.shm_prefix (NULL: none given) */
    sl_device *dev;
    sl_stream *stream;          /* the arena's (moves; unused: it is never slid) */
    sl_bfc *arena;
    sl_hostpool *hostpool;
    uint64_t arena_bytes;
    pthread_mutex_t mu;
    sl_model **models;
    size_t n_models, cap_models;
    uint64_t tick;
    sl_res_budget budget;
    uint64_t pinned_bytes;
    uint64_t loads, evictions, compactions, bytes_loaded;
};

/* Arena bytes the BFC grants for a request of `bytes` (its 256-byte alignment; 0 counts 1). */
uint64_t sl__runtime_granted(uint64_t bytes);
/* Weight i of m leaves the device: its block is freed and it reads its floor again. */
void sl__runtime_to_floor(sl_model *m, size_t i);
/* Attaches m's shared floor (runtime_floor.c): r->shm, shm_off, shm_made, shm_checked. */
sl_status sl__runtime_floor_attach(sl_model *m, sl_error *err);
/* Recomputes rt's budget from the models' scratch estimates and the pinned bytes. */
void sl__runtime_update_budget(sl_runtime *rt);

/* The serving table's entries (sl__serving in runtime/engine/model.h says what each does),
 * in runtime.c and runtime_reload.c; sl__runtime_serving is the table itself. */
extern const sl__serving sl__runtime_serving;
bool sl__runtime_floor_keep(sl_model *m, sl_weight *w);
const void *sl__runtime_floor_shared_data(const sl_model *m, const sl_weight *w);
sl_status sl__runtime_load_floor(sl_model *m, sl_error *err);
sl_status sl__runtime_lend(sl_model *m, uint64_t *device_free, sl_error *err);
sl_status sl__runtime_attach(sl_model *m, sl_error *err);
sl_status sl__runtime_register(sl_model *m, sl_error *err);
void sl__runtime_lock(sl_model *m);
void sl__runtime_unlock(sl_model *m);
sl_status sl__runtime_swap_weight(sl_model *m, sl_weight *w, const sl__floor *ns, uint32_t type,
                                  uint64_t nbytes, bool may_fall, sl__swap_fault *fault,
                                  bool *fell, sl_error *err);
sl_status sl__runtime_weight_to_host(sl_model *m, sl_weight *w, sl_error *err);
sl_status sl__runtime_weight_to_device(sl_model *m, sl_weight *w, bool *ok, sl_error *err);
void sl__runtime_provenance_moved(sl_model *m);
const void *sl__runtime_host_copy(sl_model *m, const sl_weight *w);
sl_status sl__runtime_eval_begin(sl_ctx *c, uint64_t *res_epoch, uint64_t *layout_epoch,
                                 sl_error *err);
void sl__runtime_eval_end(sl_ctx *c);
void sl__runtime_detach(sl_model *m);

#endif
