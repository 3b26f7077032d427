/* runtime/struct_size.h: the check of the size field that opens every public option struct of
 * sluice.h (STYLE.md "Symbol control"). A caller built against another sluice.h, a binding whose
 * mirror is stale, or a struct never filled by its *_default() would otherwise be read with the
 * wrong layout; its size says so before any field is read. */
#ifndef SL_RUNTIME_STRUCT_SIZE_H
#define SL_RUNTIME_STRUCT_SIZE_H

#include <stddef.h>

#include "base/status.h"

/* SL_ERR_INVALID naming the struct and both sizes unless got == want. */
static inline sl_status sl__struct_size_check(const char *what, size_t got, size_t want,
                                              sl_error *err)
{
    if (got == want) return SL_OK;
    return sl_error_set(err, SL_ERR_INVALID,
                        "%s: struct_size is %zu, this library's is %zu: start from "
                        "%s_default() (a caller built against another sluice.h, or a "
                        "binding's stale mirror)",
                        what, got, want, what);
}

#endif
