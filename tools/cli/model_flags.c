/* Shared flag parsing of the model-running commands (see model_flags.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/fetch.h"
#include "tools/cli/model_flags.h"

void sl_cli_args_init(sl_cli_args *a, const char *cmd, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    a->i = 0;
}

bool sl_cli_args_next(sl_cli_args *a)
{
    if (++a->i >= a->argc) return false;
    a->arg = a->argv[a->i];
    a->inline_val = NULL;
    const char *eq = strncmp(a->arg, "--", 2) == 0 ? strchr(a->arg, '=') : NULL;
    size_t n = eq ? (size_t)(eq - a->arg) : strlen(a->arg);
    if (n >= sizeof a->flag) n = sizeof a->flag - 1; /* too long to be a known flag anyway */
    memcpy(a->flag, a->arg, n);
    a->flag[n] = 0;
    if (eq) a->inline_val = eq + 1;
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
    if (a->inline_val) return a->inline_val;
    if (a->i + 1 >= a->argc) {
        sl_cli_usage_error(a->cmd, "%s needs a value", a->flag);
        return NULL;
    }
    return a->argv[++a->i];
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
    const char *d = s[0] == '-' ? s + 1 : s;
    bool ok = *d != 0;
    for (const char *c = d; *c; c++) ok = ok && *c >= '0' && *c <= '9';
    long long v = 0;
    if (ok) {
        errno = 0;
        char *end;
        v = strtoll(s, &end, 10);
        ok = !errno && !*end;
    }
    if (!ok || v < lo || v > hi)
        return sl_cli_usage_error(cmd, "%s '%s': not an integer in [%" PRId64 ", %" PRId64 "]",
                                  flag, s, lo, hi);
    *out = (int64_t)v;
    return 0;
}

int sl_cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out)
{
    bool ok = *s != 0;
    for (const char *c = s; *c; c++) ok = ok && *c >= '0' && *c <= '9';
    unsigned long long v = 0;
    if (ok) {
        errno = 0;
        char *end;
        v = strtoull(s, &end, 10);
        ok = !errno && !*end;
    }
    if (!ok) return sl_cli_usage_error(cmd, "%s '%s': not an unsigned 64-bit integer", flag, s);
    *out = (uint64_t)v;
    return 0;
}

int sl_cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi,
                     double *out)
{
    errno = 0;
    char *end;
    const double v = *s && !strchr(" \t\n", *s) ? strtod(s, &end) : NAN;
    if (!*s || strchr(" \t\n", *s) || errno || *end || !isfinite(v) || v < lo || v > hi)
        return sl_cli_usage_error(cmd, "%s '%s': not a number in [%g, %g]", flag, s, lo, hi);
    *out = v;
    return 0;
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
    switch (p) {
    case SL_PLACE_AUTO: return "auto";
    case SL_PLACE_GPU: return "gpu";
    case SL_PLACE_LAYERS: return "layers";
    case SL_PLACE_EXPERTS_CPU: return "experts-cpu";
    case SL_PLACE_CPU: return "cpu";
    }
    return "?";
}

int sl_cli_model_flags_parse(sl_cli_model_flags *f, sl_cli_args *a)
{
    const char *v;
    int64_t n;
    if (sl_cli_is(a, "-m", "--model")) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v) return sl_cli_usage_error(a->cmd, "%s: empty file name", a->flag);
        f->path = v;
    } else if (sl_cli_is(a, "--placement", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        static const sl_placement all[] = {SL_PLACE_AUTO, SL_PLACE_GPU, SL_PLACE_LAYERS,
                                           SL_PLACE_EXPERTS_CPU, SL_PLACE_CPU};
        size_t k = 0;
        while (k < 5 && strcmp(v, sl_cli_placement_name(all[k]))) k++;
        if (k == 5)
            return sl_cli_usage_error(a->cmd, "--placement '%s': unknown (auto, gpu, layers, "
                                      "experts-cpu, cpu)", v);
        f->opt.placement = all[k];
        f->placement_given = true;
    } else if (sl_cli_is(a, "-ngl", "--gpu-layers") || sl_cli_is(a, "--n-gpu-layers", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (sl_cli_parse_i64(a->cmd, a->flag, v, 0, 1 << 20, &n)) return 2;
        f->opt.gpu_layers = (int)n;
        /* as llama.cpp: -ngl alone means "this many layers on the GPU" */
        if (!f->placement_given) f->opt.placement = SL_PLACE_LAYERS;
    } else if (sl_cli_is(a, "--device", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (strcmp(v, "cuda") && strcmp(v, "sim") && strcmp(v, "auto"))
            return sl_cli_usage_error(a->cmd, "--device '%s': unknown (cuda, sim, auto)", v);
        f->opt.device = v;
    } else if (sl_cli_is(a, "--io", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!strcmp(v, "direct")) f->opt.io = SL_LOAD_DIRECT;
        else if (!strcmp(v, "pread")) f->opt.io = SL_LOAD_PREAD;
        else if (!strcmp(v, "mmap")) f->opt.io = SL_LOAD_MMAP;
        else return sl_cli_usage_error(a->cmd, "--io '%s': unknown (direct, pread, mmap)", v);
    } else if (sl_cli_is(a, "--numa-node", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (sl_cli_parse_i64(a->cmd, a->flag, v, 0, 4095, &n)) return 2;
        f->opt.numa_node = (int)n;
    } else if (sl_cli_is(a, "--cpus", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v || strspn(v, "0123456789,-") != strlen(v))
            return sl_cli_usage_error(a->cmd, "--cpus '%s': not a CPU list like 0-7,16", v);
        f->opt.cpus = v;
    } else if (sl_cli_is(a, "-t", "--threads")) {
        if (!(v = sl_cli_value(a))) return 2;
        if (sl_cli_parse_i64(a->cmd, a->flag, v, 1, 1024, &n)) return 2;
        f->opt.n_threads = (int)n;
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
    } else if (sl_cli_is(a, "--trace", NULL)) {
        if (!(v = sl_cli_value(a))) return 2;
        if (!*v) return sl_cli_usage_error(a->cmd, "%s: empty file name", a->flag);
        f->trace = v;
    } else {
        return 0;
    }
    return 1;
}

void sl_cli_ctx_sched(sl_cli_model_flags *f, sl_ctx_options *co)
{
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
                            (strstr(err.msg, "scheduler option") || strstr(err.msg, "POSTFETCH") ||
                             strstr(err.msg, "pin"));
        fprintf(stderr, "sluice %s: %s: context: %s%s\n", cmd, f->path ? f->path : "model",
                err.msg, config && f->sched ? " (--sched)" : "");
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
    if (!sl_cli_is(a, "-ctk", "--cache-type-k") && !sl_cli_is(a, "-ctv", "--cache-type-v"))
        return 0;
    const char *v = sl_cli_value(a);
    if (!v) return 2;
    if (!strcmp(v, "f16")) *kv_f16 = true;
    else if (!strcmp(v, "f32")) *kv_f16 = false;
    else return sl_cli_usage_error(a->cmd, "%s '%s': unknown (f16, f32)", a->flag, v);
    return 1;
}

void sl_cli_model_flags_help(FILE *out)
{
    fputs("model and placement:\n"
          "  -m, --model FILE       GGUF model (first shard of a set)\n"
          "  --placement P          auto (default) | gpu | layers | experts-cpu | cpu\n"
          "  -ngl, --gpu-layers N   layers on the GPU (implies --placement layers)\n"
          "  --device D             cuda | sim (CPU-simulated GPU) | auto (default:\n"
          "                         $SLUICE_DEVICE, then auto)\n"
          "  --io M                 how weights are read: direct (O_DIRECT, default) | pread |\n"
          "                         mmap\n"
          "  --numa-node N          host memory and threads on NUMA node N (default: nearest\n"
          "                         the GPU)\n"
          "  --cpus LIST            compute threads on these CPUs (\"0-7,16\"); not with\n"
          "                         --numa-node\n"
          "  -t, --threads N        CPU compute threads (default: all cores of the node)\n"
          "MoE scheduler:\n"
          "  --sched \"K=V ...\"      scheduler options over $SLUICE_POSTFETCH_*: mode=cpu\n"
          "                         (default) | post | full | auto, block_on_miss=0|1,\n"
          "                         max_transfers=N, scratch_kb=N, cache_kb=N, policy=lru|lfu,\n"
          "                         decay=X, pin=L:E,..., streams=dedicated|shared, debug=0|1,\n"
          "                         trace=0|1, cpu_gbs/pcie_gbs/dev_gbs=X (scheduler/fetch.h);\n"
          "                         modes other than cpu run on the sim device only\n"
          "  --trace FILE           write the scheduler's copy/compute spans as Chrome/Perfetto\n"
          "                         trace JSON after the run (adds trace=1; needs a fetch mode)\n",
          out);
}

int sl_cli_model_open(const sl_cli_model_flags *f, const char *cmd, sl_model **out)
{
    sl_error err = {0};
    if (f->opt.numa_node >= 0 && f->opt.cpus) {
        fprintf(stderr, "sluice %s: --numa-node and --cpus exclude each other\n", cmd);
        return 2;
    }
    if (sl_model_open(f->path, &f->opt, out, &err)) {
        /* engine messages usually name the file already; say it once either way */
        if (strstr(err.msg, f->path))
            fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
        else
            fprintf(stderr, "sluice %s: %s: %s\n", cmd, f->path, err.msg);
        return 1;
    }
    return 0;
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
