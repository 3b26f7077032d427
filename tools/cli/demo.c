/* `tools/run demo`: the README's main job, end to end on the CPU:
 *   1. mkmodel writes the default synthetic model (a small qwen3moe, mkmodel's defaults);
 *   2. a short summary of it as the engine sees it (sl_model_info);
 *   3. generate: -n tokens greedily from a fixed prompt, placement cpu, printing the text and
 *      prefill/decode tok/s (tools/cli/generate.c does the work).
 * The weights are random, so the text is noise; the point is that the whole path runs. Takes
 * about a second on a 2-core machine without a GPU. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cli/cli.h"
#include "tools/cli/model_flags.h"

static const char *const k_cmd = "demo";
static const char *const k_prompt = "Once upon a time, in a small town by the sea,";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tools/run demo [--dir DIR] [-n N]\n"
            "  Runs Sluice end to end on the CPU: writes the default synthetic model (mkmodel's\n"
            "  defaults: a small qwen3moe) to DIR (default $TMPDIR or /tmp) as\n"
            "  sluice-default.gguf, prints a short summary of it, then generates N tokens\n"
            "  (default 16) greedily from the prompt \"%s\"\n"
            "  with `generate --temp 0 --placement cpu`, printing the text and prefill/decode\n"
            "  tok/s. The weights are random: the text is noise.\n",
            k_prompt);
}

int sl_cli_demo(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    const char *n_s = "16";
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(dir = sl_cli_value(&a))) return 2;
            if (!*dir) return sl_cli_usage_error(k_cmd, "--dir: empty folder name");
        } else if (sl_cli_is(&a, "-n", "--n-predict")) {
            int64_t n;
            if (!(n_s = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, n_s, 1, 200, &n))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/sluice-default.gguf", dir) >= sizeof path)
        return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
    const double t0 = sl_cli_now_s();

    printf("== 1. mkmodel: the default synthetic model -> %s\n", path);
    fflush(stdout);
    char *mk[] = {"mkmodel", "-o", path, NULL};
    int rc = sl_cli_mkmodel(3, mk);
    if (rc) return rc;

    printf("\n== 2. the model, as the engine loads it\n");
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    mf.path = path;
    mf.opt.placement = SL_PLACE_CPU;
    sl_model *m = NULL;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &m))) return rc;
    sl_model_info in;
    sl_model_info_get(m, &in);
    printf("  arch %s, %" PRId32 " layers, dim %" PRId32 ", %" PRId32 " heads (%" PRId32
           " KV) of %" PRId32 ", vocab %" PRId32 ", context %" PRId32 "\n",
           in.arch, in.n_layer, in.n_embd, in.n_head, in.n_head_kv, in.head_dim, in.n_vocab,
           in.n_ctx_train);
    if (in.n_expert)
        printf("  %" PRId32 " experts per layer, top-%" PRId32 ", expert FFN %" PRId32 "\n",
               in.n_expert, in.n_expert_used, in.n_ff_exp);
    printf("  %.2f M parameters, %.2f MB of weights (host %.2f MB, GPU %.2f MB); BOS %" PRId32
           ", EOS %" PRId32 "\n",
           in.n_params / 1e6, in.weight_bytes / 1e6, in.host_bytes / 1e6, in.gpu_bytes / 1e6,
           in.bos, in.eos);
    sl_model_close(m);

    printf("\n== 3. generate %s tokens greedily on the CPU from \"%s\"\n"
           "   (tools/run generate -m %s -p PROMPT -n %s --temp 0 --placement cpu)\n",
           n_s, k_prompt, path, n_s);
    fflush(stdout);
    char *gen[] = {"generate", "-m", path, "-p", (char *)k_prompt, "-n", (char *)n_s, "--temp",
                   "0", "--placement", "cpu", NULL};
    rc = sl_cli_generate(11, gen);
    if (rc) return rc;
    printf("\n");
    printf("== done in %.1f s: wrote a synthetic %s model, loaded it on the CPU, tokenized the "
           "prompt,\n   prefilled it in one batch and decoded %s tokens with the greedy sampler "
           "(random weights: the text is noise)\n",
           sl_cli_now_s() - t0, in.arch, n_s);
    return 0;
}
