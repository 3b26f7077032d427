/* base/fault.h: fault injection for tests, through one installed hook (SQLite's
 * sqlite3_test_control(SQLITE_TESTCTRL_FAULT_INSTALL, cb)), not through variables the library
 * reads. Not part of sluice.h: tests and the CLI's test switches (tools/common/fault_env.c,
 * SLUICE_FAULT_*) install it.
 *
 * Each site counts its own calls from 1 (per device for the device sites, per live reload for
 * the swap sites) and asks the hook whether call n fails; with no hook installed nothing fails
 * and the cost is one atomic load. A failure the hook causes says "injected fault" in its
 * message. */
#ifndef SL_BASE_FAULT_H
#define SL_BASE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sl_fault_site {
    SL_FAULT_REGION_ALLOC = 0, /* base/device: a device's nth region allocation */
    SL_FAULT_HOST_REGISTER,    /* base/device: a device's nth host-memory registration */
    SL_FAULT_COPY,             /* base/device: a device's nth copy */
    SL_FAULT_SWAP_ALLOC,       /* live reload: its nth new device block, as if the arena were
                                  full (the tensor falls back to the host) */
    SL_FAULT_SWAP_TOUCH,       /* live reload: its nth changed file has its mtime moved after
                                  the read (a file still being written: skipped) */
    SL_FAULT_SITE_COUNT
} sl_fault_site;

/* Returns true when call n (from 1) of site must fail. Called from any thread. */
typedef bool (*sl_fault_fn)(void *user, sl_fault_site site, uint64_t n);

typedef struct sl_fault_hook {
    sl_fault_fn fn;
    void *user;
} sl_fault_hook;

/* Installs hook for the whole process (NULL: none); it must stay valid until replaced. Returns
 * the previous one, so that a test can restore it. */
const sl_fault_hook *sl_fault_install(const sl_fault_hook *hook);

/* The common hook: call at[site] of each site fails (0: never). */
typedef struct sl_fault_plan {
    uint64_t at[SL_FAULT_SITE_COUNT];
} sl_fault_plan;
bool sl_fault_plan_fn(void *plan, sl_fault_site site, uint64_t n);

/* Whether call n of site fails (the sites call it). */
bool sl__fault_hit(sl_fault_site site, uint64_t n);
/* "region alloc", "copy", ...; "?" out of range. */
const char *sl_fault_site_name(sl_fault_site site);

#endif
