/* scheduler/policy/placement.c: see placement.h.
 *
 * Resolution in three passes over the tensors: (1) explicit rules (-ot first match, then
 * --cpu-moe / --n-cpu-moe for routed experts); (2) the base mode for the rest; (3) groups: a
 * group with explicit rules takes their side (two explicit sides in one group is an error),
 * otherwise the side of its matrices under the base mode; vectors follow. A group holding a
 * matrix the device cannot compute goes to the host (unless an override forced it: error).
 * AUTO tries the candidates in the order placement.h gives and keeps the first that fits.
 */
#include "scheduler/policy/placement.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

typedef struct rule {
    regex_t re;
    bool device;
} rule;

typedef struct rules {
    rule r[SL_PLACE_MAX_OVERRIDES];
    int n;
} rules;

static void rules_free(rules *rs)
{
    for (int i = 0; i < rs->n; i++) regfree(&rs->r[i].re);
    rs->n = 0;
}

/* BUFT names as llama.cpp prints them (CPU, CUDA0) and GPU, case-insensitive. */
static int buft_side(const char *b)
{
    if (!strcasecmp(b, "CPU")) return 0;
    if (!strcasecmp(b, "CUDA0") || !strcasecmp(b, "GPU")) return 1;
    return -1;
}

/* llama.cpp's patterns are ECMAScript regexes; POSIX ERE lacks \d, \D, \s, and inside a
 * bracket expression a backslash is literal there. Outside brackets \d, \D, \s are spelled
 * out; inside, \d and \s become 0-9 and [:space:], and any other escaped character itself. */
static void to_ere(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    bool bracket = false;
    for (const char *p = in; *p && o + 12 < cap; p++) {
        const char *rep = NULL;
        if (p[0] == '\\' && p[1]) {
            const char c = p[1];
            if (bracket) rep = c == 'd' ? "0-9" : c == 's' ? "[:space:]" : NULL;
            else rep = c == 'd' ? "[0-9]" : c == 'D' ? "[^0-9]" : c == 's' ? "[[:space:]]" : NULL;
            if (rep) {
                o += (size_t)snprintf(out + o, cap - o, "%s", rep);
            } else {
                if (!bracket) out[o++] = '\\';
                out[o++] = c;
            }
            p++;
            continue;
        }
        if (!bracket && p[0] == '[') {
            bracket = true;
            out[o++] = *p;
            if (p[1] == '^') out[o++] = *++p;
            if (p[1] == ']') out[o++] = *++p; /* a leading ] is literal */
            continue;
        }
        if (bracket && p[0] == ']') bracket = false;
        out[o++] = *p;
    }
    out[o] = 0;
}

static sl_status parse_rules(const char *list, rules *rs, sl_place_plan *p, sl_error *err)
{
    rs->n = 0;
    if (!list || !*list) return SL_OK;
    const char *s = list;
    while (*s) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        char ent[512];
        if (len >= sizeof ent)
            return sl_error_set(err, SL_ERR_INVALID, "override '%.40s...': longer than %zu "
                                "characters", s, sizeof ent - 1);
        memcpy(ent, s, len);
        ent[len] = 0;
        char *eq = strrchr(ent, '=');
        if (!eq || eq == ent || !eq[1])
            return sl_error_set(err, SL_ERR_INVALID, "override '%s': expected REGEX=BUFT "
                                "(e.g. exps=CPU)", ent);
        *eq = 0;
        const int side = buft_side(eq + 1);
        if (side < 0)
            return sl_error_set(err, SL_ERR_INVALID, "override '%s=%s': unknown buffer type "
                                "'%s' (CPU, CUDA0 or GPU)", ent, eq + 1, eq + 1);
        if (rs->n == SL_PLACE_MAX_OVERRIDES)
            return sl_error_set(err, SL_ERR_INVALID, "more than %d tensor overrides",
                                SL_PLACE_MAX_OVERRIDES);
        char ere[1024];
        to_ere(ent, ere, sizeof ere);
        const int rc = regcomp(&rs->r[rs->n].re, ere, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, &rs->r[rs->n].re, why, sizeof why);
            return sl_error_set(err, SL_ERR_INVALID, "override '%s=%s': bad regex: %s", ent,
                                eq + 1, why);
        }
        rs->r[rs->n].device = side == 1;
        if (p) {
            snprintf(p->override_text[rs->n], sizeof p->override_text[rs->n], "%s=%s", ent,
                     eq + 1);
            p->n_override = rs->n + 1;
        }
        rs->n++;
        s += len;
        if (*s == ',') s++;
    }
    return SL_OK;
}

sl_status sl_place_overrides_check(const char *list, sl_error *err)
{
    rules rs;
    sl_status st = parse_rules(list, &rs, NULL, err);
    rules_free(&rs);
    return st;
}

static bool has_prefix(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

void sl_place_classify(const char *name, uint32_t n_dims, int32_t n_expert,
                       sl_place_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    out->layer = -1;
    out->vector = n_dims <= 1;
    if (!strcmp(name, "token_embd.weight")) {
        out->group = SL_PG_EMBD;
        return;
    }
    int il = -1, n = 0;
    if (sscanf(name, "blk.%d.%n", &il, &n) != 1 || n == 0 || il < 0) {
        out->group = has_prefix(name, "output") ? SL_PG_OUTPUT : SL_PG_CORE;
        return;
    }
    out->layer = il;
    const char *rest = name + n;
    out->group = SL_PG_CORE;
    if (strstr(rest, "_exps")) {
        out->group = SL_PG_EXPERTS;
    } else if (has_prefix(rest, "ffn_gate.") || has_prefix(rest, "ffn_up.") ||
               has_prefix(rest, "ffn_down.")) {
        /* per-expert tensors ("ffn_gate.3.weight") in MoE files, the dense FFN otherwise */
        const char *dot = strchr(rest, '.');
        out->group = n_expert > 0 && dot && isdigit((unsigned char)dot[1]) ? SL_PG_EXPERTS
                                                                          : SL_PG_FFN;
    }
}

/* Side of t under a base mode (no overrides). */
static bool base_device(const sl_place_tensor *t, sl_placement mode, int32_t ngl,
                        int32_t n_cpu_moe, int32_t n_layer, sl_place_group hot_group)
{
    const sl_place_group g = t->tied ? SL_PG_OUTPUT : t->group;
    if (g == SL_PG_EMBD) return false;
    switch (mode) {
    case SL_PLACE_GPU: return true;
    case SL_PLACE_LAYERS:
        if (g == SL_PG_OUTPUT || t->layer < 0) return ngl > n_layer;
        return t->layer >= n_layer - ngl;
    case SL_PLACE_EXPERTS_CPU:
        return g != SL_PG_EXPERTS || (n_cpu_moe >= 0 && t->layer >= n_cpu_moe);
    case SL_PLACE_HOT_COLD: return g != hot_group; /* the split group: by the index */
    default: return false;
    }
}

static int64_t group_key(const sl_place_tensor *t, int32_t n_layer)
{
    const sl_place_group g = t->tied ? SL_PG_OUTPUT : t->group;
    if (t->layer < 0 || t->layer >= n_layer) return g; /* globals: one group each */
    return (int64_t)SL_PG_COUNT * (t->layer + 1) + g;
}

typedef struct resolver {
    const sl_place_tensor *t;
    size_t n;
    int32_t n_layer;
    int16_t *explicit_by;   /* [n]: override index, SL_PLACE_BY_CPU_MOE, or SL_PLACE_BY_MODE */
    bool *explicit_dev;     /* [n] */
    int64_t *key;           /* [n] */
    int64_t n_key;
    int32_t *first;         /* [n_key]: the tensor whose rule decided the group, -1 */
    int8_t *gside;          /* [n_key]: -1 undecided, 0 host, 1 device, 2 host (no kernel) */
    const float *hot_frac;  /* HOT_COLD: per layer */
    sl_place_group hot_group; /* HOT_COLD: the group the index splits (FFN or EXPERTS) */
    bool any_rule;          /* some tensor has an explicit rule */
    uint64_t budget, stream; /* the budget for weights without the staging buffer; its bytes */
    uint8_t *lay;           /* [n_layer] (stream > 0): 1 core on the device, 2 experts on host */
    bool streamed;          /* the last candidate had the staging buffer taken off */
} resolver;

static const char *side_name(bool dev)
{
    return dev ? "CUDA0" : "CPU";
}

static void by_text(const sl_place_plan *p, int by, char *out, size_t cap)
{
    if (by >= 0) snprintf(out, cap, "-ot '%s'", p->override_text[by]);
    else if (by == SL_PLACE_BY_CPU_MOE) snprintf(out, cap, "--cpu-moe/--n-cpu-moe");
    else if (by == SL_PLACE_BY_GROUP) snprintf(out, cap, "its group");
    else if (by == SL_PLACE_BY_DEVICE) snprintf(out, cap, "no device kernel for its type");
    else if (by == SL_PLACE_BY_INDEX) snprintf(out, cap, "the neuron index");
    else snprintf(out, cap, "the placement mode");
}

/* Adds tensor i's bytes to the side(s) it lives on. */
static void account(sl_place_plan *p, const sl_place_tensor *t, size_t i)
{
    const uint64_t hot = p->split[i] ? (uint64_t)((double)t->bytes * p->hot_frac[i]) : 0;
    if (p->on_device[i]) {
        p->device_bytes += t->bytes;
    } else {
        p->device_bytes += hot;
        p->host_bytes += t->bytes - hot;
    }
}

/* One candidate: fills p->on_device / p->by from the explicit rules and a base mode. */
static sl_status assign(resolver *r, sl_placement mode, int32_t ngl, int32_t n_cpu_moe,
                        sl_place_plan *p, sl_error *err)
{
    for (int64_t k = 0; k < r->n_key; k++) {
        r->first[k] = -1;
        r->gside[k] = -1;
    }
    /* explicit matrices decide their group */
    for (size_t i = 0; i < r->n; i++) {
        const sl_place_tensor *t = &r->t[i];
        if (t->vector || r->explicit_by[i] == SL_PLACE_BY_MODE) continue;
        const int64_t k = r->key[i];
        if (r->gside[k] < 0) {
            r->gside[k] = r->explicit_dev[i];
            r->first[k] = (int32_t)i;
        } else if (r->gside[k] != r->explicit_dev[i]) {
            const int32_t j = r->first[k];
            char a[128], b[128];
            by_text(p, r->explicit_by[j], a, sizeof a);
            by_text(p, r->explicit_by[i], b, sizeof b);
            return sl_error_set(err, SL_ERR_INVALID,
                                "placement: %s goes to %s by %s but %s goes to %s by %s; a "
                                "layer's %s live on one side (give them the same rule)",
                                r->t[j].name, side_name(r->explicit_dev[j]), a, t->name,
                                side_name(r->explicit_dev[i]), b,
                                t->group == SL_PG_EXPERTS ? "routed experts"
                                : t->group == SL_PG_FFN   ? "FFN matrices"
                                                          : "attention and norms");
        }
    }
    /* the rest by the base mode, taken from the group's first matrix */
    for (size_t i = 0; i < r->n; i++) {
        const int64_t k = r->key[i];
        if (r->gside[k] >= 0 || r->t[i].vector) continue;
        r->gside[k] = base_device(&r->t[i], mode, ngl, n_cpu_moe, r->n_layer, r->hot_group);
    }
    /* a group with a matrix the device cannot compute: host (an override forcing it: error) */
    for (size_t i = 0; i < r->n; i++) {
        const int64_t k = r->key[i];
        if (!r->t[i].no_device || r->gside[k] != 1 || r->t[i].vector) continue;
        if (r->first[k] >= 0)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "placement: %s is forced onto the "
                                "device, which has no kernel for its type%s%s", r->t[i].name,
                                r->t[i].type_name ? " " : "",
                                r->t[i].type_name ? r->t[i].type_name : "");
        r->gside[k] = 2; /* host, because of the device */
    }
    p->device_bytes = p->host_bytes = 0;
    for (size_t i = 0; i < r->n; i++) {
        const int64_t k = r->key[i];
        const int8_t gs = r->gside[k];
        const bool dev = gs == 1 || (gs < 0 && base_device(&r->t[i], mode, ngl, n_cpu_moe,
                                                           r->n_layer, r->hot_group));
        p->on_device[i] = dev;
        const int16_t ex = r->explicit_by[i];
        if (gs == 2) p->by[i] = SL_PLACE_BY_DEVICE;
        else if (ex != SL_PLACE_BY_MODE && r->explicit_dev[i] == dev) p->by[i] = ex;
        else if (r->first[k] >= 0 || ex != SL_PLACE_BY_MODE) p->by[i] = SL_PLACE_BY_GROUP;
        else p->by[i] = SL_PLACE_BY_MODE;
        p->split[i] = false;
        p->hot_frac[i] = 0;
        if (mode == SL_PLACE_HOT_COLD && r->t[i].group == r->hot_group && r->first[k] < 0 &&
            gs != 2 && r->hot_frac) {
            const float f = r->t[i].layer >= 0 && r->t[i].layer < r->n_layer
                                ? r->hot_frac[r->t[i].layer] : 0.0f;
            p->on_device[i] = f >= 1.0f;
            p->split[i] = f > 0.0f && f < 1.0f;
            p->hot_frac[i] = p->split[i] ? f : 0.0f;
            p->by[i] = SL_PLACE_BY_INDEX;
        }
        account(p, &r->t[i], i);
    }
    /* the staging buffer comes off the budget only where a device layer's routed experts
     * stay on the host (a prefill streams them through it) */
    bool stream = false;
    if (r->stream) {
        memset(r->lay, 0, (size_t)r->n_layer);
        for (size_t i = 0; i < r->n; i++) {
            const int32_t l = r->t[i].layer;
            if (l < 0 || l >= r->n_layer || r->t[i].vector) continue;
            if (r->t[i].group == SL_PG_CORE && p->on_device[i]) r->lay[l] |= 1;
            if (r->t[i].group == SL_PG_EXPERTS && !p->on_device[i] && !p->split[i])
                r->lay[l] |= 2;
        }
        for (int32_t l = 0; l < r->n_layer && !stream; l++) stream = r->lay[l] == 3;
    }
    p->budget = stream ? (r->budget > r->stream ? r->budget - r->stream : 0) : r->budget;
    r->streamed = stream;
    return SL_OK;
}

static bool fits(const sl_place_plan *p)
{
    return !p->budget_known || p->device_bytes <= p->budget;
}

/* "1.50 GiB", "12.3 MiB", "900 B" */
static const char *human(uint64_t b, char *buf, size_t cap)
{
    if (b >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, cap, "%.2f MiB", (double)b / (double)(1ull << 20));
    else if (b >= 1024) snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, cap, "%llu B", (unsigned long long)b);
    return buf;
}

static sl_status too_big(const resolver *r, const sl_place_plan *p, const sl_place_options *o,
                         sl_error *err)
{
    char a[32], b[32], c[32], d[32], e[32];
    const uint64_t cap = o->vram_budget ? o->vram_budget : o->device_free / 10 * 9;
    const char *what = o->vram_budget ? "--vram-budget" : "90% of free device memory";
    /* what the plan keeps for KV cache and buffers (a staging buffer included where needed) */
    const uint64_t kept = o->reserve_bytes + (r->streamed ? r->stream : 0);
    if (!p->budget)
        return sl_error_set(err, SL_ERR_NOMEM, "placement: %s (%s) is less than the %s a "
                            "context needs on the device (KV cache, buffers)", what,
                            human(cap, a, sizeof a), human(kept, b, sizeof b));
    uint64_t sum = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!p->on_device[i]) continue;
        sum += r->t[i].bytes;
        if (sum > p->budget)
            return sl_error_set(err, SL_ERR_NOMEM,
                                "placement: %s of weights for the device, more than the %s "
                                "available (%s %s, less %s for KV cache and buffers); %s "
                                "(%s) is the first that does not fit",
                                human(p->device_bytes, a, sizeof a),
                                human(p->budget, b, sizeof b), what, human(cap, c, sizeof c),
                                human(kept, d, sizeof d), r->t[i].name,
                                human(r->t[i].bytes, e, sizeof e));
    }
    return sl_error_set(err, SL_ERR_NOMEM, "placement: device share does not fit");
}

static bool has_experts(const resolver *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->t[i].group == SL_PG_EXPERTS) return true;
    return false;
}

static sl_status resolve_auto(resolver *r, sl_place_plan *p, sl_error *err)
{
    char a[32], b[32];
    sl_status st = assign(r, SL_PLACE_GPU, r->n_layer + 1, -1, p, err);
    if (st) return st;
    if (fits(p)) {
        p->mode = SL_PLACE_GPU;
        p->n_gpu_layers = r->n_layer + 1;
        snprintf(p->why, sizeof p->why, "auto: every weight%s on the device (%s of %s)",
                 p->n_override || r->any_rule ? " the rules leave free" : "",
                 human(p->device_bytes, a, sizeof a), human(p->budget, b, sizeof b));
        return SL_OK;
    }
    if (has_experts(r)) {
        for (int32_t k = 1; k <= r->n_layer; k++) {
            if ((st = assign(r, SL_PLACE_EXPERTS_CPU, 0, k, p, err))) return st;
            if (!fits(p)) continue;
            p->mode = SL_PLACE_EXPERTS_CPU;
            p->n_cpu_moe = k;
            snprintf(p->why, sizeof p->why, "auto: routed experts of the first %d layer%s on "
                     "the host (--n-cpu-moe %d), the rest on the device (%s of %s)", k,
                     k == 1 ? "" : "s", k,
                     human(p->device_bytes, a, sizeof a), human(p->budget, b, sizeof b));
            return SL_OK;
        }
    }
    for (int32_t ngl = r->n_layer; ngl >= 0; ngl--) {
        if ((st = assign(r, SL_PLACE_LAYERS, ngl, -1, p, err))) return st;
        if (!fits(p)) continue;
        p->mode = ngl ? SL_PLACE_LAYERS : SL_PLACE_CPU;
        p->n_gpu_layers = ngl;
        if (ngl)
            snprintf(p->why, sizeof p->why, "auto: the last %d of %d layers on the device "
                     "(-ngl %d; %s of %s)", ngl, r->n_layer, ngl,
                     human(p->device_bytes, a, sizeof a), human(p->budget, b, sizeof b));
        else
            snprintf(p->why, sizeof p->why, "auto: every layer on the host (device budget %s)",
                     human(p->budget, b, sizeof b));
        return SL_OK;
    }
    return sl_error_set(err, SL_ERR_NOMEM, "placement: the tensors forced onto the device "
                        "(%s) exceed the device budget (%s)", human(p->device_bytes, a, sizeof a),
                        human(p->budget, b, sizeof b));
}

sl_status sl_place_resolve(const sl_place_tensor *t, size_t n, int32_t n_layer,
                           const sl_place_options *o, sl_place_plan *out, sl_error *err)
{
    if (!t || !o || !out || n_layer < 0)
        return sl_error_set(err, SL_ERR_INVALID, "sl_place_resolve: NULL argument");
    memset(out, 0, sizeof *out);
    const sl_place_mode_info *mi = sl_place_mode_info_get(o->mode);
    if (!mi) return sl_error_set(err, SL_ERR_INVALID, "placement mode %d: unknown", (int)o->mode);
    if (mi->needs_index && !o->ffn_hot_frac)
        return sl_error_set(err, SL_ERR_INVALID, "placement %s needs a neuron index", mi->name);
    if (o->mode == SL_PLACE_LAYERS && o->n_gpu_layers < 0)
        return sl_error_set(err, SL_ERR_INVALID, "-ngl %d: must be >= 0", o->n_gpu_layers);
    if (o->n_cpu_moe < 0)
        return sl_error_set(err, SL_ERR_INVALID, "--n-cpu-moe %d: must be >= 0", o->n_cpu_moe);
    out->n = n;
    out->n_cpu_moe = -1;
    out->on_device = calloc(n ? n : 1, sizeof *out->on_device);
    out->by = calloc(n ? n : 1, sizeof *out->by);
    out->split = calloc(n ? n : 1, sizeof *out->split);
    out->hot_frac = calloc(n ? n : 1, sizeof *out->hot_frac);
    resolver r = {.t = t, .n = n, .n_layer = n_layer, .hot_frac = o->ffn_hot_frac,
                  .hot_group = o->split_experts ? SL_PG_EXPERTS : SL_PG_FFN};
    r.explicit_by = calloc(n ? n : 1, sizeof *r.explicit_by);
    r.explicit_dev = calloc(n ? n : 1, sizeof *r.explicit_dev);
    r.key = calloc(n ? n : 1, sizeof *r.key);
    r.n_key = (int64_t)SL_PG_COUNT * (n_layer + 1);
    r.first = calloc((size_t)r.n_key, sizeof *r.first);
    r.gside = calloc((size_t)r.n_key, sizeof *r.gside);
    rules rs = {.n = 0};
    sl_status st = SL_OK;
    if (!out->on_device || !out->by || !out->split || !out->hot_frac || !r.explicit_by || !r.explicit_dev || !r.key ||
        !r.first || !r.gside) {
        st = sl_error_set(err, SL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    if ((st = parse_rules(o->override_tensor, &rs, out, err))) goto done;
    bool any_dev_rule = false;
    for (size_t i = 0; i < n; i++) {
        r.key[i] = group_key(&t[i], n_layer);
        r.explicit_by[i] = SL_PLACE_BY_MODE;
        for (int k = 0; k < rs.n; k++)
            if (!regexec(&rs.r[k].re, t[i].name, 0, NULL, 0)) {
                r.explicit_by[i] = (int16_t)k;
                r.explicit_dev[i] = rs.r[k].device;
                any_dev_rule |= rs.r[k].device && !t[i].vector;
                break;
            }
        if (r.explicit_by[i] == SL_PLACE_BY_MODE && t[i].group == SL_PG_EXPERTS &&
            (o->cpu_moe || t[i].layer < o->n_cpu_moe)) {
            r.explicit_by[i] = SL_PLACE_BY_CPU_MOE;
            r.explicit_dev[i] = false;
        }
        r.any_rule |= r.explicit_by[i] != SL_PLACE_BY_MODE;
    }
    if (o->mode == SL_PLACE_CPU && any_dev_rule) {
        st = sl_error_set(err, SL_ERR_INVALID, "placement: an override puts tensors on the "
                          "device but the placement is cpu");
        goto done;
    }
    const uint64_t cap = o->vram_budget ? o->vram_budget
                                        : o->device_free ? o->device_free / 10 * 9 : 0;
    out->budget = cap > o->reserve_bytes ? cap - o->reserve_bytes : 0;
    out->budget_known = cap != 0;
    r.budget = out->budget;
    r.stream = out->budget_known ? o->stream_bytes : 0;
    if (r.stream && !(r.lay = malloc(n_layer > 0 ? (size_t)n_layer : 1))) {
        st = sl_error_set(err, SL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    if (o->mode == SL_PLACE_AUTO) {
        st = resolve_auto(&r, out, err);
    } else {
        const int32_t ngl = o->mode == SL_PLACE_GPU ? n_layer + 1 : o->n_gpu_layers;
        st = assign(&r, o->mode, ngl, -1, out, err);
        out->mode = o->mode;
        out->n_gpu_layers = o->mode == SL_PLACE_LAYERS || o->mode == SL_PLACE_GPU ? ngl : 0;
        if (o->mode == SL_PLACE_LAYERS)
            snprintf(out->why, sizeof out->why, "layers: the last %d of %d layers on the "
                     "device%s", ngl < n_layer ? ngl : n_layer, n_layer,
                     ngl > n_layer ? ", and the output" : "");
        else if (o->mode == SL_PLACE_HOT_COLD && o->split_experts)
            snprintf(out->why, sizeof out->why, "hot-cold: routed experts split by the neuron "
                     "index");
        else
            snprintf(out->why, sizeof out->why, "%s", mi->why);
        if (!st && !fits(out)) st = too_big(&r, out, o, err);
    }
    if (!st && (o->cpu_moe || o->n_cpu_moe) && out->n_cpu_moe < 0)
        out->n_cpu_moe = o->cpu_moe ? n_layer : o->n_cpu_moe;
    if (!st) st = sl_place_plan_validate(out, t, n, err);
done:
    rules_free(&rs);
    free(r.lay);
    free(r.explicit_by);
    free(r.explicit_dev);
    free(r.key);
    free(r.first);
    free(r.gside);
    if (st) sl_place_plan_free(out);
    return st;
}

sl_status sl_place_plan_validate(const sl_place_plan *p, const sl_place_tensor *t, size_t n,
                                 sl_error *err)
{
    if (!p || p->n != n || (n && (!p->on_device || !p->by || !p->split || !p->hot_frac)) ||
        p->mode == SL_PLACE_AUTO)
        return sl_error_set(err, SL_ERR_INVALID, "placement plan: malformed");
    int32_t max_layer = -1;
    for (size_t i = 0; i < n; i++)
        if (t[i].layer > max_layer) max_layer = t[i].layer;
    /* per (layer, group): 0 unseen, 1 host, 2 device; and the first tensor seen */
    const size_t nk = (size_t)(max_layer + 2) * SL_PG_COUNT;
    uint8_t *seen = calloc(nk, 1);
    size_t *who = calloc(nk, sizeof *who);
    if (!seen || !who) {
        free(seen);
        free(who);
        return sl_error_set(err, SL_ERR_NOMEM, "placement plan: out of memory");
    }
    uint64_t d = 0, h = 0;
    sl_status st = SL_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const uint64_t hot = p->split[i] ? (uint64_t)((double)t[i].bytes * p->hot_frac[i]) : 0;
        if (p->on_device[i]) d += t[i].bytes;
        else d += hot, h += t[i].bytes - hot;
        if (t[i].group == SL_PG_EMBD && !t[i].tied) continue;
        const sl_place_group g = t[i].tied ? SL_PG_OUTPUT : t[i].group;
        const size_t k = (size_t)(t[i].layer + 1) * SL_PG_COUNT + g;
        const uint8_t side = p->on_device[i] ? 2 : 1;
        if (!seen[k]) {
            seen[k] = side;
            who[k] = i;
        } else if (seen[k] != side) {
            st = sl_error_set(err, SL_ERR_INVALID, "placement plan: %s and %s are in one group "
                              "but on different sides", t[who[k]].name, t[i].name);
        }
    }
    free(seen);
    free(who);
    if (st) return st;
    if (d != p->device_bytes || h != p->host_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "placement plan: byte totals disagree");
    return SL_OK;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

void sl_place_plan_write(FILE *f, const sl_place_plan *p, const sl_place_tensor *t, size_t n,
                         unsigned parts, bool json)
{
    const bool per_tensor = parts & SL_PLACE_WRITE_TENSORS;
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) nd += p->on_device[i];
    if (json) {
        fprintf(f, "{\"mode\": \"%s\", \"n_gpu_layers\": %d, \"n_cpu_moe\": %d, \"why\": ",
                sl_place_mode_name(p->mode), p->n_gpu_layers, p->n_cpu_moe);
        json_str(f, p->why);
        fprintf(f, ", \"device_bytes\": %llu, \"host_bytes\": %llu, \"budget_bytes\": %llu, "
                "\"device_tensors\": %zu, \"host_tensors\": %zu, \"overrides\": [",
                (unsigned long long)p->device_bytes, (unsigned long long)p->host_bytes,
                (unsigned long long)p->budget, nd, n - nd);
        for (int k = 0; k < p->n_override; k++) {
            if (k) fputs(", ", f);
            json_str(f, p->override_text[k]);
        }
        fputs("]", f);
        if (per_tensor) {
            fputs(", \"tensors\": [", f);
            for (size_t i = 0; i < n; i++) {
                char by[128];
                by_text(p, p->by[i], by, sizeof by);
                fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
                json_str(f, t[i].name);
                fputs(", \"type\": ", f);
                json_str(f, t[i].type_name ? t[i].type_name : "");
                fprintf(f, ", \"bytes\": %llu, \"buft\": \"%s\", \"hot_fraction\": %g, "
                        "\"layer\": %d, \"by\": ", (unsigned long long)t[i].bytes,
                        p->split[i] ? "split" : side_name(p->on_device[i]),
                        (double)p->hot_frac[i], t[i].layer);
                json_str(f, by);
                fputs("}", f);
            }
            fputs("]", f);
        }
        fputs("}\n", f);
        return;
    }
    if (!(parts & SL_PLACE_WRITE_SUMMARY)) goto tensors;
    fprintf(f, "placement: %s\n", p->why);
    fprintf(f, "  device (CUDA0): %10.2f MiB in %zu tensors\n", p->device_bytes / 1048576.0, nd);
    fprintf(f, "  host   (CPU):   %10.2f MiB in %zu tensors\n", p->host_bytes / 1048576.0,
            n - nd);
    if (p->budget_known)
        fprintf(f, "  device budget:  %10.2f MiB (weights; KV cache and buffers reserved)\n",
                p->budget / 1048576.0);
    for (int k = 0; k < p->n_override; k++)
        fprintf(f, "  override %d: %s\n", k, p->override_text[k]);
tensors:
    if (!per_tensor) return;
    for (size_t i = 0; i < n; i++) {
        char by[128];
        by_text(p, p->by[i], by, sizeof by);
        char side[32];
        if (p->split[i]) snprintf(side, sizeof side, "split %.0f%% CUDA0", 100.0 * p->hot_frac[i]);
        else snprintf(side, sizeof side, "%s", side_name(p->on_device[i]));
        fprintf(f, "%-36s %-6s %12llu  %-5s  %s\n", t[i].name,
                t[i].type_name ? t[i].type_name : "", (unsigned long long)t[i].bytes, side, by);
    }
}

void sl_place_plan_free(sl_place_plan *p)
{
    if (!p) return;
    free(p->on_device);
    free(p->by);
    free(p->split);
    free(p->hot_frac);
    p->on_device = NULL;
    p->by = NULL;
    p->split = NULL;
    p->hot_frac = NULL;
    p->n = 0;
}
