/* scheduler/policy/place_mode: the placement modes, one table that everything naming a mode
 * reads (the policy, its plan, sluice.h's sl_model_options, the CLI's --placement and help,
 * error messages, Python). Public: sluice.h includes it and libsluice.so exports it.
 * A new mode is a row here plus its rule in placement.c; nothing else spells a mode's name.
 * Names follow llama.cpp where the concept is the same. Pure, thread-safe, no allocation. */
#ifndef SL_SCHEDULER_PLACE_MODE_H
#define SL_SCHEDULER_PLACE_MODE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

/* Where weights live (sluice.h's sl_model_options.placement). */
typedef enum sl_placement {
    SL_PLACE_AUTO = 0,        /* all on GPU if it fits in the budget, else the experts of the
                                 first layers on CPU (--n-cpu-moe), else the last layers on the
                                 GPU (-ngl) that fit; all on the CPU when the device is auto
                                 and finds no usable CUDA device */
    SL_PLACE_GPU = 1,         /* everything on the GPU */
    SL_PLACE_LAYERS = 2,      /* the LAST gpu_layers layers on the GPU, and the output matrix
                                 when gpu_layers > n_layer (llama.cpp -ngl) */
    SL_PLACE_EXPERTS_CPU = 3, /* routed experts on CPU, the rest on GPU (-ot exps=CPU) */
    SL_PLACE_CPU = 4,         /* everything on the CPU */
    SL_PLACE_HOT_COLD = 5,    /* PowerInfer: each dense FFN split by a neuron index (gpu_index)
                                 into hot neurons on the GPU and cold ones on the CPU, computed
                                 at the same time; everything else on the GPU */
    SL_PLACE_COUNT            /* not a mode: the table's length */
} sl_placement;

typedef struct sl_place_mode_info {
    const char *name;     /* the flag value and the plan's "mode" ("experts-cpu") */
    const char *why;      /* the plan's reason when the mode alone decided */
    const char *help;     /* one line for --help */
    bool needs_index;     /* reads a neuron index (.gpuidx) */
} sl_place_mode_info;

/* The row of mode m, or NULL when m is not a mode. */
SL_API const sl_place_mode_info *sl_place_mode_info_get(sl_placement m);
/* m's name, or NULL when m is not a mode. */
SL_API const char *sl_place_mode_name(sl_placement m);
/* The mode named text; SL_ERR_INVALID naming text and every mode's name otherwise. */
SL_API sl_status sl_place_mode_parse(const char *text, sl_placement *out, sl_error *err);
/* Every mode's name joined by sep into buf (truncated to cap, always terminated); returns buf. */
SL_API const char *sl_place_mode_names(char *buf, size_t cap, const char *sep);

#endif
