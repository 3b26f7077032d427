/* llama.cpp as a peer (issue 14): where its tools are, and what their output means.
 *
 * The binaries (llama-bench, llama-perplexity, llama-completion) come from tools/peer/llama.cpp,
 * which builds them into an ignored folder. They are found, in order, in
 *   1. $SLUICE_PEER_LLAMA_BIN (a folder; tests point it at fakes), then
 *   2. the folder `$SLUICE_ROOT/tools/peer/llama.cpp --print-bin` prints (tools/run exports
 *      SLUICE_ROOT, the checkout it runs from).
 * Parsers take text as the tools print it, (ptr, len), need not be NUL-terminated, and never
 * trust it: a missing or ill-typed field is SL_ERR_FORMAT naming it. No state; thread-safe. */
#ifndef SL_CLI_PEER_LLAMA_H
#define SL_CLI_PEER_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

enum { SL_PEER_MAX_SAMPLES = 64 };

/* One test object of `llama-bench -o json` (fields of llama-bench.cpp's test::get_fields). */
typedef struct sl_peer_bench_row {
    char model_type[128];      /* "gemma3 270M Q4_K - Medium" */
    char backend[32];          /* "CPU" */
    char build_commit[32];
    uint64_t model_size;       /* bytes */
    uint64_t model_n_params;
    int64_t n_threads, n_prompt, n_gen, n_depth;
    double avg_ts, stddev_ts;  /* tokens/s: mean and sample stddev of samples_ts */
    double samples_ts[SL_PEER_MAX_SAMPLES];
    size_t n_samples;          /* min(len(samples_ts), SL_PEER_MAX_SAMPLES) */
} sl_peer_bench_row;

/* The folder holding llama.cpp's tools (see above) into dir (cap bytes). SL_ERR_NOT_FOUND with
 * a message saying how to build them when neither source names an existing folder. */
sl_status sl_peer_bin_dir(char *dir, size_t cap, sl_error *err);

/* Parses llama-bench's JSON output (an array of test objects) into rows (at most cap; *n the
 * count). Extra fields are ignored; SL_ERR_RANGE past cap. */
sl_status sl_peer_bench_parse(const char *text, size_t len, sl_peer_bench_row *rows, size_t cap,
                              size_t *n, sl_error *err);

/* Runs `BIN/llama-bench -m model -p P -n N -d D -t T -r reps -o json` (no -d for depth 0) and
 * parses its tests into rows (at most cap). A non-zero exit is SL_ERR_IO with the tail of its
 * standard error. */
sl_status sl_peer_bench_run(const char *bin, const char *model, int64_t n_prompt, int64_t n_gen,
                            int64_t n_depth, int64_t threads, int64_t reps,
                            sl_peer_bench_row *rows, size_t cap, size_t *n, sl_error *err);

/* "pp128", "tg64", "pp128+tg64", with " @ d512" for a depth: llama-bench's test name. */
void sl_peer_test_name(int64_t n_prompt, int64_t n_gen, int64_t n_depth, char *buf, size_t cap);

/* The last "Final estimate: PPL = X +/- Y" of llama-perplexity's log (perplexity.cpp's line;
 * Sluice's perplexity prints the same). SL_ERR_NOT_FOUND when absent. */
sl_status sl_peer_ppl_parse(const char *text, size_t len, double *ppl, double *ppl_err,
                            sl_error *err);

/* The generated text of `llama-completion --no-display-prompt` (its standard output): the
 * output less the "\n\n" it always ends with and the " [end of text]\n" marker it prints before
 * that at an end-of-generation token. Returns the length of text to keep. */
size_t sl_peer_completion_text(const char *text, size_t len);

#endif
