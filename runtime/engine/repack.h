/* runtime/repack: which loaded Q4_K weights the CPU reads as Q4_K_R8 (kernels/ref/repack.h),
 * and the repack itself — at load (sl__model_repack) and for a live reload's new bytes.
 *
 * Contract: a weight is repacked in place, once its bytes sit in a host pool block of its own,
 * when sl__weight_repack_wanted holds; its type becomes SL_TYPE_Q4_K_R8 (sl__weight_repacked,
 * scheduler/weights.h's invariants). Byte counts never change, so budgets, expert slices and
 * the plan's byte figures stay valid. Nothing here puts R8 bytes anywhere a device could read
 * them as Q4_K: see sl__weight_repack_wanted's rules. */
#ifndef SL_RUNTIME_REPACK_H
#define SL_RUNTIME_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/engine/model.h"

/* Whether w, holding bytes of file type file_type in host storage of its own, is to be repacked:
 * repack on (opt.no_repack false); not read by io = mmap (the weights are the read-only mapping,
 * which a reload compares new bytes with); file_type Q4_K; a matvec weight (not the token
 * embedding, whose rows are gathered as Q4_K); ne[0] % 256 == 0 and ne[1] % 8 == 0 (each 2-D
 * slice, an expert's or a head's, is whole groups of eight rows); the plan keeps it on the host
 * (a device copy, or a runtime's upload of its floor, would carry R8 to the device); not split
 * hot/cold (its parts are gathered by rows as Q4_K); and not in a runtime's shared floor
 * (read-only, mapped by other processes). A routed expert on the host of a device model (cuda
 * or sim) is repacked too: the fetching scheduler unpacks each piece it uploads back to Q4_K
 * (scheduler/moe/fetch_stage.c), so the device only ever holds the file's layout. */
bool sl__weight_repack_wanted(const sl_model *m, const sl_weight *w, uint32_t file_type);

/* Repacks w's bytes at data (Q4_K, w's shape, writable) into Q4_K_R8 in place. */
sl_status sl__weight_repack_bytes(const sl_weight *w, void *data, sl_error *err);

/* The load pass (after any hot/cold split, before the live-reload snapshot): every weight
 * with a host pool block whose repack is wanted is repacked in place; m->notice (if still
 * empty) says how many and how many MiB (sl_model_info counts them too). The plan keeps the
 * file's type names: tools read granules from them (place solve). The pass runs in row-group
 * chunks (kernels/cpu/repack.h) on a pool of the contexts' rule (sl__model_cpu_pool_create),
 * which it creates and stops: the bytes are those of one thread. */
sl_status sl__model_repack(sl_model *m, sl_error *err);

#endif
