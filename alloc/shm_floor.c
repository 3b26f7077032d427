/* alloc/shm_floor.c: the shared host floor's region and lock protocol (contract in
 * shm_floor.h). */
#include "alloc/shm_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { VERSION = 1 };
static const char k_magic[8] = {'S', 'L', 'F', 'L', 'O', 'O', 'R', '1'};

typedef struct header {
    char magic[8];
    uint32_t version, pad;
    uint64_t key, bytes;
    uint64_t ready;             /* 1 once the payload is complete (release store) */
} header;

struct sl_shm_floor {
    char name[128];             /* "prefix-key" */
    char lock_path[160];        /* "/dev/shm/prefix-key.lock" */
    int lock_fd;                /* the lock file: held exclusively while attaching/detaching */
    int region_fd;              /* the region: held shared while attached */
    uint8_t *map;               /* header + payload, read-only */
    uint64_t map_bytes, bytes;
};

static sl_status sys_error(sl_error *err, const char *what, const char *obj)
{
    return sl_error_set(err, SL_ERR_IO, "shared floor %s: %s: %s", obj, what, strerror(errno));
}

static bool ready_region(const uint8_t *map, const sl_shm_floor_options *o)
{
    const header *h = (const header *)map;
    return !memcmp(h->magic, k_magic, sizeof k_magic) && h->version == VERSION &&
           h->key == o->key && h->bytes == o->bytes &&
           __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) == 1;
}

/* Step 1: the lock file, locked exclusively, still the one its path names. */
static sl_status lock_exclusive(sl_shm_floor *f, mode_t mode, sl_error *err)
{
    for (;;) {
        f->lock_fd = open(f->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
        if (f->lock_fd < 0) return sys_error(err, "open", f->lock_path);
        int rc;
        while ((rc = flock(f->lock_fd, LOCK_EX)) != 0 && errno == EINTR) {}
        if (rc) return sys_error(err, "flock", f->lock_path);
        struct stat a, b;
        if (fstat(f->lock_fd, &a) == 0 && stat(f->lock_path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return SL_OK;
        close(f->lock_fd); /* unlinked by a last holder between open and flock: again */
        f->lock_fd = -1;
    }
}

/* Step 2 for a region that is not ready: materialize it. */
static sl_status materialize(sl_shm_floor *f, int fd, const sl_shm_floor_options *o,
                             sl_error *err)
{
    if (ftruncate(fd, 0) || ftruncate(fd, (off_t)f->map_bytes))
        return sys_error(err, "ftruncate", f->name);
    uint8_t *w = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (w == MAP_FAILED) return sys_error(err, "mmap (writable)", f->name);
    header *h = (header *)w;
    memcpy(h->magic, k_magic, sizeof k_magic);
    h->version = VERSION;
    h->key = o->key;
    h->bytes = o->bytes;
    sl_status st = o->fill(o->fill_user, w + SL_SHM_FLOOR_HEADER, o->bytes, err);
    if (!st) __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    munmap(w, f->map_bytes);
    return st;
}

sl_status sl_shm_floor_attach(const sl_shm_floor_options *o, sl_shm_floor **out,
                              bool *materialized, sl_error *err)
{
    if (!o || !out || !o->bytes || !o->fill)
        return sl_error_set(err, SL_ERR_INVALID, "shared floor: NULL argument or 0 bytes");
    *out = NULL;
    const char *prefix = o->prefix ? o->prefix : "sluice-floor";
    if (strchr(prefix, '/') || strlen(prefix) > 64)
        return sl_error_set(err, SL_ERR_INVALID, "shared floor: prefix '%s': at most 64 "
                            "characters, no '/'", prefix);
    sl_shm_floor *f = calloc(1, sizeof *f);
    if (!f) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (shared floor)");
    f->lock_fd = f->region_fd = -1;
    snprintf(f->name, sizeof f->name, "%s-%016" PRIx64, prefix, o->key);
    snprintf(f->lock_path, sizeof f->lock_path, "/dev/shm/%s.lock", f->name);
    f->bytes = o->bytes;
    f->map_bytes = SL_SHM_FLOOR_HEADER + o->bytes;
    const mode_t mode = o->mode ? (mode_t)o->mode : 0600;
    char shm_name[132];
    snprintf(shm_name, sizeof shm_name, "/%s", f->name);
    bool made = false;
    sl_status st = lock_exclusive(f, mode, err);
    int fd = -1;
    if (!st && (fd = shm_open(shm_name, O_RDWR | O_CREAT | O_CLOEXEC, mode)) < 0)
        st = sys_error(err, "shm_open", f->name);
    struct stat sb;
    if (!st && fstat(fd, &sb)) st = sys_error(err, "fstat", f->name);
    if (!st && (uint64_t)sb.st_size == f->map_bytes) {
        f->map = mmap(NULL, f->map_bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            st = sys_error(err, "mmap", f->name);
        } else if (!ready_region(f->map, o)) {
            munmap(f->map, f->map_bytes);
            f->map = NULL;
        }
    }
    if (!st && !f->map) {
        made = true;
        if (!(st = materialize(f, fd, o, err))) {
            f->map = mmap(NULL, f->map_bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (f->map == MAP_FAILED) {
                f->map = NULL;
                st = sys_error(err, "mmap", f->name);
            }
        }
    }
    f->region_fd = fd;
    /* a holder: shared lock on the region, taken under the lock file so that a detaching
     * process cannot decide it is the last in between */
    if (!st && flock(fd, LOCK_SH)) st = sys_error(err, "flock (shared)", f->name);
    if (st) {
        /* nothing half-made is ever used: the region stays not ready for the next opener */
        sl_shm_floor_detach(f);
        return st;
    }
    flock(f->lock_fd, LOCK_UN);
    if (materialized) *materialized = made;
    *out = f;
    return SL_OK;
}

const uint8_t *sl_shm_floor_payload(const sl_shm_floor *f)
{
    return f && f->map ? f->map + SL_SHM_FLOOR_HEADER : NULL;
}

uint64_t sl_shm_floor_bytes(const sl_shm_floor *f)
{
    return f ? f->bytes : 0;
}

const char *sl_shm_floor_name(const sl_shm_floor *f)
{
    return f ? f->name : "";
}

void sl_shm_floor_detach(sl_shm_floor *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->map_bytes);
    if (f->lock_fd >= 0) {
        /* under the lock file (no attach in progress), the last holder is the one whose
         * upgrade to an exclusive lock on the region succeeds */
        int rc;
        while ((rc = flock(f->lock_fd, LOCK_EX)) != 0 && errno == EINTR) {}
        if (!rc && f->region_fd >= 0 && flock(f->region_fd, LOCK_EX | LOCK_NB) == 0) {
            char shm_name[132];
            snprintf(shm_name, sizeof shm_name, "/%s", f->name);
            shm_unlink(shm_name);
            unlink(f->lock_path);
        }
    }
    if (f->region_fd >= 0) close(f->region_fd);
    if (f->lock_fd >= 0) close(f->lock_fd);
    free(f);
}
