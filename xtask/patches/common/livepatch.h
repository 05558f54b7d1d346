/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The livepatch around one replacement function, shared by the patches under
 * xtask/patches/ (`cargo xtask patch-ab`). The including file defines
 * LP_OLD_FUNC (the vmlinux function replaced, a string) and LP_NEW_FUNC (its
 * replacement) before including this header.
 *
 * Each variant of a patch is its own module, and every one of them sets
 * .replace = true: loading a variant atomically replaces whichever variant is
 * live (after the livepatch transition), and the replaced module can then be
 * removed, so one copy of the replacement function stays in kallsyms and
 * `damon-trace record --func` names it without ambiguity. Same shape as the
 * kernel's samples/livepatch/livepatch-sample.c.
 */
#include <linux/livepatch.h>
#include <linux/module.h>

static struct klp_func lp_funcs[] = {
	{
		.old_name = LP_OLD_FUNC,
		.new_func = LP_NEW_FUNC,
	},
	{}
};

static struct klp_object lp_objs[] = {
	{
		/* name NULL: the function is in vmlinux */
		.funcs = lp_funcs,
	},
	{}
};

static struct klp_patch lp_patch = {
	.mod = THIS_MODULE,
	.objs = lp_objs,
	.replace = true,
};

static int __init lp_init(void)
{
	return klp_enable_patch(&lp_patch);
}

static void __exit lp_exit(void)
{
}

module_init(lp_init);
module_exit(lp_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("damon-trace patch-ab: one variant of a patch, as a livepatch");
MODULE_INFO(livepatch, "Y");
