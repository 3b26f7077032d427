/* scheduler/fetch_options.c: defaults, the Post-Fetch environment aliases and the option string
 * of the fetching scheduler (fetch.h). Every value is checked; nothing is silently ignored. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/fetch.h"

sl_fetch_options sl_fetch_options_default(void)
{
    return (sl_fetch_options){.mode = SL_FETCH_CPU, .block_on_miss = false, .max_transfers = 4,
                              .scratch_bytes = (uint64_t)64 << 20, .cache_bytes = 0,
                              .policy = SL_CACHE_LRU, .lfu_decay = 0.9, .pinned = NULL,
                              .dedicated_streams = true, .debug = false, .trace = false,
                              .trace_max_spans = (uint64_t)1 << 20};
}

const char *sl_fetch_mode_name(sl_fetch_mode m)
{
    static const char *const names[] = {"cpu", "post", "full", "auto"};
    return (unsigned)m < 4 ? names[m] : "?";
}

static sl_status parse_u64(const char *what, const char *v, uint64_t lo, uint64_t hi,
                           uint64_t *out, sl_error *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno || x < lo || x > hi)
        return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected an integer in [%llu, %llu]",
                            what, v, (unsigned long long)lo, (unsigned long long)hi);
    *out = x;
    return SL_OK;
}

static sl_status parse_bool(const char *what, const char *v, bool *out, sl_error *err)
{
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) *out = true;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) *out = false;
    else return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected 0 or 1", what, v);
    return SL_OK;
}

static sl_status parse_double(const char *what, const char *v, double lo, double hi, double *out,
                              sl_error *err)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x >= lo) || x > hi)
        return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected a number in [%g, %g]", what,
                            v, lo, hi);
    *out = x;
    return SL_OK;
}

static sl_status parse_mode(const char *what, const char *v, sl_fetch_mode *out, sl_error *err)
{
    for (int m = 0; m < 4; m++)
        if (!strcmp(v, sl_fetch_mode_name((sl_fetch_mode)m))) {
            *out = (sl_fetch_mode)m;
            return SL_OK;
        }
    return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected cpu, post, full or auto", what, v);
}

static sl_status parse_policy(const char *what, const char *v, sl_cache_policy *out,
                              sl_error *err)
{
    if (!strcmp(v, "lru")) *out = SL_CACHE_LRU;
    else if (!strcmp(v, "lfu")) *out = SL_CACHE_LFU;
    else return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected lru or lfu", what, v);
    return SL_OK;
}

sl_status sl_fetch_options_env(sl_fetch_options *o, sl_error *err)
{
    if (!o) return sl_error_set(err, SL_ERR_INVALID, "sl_fetch_options_env: NULL options");
    const char *v;
    sl_status st;
    bool b;
    uint64_t u;
#define ENV(name) ((v = getenv(name)) != NULL)
    if (ENV("SLUICE_POSTFETCH_ENABLE")) {
        if ((st = parse_bool("SLUICE_POSTFETCH_ENABLE", v, &b, err))) return st;
        o->mode = b ? SL_FETCH_POST : SL_FETCH_CPU;
    }
    if (ENV("SLUICE_POSTFETCH_MODE") &&
        (st = parse_mode("SLUICE_POSTFETCH_MODE", v, &o->mode, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_FORCE_CPU")) {
        if ((st = parse_bool("SLUICE_POSTFETCH_FORCE_CPU", v, &b, err))) return st;
        if (b) o->mode = SL_FETCH_CPU;
    }
    if (ENV("SLUICE_POSTFETCH_BLOCK_ON_MISS") &&
        (st = parse_bool("SLUICE_POSTFETCH_BLOCK_ON_MISS", v, &o->block_on_miss, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_MAX_TRANSFERS")) {
        if ((st = parse_u64("SLUICE_POSTFETCH_MAX_TRANSFERS", v, 1, 256, &u, err))) return st;
        o->max_transfers = (int)u;
    }
    if (ENV("SLUICE_POSTFETCH_SCRATCHPAD_MB")) {
        if ((st = parse_u64("SLUICE_POSTFETCH_SCRATCHPAD_MB", v, 1, 1048576, &u, err))) return st;
        o->scratch_bytes = u << 20;
    }
    if (ENV("SLUICE_POSTFETCH_CACHE_MB")) {
        if ((st = parse_u64("SLUICE_POSTFETCH_CACHE_MB", v, 0, 1048576, &u, err))) return st;
        o->cache_bytes = u << 20;
    }
    if (ENV("SLUICE_POSTFETCH_POLICY") &&
        (st = parse_policy("SLUICE_POSTFETCH_POLICY", v, &o->policy, err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_PIN")) o->pinned = v;
    if (ENV("SLUICE_POSTFETCH_USE_DEDICATED_STREAMS") &&
        (st = parse_bool("SLUICE_POSTFETCH_USE_DEDICATED_STREAMS", v, &o->dedicated_streams,
                         err)))
        return st;
    if (ENV("SLUICE_POSTFETCH_DEBUG") && (st = parse_bool("SLUICE_POSTFETCH_DEBUG", v, &o->debug,
                                                          err)))
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
        else if (!strcmp(k, "block_on_miss")) st = parse_bool(what, v, &o->block_on_miss, err);
        else if (!strcmp(k, "max_transfers")) {
            if (!(st = parse_u64(what, v, 1, 256, &u, err))) o->max_transfers = (int)u;
        } else if (!strcmp(k, "scratch_kb")) {
            if (!(st = parse_u64(what, v, 1, (uint64_t)1 << 30, &u, err)))
                o->scratch_bytes = u << 10;
        } else if (!strcmp(k, "cache_kb")) {
            if (!(st = parse_u64(what, v, 0, (uint64_t)1 << 30, &u, err)))
                o->cache_bytes = u << 10;
        } else if (!strcmp(k, "policy")) st = parse_policy(what, v, &o->policy, err);
        else if (!strcmp(k, "decay")) st = parse_double(what, v, 1e-6, 1.0, &o->lfu_decay, err);
        else if (!strcmp(k, "pin")) {
            if (!pin_buf || strlen(v) >= pin_cap)
                return sl_error_set(err, SL_ERR_INVALID, "%s='%s': no room for the list", what, v);
            memcpy(pin_buf, v, strlen(v) + 1);
            o->pinned = pin_buf;
        } else if (!strcmp(k, "streams")) {
            if (!strcmp(v, "dedicated")) o->dedicated_streams = true;
            else if (!strcmp(v, "shared")) o->dedicated_streams = false;
            else st = sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected dedicated or shared",
                                   what, v);
        } else if (!strcmp(k, "debug")) st = parse_bool(what, v, &o->debug, err);
        else if (!strcmp(k, "trace")) st = parse_bool(what, v, &o->trace, err);
        else if (!strcmp(k, "cpu_gbs")) st = parse_double(what, v, 0.0, 1e6, &o->cpu_gbs, err);
        else if (!strcmp(k, "pcie_gbs")) st = parse_double(what, v, 0.0, 1e6, &o->pcie_gbs, err);
        else if (!strcmp(k, "dev_gbs")) st = parse_double(what, v, 0.0, 1e6, &o->dev_gbs, err);
        else
            st = sl_error_set(err, SL_ERR_INVALID,
                              "scheduler option '%s': unknown key (mode, block_on_miss, "
                              "max_transfers, scratch_kb, cache_kb, policy, decay, pin, streams, "
                              "debug, trace, cpu_gbs, pcie_gbs, dev_gbs)", k);
        if (st) return st;
    }
    return SL_OK;
}
