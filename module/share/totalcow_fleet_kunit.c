// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for who may wait for a shared read (totalcow-fleet.c): the
 * records of a group's template reads in flight and the tags of canonical
 * folios, against the fake hierarchy of ../dm/totalcow_test_cgroups.h
 * (root -> a -> a1, root -> b).
 */
#include <kunit/test.h>

#include "../dm/totalcow_test_cgroups.h"

/*
 * A read charged to a is waited for by a's and a1's readers only, and
 * only for the slots it added (the bits its readahead set so far).
 */
static void tc_fleet_waits_only_for_reads_it_may(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);
	struct address_space *m = (void *)0x1000, *other = (void *)0x2000;
	DECLARE_BITMAP(added, 8);
	struct tc_fleet_reads fr;
	struct tc_fleet_read r;

	tc_fleet_reads_init(&fr);
	bitmap_zero(added, 8);
	tc_fleet_record(&fr, &r, m, 100, 8, added, &t->a);
	KUNIT_EXPECT_TRUE(test, r.listed);
	/* Not added yet: not waited for. */
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 102, &t->a));
	set_bit(2, added);
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait(&fr, m, 102, &t->a));
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait(&fr, m, 102, &t->a1));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 102, &t->b));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 102, &t->root));
	/* Slots it did not add, outside its range, of another file. */
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 101, &t->a));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 99, &t->a));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 108, &t->a));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, other, 102, &t->a));
	r.css = NULL;		/* the fake css has no reference to drop */
	tc_fleet_read_end(&fr, &r);
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, 102, &t->a));
	KUNIT_EXPECT_EQ(test, fr.nr, 0U);
	tc_fleet_reads_destroy(&fr);
}

/*
 * A group records at most TC_FLEET_READS_MAX reads, so that a reader's
 * walk under the lock is bounded however many threads a tenant starts;
 * the pages of a read it did not record are read by whoever needs them.
 */
static void tc_fleet_records_a_bounded_number_of_reads(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);
	struct address_space *m = (void *)0x1000;
	struct tc_fleet_read *r;
	DECLARE_BITMAP(added, 1);
	struct tc_fleet_reads fr;
	unsigned int i;

	r = kunit_kcalloc(test, TC_FLEET_READS_MAX + 1, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	tc_fleet_reads_init(&fr);
	bitmap_fill(added, 1);
	for (i = 0; i <= TC_FLEET_READS_MAX; i++)
		tc_fleet_record(&fr, &r[i], m, i, 1, added, &t->a);
	KUNIT_EXPECT_EQ(test, fr.nr, (unsigned int)TC_FLEET_READS_MAX);
	KUNIT_EXPECT_FALSE(test, r[TC_FLEET_READS_MAX].listed);
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait(&fr, m, 0, &t->a1));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait(&fr, m, TC_FLEET_READS_MAX, &t->a1));
	for (i = 0; i <= TC_FLEET_READS_MAX; i++) {
		r[i].css = NULL;
		tc_fleet_read_end(&fr, &r[i]);
	}
	KUNIT_EXPECT_EQ(test, fr.nr, 0U);
	tc_fleet_reads_destroy(&fr);
}

/*
 * A canonical folio's tag names the cgroup its read is charged to; with
 * no tag (its read not submitted yet) it is waited for.
 */
static void tc_fleet_tagged_folios_follow_the_waiting_rule(struct kunit *test)
{
	struct tc_test_tree *t = tc_test_tree(test);
	struct folio *folio = folio_alloc(GFP_KERNEL, 0);

	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait_tagged(folio, &t->b));
	WRITE_ONCE(folio->private, &t->a);
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait_tagged(folio, &t->a1));
	KUNIT_EXPECT_FALSE(test, __tc_fleet_may_wait_tagged(folio, &t->b));
	tc_fleet_untag_folio(folio, NULL);
	KUNIT_EXPECT_NULL(test, folio->private);
	KUNIT_EXPECT_TRUE(test, __tc_fleet_may_wait_tagged(folio, &t->b));
	folio_put(folio);
}

static int tc_fleet_test_calls;

static void tc_fleet_test_fn(void *arg)
{
	tc_fleet_test_calls++;
	*(struct task_struct **)arg = current;
}

/*
 * A reader whose own I/O cgroup is the fleet's (here the root's: the
 * fleet of a root reader is the root) runs the reads itself, inline.
 */
static void tc_fleet_run_inline_for_the_fleets_own_reader(struct kunit *test)
{
	struct cgroup_subsys_state *css;
	struct task_struct *ran = NULL;
	struct tc_fleet fl;

	tc_fleet_init(&fl);
	tc_fleet_test_calls = 0;
	css = tc_fleet_run(&fl, TC_FLEET_TEMPLATE, tc_fleet_test_fn, &ran);
	KUNIT_EXPECT_EQ(test, tc_fleet_test_calls, 1);
	KUNIT_EXPECT_PTR_EQ(test, ran, current);
	if (IS_ENABLED(CONFIG_BLK_CGROUP)) {
		KUNIT_EXPECT_NOT_NULL(test, css);
		KUNIT_EXPECT_PTR_EQ(test, css, rcu_access_pointer(fl.css));
	}
	if (css)
		css_put(css);
	tc_fleet_destroy(&fl);
}

static struct kunit_case tc_fleet_test_cases[] = {
	KUNIT_CASE(tc_fleet_waits_only_for_reads_it_may),
	KUNIT_CASE(tc_fleet_records_a_bounded_number_of_reads),
	KUNIT_CASE(tc_fleet_tagged_folios_follow_the_waiting_rule),
	KUNIT_CASE(tc_fleet_run_inline_for_the_fleets_own_reader),
	{}
};

static struct kunit_suite tc_fleet_test_suite = {
	.name = "totalcow_fleet",
	.test_cases = tc_fleet_test_cases,
};

kunit_test_suite(tc_fleet_test_suite);
