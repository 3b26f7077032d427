/* tools/commands/perplexity_swap: the hot-swap loop of `perplexity` (ik_llama.cpp's workflow):
 * reload pending changes, measure, run the pre-reload script, reload; repeat until a reload
 * changes nothing. Enabled by --hotswap or SLUICE_HOTSWAP_ENABLED=1 (LLAMA_HOTSWAP_ENABLED);
 * the script by --pre-reload-script or SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT
 * (LLAMA_PERPLEXITY_PRE_RELOAD_SCRIPT), run with /bin/sh, its round number in
 * SLUICE_HOTSWAP_ROUND. */
#ifndef SL_TOOLS_CLI_PERPLEXITY_SWAP_H
#define SL_TOOLS_CLI_PERPLEXITY_SWAP_H

#include <stdbool.h>

#include "runtime/sluice.h"

typedef struct sl_cli_hotswap {
    bool on, json;
    const char *script;         /* NULL: none */
    int round;                  /* rounds measured so far */
    double first_ppl;
    sl_reload_report pending;   /* what the reload before the current round did */
} sl_cli_hotswap;

/* SLUICE_HOTSWAP_ENABLED (else LLAMA_HOTSWAP_ENABLED), a boolean by base/parse.h's rule, into
 * *on (false when unset); 2 after printing "sluice CMD: VAR: ..." for a bad value. Shared by
 * perplexity and serve (whose /health then reloads). */
int sl_cli_hotswap_env(const char *cmd, bool *on);
/* Flags first, then the environment (an invalid SLUICE_HOTSWAP_ENABLED is a usage error: 2). */
int sl_cli_hotswap_init(sl_cli_hotswap *h, bool flag, const char *script, bool json);
/* Before the first round: applies what is pending. 0 or 1 (error printed). */
int sl_cli_hotswap_begin(sl_cli_hotswap *h, sl_model *m);
/* After a round: prints it (text: the reloaded tensors; json: one record), runs the script and
 * reloads. *again: measure another round. Returns 0, 1 (error) or the script's failing status. */
int sl_cli_hotswap_end(sl_cli_hotswap *h, sl_model *m, double ppl, double ppl_err, double secs,
                       bool *again);
void sl_cli_hotswap_free(sl_cli_hotswap *h);

#endif
