/* SPDX-License-Identifier: GPL-2.0 */
/*
 * damon_hot_score() of mm/damon/ops-common.c as in mainline, for the patches
 * under xtask/patches/: the same text in v6.6 and in torvalds/linux at
 * 0a707d6b04e0 (a 7.x-era tree, with damos_ops_has_filter()); Debian's 7.2.13
 * source itself was not compared, but the modules build against its headers
 * and replace the function it exports. Its one change: `use_fls` picks how age_in_log is
 * computed, the upstream loop that counts the bits of age_in_sec (false) or
 * fls(), which returns the same value (the 1-based position of the highest set
 * bit, 0 for 0, at most 32 = DAMON_MAX_AGE_IN_LOG for an unsigned int).
 * Always inlined with a constant `use_fls`, so each variant compiles to one
 * branch-free copy of the function.
 */
#include <linux/bitops.h>
#include <linux/damon.h>
#include <linux/minmax.h>

/* Private to ops-common.c upstream, copied with the function. */
#define DAMON_MAX_SUBSCORE	(100)
#define DAMON_MAX_AGE_IN_LOG	(32)

static __always_inline int damon_hot_score_copy(struct damon_ctx *c,
		struct damon_region *r, struct damos *s, bool use_fls)
{
	int freq_subscore;
	unsigned int age_in_sec;
	int age_in_log, age_subscore;
	unsigned int freq_weight = s->quota.weight_nr_accesses;
	unsigned int age_weight = s->quota.weight_age;
	int hotness;

	freq_subscore = r->nr_accesses * DAMON_MAX_SUBSCORE /
		damon_max_nr_accesses(&c->attrs);

	age_in_sec = (unsigned long)r->age * c->attrs.aggr_interval / 1000000;
	if (use_fls)
		age_in_log = min_t(int, fls(age_in_sec), DAMON_MAX_AGE_IN_LOG);
	else
		for (age_in_log = 0;
		     age_in_log < DAMON_MAX_AGE_IN_LOG && age_in_sec;
		     age_in_log++, age_in_sec >>= 1)
			;

	/* If frequency is 0, higher age means it's colder */
	if (freq_subscore == 0)
		age_in_log *= -1;

	/*
	 * Now age_in_log is in [-DAMON_MAX_AGE_IN_LOG, DAMON_MAX_AGE_IN_LOG].
	 * Scale it to be in [0, 100] and set it as age subscore.
	 */
	age_in_log += DAMON_MAX_AGE_IN_LOG;
	age_subscore = age_in_log * DAMON_MAX_SUBSCORE /
		DAMON_MAX_AGE_IN_LOG / 2;

	hotness = (freq_weight * freq_subscore + age_weight * age_subscore);
	if (freq_weight + age_weight)
		hotness /= freq_weight + age_weight;
	/*
	 * Transform it to fit in [0, DAMOS_MAX_SCORE]
	 */
	hotness = hotness * DAMOS_MAX_SCORE / DAMON_MAX_SUBSCORE;

	return hotness;
}
