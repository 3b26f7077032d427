/* alloc/shm_floor: a host floor shared by the processes of one node — one POSIX shared-memory
 * region per key (a digest of a model's identity and layout), filled once, mapped by all.
 *
 * Objects, under /dev/shm: the region NAME = "<prefix>-<key as 16 hex digits>" (shm_open) and
 * its lock file NAME.lock (flock), both created with the caller's permission bits.
 * Region layout: one 4096-byte header {magic "SLFLOOR1", version, key, bytes, ready}, then
 * `bytes` of payload. ready is written last (a release store), after the whole payload.
 *
 * Protocol (attach), under an exclusive flock of the lock file (attachers and detachers
 * take turns; the lock is held only while attaching or detaching):
 *   1. open NAME.lock, flock(LOCK_EX); if the path no longer names that file (a last holder
 *      unlinked it meanwhile) start again;
 *   2. shm_open NAME; a region of the right size whose header says ready with the same key
 *      and size is mapped read-only; otherwise this process materializes: truncates it to 0
 *      and back to the full size (so nothing of a dead materializer survives), maps it
 *      writable, fills the payload (the caller's fill function), sets ready, remaps it
 *      read-only;
 *   3. flock(region, LOCK_SH): a holder; then the lock file is unlocked. Every holder keeps
 *      its shared lock on the region while it is attached.
 * A materializer that dies half-way releases the lock file with its death and leaves
 * ready == 0: the next opener (waiting on the lock) redoes the fill.
 * Detach: unmap; under the lock file, a non-blocking upgrade to LOCK_EX on the region
 * succeeds only for the last holder, which unlinks the region and the lock file.
 * Thread safety: a handle is used by one thread at a time; separate handles are independent.
 */
#ifndef SL_SHM_FLOOR_H
#define SL_SHM_FLOOR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

enum { SL_SHM_FLOOR_HEADER = 4096 };

/* Fills payload[0 .. bytes) (page-aligned, writable, zeroed) of a region being materialized. */
typedef sl_status (*sl_shm_floor_fill_fn)(void *user, uint8_t *payload, uint64_t bytes,
                                          sl_error *err);

typedef struct sl_shm_floor_options {
    const char *prefix;         /* object name prefix, no '/' (NULL: "sluice-floor") */
    uint64_t key;               /* the content digest */
    uint64_t bytes;             /* payload bytes (> 0) */
    unsigned mode;              /* permission bits of both objects (0: 0600) */
    sl_shm_floor_fill_fn fill;
    void *fill_user;
} sl_shm_floor_options;

typedef struct sl_shm_floor sl_shm_floor;

/* Attaches to (or materializes) the region; *materialized (may be NULL) says which. Errors:
 * SL_ERR_IO naming the object and the system call, the fill function's status (the region is
 * left not ready, for the next opener to redo). */
sl_status sl_shm_floor_attach(const sl_shm_floor_options *o, sl_shm_floor **out,
                              bool *materialized, sl_error *err);
/* The read-only payload: valid until detach. */
const uint8_t *sl_shm_floor_payload(const sl_shm_floor *f);
uint64_t sl_shm_floor_bytes(const sl_shm_floor *f);
/* "<prefix>-<key>": the shm object's name (without the leading '/'). */
const char *sl_shm_floor_name(const sl_shm_floor *f);
/* Unmaps; the last holder unlinks the region and its lock file. NULL allowed. */
void sl_shm_floor_detach(sl_shm_floor *f);

#endif
