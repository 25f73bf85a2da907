// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the waiting rule and the fleet's cgroup
 * (totalcow-cgroup.c), on a fake hierarchy (totalcow_test_cgroups.h).
 */
#include <kunit/test.h>

#include "totalcow_test_cgroups.h"

/*
 * A reader waits for a fill charged to its cgroup or to an ancestor, never
 * to a sibling's or a descendant's: those may be held back by limits its
 * own reads are free of. A fill charged to no cgroup is waited for.
 */
static void tc_cg_may_wait_for_own_and_ancestors_fills(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);

	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(&t->a, &t->a));
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(&t->a, &t->a1));
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(&t->root, &t->b));
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(&t->root, &t->a1));
	KUNIT_EXPECT_FALSE(test, tc_cg_may_wait(&t->a, &t->b));
	KUNIT_EXPECT_FALSE(test, tc_cg_may_wait(&t->a, &t->root));
	KUNIT_EXPECT_FALSE(test, tc_cg_may_wait(&t->a1, &t->a));
	KUNIT_EXPECT_FALSE(test, tc_cg_may_wait(&t->b, &t->a1));
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(NULL, &t->b));
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(NULL, NULL));
	KUNIT_EXPECT_FALSE(test, tc_cg_may_wait(&t->a, NULL));
}

/* The fleet starts at the first reader's parent and widens to the LCA. */
static void tc_cg_widen_to_the_closest_common_ancestor(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);

	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(NULL, &t->a1), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(NULL, &t->b), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(NULL, &t->root), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a, &t->a1), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a, &t->a), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a1, &t->a), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a1, &t->a1), &t->a1);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a, &t->b), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a1, &t->b), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->a1, &t->root), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_cg_widen(&t->root, &t->a1), &t->root);
}

/*
 * Every cgroup a fill is charged to is an ancestor of its reader's, so
 * the reader and every later one of the same subtree may wait for it; it
 * never narrows.
 */
static void tc_fleet_only_widens(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);
	struct tc_fleet fl;

	tc_fleet_init(&fl);
	KUNIT_EXPECT_NULL(test, tc_fleet_get(&fl, NULL));
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a1), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a), &t->a);
	KUNIT_EXPECT_TRUE(test, tc_cg_may_wait(tc_fleet_get(&fl, &t->a1), &t->a1));
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->b), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a1), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, rcu_access_pointer(fl.css), &t->root);
	tc_fleet_destroy(&fl);
}

/*
 * A pinned fleet: readers below it share its fills, readers elsewhere fill
 * in their own cgroups, and it never widens; auto starts anew.
 */
static void tc_fleet_pinned_never_widens(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);
	struct tc_fleet fl;

	tc_fleet_init(&fl);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->b), &t->root);
	tc_fleet_set(&fl, &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a1), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->b), &t->b);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->root), &t->root);
	KUNIT_EXPECT_PTR_EQ(test, rcu_access_pointer(fl.css), &t->a);
	tc_fleet_set(&fl, NULL);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->a1), &t->a);
	KUNIT_EXPECT_PTR_EQ(test, tc_fleet_get(&fl, &t->b), &t->root);
	tc_fleet_destroy(&fl);
}

static struct kunit_case tc_cgroup_test_cases[] = {
	KUNIT_CASE(tc_cg_may_wait_for_own_and_ancestors_fills),
	KUNIT_CASE(tc_cg_widen_to_the_closest_common_ancestor),
	KUNIT_CASE(tc_fleet_only_widens),
	KUNIT_CASE(tc_fleet_pinned_never_widens),
	{}
};

static struct kunit_suite tc_cgroup_test_suite = {
	.name = "dm_totalcow_cgroup",
	.test_cases = tc_cgroup_test_cases,
};

kunit_test_suite(tc_cgroup_test_suite);
