/* scheduler/moe/fetch_options.c: defaults, the Post-Fetch aliases (looked up by
 * the caller: runtime/engine/env.c), the option string
 * and the pinned-expert list of the fetching scheduler (fetch.h). Every value is checked by
 * base/parse.h's rules; nothing is silently ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "scheduler/moe/fetch.h"

sl_fetch_options sl_fetch_options_default(void)
{
    return (sl_fetch_options){.mode = SL_FETCH_CPU, .block_on_miss = false, .max_transfers = 4,
                              .scratch_bytes = (uint64_t)64 << 20, .cache_bytes = 0,
                              .policy = SL_CACHE_LRU, .lfu_decay = 0.9, .pinned = NULL,
                              .dedicated_streams = true, .debug = false, .trace = false,
                              .trace_max_spans = (uint64_t)1 << 20, .hot_warm = 256,
                              .prefill_stream = 32};
}

const char *sl_fetch_mode_name(sl_fetch_mode m)
{
    static const char *const names[] = {"cpu", "post", "full", "auto"};
    return (unsigned)m < 4 ? names[m] : "?";
}

static sl_status parse_mode(const char *what, const char *v, sl_fetch_mode *out, sl_error *err)
{
    for (int m = 0; m < 4; m++)
        if (!strcmp(v, sl_fetch_mode_name((sl_fetch_mode)m))) {
            *out = (sl_fetch_mode)m;
            return SL_OK;
        }
    return sl_error_set(err, SL_ERR_INVALID, "%s: '%s' is not a mode; expected cpu, post, full or "
                        "auto", what, v);
}

static sl_status parse_policy(const char *what, const char *v, sl_cache_policy *out,
                              sl_error *err)
{
    if (!strcmp(v, "lru")) *out = SL_CACHE_LRU;
    else if (!strcmp(v, "lfu")) *out = SL_CACHE_LFU;
    else return sl_error_set(err, SL_ERR_INVALID, "%s: '%s' is not a policy; expected lru or lfu",
                             what, v);
    return SL_OK;
}

/* The ranges of the numeric options (the option string's and the variables' units differ). */
static const sl_urange k_transfers = {1, SL_FETCH_MAX_TRANSFERS};
static const sl_urange k_scratch_mb = {1, 1048576}, k_cache_mb = {0, 1048576};
static const sl_urange k_scratch_kb = {1, (uint64_t)1 << 30}, k_cache_kb = {0, (uint64_t)1 << 30};
static const sl_urange k_hot_warm = {1, (uint64_t)1 << 40}, k_uploads = {0, 1 << 20};
static const sl_urange k_defer = {0, SL_MOE_JOIN_MAX_K};
static const sl_urange k_tokens = {0, INT32_MAX};
static const sl_frange k_decay = {0.0, 1.0, true, false}, k_gbs = {0.0, 1e6, false, false};

sl_status sl_fetch_pins_parse(const char *what, const char *list, int32_t (*out)[2], int *n_out,
                              sl_error *err)
{
    *n_out = 0;
    if (!list) return SL_OK;
    const sl_irange r = {0, INT32_MAX};
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ","), colon = strcspn(p, ":");
        char w[160];
        snprintf(w, sizeof w, "%s item %d '%.*s'", what, *n_out + 1, n > 40 ? 40 : (int)n, p);
        if (colon >= n)
            return sl_error_set(err, SL_ERR_INVALID, "%s: expected layer:expert (the list is "
                                "layer:expert,...)", w);
        int64_t l, e;
        char wl[192], we[192];
        snprintf(wl, sizeof wl, "%s: layer", w);
        snprintf(we, sizeof we, "%s: expert", w);
        sl_status st = sl_parse_i64n(wl, p, colon, r, &l, err);
        if (!st) st = sl_parse_i64n(we, p + colon + 1, n - colon - 1, r, &e, err);
        if (st) return st;
        if (*n_out == SL_FETCH_MAX_PINS)
            return sl_error_set(err, SL_ERR_INVALID, "%s: more than %d pinned experts", what,
                                SL_FETCH_MAX_PINS);
        if (out) {
            out[*n_out][0] = (int32_t)l;
            out[*n_out][1] = (int32_t)e;
        }
        ++*n_out;
        p += n;
        if (*p == ',' && !*++p)
            return sl_error_set(err, SL_ERR_INVALID, "%s '%s': ends with ','", what, list);
    }
    return SL_OK;
}

sl_status sl_fetch_options_vars(sl_fetch_options *o, sl_fetch_var_fn get, void *user,
                                sl_error *err)
{
    if (!o || !get)
        return sl_error_set(err, SL_ERR_INVALID, "sl_fetch_options_vars: NULL options or get");
    const char *v;
    sl_status st;
    bool b;
    uint64_t u;
#define ENV(name) ((v = get(user, name)) != NULL)
    if (ENV("SLUICE_POSTFETCH_ENABLE")) {
        if ((st = sl_parse_bool("SLUICE_POSTFETCH_ENABLE", v, &b, err))) return st;
        o->mode = b ? SL_FETCH_POST : SL_FETCH_CPU;
    }
    if (ENV("SLUICE_POSTFETCH_MODE") &&
        (st = parse_mode("SLUICE_POSTFETCH_MODE", v, &o->mode, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_FORCE_CPU")) {
        if ((st = sl_parse_bool("SLUICE_POSTFETCH_FORCE_CPU", v, &b, err))) return st;
        if (b) o->mode = SL_FETCH_CPU;
    }
    if (ENV("SLUICE_POSTFETCH_BLOCK_ON_MISS") &&
        (st = sl_parse_bool("SLUICE_POSTFETCH_BLOCK_ON_MISS", v, &o->block_on_miss, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_MAX_TRANSFERS")) {
        if ((st = sl_parse_u64("SLUICE_POSTFETCH_MAX_TRANSFERS", v, k_transfers, &u, err)))
            return st;
        o->max_transfers = (int)u;
    }
    if (ENV("SLUICE_POSTFETCH_SCRATCHPAD_MB")) {
        if ((st = sl_parse_u64("SLUICE_POSTFETCH_SCRATCHPAD_MB", v, k_scratch_mb, &u, err)))
            return st;
        o->scratch_bytes = u << 20;
    }
    if (ENV("SLUICE_POSTFETCH_CACHE_MB")) {
        if ((st = sl_parse_u64("SLUICE_POSTFETCH_CACHE_MB", v, k_cache_mb, &u, err)))
            return st;
        o->cache_bytes = u << 20;
    }
    if (ENV("SLUICE_POSTFETCH_POLICY") &&
        (st = parse_policy("SLUICE_POSTFETCH_POLICY", v, &o->policy, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_PIN")) {
        int n;
        if ((st = sl_fetch_pins_parse("SLUICE_POSTFETCH_PIN", v, NULL, &n, err))) return st;
        o->pinned = v;
    }
    if (ENV("SLUICE_POSTFETCH_USE_DEDICATED_STREAMS") &&
        (st = sl_parse_bool("SLUICE_POSTFETCH_USE_DEDICATED_STREAMS", v, &o->dedicated_streams,
                         err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_DEBUG") &&
        (st = sl_parse_bool("SLUICE_POSTFETCH_DEBUG", v, &o->debug, err)))
        return st;
#undef ENV
    return SL_OK;
}

sl_status sl_fetch_options_parse(sl_fetch_options *o, const char *spec, char *pin_buf,
                                 size_t pin_cap, sl_error *err)
{
    if (!o) return sl_error_set(err, SL_ERR_INVALID, "sl_fetch_options_parse: NULL options");
    if (!spec) return SL_OK;
    const char *p = spec;
    while (*p) {
        while (*p == ' ' || *p == ';') p++;
        if (!*p) break;
        const size_t n = strcspn(p, " ;");
        char item[256];
        if (n >= sizeof item)
            return sl_error_set(err, SL_ERR_INVALID, "scheduler option '%.40s...': too long", p);
        memcpy(item, p, n);
        item[n] = 0;
        p += n;
        char *eq = strchr(item, '=');
        if (!eq)
            return sl_error_set(err, SL_ERR_INVALID, "scheduler option '%s': expected key=value",
                                item);
        *eq = 0;
        const char *k = item, *v = eq + 1;
        char what[96];
        snprintf(what, sizeof what, "scheduler option %s", k);
        sl_status st = SL_OK;
        uint64_t u;
        if (!strcmp(k, "mode")) st = parse_mode(what, v, &o->mode, err);
        else if (!strcmp(k, "block_on_miss"))
            st = sl_parse_bool(what, v, &o->block_on_miss, err);
        else if (!strcmp(k, "max_transfers")) {
            if (!(st = sl_parse_u64(what, v, k_transfers, &u, err))) o->max_transfers = (int)u;
        } else if (!strcmp(k, "scratch_kb")) {
            if (!(st = sl_parse_u64(what, v, k_scratch_kb, &u, err)))
                o->scratch_bytes = u << 10;
        } else if (!strcmp(k, "cache_kb")) {
            if (!(st = sl_parse_u64(what, v, k_cache_kb, &u, err)))
                o->cache_bytes = u << 10;
        } else if (!strcmp(k, "hot_kb")) {
            if (!(st = sl_parse_u64(what, v, k_cache_kb, &u, err))) o->hot_bytes = u << 10;
        } else if (!strcmp(k, "hot_warm")) {
            if (!(st = sl_parse_u64(what, v, k_hot_warm, &u, err))) o->hot_warm = (int64_t)u;
        } else if (!strcmp(k, "uploads")) {
            if (!(st = sl_parse_u64(what, v, k_uploads, &u, err))) o->uploads = (int)u;
        } else if (!strcmp(k, "policy")) st = parse_policy(what, v, &o->policy, err);
        else if (!strcmp(k, "decay")) st = sl_parse_f64(what, v, k_decay, &o->lfu_decay, err);
        else if (!strcmp(k, "pin")) {
            int n;
            if ((st = sl_fetch_pins_parse(what, v, NULL, &n, err))) return st;
            if (!pin_buf || strlen(v) >= pin_cap)
                return sl_error_set(err, SL_ERR_INVALID, "%s: '%s': no room for the list", what,
                                    v);
            memcpy(pin_buf, v, strlen(v) + 1);
            o->pinned = pin_buf;
        } else if (!strcmp(k, "order")) {
            if (!strcmp(v, "stream")) o->order = SL_FETCH_ORDER_STREAM;
            else if (!strcmp(v, "sync")) o->order = SL_FETCH_ORDER_SYNC;
            else st = sl_error_set(err, SL_ERR_INVALID, "%s: '%s' is not an order; expected "
                                   "stream or sync", what, v);
        } else if (!strcmp(k, "streams")) {
            if (!strcmp(v, "dedicated")) o->dedicated_streams = true;
            else if (!strcmp(v, "shared")) o->dedicated_streams = false;
            else st = sl_error_set(err, SL_ERR_INVALID, "%s: '%s' is not a stream choice; "
                                   "expected dedicated or shared", what, v);
        } else if (!strcmp(k, "debug")) st = sl_parse_bool(what, v, &o->debug, err);
        else if (!strcmp(k, "trace")) st = sl_parse_bool(what, v, &o->trace, err);
        else if (!strcmp(k, "cpu_gbs")) st = sl_parse_f64(what, v, k_gbs, &o->cpu_gbs, err);
        else if (!strcmp(k, "pcie_gbs")) st = sl_parse_f64(what, v, k_gbs, &o->pcie_gbs, err);
        else if (!strcmp(k, "dev_gbs")) st = sl_parse_f64(what, v, k_gbs, &o->dev_gbs, err);
        else if (!strcmp(k, "dram_gbs")) st = sl_parse_f64(what, v, k_gbs, &o->dram_gbs, err);
        else if (!strcmp(k, "prefill_stream")) {
            if (!(st = sl_parse_u64(what, v, k_tokens, &u, err))) o->prefill_stream = (int64_t)u;
        } else if (!strcmp(k, "defer")) {
            if (!(st = sl_parse_u64(what, v, k_defer, &u, err))) o->defer = (int32_t)u;
        } else
            st = sl_error_set(err, SL_ERR_INVALID,
                              "scheduler option '%s': unknown key (mode, block_on_miss, "
                              "max_transfers, scratch_kb, cache_kb, hot_kb, hot_warm, uploads, "
                              "policy, decay, pin, order, streams, debug, trace, cpu_gbs, "
                              "pcie_gbs, dev_gbs, dram_gbs, prefill_stream, defer)", k);
        if (st) return st;
    }
    return SL_OK;
}
