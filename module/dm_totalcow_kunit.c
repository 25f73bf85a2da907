// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for dm-totalcow.
 *
 * Included at the end of dm-totalcow.c (as ext4 does with mballoc-test.c)
 * so that the tests reach the target's static functions and data.
 */

#include <kunit/test.h>

/* A table line must name exactly one origin device. */
static void totalcow_ctr_rejects_bad_arg_count(struct kunit *test)
{
	char origin[] = "/dev/ubda", extra[] = "extra";
	char *two_args[2] = { origin, extra };
	struct dm_target ti = { };

	KUNIT_EXPECT_EQ(test, totalcow_ctr(&ti, 0, NULL), -EINVAL);
	KUNIT_EXPECT_NOT_ERR_OR_NULL(test, ti.error);
	KUNIT_EXPECT_NULL(test, ti.private);

	ti.error = NULL;
	KUNIT_EXPECT_EQ(test, totalcow_ctr(&ti, 2, two_args), -EINVAL);
	KUNIT_EXPECT_NOT_ERR_OR_NULL(test, ti.error);
	KUNIT_EXPECT_NULL(test, ti.private);
}

/* dmsetup finds the target as "totalcow", with the hooks it needs. */
static void totalcow_target_type_is_complete(struct kunit *test)
{
	KUNIT_EXPECT_STREQ(test, totalcow_target.name, "totalcow");
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.ctr, (void *)totalcow_ctr);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.dtr, (void *)totalcow_dtr);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.map, (void *)totalcow_map);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.status, (void *)totalcow_status);
	KUNIT_EXPECT_NOT_NULL(test, totalcow_target.iterate_devices);
}

static struct kunit_case totalcow_target_test_cases[] = {
	KUNIT_CASE(totalcow_ctr_rejects_bad_arg_count),
	KUNIT_CASE(totalcow_target_type_is_complete),
	{}
};

static struct kunit_suite totalcow_target_test_suite = {
	.name = "dm-totalcow-target",
	.test_cases = totalcow_target_test_cases,
};

kunit_test_suite(totalcow_target_test_suite);
