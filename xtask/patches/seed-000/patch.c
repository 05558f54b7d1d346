// SPDX-License-Identifier: GPL-2.0
/*
 * seed-000, the patch damon-trace started from: in damon_hot_score()
 * (mm/damon/ops-common.c, mainline; see hot_score.h), the loop counting the
 * bits of the region's age replaced by fls(). Variant before (LP_AFTER=0):
 * the upstream loop; after (LP_AFTER=1): fls(). Both compute the same scores.
 */
#include "hot_score.h"

static noinline int lp_damon_hot_score(struct damon_ctx *c,
		struct damon_region *r, struct damos *s)
{
	return damon_hot_score_copy(c, r, s, LP_AFTER);
}

#define LP_OLD_FUNC "damon_hot_score"
#define LP_NEW_FUNC lp_damon_hot_score
#include "livepatch.h"
