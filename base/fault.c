/* base/fault.c: the one fault-injection hook (base/fault.h). */
#include "base/fault.h"

#include <stdatomic.h>
#include <stddef.h>

/* A mutable global, on purpose and in this one place: a fault site is reached from deep in the
 * library (a device opened by sl_model_open, a reload's arena), where no options reach, so
 * the hook is process-wide like SQLite's. Atomic: sites read it from any thread while a test
 * installs or removes it. */
static _Atomic(const sl_fault_hook *) g_hook;

const sl_fault_hook *sl_fault_install(const sl_fault_hook *hook)
{
    return atomic_exchange(&g_hook, hook);
}

bool sl_fault_plan_fn(void *plan, sl_fault_site site, uint64_t n)
{
    const sl_fault_plan *p = plan;
    return p && (unsigned)site < SL_FAULT_SITE_COUNT && p->at[site] && n == p->at[site];
}

bool sl__fault_hit(sl_fault_site site, uint64_t n)
{
    const sl_fault_hook *h = atomic_load_explicit(&g_hook, memory_order_acquire);
    return h && h->fn && h->fn(h->user, site, n);
}

const char *sl_fault_site_name(sl_fault_site site)
{
    static const char *const names[SL_FAULT_SITE_COUNT] = {
        "region alloc", "host register", "copy", "swap alloc", "swap touch"};
    return (unsigned)site < SL_FAULT_SITE_COUNT ? names[site] : "?";
}
