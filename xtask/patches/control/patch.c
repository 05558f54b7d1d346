// SPDX-License-Identifier: GPL-2.0
/*
 * control: a known slowdown, so every `cargo xtask patch-ab` shows what the
 * harness can detect. Both variants are damon_hot_score() of
 * mm/damon/ops-common.c (mainline; see hot_score.h) with seed-000's fls();
 * the after variant (LP_AFTER=1) adds ndelay(LP_DELAY_NS) before returning.
 * The delay loop follows the clock, so it adds about LP_DELAY_NS under an
 * emulated CPU too. Preemption stays disabled around it, since ndelay() may
 * otherwise let the task be preempted between its clock reads. Under TCG the
 * after variant still shows a millisecond tail on ~5 % of its calls (cause not
 * established); the verdict rests on the per-run medians.
 *
 * 1000 ns: under TCG on a loaded two-core host the per-run median of this
 * function moves by 200-400 ns from run to run, and a 100 ns delay (tried
 * first) was not resolved by three runs a side.
 */
#include <linux/delay.h>

#include "hot_score.h"

#define LP_DELAY_NS 1000

static noinline int lp_damon_hot_score(struct damon_ctx *c,
		struct damon_region *r, struct damos *s)
{
	int hotness = damon_hot_score_copy(c, r, s, true);

	if (LP_AFTER) {
		preempt_disable();
		ndelay(LP_DELAY_NS);
		preempt_enable();
	}
	return hotness;
}

#define LP_OLD_FUNC "damon_hot_score"
#define LP_NEW_FUNC lp_damon_hot_score
#include "livepatch.h"
