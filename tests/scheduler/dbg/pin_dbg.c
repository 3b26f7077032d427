#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
int main(int argc, char **argv) { (void)argc;
    tm_params p; tm_defaults(argv[1], &p);
    sl_error e; tm_write(&p, "/tmp/pin_dbg.gguf", &e);
    sl_model_options o = sl_model_options_default(); o.placement = SL_PLACE_CPU; o.device="sim"; o.progress=false; o.n_threads=2;
    sl_model *m; if (sl_model_open("/tmp/pin_dbg.gguf", &o, &m, &e)) { printf("open %s\n", e.msg); return 1; }
    sl_ctx_options co = sl_ctx_options_default(); co.n_ctx = 64; co.sched = argv[2];
    sl_ctx *c; if (sl_ctx_create(m, &co, &c, &e)) { printf("ctx %s\n", e.msg); return 1; }
    int32_t t[6] = {1,17,250,3,99,42};
    if (sl_ctx_eval(c, t, 6, &e)) printf("eval %s\n", e.msg);
    for (int i = 0; i < 5; i++) sl_ctx_eval(c, t + i, 1, &e);
    sl_ctx_stats s; sl_ctx_stats_get(c, &s);
    printf("%s fetches %llu fb %llu lookups %llu hits %llu copies %llu\n", s.moe_scheduler, (unsigned long long)s.expert_fetches, (unsigned long long)s.expert_fallbacks, (unsigned long long)s.expert_cache_lookups, (unsigned long long)s.expert_cache_hits, (unsigned long long)s.copies);
    sl_ctx_destroy(c); sl_model_close(m); return 0;
}
