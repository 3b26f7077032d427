/* Flag parsing shared by the commands that run a model (generate, perplexity, eval, bench
 * decode, demo): an argv walker that accepts "--flag value" and "--flag=value", strict number
 * parsers, and the model/placement flags (names follow llama.cpp where the concept is the same):
 *
 *   -m, --model FILE          --placement auto|gpu|layers|experts-cpu|cpu
 *   -ngl, --n-gpu-layers N    -ot, --override-tensor R=B    --cpu-moe   --n-cpu-moe N
 *   --vram-budget SIZE        --device cuda|sim|auto        --io direct|pread|mmap
 *   --numa-node N             --cpus LIST                   -t, --threads N
 *   --no-graphs               --no-pdl                      --no-fusion
 *
 * Conventions (every command): a usage error prints "sluice CMD: FLAG 'VALUE': why" (numbers:
 * "sluice CMD: FLAG: 'VALUE' is outside [lo, hi]", base/parse.h's wording) to stderr and the
 * command exits 2; a file or engine error names the file and exits 1. Numbers follow
 * base/parse.h's grammar (decimal; blanks, "+", hex, inf/nan and trailing text refused) and
 * a flag that sets an engine option is checked against the engine's own range (sluice.h's
 * SL_RANGE_*), so that what the CLI accepts the engine accepts.
 *
 * Flags given twice and flags that contradict each other: the walker records every flag given
 * (sl_cli_given: its alias group, spelling and value). A second use of a flag (under any of its
 * names) is an error "-m given twice" unless its group is marked repeatable in model_flags.c's
 * table; contradicting pairs (-ngl or --sched mode=post with --placement cpu, ...) are a table
 * there too, checked as soon as the second flag of a pair arrives. New flags join by a line in
 * each table. No global state: everything lives in the caller's structs. */
#ifndef SL_CLI_MODEL_FLAGS_H
#define SL_CLI_MODEL_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/sluice.h"

/* One flag given on the command line. */
typedef struct sl_cli_given {
    const char *canon;     /* its alias group's first name ("-m" for "--model"), or NULL: the
                              flag is in no group and `as` is its name */
    char as[32];           /* as spelled ("--model"), cut to 31 bytes */
    const char *value;     /* its value once sl_cli_value read it, else NULL */
} sl_cli_given;

enum { SL_CLI_MAX_GIVEN = 64 };

/* Walks argv[1..argc): sl_cli_args_next sets `flag` (the name without "=value") and returns
 * true while flags remain. */
typedef struct sl_cli_args {
    const char *cmd;       /* "generate", "bench decode", ... for messages */
    int argc;
    char **argv;
    int i;                 /* index of the current flag */
    const char *arg;       /* argv[i] as given */
    char flag[64];         /* its name: "--ctx-size" for "--ctx-size=512" */
    const char *inline_val;/* the text after '=' or NULL */
    sl_cli_given given[SL_CLI_MAX_GIVEN]; /* flags so far, first use of each */
    int n_given;
    int cur;               /* given[] index of the current flag, -1: a repeat or not a flag */
    int status;            /* 2 once sl_cli_args_next refused a flag (after printing why) */
    bool models_repeat;    /* -m may be given more than once (serve's several models) */
} sl_cli_args;

void sl_cli_args_init(sl_cli_args *a, const char *cmd, int argc, char **argv);
/* False at the end, or when the next flag repeats one given before (not repeatable): then it
 * prints "sluice CMD: -m given twice" and sets a->status = 2, which the caller returns. */
bool sl_cli_args_next(sl_cli_args *a);
/* The record of flag `name` (or any name of its alias group) if it was given, else NULL. */
const sl_cli_given *sl_cli_given_get(const sl_cli_args *a, const char *name);
/* Whether the current flag is n1 or n2 (n2 may be NULL). */
bool sl_cli_is(const sl_cli_args *a, const char *n1, const char *n2);
/* The current flag's value ("=value" or the next argument); NULL after printing "FLAG needs a
 * value" (the caller returns 2). */
const char *sl_cli_value(sl_cli_args *a);
/* A flag that takes no value given one ("--json=1"): prints "FLAG takes no value", returns 2;
 * else 0. */
int sl_cli_no_value(const sl_cli_args *a);
/* The current flag's value as a device kind (cuda, sim, auto): NULL after printing why (the
 * caller returns 2). */
const char *sl_cli_device_value(sl_cli_args *a);
/* Prints "sluice CMD: unknown flag 'X'" (or "unexpected argument") with a help hint; returns 2. */
int sl_cli_unknown(const sl_cli_args *a);
/* Prints "sluice CMD: " + message + help hint to stderr; returns 2. */
int sl_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* base/parse.h's readers for flags: 0 on success; otherwise print "sluice CMD: FLAG: 'S' is
 * outside [lo, hi]" (or why it is not a number) and return 2. u64: any 64-bit value. */
int sl_cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi,
                     int64_t *out);
int sl_cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out);
int sl_cli_parse_f64(const char *cmd, const char *flag, const char *s, sl_frange r,
                     double *out);

/* The model flags and their values. */
typedef struct sl_cli_model_flags {
    const char *path;          /* -m; NULL until given */
    sl_model_options opt;      /* from sl_model_options_default(), progress off */
    bool placement_given;
    const char *sched;         /* --sched "key=value ..." (scheduler/moe/fetch.h) or NULL */
    bool sched_fetches;        /* --sched asks for a mode other than cpu */
    const char *trace;         /* --trace FILE or NULL */
    bool no_graphs;            /* --no-graphs (sl_ctx_options.no_graphs) */
    bool no_pdl;               /* --no-pdl (sl_ctx_options.no_pdl) */
    bool no_fusion;            /* --no-fusion (sl_ctx_options.no_fusion) */
    char sched_buf[1024];      /* sched plus " trace=1" when --trace is given */
    char ot_buf[2048];         /* every -ot list, joined by ',' (opt.override_tensor) */
} sl_cli_model_flags;

void sl_cli_model_flags_init(sl_cli_model_flags *f);
/* If the current flag is a model flag, consumes it (and its value) and returns 1; returns 0 if
 * it is not one; returns 2 after printing a usage error. */
int sl_cli_model_flags_parse(sl_cli_model_flags *f, sl_cli_args *a);
/* The help lines of the model flags (two-space indent, as the commands' usage). */
void sl_cli_model_flags_help(FILE *out);
/* Sets the context options the model flags carry: co->sched from --sched and --trace (which
 * adds trace=1; f must outlive the context's creation), co->no_graphs, co->no_pdl and
 * co->no_fusion from --no-graphs, --no-pdl and --no-fusion. */
void sl_cli_ctx_sched(sl_cli_model_flags *f, sl_ctx_options *co);
/* sl_cli_ctx_sched + sl_ctx_create; on failure prints "sluice CMD: MODEL: context: message" and
 * returns 2 for a scheduler configuration the engine refuses (--sched or SLUICE_POSTFETCH_*),
 * else 1. With --trace, a context whose MoE scheduler records no trace (dense model, mode cpu,
 * a device other than sim) is an error naming the file (1). */
int sl_cli_ctx_create(sl_cli_model_flags *f, const char *cmd, sl_model *m, sl_ctx_options *co,
                      sl_ctx **out);
/* After the run: with --trace, sl_ctx_trace_write to `path` (the name fileio.h's output for
 * --trace gives); on failure prints "sluice CMD: --trace FILE: message" and returns 1. 0
 * otherwise. */
int sl_cli_trace_finish(const sl_cli_model_flags *f, const char *cmd, const sl_ctx *c,
                        const char *path);
/* "auto", "gpu", ... */
const char *sl_cli_placement_name(sl_placement p);
/* Opens f->path; on failure prints "sluice CMD: FILE: message" and returns the exit status
 * (1). */
int sl_cli_model_open(const sl_cli_model_flags *f, const char *cmd, sl_model **out);
/* The same for path, opened into rt (sl_model_open_in) unless rt is NULL. */
int sl_cli_model_open_in(const sl_cli_model_flags *f, const char *cmd, sl_runtime *rt,
                         const char *path, sl_model **out);

/* Whether the model adds a BOS token when tokenizing with add_special (asked through the public
 * API: the tokens of "" with add_special start with info.bos). */
bool sl_cli_model_adds_bos(const sl_model *m);

/* KV cache type flags (llama.cpp's names): -ctk/--cache-type-k T and -ctv/--cache-type-v T,
 * T = f16 | f32. The engine has one type for K and V: either flag sets both. Same return
 * convention as sl_cli_model_flags_parse. */
int sl_cli_kv_flag_parse(sl_cli_args *a, bool *kv_f16);
/* Context flags: -c/--ctx-size/--ctx N in [min_ctx, SL_RANGE_N_CTX.hi] and -b/--batch-size N
 * in SL_RANGE_N_BATCH. Same return convention as sl_cli_model_flags_parse. */
int sl_cli_ctx_flags_parse(sl_cli_args *a, int64_t min_ctx, int64_t *n_ctx, int64_t *n_batch);
#define SL_CLI_KV_HELP                                                                          \
    "  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"                                      \
    "                         KV cache type f16 | f32 (one type for K and V; default %s)\n"

/* Sampling flags (generate's names): --temp, --top-k, --top-p, --min-p, --seed, with the
 * library's ranges (sluice.h SL_RANGE_*). Same return convention as sl_cli_model_flags_parse. */
int sl_cli_sampling_flags_parse(sl_cli_args *a, sl_sampler_options *so);
/* sl_tokenize into a malloc'd array; on failure prints "sluice CMD: MODEL: why" and
 * returns 1. */
int sl_cli_tokenize(const sl_model *m, const char *cmd, const char *model_path, const char *text,
                    size_t len, bool add_special, bool parse_special, int32_t **out,
                    size_t *n_out);

/* The text of token tok (control tokens give "") into *buf, grown as needed (*cap bytes);
 * *n its bytes, NUL-terminated. 1 on failure (err names it, or is empty when out of memory). */
int sl_cli_token_piece(const sl_model *m, int32_t tok, char **buf, size_t *cap, size_t *n,
                       sl_error *err);

/* The logits file format of eval and perplexity (--logits-out, --kl-divergence-base):
 * float32 little-endian, row-major [rows][n_vocab], no header; size = rows * n_vocab * 4.
 * Appends n_rows rows to f; on failure prints "sluice CMD: PATH: why" and returns 1. */
int sl_cli_logits_write(FILE *f, const char *cmd, const char *path, const float *rows,
                        int64_t n_rows, int32_t n_vocab);
/* A row read back from a logits file must be finite: on NaN or an infinity prints "sluice CMD:
 * FLAG PATH: row R, column C (byte B): nan; ..." and returns 1 (R: the row's index in the
 * file; `where` may add its meaning, e.g. "chunk 2, position 40"); 0 when all are finite. */
int sl_cli_logits_check(const char *cmd, const char *flag, const char *path, const float *row,
                        int32_t n_vocab, int64_t row_index, const char *where);

#endif
