/* Private to alloc/: the invariant checker, for tests and debug builds. */
#ifndef SL_BFC_IMPL_H
#define SL_BFC_IMPL_H

#include "alloc/bfc.h"

/* Checks every invariant listed in bfc.h; SL_OK or a message naming the broken one. */
sl_status sl__bfc_validate(const sl_bfc *a, sl_error *err);

#endif
