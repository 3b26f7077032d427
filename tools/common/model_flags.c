/* Shared flag parsing of the model-running commands (see model_flags.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/device/device.h"
#include "base/parse.h"
#include "scheduler/moe/fetch.h"
#include "scheduler/policy/placement.h"
#include "tools/common/model_flags.h"

void sl_cli_args_init(sl_cli_args *a, const char *cmd, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    a->i = 0;
    a->cur = -1;
}

/* The names of one option (the first is the one messages use) and whether the option may be
 * given more than once. Every command's aliases are here; a flag in no group is an option of
 * its own, not repeatable. A repeatable flag (llama.cpp's -ot, say) is a line with `true`. */
typedef struct flag_group {
    const char *names[4];
    bool repeatable;
} flag_group;

static const flag_group k_groups[] = {
    {{"-m", "--model"}, false},
    {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, false},
    {{"-t", "--threads"}, false},
    {{"-c", "--ctx-size", "--ctx"}, false},
    {{"-b", "--batch-size"}, false},
    {{"-p", "--prompt"}, false},
    {{"-f", "--file"}, false},
    {{"-n", "--n-predict"}, false},
    {{"-ctk", "--cache-type-k"}, false},
    {{"-ctv", "--cache-type-v"}, false},
    {{"-ot", "--override-tensor"}, true},
    {{"--cpu-moe", "-cmoe"}, false},
    {{"--n-cpu-moe", "-ncmoe"}, false},
    {{"-nr", "--no-repack"}, false},
    {{"-h", "--help"}, true},
    {{"--pin"}, true},          /* serve: one per pinned model */
};

static const flag_group *group_of(const char *name)
{
    for (size_t g = 0; g < sizeof k_groups / sizeof *k_groups; g++)
        for (int k = 0; k < 4 && k_groups[g].names[k]; k++)
            if (!strcmp(name, k_groups[g].names[k])) return &k_groups[g];
    return NULL;
}

static bool same_option(const sl_cli_given *g, const char *canon, const char *name)
{
    return g->canon ? canon && !strcmp(g->canon, canon) : !canon && !strcmp(g->as, name);
}

const sl_cli_given *sl_cli_given_get(const sl_cli_args *a, const char *name)
{
    const flag_group *grp = group_of(name);
    const char *canon = grp ? grp->names[0] : NULL;
    for (int i = 0; i < a->n_given; i++)
        if (same_option(&a->given[i], canon, name)) return &a->given[i];
    return NULL;
}

/* Records the current flag; 2 after printing why when it may not be given again. */
static int note_given(sl_cli_args *a)
{
    a->cur = -1;
    const flag_group *grp = group_of(a->flag);
    const sl_cli_given *prev = sl_cli_given_get(a, a->flag);
    if (prev && grp && (grp->repeatable || (a->models_repeat && !strcmp(grp->names[0], "-m"))))
        return 0;
    if (prev && !strcmp(prev->as, a->flag))
        return sl_cli_usage_error(a->cmd, "%s given twice", a->flag);
    if (prev)
        return sl_cli_usage_error(a->cmd, "%s given twice (first as %s)", a->flag, prev->as);
    if (a->n_given == SL_CLI_MAX_GIVEN)
        return sl_cli_usage_error(a->cmd, "more than %d flags", SL_CLI_MAX_GIVEN);
    sl_cli_given *g = &a->given[a->n_given];
    g->canon = grp ? grp->names[0] : NULL;
    snprintf(g->as, sizeof g->as, "%s", a->flag);
    g->value = NULL;
    a->cur = a->n_given++;
    return 0;
}

bool sl_cli_args_next(sl_cli_args *a)
{
    if (a->status || ++a->i >= a->argc) return false;
    a->arg = a->argv[a->i];
    a->inline_val = NULL;
    const char *eq = strncmp(a->arg, "--", 2) == 0 ? strchr(a->arg, '=') : NULL;
    size_t n = eq ? (size_t)(eq - a->arg) : strlen(a->arg);
    if (n >= sizeof a->flag) n = sizeof a->flag - 1; /* too long to be a known flag anyway */
    memcpy(a->flag, a->arg, n);
    a->flag[n] = 0;
    if (eq) a->inline_val = eq + 1;
    a->cur = -1;
    if (a->arg[0] == '-' && a->arg[1] && (a->status = note_given(a))) return false;
    return true;
}

bool sl_cli_is(const sl_cli_args *a, const char *n1, const char *n2)
{
    return !strcmp(a->flag, n1) || (n2 && !strcmp(a->flag, n2));
}

int sl_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sluice %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(tools/run %s --help for usage)\n", cmd);
    va_end(ap);
    return 2;
}

const char *sl_cli_value(sl_cli_args *a)
{
    const char *v = a->inline_val;
    if (!v && a->i + 1 >= a->argc) {
        sl_cli_usage_error(a->cmd, "%s needs a value", a->flag);
        return NULL;
    }
    if (!v) v = a->argv[++a->i];
    if (a->cur >= 0) a->given[a->cur].value = v;
    return v;
}

const char *sl_cli_device_value(sl_cli_args *a)
{
    const char *v = sl_cli_value(a);
    sl_error err = {0};
    if (v && sl_device_kind_check(a->flag, v, &err)) {
        sl_cli_usage_error(a->cmd, "%s", err.msg);
        return NULL;
    }
    return v;
}

int sl_cli_no_value(const sl_cli_args *a)
{
    return a->inline_val ? sl_cli_usage_error(a->cmd, "%s takes no value", a->flag) : 0;
}

int sl_cli_unknown(const sl_cli_args *a)
{
    if (a->arg[0] == '-' && a->arg[1])
        return sl_cli_usage_error(a->cmd, "unknown flag '%s'", a->flag);
    return sl_cli_usage_error(a->cmd, "unexpected argument '%s'", a->arg);
}

int sl_cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi,
                     int64_t *out)
{
    sl_error err;
    if (!sl_parse_i64(flag, s, (sl_irange){lo, hi}, out, &err)) return 0;
    return sl_cli_usage_error(cmd, "%s", err.msg);
}

int sl_cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out)
{
    sl_error err;
    if (!sl_parse_u64(flag, s, (sl_urange){0, UINT64_MAX}, out, &err)) return 0;
    return sl_cli_usage_error(cmd, "%s", err.msg);
}

int sl_cli_parse_f64(const char *cmd, const char *flag, const char *s, sl_frange r, double *out)
{
    sl_error err;
    if (!sl_parse_f64(flag, s, r, out, &err)) return 0;
    return sl_cli_usage_error(cmd, "%s", err.msg);
}

/* ---- model flags ------------------------------------------------------------------------ */

void sl_cli_model_flags_init(sl_cli_model_flags *f)
{
    memset(f, 0, sizeof *f);
    f->opt = sl_model_options_default();
    f->opt.progress = false;
}

const char *sl_cli_placement_name(sl_placement p)
{
    const char *name = sl_place_mode_name(p);
    return name ? name : "?";
}

/* Flags that contradict each other when given together: `clash` says whether the values do
 * (after both were read, so the order on the command line does not matter). Names are the
 * alias groups' first names. */
typedef struct conflict {
    const char *a, *b;
    bool (*clash)(const sl_cli_model_flags *f);
    const char *why;
} conflict;

static bool always(const sl_cli_model_flags *f) { return (void)f, true; }
static bool ngl_not_layers(const sl_cli_model_flags *f)
{
    return f->opt.placement != SL_PLACE_LAYERS;
}
static bool fetch_on_cpu(const sl_cli_model_flags *f)
{
    return f->sched_fetches && f->opt.placement == SL_PLACE_CPU;
}

static bool index_unread(const sl_cli_model_flags *f)
{
    return f->opt.placement != SL_PLACE_HOT_COLD && f->opt.placement != SL_PLACE_AUTO;
}
static bool ot_gpu_on_cpu(const sl_cli_model_flags *f)
{
    return f->opt.placement == SL_PLACE_CPU &&
           (strcasestr(f->ot_buf, "=cuda0") || strcasestr(f->ot_buf, "=gpu"));
}

static const conflict k_conflicts[] = {
    {"--gpu-index", "--placement", index_unread,
     "the neuron index is read by --placement hot-cold (and auto)"},
    {"-ot", "--placement", ot_gpu_on_cpu,
     "an override puts tensors on the GPU; --placement cpu keeps everything on the CPU"},
    {"-ngl", "--placement", ngl_not_layers, "-ngl puts layers on the GPU (--placement layers)"},
    {"--sched", "--placement", fetch_on_cpu,
     "a fetch mode copies experts to the GPU; --placement cpu keeps everything on the CPU"},
    {"--numa-node", "--cpus", always, "threads go on the node's CPUs or on the list, not both"},
};

/* 2 after printing "X V and Y W contradict: why" when the current flag clashes with one given
 * before; 0 otherwise. */
static int check_conflicts(const sl_cli_model_flags *f, const sl_cli_args *a)
{
    const sl_cli_given *cur = a->cur >= 0 ? &a->given[a->cur] : NULL;
    if (!cur) return 0;
    const char *name = cur->canon ? cur->canon : cur->as;
    for (size_t i = 0; i < sizeof k_conflicts / sizeof *k_conflicts; i++) {
        const conflict *c = &k_conflicts[i];
        const char *other = !strcmp(name, c->a) ? c->b : !strcmp(name, c->b) ? c->a : NULL;
        const sl_cli_given *o = other ? sl_cli_given_get(a, other) : NULL;
        if (o && c->clash(f))
            return sl_cli_usage_error(a->cmd, "%s %s and %s %s contradict: %s", o->as,
                                      o->value ? o->value : "", cur->as,
                                      cur->value ? cur->value : "", c->why);
    }
    return 0;
}

static int parse_int_flag(const sl_cli_args *a, const char *v, sl_irange r, int *out)
{
    int64_t n;
    if (sl_cli_parse_i64(a->cmd, a->flag, v, r.lo, r.hi, &n)) return 2;
    *out = (int)n;
    return 0;
}

/* One model flag (the caller found its name); 1 when consumed, 2 after a usage error. */
static int parse_model_flag(sl_cli_model_flags *f, sl_cli_args *a)
{
    const char *v;
    if (sl_cli_is(a, "-m", "--model")) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v) return sl_cli_usage_error(a->cmd, "%s: empty file name", a->flag);
        f->path = v;
    } else if (sl_cli_is(a, "--placement", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        sl_error e;
        if (sl_place_mode_parse(v, &f->opt.placement, &e))
            return sl_cli_usage_error(a->cmd, "--%s", e.msg);
        f->placement_given = true;
    } else if (sl_cli_is(a, "-ngl", "--gpu-layers") || sl_cli_is(a, "--n-gpu-layers", NULL)) {
        if (!(v = sl_cli_value(a)) || parse_int_flag(a, v, SL_RANGE_GPU_LAYERS,
                                                     &f->opt.gpu_layers))
            return 2;
        /* as llama.cpp: -ngl alone means "this many layers on the GPU" */
        if (!f->placement_given) f->opt.placement = SL_PLACE_LAYERS;
    } else if (sl_cli_is(a, "-ot", "--override-tensor")) {
        if (!(v = sl_cli_value(a))) return 2;
        sl_error err = {0};
        if (sl_place_overrides_check(v, &err))
            return sl_cli_usage_error(a->cmd, "%s '%s': %s", a->flag, v, err.msg);
        /* repeatable, as llama.cpp's: the lists join in the order given */
        const size_t used = strlen(f->ot_buf);
        if (used + strlen(v) + 2 > sizeof f->ot_buf)
            return sl_cli_usage_error(a->cmd, "%s: the overrides exceed %zu bytes", a->flag,
                                      sizeof f->ot_buf - 1);
        snprintf(f->ot_buf + used, sizeof f->ot_buf - used, "%s%s", used ? "," : "", v);
        f->opt.override_tensor = f->ot_buf;
    } else if (sl_cli_is(a, "--gpu-index", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v) return sl_cli_usage_error(a->cmd, "%s: empty file name", a->flag);
        f->opt.gpu_index = v;
    } else if (sl_cli_is(a, "--cpu-moe", "-cmoe")) {
        if (a->inline_val)
            return sl_cli_usage_error(a->cmd, "%s takes no value", a->flag);
        f->opt.cpu_moe = true;
    } else if (sl_cli_is(a, "-nr", "--no-repack")) {
        if (a->inline_val) return sl_cli_no_value(a);
        f->opt.no_repack = true;
    } else if (sl_cli_is(a, "--no-graphs", NULL)) {
        if (a->inline_val) return sl_cli_no_value(a);
        f->no_graphs = true;
    } else if (sl_cli_is(a, "--no-pdl", NULL)) {
        if (a->inline_val) return sl_cli_no_value(a);
        f->no_pdl = true;
    } else if (sl_cli_is(a, "--no-fusion", NULL)) {
        if (a->inline_val) return sl_cli_no_value(a);
        f->no_fusion = true;
    } else if (sl_cli_is(a, "--n-cpu-moe", "-ncmoe")) {
        if (!(v = sl_cli_value(a)) ||
            parse_int_flag(a, v, SL_RANGE_N_CPU_MOE, &f->opt.n_cpu_moe))
            return 2;
    } else if (sl_cli_is(a, "--vram-budget", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        sl_error err = {0};
        uint64_t b = 0;
        if (sl_parse_size(a->flag, v, (sl_urange){1, UINT64_MAX}, &b, &err))
            return sl_cli_usage_error(a->cmd, "%s", err.msg);
        f->opt.vram_budget = b;
    } else if (sl_cli_is(a, "--device", NULL)) {
        if (!(v = sl_cli_device_value(a))) return 2;
        f->opt.device = v;
    } else if (sl_cli_is(a, "--io", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!strcmp(v, "direct")) f->opt.io = SL_LOAD_DIRECT;
        else if (!strcmp(v, "pread")) f->opt.io = SL_LOAD_PREAD;
        else if (!strcmp(v, "mmap")) f->opt.io = SL_LOAD_MMAP;
        else return sl_cli_usage_error(a->cmd, "--io '%s': unknown (direct, pread, mmap)", v);
    } else if (sl_cli_is(a, "--numa-node", NULL)) {
        if (!(v = sl_cli_value(a)) || parse_int_flag(a, v, SL_RANGE_NUMA_NODE,
                                                     &f->opt.numa_node))
            return 2;
    } else if (sl_cli_is(a, "--cpus", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v || strspn(v, "0123456789,-") != strlen(v))
            return sl_cli_usage_error(a->cmd, "--cpus '%s': not a CPU list like 0-7,16", v);
        f->opt.cpus = v;
    } else if (sl_cli_is(a, "-t", "--threads")) {
        if (!(v = sl_cli_value(a)) || parse_int_flag(a, v, SL_RANGE_N_THREADS,
                                                     &f->opt.n_threads))
            return 2;
    } else if (sl_cli_is(a, "--sched", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        /* the engine's own parser, so that a bad value stops here, before the model loads */
        sl_fetch_options fo = sl_fetch_options_default();
        char pins[1024];
        sl_error err = {0};
        if (sl_fetch_options_parse(&fo, v, pins, sizeof pins, &err))
            return sl_cli_usage_error(a->cmd, "--sched '%s': %s", v, err.msg);
        if (strlen(v) + 16 > sizeof f->sched_buf)
            return sl_cli_usage_error(a->cmd, "--sched: longer than %zu bytes",
                                      sizeof f->sched_buf - 16);
        f->sched = v;
        f->sched_fetches = fo.mode != SL_FETCH_CPU;
    } else if (sl_cli_is(a, "--trace", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v) return sl_cli_usage_error(a->cmd, "%s: empty file name", a->flag);
        f->trace = v;
    } else {
        return 0;
    }
    return 1;
}

int sl_cli_model_flags_parse(sl_cli_model_flags *f, sl_cli_args *a)
{
    const int r = parse_model_flag(f, a);
    return r == 1 && check_conflicts(f, a) ? 2 : r;
}

void sl_cli_ctx_sched(sl_cli_model_flags *f, sl_ctx_options *co)
{
    co->no_graphs = f->no_graphs;
    co->no_pdl = f->no_pdl;
    co->no_fusion = f->no_fusion;
    if (!f->sched && !f->trace) return;
    snprintf(f->sched_buf, sizeof f->sched_buf, "%s%s%s", f->sched ? f->sched : "",
             f->sched && f->trace ? " " : "", f->trace ? "trace=1" : "");
    co->sched = f->sched_buf;
}

int sl_cli_ctx_create(sl_cli_model_flags *f, const char *cmd, sl_model *m, sl_ctx_options *co,
                      sl_ctx **out)
{
    sl_error err = {0};
    sl_cli_ctx_sched(f, co);
    const sl_status st = sl_ctx_create(m, co, out, &err);
    if (st) {
        const bool config = st == SL_ERR_INVALID &&
                            (strstr(err.msg, "scheduler option") || strstr(err.msg, "SLUICE_") ||
                             strstr(err.msg, "pin"));
        fprintf(stderr, "sluice %s: %s: context: %s%s\n", cmd, f->path ? f->path : "model",
                err.msg, f->sched && strstr(err.msg, "scheduler option") ? " (--sched)" : "");
        return config ? 2 : 1;
    }
    if (f->trace) {
        sl_ctx_stats s;
        sl_ctx_stats_get(*out, &s);
        if (!s.moe_scheduler || strcmp(s.moe_scheduler, "fetch")) {
            fprintf(stderr, "sluice %s: --trace %s: the %s scheduler records no trace (needs a "
                            "MoE model, --sched mode=post|full|auto and the sim device)\n",
                    cmd, f->trace, s.moe_scheduler ? s.moe_scheduler : "(no MoE)");
            sl_ctx_destroy(*out);
            *out = NULL;
            return 1;
        }
    }
    return 0;
}

int sl_cli_trace_finish(const sl_cli_model_flags *f, const char *cmd, const sl_ctx *c,
                        const char *path)
{
    if (!f->trace) return 0;
    sl_error err = {0};
    if (sl_ctx_trace_write(c, path, &err)) {
        if (strstr(err.msg, f->trace))
            fprintf(stderr, "sluice %s: --trace: %s\n", cmd, err.msg);
        else
            fprintf(stderr, "sluice %s: --trace %s: %s\n", cmd, f->trace, err.msg);
        return 1;
    }
    return 0;
}

int sl_cli_kv_flag_parse(sl_cli_args *a, bool *kv_f16)
{
    const bool k = sl_cli_is(a, "-ctk", "--cache-type-k");
    if (!k && !sl_cli_is(a, "-ctv", "--cache-type-v")) return 0;
    const char *v = sl_cli_value(a);
    if (!v) return 2;
    if (!strcmp(v, "f16")) *kv_f16 = true;
    else if (!strcmp(v, "f32")) *kv_f16 = false;
    else return sl_cli_usage_error(a->cmd, "%s '%s': unknown (f16, f32)", a->flag, v);
    const sl_cli_given *o = sl_cli_given_get(a, k ? "-ctv" : "-ctk");
    if (o && o->value && strcmp(o->value, v))
        return sl_cli_usage_error(a->cmd, "%s %s and %s %s contradict: the engine has one KV "
                                  "cache type for K and V", o->as, o->value, a->flag, v);
    return 1;
}

int sl_cli_ctx_flags_parse(sl_cli_args *a, int64_t min_ctx, int64_t *n_ctx, int64_t *n_batch)
{
    const bool c = sl_cli_is(a, "-c", "--ctx-size") || sl_cli_is(a, "--ctx", NULL);
    if (!c && !sl_cli_is(a, "-b", "--batch-size")) return 0;
    const char *v = sl_cli_value(a);
    if (!v) return 2;
    const int64_t lo = c ? min_ctx : SL_RANGE_N_BATCH.lo;
    const int64_t hi = c ? SL_RANGE_N_CTX.hi : SL_RANGE_N_BATCH.hi;
    return sl_cli_parse_i64(a->cmd, a->flag, v, lo, hi, c ? n_ctx : n_batch) ? 2 : 1;
}

void sl_cli_model_flags_help(FILE *out)
{
    fputs("model and placement:\n"
          "  -m, --model FILE       GGUF model (first shard of a set)\n"
          "  --placement P          where weights live (default auto):\n",
          out);
    for (int m = 0; m < SL_PLACE_COUNT; m++) {
        const sl_place_mode_info *i = sl_place_mode_info_get((sl_placement)m);
        fprintf(out, "      %-12s %s\n", i->name, i->help);
    }
    fputs(          "  --gpu-index FILE       PowerInfer neuron index (.gpuidx; default: MODEL.generated.\n"
          "                         gpuidx beside the model, which auto then uses too)\n"
          "  -ngl, --gpu-layers N   layers on the GPU (implies --placement layers)\n"
          "  --device D             cuda | sim (CPU-simulated GPU) | auto (default:\n"
          "                         $SLUICE_DEVICE, then auto; where auto finds no CUDA\n"
          "                         device, --placement auto puts everything on the CPU)\n"
          "  --io M                 how weights are read: direct (O_DIRECT, default) | pread |\n"
          "                         mmap\n"
          "  --numa-node N          host memory and threads on NUMA node N (default: nearest\n"
          "                         the GPU)\n"
          "  --cpus LIST            compute threads on these CPUs (\"0-7,16\"); not with\n"
          "                         --numa-node\n"
          "  -t, --threads N        CPU compute threads, 1..1024 (default, or 0: the CPUs of\n"
          "                         --numa-node or --cpus, else all; on 4 or more, one fewer\n"
          "                         when the layers compute on both the GPU and the CPU)\n"
          "  -nr, --no-repack       keep Q4_K weights as stored (default: the CPU's Q4_K\n"
          "                         matrices are repacked at load into Q4_K_R8, eight rows\n"
          "                         interleaved; the same logits, faster CPU matvecs)\n"
          "  --no-graphs            cuda: launch a decode token's kernels one by one (default:\n"
          "                         a model whose layers all run on the GPU, host experts in\n"
          "                         stream order aside, captures its first\n"
          "                         token into a CUDA graph and replays it: same logits, one\n"
          "                         launch a token)\n"
          "  --no-pdl               cuda: launch kernels in plain stream order (default on\n"
          "                         compute capability 9.0+: programmatic dependent launch,\n"
          "                         a kernel's launch overlaps the end of the one before;\n"
          "                         same logits)\n"
          "  --no-fusion            cuda: launch separately the steps fused by default (norm +\n"
          "                         Q/K/V, wo + add + norm, router + top-k, experts' gate/up +\n"
          "                         SwiGLU, down + combine): same logits, more launches\n"
          "MoE scheduler:\n"
          "  --sched \"K=V ...\"      scheduler options over $SLUICE_POSTFETCH_*: mode=cpu\n"
          "                         (default) | post | full | auto, block_on_miss=0|1,\n"
          "                         max_transfers=N, scratch_kb=N, cache_kb=N, policy=lru|lfu,\n"
          "                         decay=X, pin=L:E,..., hot_kb=N, hot_warm=N, uploads=N,\n"
          "                         order=stream|sync (a device layer's host experts: a host\n"
          "                         function on the stream, or after a blocking sync);\n"
          "                         mode=cpu hot_kb=N: each layer's most routed experts (of\n"
          "                         its first hot_warm assignments) resident in N KiB, run on\n"
          "                         the GPU beside the CPU's, no wait; + cache_kb=M uploads=U:\n"
          "                         at most U more go up per layer and step by decayed\n"
          "                         frequency into M KiB,\n"
          "                         streams=dedicated|shared, debug=0|1, trace=0|1,\n"
          "                         cpu_gbs/pcie_gbs/dev_gbs/dram_gbs=X (scheduler/moe/fetch.h),\n"
          "                         prefill_stream=N (a batch of >= N tokens, default 32,\n"
          "                         copies a device layer's host experts to the GPU and\n"
          "                         computes them there; 0: never),\n"
          "                         mode=cpu defer=D: Expert Deferral (KTransformers'; opt-in,\n"
          "                         other numerics): each token's D lowest-weighted experts\n"
          "                         join the next layer's sum, computed while the GPU runs it\n"
          "  --trace FILE           write the scheduler's copy/compute spans as Chrome/Perfetto\n"
          "                         trace JSON after the run (adds trace=1; needs a fetch mode)\n"
          "Numbers are decimal (base/parse.h: no blanks, '+', hex, inf or nan). Each flag may\n"
          "be given once (-h excepted); -ngl or --sched with a fetch mode together with\n"
          "--placement cpu, --numa-node with --cpus, and -ctk/-ctv of different types\n"
          "contradict each other and are refused.\n",
          out);
}

int sl_cli_model_open_in(const sl_cli_model_flags *f, const char *cmd, sl_runtime *rt,
                         const char *path, sl_model **out)
{
    sl_error err = {0};
    if (rt ? sl_model_open_in(rt, path, &f->opt, out, &err)
           : sl_model_open(path, &f->opt, out, &err)) {
        /* engine messages usually name the file already; say it once either way */
        if (strstr(err.msg, path))
            fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
        else
            fprintf(stderr, "sluice %s: %s: %s\n", cmd, path, err.msg);
        return 1;
    }
    return 0;
}

int sl_cli_model_open(const sl_cli_model_flags *f, const char *cmd, sl_model **out)
{
    return sl_cli_model_open_in(f, cmd, NULL, f->path, out);
}

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the logits file format is little-endian float32: add a byte swap for this target"
#endif

int sl_cli_logits_write(FILE *f, const char *cmd, const char *path, const float *rows,
                        int64_t n_rows, int32_t n_vocab)
{
    const size_t n = (size_t)n_rows * (size_t)n_vocab;
    if (fwrite(rows, sizeof *rows, n, f) != n) {
        fprintf(stderr, "sluice %s: %s: write failed: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    return 0;
}

int sl_cli_logits_check(const char *cmd, const char *flag, const char *path, const float *row,
                        int32_t n_vocab, int64_t row_index, const char *where)
{
    for (int32_t c = 0; c < n_vocab; c++) {
        if (isfinite(row[c])) continue;
        fprintf(stderr, "sluice %s: %s %s: row %" PRId64 "%s%s%s, column %" PRId32 " (byte %" PRId64
                        "): %g; a logits file holds finite float32 values\n",
                cmd, flag, path, row_index, where ? " (" : "", where ? where : "",
                where ? ")" : "", c, (row_index * n_vocab + c) * 4, (double)row[c]);
        return 1;
    }
    return 0;
}
