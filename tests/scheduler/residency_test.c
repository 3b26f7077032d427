/* scheduler/policy/residency: the budget solver's arithmetic (ReactantServer's formulas, including
 * over-commit and a scratch larger than the ceiling) and the eviction choice (least recently
 * used first, pinned and busy entries never chosen, a newcomer larger than the budget). */
#include <stdio.h>

#include "scheduler/policy/residency.h"
#include "tests/testing.h"

enum { MiB = 1 << 20 };

static sl_res_budget solve(uint64_t arena, double frac, double wiggle, uint64_t scratch,
                           uint64_t pinned)
{
    const sl_res_budget_in in = {arena, frac, wiggle, scratch, pinned};
    sl_res_budget b = {0};
    sl_error err;
    CHECK(sl_res_budget_solve(&in, &b, &err) == SL_OK);
    CHECK_MSG(sl_res_budget_validate(&in, &b, &err) == SL_OK, "%s", err.msg);
    return b;
}

static void test_budget(void)
{
    /* 1000 MiB arena, 80% for weights, 5% wiggle, 100 MiB scratch, 300 MiB pinned:
     * ceiling 950, pool min(800, 850) = 800, on demand 500 */
    sl_res_budget b = solve(1000ull * MiB, 0.8, 0.05, 100ull * MiB, 300ull * MiB);
    CHECK(b.scratch_ceiling == 950ull * MiB);
    CHECK(b.weight_pool == 800ull * MiB);
    CHECK(b.on_demand_budget == 500ull * MiB);
    CHECK(!b.over_commit);
    /* the scratch decides: pool = 950 - 400 = 550 < 800 */
    b = solve(1000ull * MiB, 0.8, 0.05, 400ull * MiB, 0);
    CHECK(b.weight_pool == 550ull * MiB && b.on_demand_budget == 550ull * MiB);
    /* over-commit: pinned 600 > pool 550; nothing left on demand */
    b = solve(1000ull * MiB, 0.8, 0.05, 400ull * MiB, 600ull * MiB);
    CHECK(b.over_commit && b.on_demand_budget == 0 && b.weight_pool == 550ull * MiB);
    /* pinned exactly the pool: not over-committed */
    b = solve(1000ull * MiB, 0.8, 0.05, 400ull * MiB, 550ull * MiB);
    CHECK(!b.over_commit && b.on_demand_budget == 0);
    /* scratch above the ceiling: no weight pool at all */
    b = solve(1000ull * MiB, 1.0, 0.1, 2000ull * MiB, 0);
    CHECK(b.scratch_ceiling == 900ull * MiB && b.weight_pool == 0 && !b.over_commit);
    /* no wiggle, everything for weights, nothing else */
    b = solve(64ull * MiB, 1.0, 0.0, 0, 0);
    CHECK(b.scratch_ceiling == 64ull * MiB && b.weight_pool == 64ull * MiB);
    /* fractions out of range are refused naming the field */
    sl_error err;
    sl_res_budget out;
    const sl_res_budget_in bad1 = {MiB, 1.5, 0.1, 0, 0}, bad2 = {MiB, 0.5, 1.0, 0, 0};
    CHECK(sl_res_budget_solve(&bad1, &out, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "weight fraction");
    CHECK(sl_res_budget_solve(&bad2, &out, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "wiggle fraction");
    /* the validator catches a wrong answer */
    const sl_res_budget_in in = {1000, 0.5, 0, 0, 100};
    sl_res_budget wrong = {.scratch_ceiling = 1000, .weight_pool = 500, .on_demand_budget = 500};
    CHECK(sl_res_budget_validate(&in, &wrong, &err) == SL_ERR_INVALID);
}

static void test_evictions(void)
{
    /* budget 100: A(30, t=5) B(30, t=2) C(30, t=9) resident; D pinned (t=1); E wants 50 */
    sl_res_entry e[6] = {
        {SL_RS_DEVICE, 30, 5, false}, {SL_RS_DEVICE, 30, 2, false},
        {SL_RS_DEVICE, 30, 9, false}, {SL_RS_PINNED, 40, 1, false},
        {SL_RS_HOST, 50, 0, false},   {SL_RS_DISK, 200, 0, false}};
    size_t ev[6];
    sl_res_choice ch;
    sl_error err;
    CHECK(sl_res_choose_evictions(e, 6, 4, 100, ev, &ch, &err) == SL_OK);
    /* 90 + 50 > 100: evict B (oldest), then 60 + 50 > 100: evict A; 30 + 50 fits */
    CHECK(ch.n_evict == 2 && ev[0] == 1 && ev[1] == 0 && !ch.too_big && !ch.over);
    /* fits already: nothing evicted */
    CHECK(sl_res_choose_evictions(e, 6, 4, 140, ev, &ch, &err) == SL_OK);
    CHECK(ch.n_evict == 0 && !ch.over);
    /* a busy entry is skipped: A busy -> B then C */
    e[0].busy = true;
    CHECK(sl_res_choose_evictions(e, 6, 4, 100, ev, &ch, &err) == SL_OK);
    CHECK(ch.n_evict == 2 && ev[0] == 1 && ev[1] == 2 && !ch.over);
    /* all busy but B: cannot fit, over */
    e[2].busy = true;
    CHECK(sl_res_choose_evictions(e, 6, 4, 100, ev, &ch, &err) == SL_OK);
    CHECK(ch.n_evict == 1 && ev[0] == 1 && ch.over);
    e[0].busy = e[2].busy = false;
    /* larger than the whole budget: every unpinned resident entry goes, in LRU order; the
     * pinned one stays */
    CHECK(sl_res_choose_evictions(e, 6, 5, 100, ev, &ch, &err) == SL_OK);
    CHECK(ch.too_big && ch.over && ch.n_evict == 3);
    CHECK(ev[0] == 1 && ev[1] == 0 && ev[2] == 2);
    /* refusals */
    CHECK(sl_res_choose_evictions(e, 6, 0, 100, ev, &ch, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "already resident");
    CHECK(sl_res_choose_evictions(e, 6, 6, 100, ev, &ch, &err) == SL_ERR_RANGE);
    CHECK(sl_res_state_name(SL_RS_PINNED)[0] == 'p' && sl_res_state_name(SL_RS_COUNT)[0] == '?');
}

int main(void)
{
    test_budget();
    test_evictions();
    return sl_test_finish("residency_test");
}
