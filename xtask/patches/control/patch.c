// SPDX-License-Identifier: GPL-2.0
/*
 * control: a known slowdown, so every `cargo xtask patch-ab` shows what the
 * harness can detect. Both variants are damon_hot_score() of
 * mm/damon/ops-common.c (Debian 7.2.13) with seed-000's fls(); the after
 * variant (LP_AFTER=1) adds ndelay(100) before returning: 100 ns on hardware,
 * several times that under an emulated CPU, whose clock the delay loop follows.
 */
#include <linux/delay.h>

#include "hot_score.h"

static noinline int lp_damon_hot_score(struct damon_ctx *c,
		struct damon_region *r, struct damos *s)
{
	int hotness = damon_hot_score_copy(c, r, s, true);

	if (LP_AFTER)
		ndelay(100);
	return hotness;
}

#define LP_OLD_FUNC "damon_hot_score"
#define LP_NEW_FUNC lp_damon_hot_score
#include "livepatch.h"
