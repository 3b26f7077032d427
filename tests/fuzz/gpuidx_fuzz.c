/* Fuzz entry point for the .gpuidx reader: any input is refused with a message and an empty
 * index, or yields an index that passes sl_gpuidx_validate and whose arrays are all readable.
 * A broken invariant aborts, which libFuzzer reports as a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/policy/gpuidx.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "gpuidx_fuzz: invariant broken: %s: %s\n", what, msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_gpuidx idx = {0};
    sl_error e = {0};
    if (sl_gpuidx_read_memory(data, size, "fuzz.gpuidx", 0, NULL, &idx, &e) != SL_OK) {
        if (idx.n_layer || idx.layers) die("read", "index not empty after an error");
        if (e.msg[0] == '\0') die("read", "error without a message");
        return 0;
    }
    if (sl_gpuidx_validate(&idx, &e) != SL_OK) die("validate", e.msg);
    volatile uint64_t acc = 0;
    for (uint32_t l = 0; l < idx.n_layer; l++) {
        for (uint32_t i = 0; i < idx.layers[l].n_neuron; i++) acc += idx.layers[l].hot[i];
        for (uint32_t k = 0; k < idx.layers[l].n_hot; k++) acc += idx.layers[l].hot_list[k];
    }
    (void)acc;
    sl_gpuidx_free(&idx);
    return 0;
}
