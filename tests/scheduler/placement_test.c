/* scheduler/policy/placement: the policy's rules on a synthetic tensor list (no model, no device).
 * llama.cpp's meaning of -ngl (the LAST N layers; the output only when N > n_layer), -ot
 * precedence (first match wins, searched in the name, ECMAScript \d), --cpu-moe /
 * --n-cpu-moe, group coherence (a group follows its explicit rule; two explicit sides in
 * one group is an error naming both), the device budget (an impossible request names the
 * tensor and the sizes), AUTO's candidates in order, types without a device kernel, and the
 * plan's invariants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/policy/placement.h"
#include "tests/testing.h"

enum { N_LAYER = 4, MAX_T = 64 };

typedef struct model {
    sl_place_tensor t[MAX_T];
    char names[MAX_T][64];
    size_t n;
} model;

static void add(model *m, const char *name, uint32_t n_dims, uint64_t bytes)
{
    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    sl_place_classify(m->names[m->n], n_dims, 8, &m->t[m->n]);
    m->t[m->n].bytes = bytes;
    m->n++;
}

/* A qwen3moe-like model: per layer 1 KiB of attention, 8 KiB of experts; a 2 KiB output. */
static void moe_model(model *m)
{
    memset(m, 0, sizeof *m);
    add(m, "token_embd.weight", 2, 2048);
    char b[64];
    for (int il = 0; il < N_LAYER; il++) {
        const char *core[] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight",
                              "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
                              "ffn_gate_inp.weight"};
        for (int i = 0; i < 7; i++) {
            snprintf(b, sizeof b, "blk.%d.%s", il, core[i]);
            const bool vec = strstr(core[i], "norm") != NULL;
            add(m, b, vec ? 1 : 2, vec ? 64 : 200);
        }
        const char *ex[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        for (int i = 0; i < 3; i++) {
            snprintf(b, sizeof b, "blk.%d.%s", il, ex[i]);
            add(m, b, 3, 8192 / 3);
        }
    }
    add(m, "output_norm.weight", 1, 64);
    add(m, "output.weight", 2, 2048);
}

static int find(const model *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return (int)i;
    CHECK_MSG(0, "no tensor %s", name);
    return 0;
}

static bool dev(const model *m, const sl_place_plan *p, const char *name)
{
    return p->on_device[find(m, name)];
}

static sl_status resolve(const model *m, const sl_place_options *o, sl_place_plan *p,
                         sl_error *e)
{
    sl_status st = sl_place_resolve(m->t, m->n, N_LAYER, o, p, e);
    if (!st) CHECK(sl_place_plan_validate(p, m->t, m->n, e) == SL_OK);
    return st;
}

static void test_classify(void)
{
    sl_place_tensor t;
    sl_place_classify("blk.12.ffn_up_exps.weight", 3, 8, &t);
    CHECK(t.group == SL_PG_EXPERTS && t.layer == 12 && !t.vector);
    sl_place_classify("blk.3.ffn_gate.5.weight", 2, 8, &t); /* per-expert (old Mixtral) */
    CHECK(t.group == SL_PG_EXPERTS && t.layer == 3);
    sl_place_classify("blk.3.ffn_gate.weight", 2, 0, &t);
    CHECK(t.group == SL_PG_FFN);
    sl_place_classify("blk.3.ffn_gate_inp.weight", 2, 8, &t);
    CHECK(t.group == SL_PG_CORE);
    sl_place_classify("blk.3.ffn_up_shexp.weight", 2, 8, &t);
    CHECK(t.group == SL_PG_CORE);
    sl_place_classify("blk.0.attn_norm.weight", 1, 8, &t);
    CHECK(t.group == SL_PG_CORE && t.vector);
    sl_place_classify("output.weight", 2, 8, &t);
    CHECK(t.group == SL_PG_OUTPUT && t.layer == -1);
    sl_place_classify("token_embd.weight", 2, 8, &t);
    CHECK(t.group == SL_PG_EMBD);
}

static void test_ngl(void)
{
    model m;
    moe_model(&m);
    sl_place_plan p;
    sl_error e;
    sl_place_options o = {.mode = SL_PLACE_LAYERS, .n_gpu_layers = 1};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    /* llama.cpp: -ngl 1 is the LAST layer, not the first; the output stays on the CPU */
    CHECK(dev(&m, &p, "blk.3.attn_q.weight") && dev(&m, &p, "blk.3.ffn_up_exps.weight"));
    CHECK(!dev(&m, &p, "blk.0.attn_q.weight") && !dev(&m, &p, "blk.2.attn_q.weight"));
    CHECK(!dev(&m, &p, "output.weight") && !dev(&m, &p, "token_embd.weight"));
    sl_place_plan_free(&p);
    o.n_gpu_layers = N_LAYER;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(dev(&m, &p, "blk.0.attn_q.weight") && !dev(&m, &p, "output.weight"));
    sl_place_plan_free(&p);
    o.n_gpu_layers = N_LAYER + 1; /* and the output */
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(dev(&m, &p, "output.weight") && dev(&m, &p, "output_norm.weight"));
    CHECK(!dev(&m, &p, "token_embd.weight")); /* read by row on the host */
    sl_place_plan_free(&p);
    o.n_gpu_layers = 999;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.device_bytes == 4 * (5 * 200 + 2 * 64 + 3 * (8192 / 3)) + 64 + 2048);
    CHECK(p.host_bytes == 2048);
    sl_place_plan_free(&p);
    o.n_gpu_layers = -1;
    CHECK(resolve(&m, &o, &p, &e) == SL_ERR_INVALID);
}

static void test_overrides(void)
{
    model m;
    moe_model(&m);
    sl_place_plan p;
    sl_error e;
    /* first match wins: blk.1's experts to the GPU, every other expert to the CPU */
    sl_place_options o = {.mode = SL_PLACE_LAYERS, .n_gpu_layers = 0,
                          .override_tensor = "blk\\.1\\.ffn_.*_exps=CUDA0,exps=CPU"};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(dev(&m, &p, "blk.1.ffn_down_exps.weight") && !dev(&m, &p, "blk.2.ffn_up_exps.weight"));
    CHECK(!dev(&m, &p, "blk.1.attn_q.weight")); /* the mode keeps the core on the host */
    CHECK(p.by[find(&m, "blk.1.ffn_up_exps.weight")] == 0);
    CHECK(p.by[find(&m, "blk.2.ffn_up_exps.weight")] == 1);
    CHECK(p.n_override == 2 && !strcmp(p.override_text[1], "exps=CPU"));
    sl_place_plan_free(&p);
    /* the reverse order: exps=CPU matches first everywhere */
    o.override_tensor = "exps=CPU,blk\\.1\\.ffn_.*_exps=CUDA0";
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(!dev(&m, &p, "blk.1.ffn_down_exps.weight"));
    sl_place_plan_free(&p);
    /* ECMAScript \d, and GPU as a synonym of CUDA0; -ot exps=CPU with -ngl 999 */
    o = (sl_place_options){.mode = SL_PLACE_LAYERS, .n_gpu_layers = 999,
                           .override_tensor = "blk\\.[\\d]\\.ffn_up_exps=CPU"};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    /* up decides its group: gate and down follow (a layer's experts live on one side) */
    CHECK(!dev(&m, &p, "blk.2.ffn_gate_exps.weight") && dev(&m, &p, "blk.2.attn_q.weight"));
    CHECK(p.by[find(&m, "blk.2.ffn_gate_exps.weight")] == SL_PLACE_BY_GROUP);
    sl_place_plan_free(&p);
    /* two explicit sides in one group: an error naming both tensors */
    o.override_tensor = "ffn_up_exps=CPU,ffn_down_exps=GPU";
    CHECK(resolve(&m, &o, &p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "blk.0.ffn_up_exps.weight");
    CHECK_CONTAINS(e.msg, "blk.0.ffn_down_exps.weight");
    /* norms follow their group whatever a rule says of them */
    o.override_tensor = "attn_norm=CPU";
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(dev(&m, &p, "blk.0.attn_norm.weight"));
    sl_place_plan_free(&p);
    /* cpu mode with a device override */
    o = (sl_place_options){.mode = SL_PLACE_CPU, .override_tensor = "output=CUDA0"};
    CHECK(resolve(&m, &o, &p, &e) == SL_ERR_INVALID);
    /* syntax errors name the entry */
    CHECK(sl_place_overrides_check("exps=CPU,(=CPU", &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "(=CPU");
    CHECK(sl_place_overrides_check("exps=TPU", &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "TPU");
    CHECK(sl_place_overrides_check("exps", &e) == SL_ERR_INVALID);
    CHECK(sl_place_overrides_check("=CPU", &e) == SL_ERR_INVALID);
    CHECK(sl_place_overrides_check("a=CPU,b=cuda0,c=gpu", &e) == SL_OK);
}

static void test_cpu_moe(void)
{
    model m;
    moe_model(&m);
    sl_place_plan p;
    sl_error e;
    sl_place_options o = {.mode = SL_PLACE_GPU, .n_cpu_moe = 2};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(!dev(&m, &p, "blk.1.ffn_up_exps.weight") && dev(&m, &p, "blk.2.ffn_up_exps.weight"));
    CHECK(dev(&m, &p, "blk.0.attn_q.weight"));
    CHECK(p.by[find(&m, "blk.0.ffn_up_exps.weight")] == SL_PLACE_BY_CPU_MOE);
    sl_place_plan_free(&p);
    o = (sl_place_options){.mode = SL_PLACE_GPU, .cpu_moe = true};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    for (int il = 0; il < N_LAYER; il++) {
        char b[64];
        snprintf(b, sizeof b, "blk.%d.ffn_gate_exps.weight", il);
        CHECK(!dev(&m, &p, b));
    }
    CHECK(p.host_bytes == 2048 + 4 * 3 * (8192 / 3));
    sl_place_plan_free(&p);
    /* an -ot rule comes before --cpu-moe */
    o.override_tensor = "blk\\.3\\.ffn_.*_exps=CUDA0";
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(dev(&m, &p, "blk.3.ffn_up_exps.weight") && !dev(&m, &p, "blk.2.ffn_up_exps.weight"));
    sl_place_plan_free(&p);
}

static void test_budget(void)
{
    model m;
    moe_model(&m);
    sl_place_plan p;
    sl_error e;
    const uint64_t core = 5 * 200 + 2 * 64, ex = 3 * (8192 / 3), out = 64 + 2048;
    const uint64_t all = 4 * (core + ex) + out;
    /* AUTO: all fits */
    sl_place_options o = {.mode = SL_PLACE_AUTO, .vram_budget = all + 100, .reserve_bytes = 100};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_GPU && p.device_bytes == all);
    sl_place_plan_free(&p);
    /* one byte short: the experts of the first layer go to the host (--n-cpu-moe 1) */
    o.vram_budget = all + 99;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_EXPERTS_CPU && p.n_cpu_moe == 1);
    CHECK(!dev(&m, &p, "blk.0.ffn_up_exps.weight") && dev(&m, &p, "blk.1.ffn_up_exps.weight"));
    CHECK_CONTAINS(p.why, "--n-cpu-moe 1");
    sl_place_plan_free(&p);
    /* room for the dense part and two layers' experts */
    o.vram_budget = 4 * core + out + 2 * ex + 100;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.n_cpu_moe == 2 && p.device_bytes <= p.budget);
    sl_place_plan_free(&p);
    /* every expert on the host still fits */
    o.vram_budget = 4 * core + out + 100;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_EXPERTS_CPU && p.n_cpu_moe == N_LAYER);
    sl_place_plan_free(&p);
    /* not even the dense part, and a whole layer does not fit either */
    o.vram_budget = 4 * core + out + 99;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_CPU && p.device_bytes == 0);
    sl_place_plan_free(&p);
    /* less than the reserve: everything on the host */
    o.vram_budget = 50;
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_CPU && p.device_bytes == 0);
    sl_place_plan_free(&p);
    /* an explicit mode that does not fit: the error names the tensor and the sizes */
    o = (sl_place_options){.mode = SL_PLACE_GPU, .vram_budget = 4000, .reserve_bytes = 100};
    CHECK(resolve(&m, &o, &p, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "--vram-budget");
    CHECK_CONTAINS(e.msg, "blk.0.ffn_up_exps.weight"); /* 1128 + 2730 fit in 3900; + 2730 not */
    CHECK_CONTAINS(e.msg, "first that does not fit");
    /* no budget and no device figure: no check */
    o = (sl_place_options){.mode = SL_PLACE_GPU};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    sl_place_plan_free(&p);
    /* the default budget is 90% of free memory */
    o = (sl_place_options){.mode = SL_PLACE_AUTO, .device_free = all * 10 / 9 + 20};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_GPU);
    sl_place_plan_free(&p);
    /* a prefill's staging buffer (stream_bytes) is taken off only a plan that leaves a device
     * layer's experts on the host: every weight still fits in all + reserve, and the first
     * layers' experts on the host need the buffer's room too */
    o = (sl_place_options){.mode = SL_PLACE_AUTO, .vram_budget = all + 100, .reserve_bytes = 100,
                           .stream_bytes = 1000};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_GPU && p.device_bytes == all && p.budget == all);
    sl_place_plan_free(&p);
    o.vram_budget = all + 99; /* not all: the buffer comes off, one layer's experts make room */
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_EXPERTS_CPU && p.n_cpu_moe == 1 && p.budget == all - 1 - 1000 &&
          p.device_bytes <= p.budget);
    sl_place_plan_free(&p);
    o.stream_bytes = ex; /* a buffer of a layer's experts: one layer's no longer make room */
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_EXPERTS_CPU && p.n_cpu_moe == 2 && p.budget == all - 1 - ex &&
          p.device_bytes <= p.budget);
    sl_place_plan_free(&p);
    /* every layer on the host (-ngl 0): nothing streams, the buffer stays in the budget */
    o = (sl_place_options){.mode = SL_PLACE_LAYERS, .n_gpu_layers = 0, .vram_budget = 300,
                           .reserve_bytes = 100, .stream_bytes = 1000};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(p.budget == 200);
    sl_place_plan_free(&p);
}

static void test_no_device_kernel(void)
{
    model m;
    moe_model(&m);
    m.t[find(&m, "blk.2.ffn_down_exps.weight")].no_device = true;
    m.t[find(&m, "blk.1.attn_v.weight")].no_device = true;
    sl_place_plan p;
    sl_error e;
    sl_place_options o = {.mode = SL_PLACE_GPU};
    CHECK(resolve(&m, &o, &p, &e) == SL_OK);
    CHECK(!dev(&m, &p, "blk.2.ffn_up_exps.weight") && dev(&m, &p, "blk.2.attn_q.weight"));
    CHECK(!dev(&m, &p, "blk.1.attn_q.weight") && dev(&m, &p, "blk.1.ffn_up_exps.weight"));
    CHECK(p.by[find(&m, "blk.2.ffn_down_exps.weight")] == SL_PLACE_BY_DEVICE);
    sl_place_plan_free(&p);
    /* forced onto the device by a rule: an error */
    o.override_tensor = "blk\\.2\\.ffn_down_exps=CUDA0";
    CHECK(resolve(&m, &o, &p, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "blk.2.ffn_down_exps.weight");
}

static void test_tied_and_dense(void)
{
    model m;
    memset(&m, 0, sizeof m);
    add(&m, "token_embd.weight", 2, 1000);
    m.t[0].tied = true; /* no output.weight: token_embd is the output matrix too */
    add(&m, "blk.0.attn_q.weight", 2, 100);
    add(&m, "blk.0.ffn_gate.weight", 2, 300);
    add(&m, "blk.0.ffn_up.weight", 2, 300);
    add(&m, "blk.0.ffn_down.weight", 2, 300);
    add(&m, "output_norm.weight", 1, 10);
    sl_place_plan p;
    sl_error e;
    sl_place_options o = {.mode = SL_PLACE_GPU};
    CHECK(sl_place_resolve(m.t, m.n, 1, &o, &p, &e) == SL_OK);
    CHECK(p.on_device[0] && p.on_device[5]); /* tied: with the output */
    sl_place_plan_free(&p);
    o = (sl_place_options){.mode = SL_PLACE_GPU, .override_tensor = "ffn_down=CPU"};
    CHECK(sl_place_resolve(m.t, m.n, 1, &o, &p, &e) == SL_OK);
    CHECK(!p.on_device[2] && !p.on_device[3] && !p.on_device[4] && p.on_device[1]);
    sl_place_plan_free(&p);
}

/* A dense model under AUTO: the last layers that fit (-ngl), the output only with all. */
static void test_auto_dense(void)
{
    model m;
    memset(&m, 0, sizeof m);
    add(&m, "token_embd.weight", 2, 1000);
    char b[64];
    for (int il = 0; il < N_LAYER; il++) {
        snprintf(b, sizeof b, "blk.%d.attn_q.weight", il);
        add(&m, b, 2, 100);
        snprintf(b, sizeof b, "blk.%d.ffn_up.weight", il);
        add(&m, b, 2, 900);
    }
    add(&m, "output.weight", 2, 1000);
    sl_place_plan p;
    sl_error e;
    sl_place_options o = {.mode = SL_PLACE_AUTO, .vram_budget = 2500};
    CHECK(sl_place_resolve(m.t, m.n, N_LAYER, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_LAYERS && p.n_gpu_layers == 2 && p.device_bytes == 2000);
    CHECK(p.on_device[7] && p.on_device[5] && !p.on_device[3] && !p.on_device[9]);
    CHECK_CONTAINS(p.why, "-ngl 2");
    sl_place_plan_free(&p);
    o.vram_budget = 5000; /* all layers and the output */
    CHECK(sl_place_resolve(m.t, m.n, N_LAYER, &o, &p, &e) == SL_OK);
    CHECK(p.mode == SL_PLACE_GPU && p.on_device[9] && !p.on_device[0]);
    sl_place_plan_free(&p);
}

/* The modes' one table: every name parses back to its mode, an unknown name's error lists them
 * all, and a value outside the table has no row. */
static void test_mode_table(void)
{
    sl_error e;
    char names[256];
    sl_place_mode_names(names, sizeof names, ", ");
    for (int m = 0; m < SL_PLACE_COUNT; m++) {
        const sl_place_mode_info *i = sl_place_mode_info_get((sl_placement)m);
        CHECK(i && i->name && i->why && i->help && strstr(names, i->name));
        sl_placement back = SL_PLACE_COUNT;
        CHECK(sl_place_mode_parse(i->name, &back, &e) == SL_OK && back == (sl_placement)m);
    }
    CHECK(sl_place_mode_info_get(SL_PLACE_HOT_COLD)->needs_index);
    CHECK(!sl_place_mode_info_get(SL_PLACE_CPU)->needs_index);
    sl_placement p = SL_PLACE_AUTO;
    CHECK(sl_place_mode_parse("experts_cpu", &p, &e) == SL_ERR_INVALID && p == SL_PLACE_AUTO);
    CHECK(strstr(e.msg, "experts_cpu") && strstr(e.msg, names));
    CHECK(sl_place_mode_parse(NULL, &p, &e) == SL_ERR_INVALID);
    CHECK(!sl_place_mode_info_get(SL_PLACE_COUNT) && !sl_place_mode_name((sl_placement)-1));
    /* the policy refuses a mode outside the table, and names the mode an index needs */
    sl_place_options o = {.mode = SL_PLACE_COUNT};
    sl_place_tensor t = {.name = "output.weight", .layer = -1, .group = SL_PG_OUTPUT, .bytes = 1};
    sl_place_plan plan;
    CHECK(sl_place_resolve(&t, 1, 1, &o, &plan, &e) == SL_ERR_INVALID);
    o.mode = SL_PLACE_HOT_COLD;
    CHECK(sl_place_resolve(&t, 1, 1, &o, &plan, &e) == SL_ERR_INVALID && strstr(e.msg, "hot-cold"));
}

int main(void)
{
    test_mode_table();
    test_classify();
    test_ngl();
    test_overrides();
    test_cpu_moe();
    test_budget();
    test_no_device_kernel();
    test_tied_and_dense();
    test_auto_dense();
    return sl_test_finish("placement_test");
}
