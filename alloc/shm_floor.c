/* alloc/shm_floor.c: the shared host floor's region and lock protocol (contract in
 * shm_floor.h). */
#include "base/clock.h"
#include "alloc/shm_floor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { VERSION = 2, LABEL_BYTES = 1024, DEFAULT_WAIT_MS = 600000 };
static const char k_magic[8] = {'S', 'L', 'F', 'L', 'O', 'O', 'R', '2'};

/* The label's stat when the region was filled: a holderless region whose file no longer
 * matches it is stale (reclaim_stale). */
typedef struct label_stat {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} label_stat;

typedef struct header {
    char magic[8];
    uint32_t version, pad;
    uint64_t key, bytes;
    uint8_t identity[SL_SHM_FLOOR_DIGEST];
    uint8_t digest[SL_SHM_FLOOR_DIGEST];
    label_stat lst;
    char label[LABEL_BYTES];
    uint64_t ready;             /* 1 once the payload is complete (release store) */
} header;
_Static_assert(sizeof(header) <= SL_SHM_FLOOR_HEADER, "the header fits its page");

struct sl_shm_floor {
    char name[128];             /* "prefix-uUID-key" */
    char lock_path[160];        /* "/dev/shm/prefix-uUID-key.lock" */
    int lock_fd;                /* the lock file: held exclusively while attaching/detaching */
    int region_fd;              /* the region: held shared while attached */
    uint8_t *map;               /* header + payload, read-only */
    uint64_t map_bytes, bytes;
    bool mine;                  /* both objects passed check_object: ours to unlink */
};

/* ---- digest ---------------------------------------------------------------------------- */

static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full,
                      P3 = 0x165667B19E3779F9ull, P4 = 0x85EBCA77C2B2AE63ull,
                      P5 = 0x27D4EB2F165667C5ull;

static uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void stripe(uint64_t *lane, const uint8_t *p)
{
    for (int i = 0; i < 4; i++) lane[i] = rotl(lane[i] + rd64(p + 8 * i) * P2, 31) * P1;
}

void sl_shm_floor_hash_init(sl_shm_floor_hash *h, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    h->lane[0] = seed + P1 + P2;
    h->lane[1] = seed + P2;
    h->lane[2] = seed;
    h->lane[3] = seed - P1;
}

void sl_shm_floor_hash_update(sl_shm_floor_hash *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    h->total += n;
    if (h->n) {
        const size_t k = n < 32 - h->n ? n : 32 - h->n;
        memcpy(h->buf + h->n, p, k);
        h->n += k;
        p += k;
        n -= k;
        if (h->n < 32) return;
        stripe(h->lane, h->buf);
        h->n = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(h->lane, p);
    memcpy(h->buf, p, n);
    h->n = n;
}

static uint64_t avalanche(uint64_t x)
{
    x ^= x >> 33;
    x *= P2;
    x ^= x >> 29;
    x *= P3;
    return x ^ (x >> 32);
}

void sl_shm_floor_hash_final(const sl_shm_floor_hash *h, uint8_t out[SL_SHM_FLOOR_DIGEST])
{
    uint64_t t = (h->total * P5) ^ P4;
    for (size_t i = 0; i < h->n; i++) t = rotl(t ^ (h->buf[i] * P5), 11) * P1;
    for (int j = 0; j < 4; j++) {
        const uint64_t x = avalanche(h->lane[j] ^ rotl(h->lane[(j + 1) & 3], 23) ^
                                     rotl(h->lane[(j + 2) & 3], 41) ^ t ^ ((uint64_t)j * P3));
        memcpy(out + 8 * j, &x, 8);
        t = rotl(t, 29) * P1 + x;
    }
}

/* ---- objects --------------------------------------------------------------------------- */

static sl_status sys_error(sl_error *err, const char *what, const char *obj)
{
    return sl_error_set(err, SL_ERR_IO, "shared floor %s: %s: %s", obj, what, strerror(errno));
}

static const char *prefix_of(const char *prefix)
{
    return prefix ? prefix : "sluice-floor";
}

void sl_shm_floor_object_name(const char *prefix, uint64_t key, char *buf, size_t n)
{
    snprintf(buf, n, "%s-u%u-%016" PRIx64, prefix_of(prefix), (unsigned)geteuid(), key);
}

/* An object another user made, or one others may write, is never used: its creator (or any
 * writer) could change the bytes this process computes with. Then the mode is set exactly. */
static sl_status check_object(int fd, const char *obj, mode_t mode, sl_error *err)
{
    struct stat sb;
    if (fstat(fd, &sb)) return sys_error(err, "fstat", obj);
    if (!S_ISREG(sb.st_mode))
        return sl_error_set(err, SL_ERR_IO, "shared floor %s: not a regular file (mode %o): "
                            "refused", obj, (unsigned)sb.st_mode);
    if (sb.st_uid != geteuid())
        return sl_error_set(err, SL_ERR_IO, "shared floor %s: owned by uid %u, not by this "
                            "process's uid %u: refused (another user created it; remove it or "
                            "use another prefix)", obj, (unsigned)sb.st_uid,
                            (unsigned)geteuid());
    const mode_t extra = sb.st_mode & 022 & ~mode;
    if (extra)
        return sl_error_set(err, SL_ERR_IO, "shared floor %s: mode %03o lets others write "
                            "(asked for %03o): refused", obj, (unsigned)(sb.st_mode & 0777),
                            (unsigned)mode);
    if ((sb.st_mode & 07777) != mode && fchmod(fd, mode)) return sys_error(err, "fchmod", obj);
    return SL_OK;
}

/* Who holds the lock file now (its content, one line), for a waiter's message. */
static void holder_of(int fd, char *buf, size_t n)
{
    const ssize_t k = pread(fd, buf, n - 1, 0);
    buf[k > 0 ? k : 0] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
    if (!buf[0]) snprintf(buf, n, "an unknown process");
}

/* The lock file's content while this process holds it. */
static void claim(int fd, const char *label)
{
    char line[LABEL_BYTES + 128];
    const time_t t = time(NULL);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const int k = snprintf(line, sizeof line, "pid %d since %s for %s\n", (int)getpid(), when,
                           label ? label : "?");
    if (ftruncate(fd, 0) == 0 && k > 0) {
        const ssize_t w = pwrite(fd, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1,
                                 0);
        (void)w; /* the content only informs a waiter's message */
    }
}

/* flock(LOCK_EX), polled: gives up after wait_ms or when cancelled, naming the holder. */
static sl_status lock_wait(int fd, const char *obj, const sl_shm_floor_options *o, sl_error *err)
{
    const double t0 = sl_clock_s();
    const double limit = (o->wait_ms ? o->wait_ms : DEFAULT_WAIT_MS) / 1000.0;
    long sleep_ns = 1000000;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return SL_OK;
        if (errno != EWOULDBLOCK && errno != EINTR) return sys_error(err, "flock", obj);
        char who[LABEL_BYTES + 128];
        if (o->cancelled && o->cancelled(o->cancelled_user)) {
            holder_of(fd, who, sizeof who);
            return sl_error_set(err, SL_ERR_INVALID, "shared floor %s: cancelled while waiting "
                                "%.1f s for its lock, held by %s", obj, sl_clock_s() - t0, who);
        }
        if (sl_clock_s() - t0 >= limit) {
            holder_of(fd, who, sizeof who);
            return sl_error_set(err, SL_ERR_RANGE, "shared floor %s: waited %.1f s for its "
                                "lock, held by %s (a stopped process? kill it or raise the "
                                "wait)", obj, sl_clock_s() - t0, who);
        }
        const struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL); /* a signal cuts it short: cancelled is asked at once */
        if (sleep_ns < 50000000) sleep_ns *= 2;
    }
}

/* Step 1: the lock file, checked, locked exclusively, still the one its path names. */
static sl_status lock_exclusive(sl_shm_floor *f, const sl_shm_floor_options *o, mode_t mode,
                                sl_error *err)
{
    for (;;) {
        f->lock_fd = open(f->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
        if (f->lock_fd < 0) return sys_error(err, "open", f->lock_path);
        sl_status st = check_object(f->lock_fd, f->lock_path, mode, err);
        if (!st) st = lock_wait(f->lock_fd, f->lock_path, o, err);
        if (st) return st;
        struct stat a, b;
        if (fstat(f->lock_fd, &a) == 0 && lstat(f->lock_path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            claim(f->lock_fd, o->label);
            return SL_OK;
        }
        close(f->lock_fd); /* unlinked by a last holder between open and flock: again */
        f->lock_fd = -1;
    }
}

static label_stat label_stat_of(const char *label)
{
    label_stat l = {0};
    struct stat sb;
    if (label && !stat(label, &sb))
        l = (label_stat){(uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)sb.st_size,
                         (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec,
                         (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec};
    return l;
}

/* Step 2 for a region that is not ready: materialize it. */
static sl_status materialize(sl_shm_floor *f, int fd, const sl_shm_floor_options *o,
                             const uint8_t *want_digest, sl_error *err)
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
    memcpy(h->identity, o->identity, SL_SHM_FLOOR_DIGEST);
    h->lst = label_stat_of(o->label);
    snprintf(h->label, sizeof h->label, "%s", o->label ? o->label : "");
    sl_status st = o->fill(o->user, w + SL_SHM_FLOOR_HEADER, o->bytes, h->digest, err);
    if (!st && want_digest && memcmp(h->digest, want_digest, SL_SHM_FLOOR_DIGEST))
        st = sl_error_set(err, SL_ERR_IO, "shared floor %s: the source changed while it was "
                          "read (its digest differs from the one computed before)", f->name);
    if (!st) __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    munmap(w, f->map_bytes);
    return st;
}

/* Whether the mapped region is ready with this key and size. */
static bool ready_region(const uint8_t *map, const sl_shm_floor_options *o)
{
    const header *h = (const header *)map;
    return !memcmp(h->magic, k_magic, sizeof k_magic) && h->version == VERSION &&
           h->key == o->key && h->bytes == o->bytes &&
           __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) == 1;
}

static void release(sl_shm_floor *f);

/* Steps 1-3 for the region named by key. want_digest: NULL at the first name (a ready region
 * is checked by identity, then by own_digest, computed on demand); else the content digest a
 * region of this name must hold. *other: the region is ready with other content (released). */
static sl_status attach_name(sl_shm_floor *f, const sl_shm_floor_options *o, uint64_t key,
                             const uint8_t *want_digest, uint8_t *own_digest, bool *have_own,
                             sl_shm_floor_how *how, bool *other, sl_error *err)
{
    *other = false;
    sl_shm_floor_options ko = *o;
    ko.key = key;
    sl_shm_floor_object_name(o->prefix, key, f->name, sizeof f->name);
    snprintf(f->lock_path, sizeof f->lock_path, "/dev/shm/%s.lock", f->name);
    const mode_t mode = o->mode ? (mode_t)o->mode : 0600;
    char shm_name[132];
    snprintf(shm_name, sizeof shm_name, "/%s", f->name);
    sl_status st = lock_exclusive(f, o, mode, err);
    int fd = -1;
    if (!st && (fd = shm_open(shm_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode)) < 0)
        st = sys_error(err, "shm_open", f->name);
    f->region_fd = fd;
    if (!st) st = check_object(fd, f->name, mode, err);
    f->mine = !st;
    struct stat sb;
    if (!st && fstat(fd, &sb)) st = sys_error(err, "fstat", f->name);
    if (!st && (uint64_t)sb.st_size == f->map_bytes) {
        f->map = mmap(NULL, f->map_bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            st = sys_error(err, "mmap", f->name);
        } else if (!ready_region(f->map, &ko)) {
            munmap(f->map, f->map_bytes);
            f->map = NULL;
        }
    }
    if (!st && f->map) {
        const header *h = (const header *)f->map;
        if (want_digest) {
            *other = memcmp(h->digest, want_digest, SL_SHM_FLOOR_DIGEST) != 0;
            *how = SL_SHM_FLOOR_DIGEST_CHECKED;
        } else if (!memcmp(h->identity, o->identity, SL_SHM_FLOOR_DIGEST)) {
            *how = SL_SHM_FLOOR_SAME_SOURCE;
        } else {
            /* filled from another file or version: only equal content may share it */
            if (!*have_own && !(st = o->digest(o->user, own_digest, err))) *have_own = true;
            *other = !st && memcmp(h->digest, own_digest, SL_SHM_FLOOR_DIGEST) != 0;
            *how = SL_SHM_FLOOR_DIGEST_CHECKED;
        }
        if (*other) {
            release(f);
            return SL_OK;
        }
    }
    if (!st && !f->map) {
        *how = SL_SHM_FLOOR_FILLED;
        if (!(st = materialize(f, fd, &ko, want_digest, err))) {
            f->map = mmap(NULL, f->map_bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (f->map == MAP_FAILED) {
                f->map = NULL;
                st = sys_error(err, "mmap", f->name);
            }
        }
    }
    /* a holder: shared lock on the region, taken under the lock file so that a detaching
     * process cannot decide it is the last in between */
    if (!st && flock(fd, LOCK_SH)) st = sys_error(err, "flock (shared)", f->name);
    if (st) {
        /* nothing half-made is ever used: the region stays not ready for the next opener */
        release(f);
        return st;
    }
    flock(f->lock_fd, LOCK_UN);
    return SL_OK;
}

/* Holderless regions of this user and prefix whose source is gone or changed (or never got
 * filled) are removed: nobody will open their name again (a last holder killed with -9, a
 * process that exited without detaching). A holderless region whose file is unchanged stays:
 * the next opener of that file reuses it. Never blocks: a locked object is someone's. */
static void reclaim_stale(const char *prefix)
{
    char want[96];
    snprintf(want, sizeof want, "%s-u%u-", prefix_of(prefix), (unsigned)geteuid());
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, want, strlen(want)) || n < 5 || strcmp(e->d_name + n - 5, ".lock"))
            continue;
        char lock_path[400], shm_name[300];
        snprintf(lock_path, sizeof lock_path, "/dev/shm/%s", e->d_name);
        snprintf(shm_name, sizeof shm_name, "/%.*s", (int)(n - 5), e->d_name);
        const int lfd = open(lock_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0) continue;
        struct stat ls;
        const int rfd = fstat(lfd, &ls) == 0 && ls.st_uid == geteuid() &&
                                flock(lfd, LOCK_EX | LOCK_NB) == 0
                            ? shm_open(shm_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0)
                            : -1;
        struct stat rs;
        if (rfd >= 0 && fstat(rfd, &rs) == 0 && rs.st_uid == geteuid() &&
            flock(rfd, LOCK_EX | LOCK_NB) == 0) {
            bool stale = (uint64_t)rs.st_size < sizeof(header);
            if (!stale) {
                const header *h = mmap(NULL, sizeof(header), PROT_READ, MAP_SHARED, rfd, 0);
                if (h != MAP_FAILED) {
                    const label_stat now = label_stat_of(h->label[0] ? h->label : NULL);
                    stale = __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) != 1 ||
                            memcmp(&now, &h->lst, sizeof now) || !h->label[0];
                    munmap((void *)h, sizeof(header));
                }
            }
            if (stale) {
                shm_unlink(shm_name);
                unlink(lock_path);
            }
        }
        if (rfd >= 0) close(rfd);
        close(lfd);
    }
    closedir(d);
}

sl_status sl_shm_floor_check_names(const char *prefix, unsigned mode, sl_error *err)
{
    prefix = prefix_of(prefix);
    if (strchr(prefix, '/') || strlen(prefix) > 64)
        return sl_error_set(err, SL_ERR_INVALID, "shared floor: prefix '%.80s': at most 64 "
                            "characters, no '/'", prefix);
    if (mode & ~0777u)
        return sl_error_set(err, SL_ERR_INVALID, "shared floor: mode %o: permission bits only",
                            mode);
    return SL_OK;
}

sl_status sl_shm_floor_attach(const sl_shm_floor_options *o, sl_shm_floor **out,
                              sl_shm_floor_how *how, sl_error *err)
{
    if (!o || !out || !o->bytes || !o->fill || !o->digest)
        return sl_error_set(err, SL_ERR_INVALID, "shared floor: NULL argument or 0 bytes");
    *out = NULL;
    sl_status st = sl_shm_floor_check_names(o->prefix, o->mode, err);
    if (st != SL_OK) return st;
    reclaim_stale(o->prefix);
    sl_shm_floor *f = calloc(1, sizeof *f);
    if (!f) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (shared floor)");
    f->lock_fd = f->region_fd = -1;
    f->bytes = o->bytes;
    f->map_bytes = SL_SHM_FLOOR_HEADER + o->bytes;
    uint8_t own[SL_SHM_FLOOR_DIGEST];
    bool have_own = false, other = false;
    sl_shm_floor_how h = SL_SHM_FLOOR_FILLED;
    st = attach_name(f, o, o->key, NULL, own, &have_own, &h, &other, err);
    if (!st && other) {
        /* the key's region holds other content: this content's own name */
        uint64_t k2;
        memcpy(&k2, own, sizeof k2);
        k2 ^= rotl(o->key, 17) * P1;
        st = attach_name(f, o, k2, own, own, &have_own, &h, &other, err);
        if (!st && other)
            st = sl_error_set(err, SL_ERR_IO, "shared floor %s: holds other content than its "
                              "name's digest says: refused", f->name);
    }
    if (st) {
        free(f);
        return st;
    }
    if (how) *how = h;
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

const uint8_t *sl_shm_floor_digest(const sl_shm_floor *f)
{
    return f && f->map ? ((const header *)f->map)->digest : NULL;
}

/* Unmaps and closes; under the lock file, the last holder unlinks both objects. f stays
 * allocated (reset for another name). */
static void release(sl_shm_floor *f)
{
    if (f->map) munmap(f->map, f->map_bytes);
    f->map = NULL;
    if (f->lock_fd >= 0 && f->mine) {
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
    f->region_fd = f->lock_fd = -1;
    f->mine = false;
}

void sl_shm_floor_detach(sl_shm_floor *f)
{
    if (!f) return;
    release(f);
    free(f);
}
