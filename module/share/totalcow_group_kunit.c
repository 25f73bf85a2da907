// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the groups and their sysfs files (included at the end
 * of totalcow-group.c): every counter is named, and bad writes to the
 * groups/ files change nothing.
 */

#include <kunit/test.h>

static void tc_group_stats_are_named(struct kunit *test)
{
	int i;

	for (i = 0; i < TC_NR_STATS; i++)
		KUNIT_EXPECT_NOT_NULL(test, tc_stat_names[i]);
}

static ssize_t tc_test_groups_store(ssize_t (*store)(struct kobject *,
						     struct kobj_attribute *,
						     const char *, size_t),
				    const char *buf)
{
	return store(NULL, NULL, buf, strlen(buf));
}

/*
 * Every groups/ file rejects malformed input with -EINVAL, an unknown
 * group or member with -ENOENT, and a directory that cannot be a template
 * or member (not on btrfs: the root of the UML test kernel is hostfs)
 * with -EINVAL; no group appears or goes.
 */
static void tc_groups_writes_reject_bad_input(struct kunit *test)
{
	static const struct {
		const char *buf;
		int err;
	} create[] = {
		{ "", -EINVAL }, { "g", -EINVAL }, { "g\n", -EINVAL },
		{ "g ", -EINVAL }, { "g \x0a", -EINVAL }, { "g relative", -EINVAL },
		{ "bad/name /", -EINVAL }, { ". /", -EINVAL }, { ".. /", -EINVAL },
		{ " /", -EINVAL },
		{ "0123456789012345678901234567890123456789012345678901234567890123456789 /",
		  -EINVAL },
		{ "g /", -EINVAL }, { "g /\n", -EINVAL },
		{ "g /totalcow-kunit-no-such-directory", -ENOENT },
	}, add[] = {
		{ "", -EINVAL }, { "g", -EINVAL }, { "g relative", -EINVAL },
		{ "bad/name /", -EINVAL }, { "g /", -EINVAL },
		{ "g /totalcow-kunit-no-such-directory", -ENOENT },
	}, remove[] = {
		{ "", -EINVAL }, { "g", -EINVAL }, { "g relative", -EINVAL },
		{ "bad/name /", -EINVAL }, { "nosuchgroup /", -ENOENT },
		{ "g /totalcow-kunit-no-such-directory", -ENOENT },
	}, del[] = {
		{ "", -EINVAL }, { "\n", -EINVAL }, { "bad/name", -EINVAL },
		{ "a b", -EINVAL }, { "..", -EINVAL },
		{ "0123456789012345678901234567890123456789012345678901234567890123456789",
		  -EINVAL },
		{ "nosuchgroup", -ENOENT }, { "nosuchgroup\n", -ENOENT },
	};
	bool empty;
	unsigned int i;

	mutex_lock(&tc_groups_lock);
	empty = list_empty(&tc_groups);
	mutex_unlock(&tc_groups_lock);
	KUNIT_ASSERT_TRUE_MSG(test, empty, "groups exist before the test");
	for (i = 0; i < ARRAY_SIZE(create); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_groups_store(create_store, create[i].buf),
				    (ssize_t)create[i].err, "create '%s'", create[i].buf);
	for (i = 0; i < ARRAY_SIZE(add); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_groups_store(add_store, add[i].buf),
				    (ssize_t)add[i].err, "add '%s'", add[i].buf);
	for (i = 0; i < ARRAY_SIZE(remove); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_groups_store(remove_store, remove[i].buf),
				    (ssize_t)remove[i].err, "remove '%s'", remove[i].buf);
	for (i = 0; i < ARRAY_SIZE(del); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_groups_store(delete_store, del[i].buf),
				    (ssize_t)del[i].err, "delete '%s'", del[i].buf);
	mutex_lock(&tc_groups_lock);
	empty = list_empty(&tc_groups);
	mutex_unlock(&tc_groups_lock);
	KUNIT_EXPECT_TRUE(test, empty);
}

static struct kunit_case tc_group_cases[] = {
	KUNIT_CASE(tc_group_stats_are_named),
	KUNIT_CASE(tc_groups_writes_reject_bad_input),
	{}
};

static struct kunit_suite tc_group_suite = {
	.name = "totalcow_groups",
	.test_cases = tc_group_cases,
};

kunit_test_suite(tc_group_suite);
