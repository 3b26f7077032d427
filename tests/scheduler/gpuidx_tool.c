/* Test helper for gpuidx_powerinfer.py: reads or writes a .gpuidx through scheduler/gpuidx.
 *   gpuidx_tool read FILE [N_LAYER [W0,W1,...]]   prints the index as JSON (n_expert 0 or 1:
 *                                                 dense; flat expert-major hot lists), or
 *                                                 {"status": ..., "error": ...} and exits 1
 *   gpuidx_tool write FILE VRAM [--gguf-magic] N:I,J,... ...   one argument per layer
 *                                                 (N neurons, hot I, J ...; "N:" for none) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/policy/gpuidx.h"

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static int fail(sl_status s, const sl_error *e)
{
    printf("{\"status\": \"%s\", \"error\": ", sl_status_name(s));
    json_str(e->msg);
    printf("}\n");
    return 1;
}

static int do_read(int argc, char **argv)
{
    uint32_t n_layer = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0;
    uint32_t *widths = NULL;
    if (argc > 4) {
        widths = calloc(n_layer + 1, sizeof *widths);
        char *p = argv[4];
        for (uint32_t l = 0; l < n_layer && widths && *p; l++) {
            widths[l] = (uint32_t)strtoul(p, &p, 10);
            if (*p == ',') p++;
        }
    }
    sl_gpuidx idx;
    sl_error e = {0};
    sl_status s = sl_gpuidx_read(argv[2], n_layer, widths, &idx, &e);
    free(widths);
    if (s) return fail(s, &e);
    printf("{\"n_layer\": %u, \"n_expert\": %u, \"vram_capacity\": %" PRIu64
           ", \"layers\": [", idx.n_layer, idx.n_expert, idx.vram_capacity_bytes);
    for (uint32_t l = 0; l < idx.n_layer; l++) {
        const sl_gpuidx_layer *L = &idx.layers[l];
        printf("%s{\"n_neuron\": %u, \"split\": %s, \"hot\": [", l ? ", " : "", L->n_neuron,
               sl_gpuidx_layer_is_split(L) ? "true" : "false");
        for (uint32_t k = 0; k < L->n_hot; k++) printf("%s%u", k ? ", " : "", L->hot_list[k]);
        printf("]}");
    }
    printf("]}\n");
    sl_gpuidx_free(&idx);
    return 0;
}

static int do_write(int argc, char **argv)
{
    int first = 4;
    sl_gpuidx_write_options o = {0};
    if (argc > 4 && !strcmp(argv[4], "--gguf-magic")) {
        o.gguf_magic = true;
        first = 5;
    }
    uint32_t n_layer = (uint32_t)(argc - first);
    uint32_t *widths = calloc(n_layer + 1, sizeof *widths);
    if (!widths) return 1;
    for (uint32_t l = 0; l < n_layer; l++) widths[l] = (uint32_t)strtoul(argv[first + l], NULL, 10);
    sl_gpuidx idx;
    sl_error e = {0};
    sl_status s = sl_gpuidx_init(&idx, n_layer, widths, &e);
    idx.vram_capacity_bytes = strtoull(argv[3], NULL, 10);
    for (uint32_t l = 0; l < n_layer && !s; l++) {
        uint32_t *list = calloc(widths[l] + 1, sizeof *list), n = 0;
        char *p = strchr(argv[first + l], ':');
        while (list && p && *++p) {
            list[n++] = (uint32_t)strtoul(p, &p, 10);
            if (*p != ',') break;
        }
        s = list ? sl_gpuidx_set_layer(&idx, l, list, n, &e) : SL_ERR_NOMEM;
        free(list);
    }
    if (!s) s = sl_gpuidx_write(argv[2], &idx, &o, &e);
    sl_gpuidx_free(&idx);
    free(widths);
    return s ? fail(s, &e) : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "read")) return do_read(argc, argv);
    if (argc >= 4 && !strcmp(argv[1], "write")) return do_write(argc, argv);
    fprintf(stderr, "usage: gpuidx_tool read FILE [N_LAYER [W0,W1,...]] | "
                    "write FILE VRAM [--gguf-magic] N:I,J,... ...\n");
    return 2;
}
