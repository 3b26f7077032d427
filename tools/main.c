/* sluice: the single CLI entry behind tools/run. Dispatches to one file per command. */
#include <stdio.h>
#include <string.h>

#include "tools/common/cli.h"
#include "tools/common/fileio.h"

typedef struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command k_commands[] = {
    {"demo", sl_cli_demo, "the main job: make the default model and run it end to end"},
    {"generate", sl_cli_generate, "generate text from a prompt (prefill + decode tok/s)"},
    {"perplexity", sl_cli_perplexity, "perplexity of a text file, KL divergence vs a saved run"},
    {"eval", sl_cli_eval, "logits of raw token ids (float32 file or summary)"},
    {"serve", sl_cli_serve, "HTTP server with llama-server's endpoints (OpenAI API, SSE)"},
    {"place", sl_cli_place, "where each tensor lives under the placement flags (place show)"},
    {"requant", sl_cli_requant, "rewrite a tensor (or a regex of them) in another type"},
    {"inspect", sl_cli_inspect, "print a GGUF file's header, metadata and tensor table"},
    {"mkmodel", sl_cli_mkmodel, "write a synthetic model of a real architecture"},
    {"bench", sl_cli_bench, "benchmarks: gguf, alloc, copy, kernels, decode"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tools/run <command> [flags]   (tools/run <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return sl_cli_stdout_close("help");
    }
    /* a --help text runs past stdio's 4 KiB block, and glibc drops the rest of a block whose
     * write failed: one buffer for the whole text lets the final flush see a full disk's
     * errno (sl_cli_stdout_close) instead of "an earlier write failed" */
    char help_buf[1 << 16]; /* glibc ignores setvbuf's size without a buffer; stdout is
                               closed below, while this frame lives */
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            setvbuf(stdout, help_buf, _IOFBF, sizeof help_buf);
            break;
        }
    sl_fault_plan fault_plan; /* this frame outlives every command */
    sl_fault_hook fault_hook;
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        if (strcmp(argv[1], k_commands[i].name)) continue;
        if (sl_cli_fault_env_install(&fault_plan, &fault_hook)) return 1;
        const int rc = k_commands[i].fn(argc - 1, argv + 1);
        sl_fault_install(NULL); /* before this frame goes */
        /* output lost to a full disk or a closed pipe is a failure, whatever the command did */
        const int out = sl_cli_stdout_close(k_commands[i].name);
        return rc ? rc : out;
    }
    fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
