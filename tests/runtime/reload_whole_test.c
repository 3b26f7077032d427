/* A live reload applies a file whole or not at all (sl_reload_changed, runtime/reload.c): a
 * rewrite whose only change is a hyperparameter the model read at open (expert_used_count),
 * and a rewrite of another architecture (its tensors partly matching by name and shape), are
 * refused with an error naming the key or the file and why; the logits stay those of the
 * model as opened, bit for bit, and every later reload refuses and reports the file again
 * (never "nothing changed"). Putting the original back is accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/swap_testlib.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

static void write_tm(const char *arch, const char *key, int64_t val, const char *path)
{
    tm_params p;
    tm_defaults(arch, &p);
    p.seed = 7;
    p.set_key = key;
    p.set_val = val;
    sl_error err;
    CHECK_MSG(tm_write(&p, path, &err) == SL_OK, "%s", err.msg);
}

/* A reload that must be refused: an error naming what, no change, logits as before. */
static void refused(sl_model *m, const char *what, const float *l_before, int V)
{
    for (int round = 0; round < 2; round++) { /* the later call reports it too */
        sl_reload_report r;
        sl_error e = {0};
        const sl_status st = sl_reload_changed(m, &r, &e);
        CHECK_MSG(st != SL_OK, "round %d: a reload that cannot be applied whole returned OK "
                  "(changed %d, %u reloaded, %u refused)", round, r.changed, r.n_reloaded,
                  r.n_refused);
        if (st) CHECK_CONTAINS(e.msg, what);
        CHECK_MSG(!r.changed && r.n_reloaded == 0, "round %d: %u tensors applied", round,
                  r.n_reloaded);
        sl_reload_report_free(&r);
        float *l = run_logits(m, NULL);
        CHECK_MSG(same(l, l_before, V), "round %d: the logits changed after a refused reload",
                  round);
        free(l);
    }
}

static void test_metadata_only(void)
{
    const char *orig = tmp_path("w_orig.gguf"), *hp = tmp_path("w_hp.gguf");
    const char *live = tmp_path("w_live.gguf");
    write_tm("qwen3moe", NULL, 0, orig);
    write_tm("qwen3moe", "expert_used_count", 1, hp); /* 2 by default */
    copy_file(orig, live);
    sl_model *m = open_model(live, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL), *l_hp = fresh_logits(hp, SL_PLACE_GPU, NULL);
    CHECK_MSG(l_orig && l_hp && !same(l_orig, l_hp, V), "the hyperparameter changes logits");
    copy_file(hp, live); /* the same tensors, byte for byte; one metadata value differs */
    refused(m, "expert_used_count", l_orig, V);
    copy_file(orig, live); /* back as opened: accepted, nothing to apply */
    sl_reload_report r;
    sl_error e;
    CHECK_MSG(sl_reload_changed(m, &r, &e) == SL_OK, "%s", e.msg);
    CHECK(!r.changed);
    sl_reload_report_free(&r);
    float *l = run_logits(m, NULL);
    CHECK(same(l, l_orig, V));
    free(l);
    free(l_orig);
    free(l_hp);
    sl_model_close(m);
}

static void test_other_arch(void)
{
    const char *orig = tmp_path("a_orig.gguf"), *other = tmp_path("a_other.gguf");
    const char *live = tmp_path("a_live.gguf");
    write_tm("llama", NULL, 0, orig);
    write_tm("qwen3moe", NULL, 0, other); /* attention and norms by the same names */
    copy_file(orig, live);
    sl_model *m = open_model(live, SL_PLACE_GPU);
    if (!m) return;
    const int V = n_vocab(m);
    float *l_orig = run_logits(m, NULL);
    copy_file(other, live);
    refused(m, "general.architecture", l_orig, V);
    free(l_orig);
    sl_model_close(m);
}

int main(void)
{
    test_metadata_only();
    test_other_arch();
    return sl_test_finish("reload_whole_test");
}
