/* The sampling flags of model_flags.h, shared by generate and serve (where they set the
 * defaults of requests): one place for their names and ranges, which serve's request fields
 * also follow; the ranges are the library's (sluice.h SL_RANGE_*). */
#include "tools/common/model_flags.h"

int sl_cli_sampling_flags_parse(sl_cli_args *a, sl_sampler_options *so)
{
    static const char *const k_flags[] = {"--temp", "--top-k", "--top-p", "--min-p", "--seed"};
    size_t k = 0;
    while (k < sizeof k_flags / sizeof *k_flags && !sl_cli_is(a, k_flags[k], NULL)) k++;
    if (k == sizeof k_flags / sizeof *k_flags) return 0;
    const char *v = sl_cli_value(a);
    if (!v) return 2;
    double f64;
    int64_t i64;
    switch (k) {
    case 0:
        if (sl_cli_parse_f64(a->cmd, a->flag, v, SL_RANGE_TEMP, &f64)) return 2;
        so->temp = (float)f64;
        break;
    case 1:
        if (sl_cli_parse_i64(a->cmd, a->flag, v, SL_RANGE_TOP_K.lo, SL_RANGE_TOP_K.hi, &i64))
            return 2;
        so->top_k = (int32_t)i64;
        break;
    case 2:
        if (sl_cli_parse_f64(a->cmd, a->flag, v, SL_RANGE_TOP_P, &f64)) return 2;
        so->top_p = (float)f64;
        break;
    case 3:
        if (sl_cli_parse_f64(a->cmd, a->flag, v, SL_RANGE_MIN_P, &f64)) return 2;
        so->min_p = (float)f64;
        break;
    default:
        if (sl_cli_parse_u64(a->cmd, a->flag, v, &so->seed)) return 2;
        break;
    }
    return 1;
}
