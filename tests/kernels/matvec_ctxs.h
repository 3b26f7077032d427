/* tests/kernels/matvec_ctxs.h: the matvec tests' ISA contexts. Header-only, for the test
 * programs of kernels/cpu/matvec (matvec_test and matvec_multi_test through matvec_testlib.h,
 * matvec_groups_test, repack_test). */
#ifndef SL_TESTS_KERNELS_MATVEC_CTXS_H
#define SL_TESTS_KERNELS_MATVEC_CTXS_H

#include <stdio.h>

#include "kernels/cpu/matvec.h"

/* The context with AMX tiles (sl_cpu_matvec_init sets amx where the CPU has them and the
 * process was granted them) becomes two, mv[*n] gaining the tiles and the original losing them,
 * so the VNNI kernels and the tile kernels are both tested; mv has room for *n + 1. */
static inline void sl_test_amx_split(sl_cpu_matvec_ctx *mv, int *n, const char *who)
{
    for (int i = 0; i < *n; i++) {
        if (!mv[i].amx) continue;
        mv[*n] = mv[i];
        mv[i].amx = false;
        printf("%s: testing %s and %s\n", who, sl_cpu_matvec_name(&mv[i]),
               sl_cpu_matvec_name(&mv[*n]));
        (*n)++;
        return;
    }
    printf("%s: notice: no AMX tiles here (CPU or OS): their kernels are not tested\n", who);
}

#endif
