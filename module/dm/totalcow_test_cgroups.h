/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * For KUnit tests of I/O cgroup rules (dm-totalcow's fills, page-cache
 * sharing's shared reads): a fake hierarchy. Its cgroups are only what
 * cgroup_is_descendant() reads (root, level, ancestors), its css only
 * their cgroup and parent, and CSS_NO_REF makes their references no-ops.
 */
#ifndef TOTALCOW_TEST_CGROUPS_H
#define TOTALCOW_TEST_CGROUPS_H

#include <kunit/test.h>
#include <linux/cgroup.h>

/* root -> a -> a1, root -> b */
struct tc_test_tree {
	struct cgroup_subsys_state root, a, b, a1;
};

static struct cgroup *tc_test_cgroup(struct kunit *test, struct cgroup_root *hier,
				     struct cgroup_subsys_state *css,
				     struct cgroup_subsys_state *parent)
{
	int level = parent ? parent->cgroup->level + 1 : 0;
	struct cgroup *cg;

	cg = kunit_kzalloc(test, struct_size(cg, ancestors, level + 1), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cg);
	cg->root = hier;
	cg->level = level;
	if (parent)
		memcpy(cg->ancestors, parent->cgroup->ancestors,
		       level * sizeof(cg->ancestors[0]));
	cg->ancestors[level] = cg;
	css->cgroup = cg;
	css->parent = parent;
	css->flags = CSS_NO_REF;
	return cg;
}

static struct tc_test_tree *tc_test_tree(struct kunit *test)
{
	struct cgroup_root *hier = kunit_kzalloc(test, sizeof(*hier), GFP_KERNEL);
	struct tc_test_tree *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, hier);
	KUNIT_ASSERT_NOT_NULL(test, t);
	tc_test_cgroup(test, hier, &t->root, NULL);
	tc_test_cgroup(test, hier, &t->a, &t->root);
	tc_test_cgroup(test, hier, &t->b, &t->root);
	tc_test_cgroup(test, hier, &t->a1, &t->a);
	return t;
}

#endif /* TOTALCOW_TEST_CGROUPS_H */
