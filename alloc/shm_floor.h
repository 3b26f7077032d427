/* alloc/shm_floor: a host floor shared by the processes of one node and one user — one POSIX
 * shared-memory region per content, filled once, mapped by all.
 *
 * Objects, under /dev/shm: the region NAME = "<prefix>-u<euid>-<key as 16 hex digits>"
 * (shm_open) and its lock file NAME.lock (flock). The euid in the name keeps each user's floors
 * apart; since any local user can still create any name first, every attach checks both objects
 * with fstat: owned by the caller's euid, a regular file, no group/other write bit beyond the
 * requested mode — anything else is refused naming the object, its owner and mode (never
 * attached: its creator could rewrite the bytes under us). The requested mode is applied with
 * fchmod, so the umask does not cut it.
 *
 * Identity. The key (the name) is the caller's cheap summary of the content (layout and sampled
 * bytes); it may be equal for different contents. The header therefore holds
 *   identity: the caller's fingerprint of its source (e.g. device, inode, size, mtime and ctime
 *             in ns of every file), which differs for any other file or version of one;
 *   digest:   a digest of the payload's content, computed by the fill while it fills.
 * An attacher whose identity equals the header's trusts the region (it was filled from the same
 * file version); one whose identity differs computes its own content's digest (o->digest, a
 * full read of its files) and attaches only if the digests are equal. If they differ, the same
 * key holds other content: the region named by the key mixed with its own digest is used
 * instead (whose header digest must equal it). So two files never share a region unless their
 * digests are equal, and a region never serves a file whose fingerprint it does not carry
 * without a full check.
 *
 * Region layout: one 4096-byte header {magic "SLFLOOR2", version, key, bytes, identity, digest,
 * ready}, then `bytes` of payload. ready is written last (a release store), after the payload.
 * The lock file's content names the process holding it, since when, and the source (o->label),
 * for the message of an opener that waits too long.
 *
 * Protocol (attach), under an exclusive flock of the lock file (attachers and detachers
 * take turns; the lock is held only while attaching or detaching):
 *   1. open NAME.lock (O_NOFOLLOW), check it, flock(LOCK_EX) — polled, up to o->wait_ms, and
 *      given up when o->cancelled says so; if the path no longer names that file (a last
 *      holder unlinked it meanwhile) start again;
 *   2. shm_open NAME, check it; a region of the right size whose header says ready with the
 *      same key and size is a candidate (identity / digest as above); a region not ready is
 *      materialized: truncated to 0 and back to the full size (nothing of a dead materializer
 *      survives), mapped writable, filled (the caller's fill, which returns the digest), ready
 *      set, remapped read-only;
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
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

enum { SL_SHM_FLOOR_HEADER = 4096, SL_SHM_FLOOR_DIGEST = 32 };

/* A 256-bit digest of a byte stream (four xxHash64-style lanes; fast, not cryptographic: it
 * tells contents apart, the owner checks keep hostile writers out). */
typedef struct sl_shm_floor_hash {
    uint64_t lane[4], total;
    uint8_t buf[32];
    size_t n;
} sl_shm_floor_hash;
void sl_shm_floor_hash_init(sl_shm_floor_hash *h, uint64_t seed);
void sl_shm_floor_hash_update(sl_shm_floor_hash *h, const void *p, size_t n);
void sl_shm_floor_hash_final(const sl_shm_floor_hash *h, uint8_t out[SL_SHM_FLOOR_DIGEST]);

/* Fills payload[0 .. bytes) (page-aligned, writable, zeroed) of a region being materialized
 * and sets digest to the digest of the content it wrote (the same one digest_fn computes). */
typedef sl_status (*sl_shm_floor_fill_fn)(void *user, uint8_t *payload, uint64_t bytes,
                                          uint8_t digest[SL_SHM_FLOOR_DIGEST], sl_error *err);
/* The digest of the caller's content, computed from its source without a region. */
typedef sl_status (*sl_shm_floor_digest_fn)(void *user, uint8_t digest[SL_SHM_FLOOR_DIGEST],
                                            sl_error *err);

typedef struct sl_shm_floor_options {
    const char *prefix;         /* object name prefix, no '/' (NULL: "sluice-floor") */
    uint64_t key;               /* the content's summary (see Identity) */
    uint64_t bytes;             /* payload bytes (> 0) */
    unsigned mode;              /* permission bits of both objects, applied exactly (0: 0600) */
    uint8_t identity[SL_SHM_FLOOR_DIGEST]; /* the source's fingerprint (see Identity) */
    sl_shm_floor_fill_fn fill;
    sl_shm_floor_digest_fn digest;
    void *user;                 /* for fill and digest */
    const char *label;          /* what the floor holds (a path), written into the lock file */
    uint32_t wait_ms;           /* longest wait for the lock file (0: 600000, ten minutes) */
    bool (*cancelled)(void *user); /* NULL, or polled while waiting: true gives up */
    void *cancelled_user;
} sl_shm_floor_options;

typedef struct sl_shm_floor sl_shm_floor;

/* How the region was found: filled here, trusted by identity, or checked by a full digest. */
typedef enum sl_shm_floor_how {
    SL_SHM_FLOOR_FILLED = 0,
    SL_SHM_FLOOR_SAME_SOURCE,
    SL_SHM_FLOOR_DIGEST_CHECKED,
} sl_shm_floor_how;

/* The rule for a prefix (NULL, or at most 64 characters without '/') and a mode (permission
 * bits only): SL_ERR_INVALID naming the value. Attach applies it; callers that take the
 * options long before (sl_runtime_create) check them up front with it. */
sl_status sl_shm_floor_check_names(const char *prefix, unsigned mode, sl_error *err);

/* Attaches to (or materializes) the region; *how (may be NULL) says which. Errors: SL_ERR_IO
 * naming the object and the system call, or an object that is not the caller's (owner, mode);
 * SL_ERR_RANGE when the lock was not had within wait_ms (naming its holder and since when);
 * SL_ERR_INVALID when cancelled; the fill's or digest's status (a region being filled is left
 * not ready, for the next opener to redo). */
sl_status sl_shm_floor_attach(const sl_shm_floor_options *o, sl_shm_floor **out,
                              sl_shm_floor_how *how, sl_error *err);
/* The read-only payload: valid until detach. */
const uint8_t *sl_shm_floor_payload(const sl_shm_floor *f);
uint64_t sl_shm_floor_bytes(const sl_shm_floor *f);
/* The region's name (without the leading '/'). */
const char *sl_shm_floor_name(const sl_shm_floor *f);
/* The digest its header holds. */
const uint8_t *sl_shm_floor_digest(const sl_shm_floor *f);
/* The name of the region for prefix and key in this user's namespace (what attach uses first):
 * buf of n bytes. */
void sl_shm_floor_object_name(const char *prefix, uint64_t key, char *buf, size_t n);
/* Unmaps; the last holder unlinks the region and its lock file. NULL allowed. */
void sl_shm_floor_detach(sl_shm_floor *f);

#endif
