// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the dm-totalcow target's table parsing.
 *
 * Included at the end of dm-totalcow-target.c (as ext4 does with
 * mballoc-test.c) so that the tests reach the target's static functions.
 * Only paths that fail before the origin device is looked up are
 * exercised here; the UML integration tests construct real tables.
 */

#include <kunit/test.h>
#include <linux/string.h>

static int totalcow_test_ctr(struct dm_target *ti, const char *line)
{
	char **argv;
	int argc, r;

	argv = argv_split(GFP_KERNEL, line, &argc);
	if (!argv)
		return -ENOMEM;
	memset(ti, 0, sizeof(*ti));
	r = totalcow_ctr(ti, argc, argv);
	argv_free(argv);
	return r;
}

/* Each bad table line fails with -EINVAL and an error, and allocates nothing. */
static void totalcow_ctr_rejects_bad_tables(struct kunit *test)
{
	static const char * const bad[] = {
		"",
		"/dev/ubda extra",
		"/dev/ubda 1 cache_size",
		"/dev/ubda 2 cache_size",
		"/dev/ubda 2 cache_size 0",
		"/dev/ubda 2 cache_size 101%",
		"/dev/ubda 2 cache_size 12x",
		"/dev/ubda 2 cache_size -1",
		"/dev/ubda 2 cache_sizes 100",
		"/dev/ubda 2 cache_size 100 trailing",
		"/dev/ubda 3 cache_size 100 100",
		"/dev/ubda -1",
	};
	struct dm_target ti;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		KUNIT_EXPECT_EQ_MSG(test, totalcow_test_ctr(&ti, bad[i]), -EINVAL,
				    "table '%s'", bad[i]);
		KUNIT_EXPECT_NOT_ERR_OR_NULL_MSG(test, ti.error, "table '%s'", bad[i]);
		KUNIT_EXPECT_NULL(test, ti.private);
	}
}

/* dmsetup finds the target as "totalcow", with the hooks it needs. */
static void totalcow_target_type_is_complete(struct kunit *test)
{
	KUNIT_EXPECT_STREQ(test, totalcow_target.name, "totalcow");
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.ctr, (void *)totalcow_ctr);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.dtr, (void *)totalcow_dtr);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.map, (void *)totalcow_map);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.end_io, (void *)totalcow_end_io);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.message,
			    (void *)totalcow_message);
	KUNIT_EXPECT_PTR_EQ(test, (void *)totalcow_target.status, (void *)totalcow_status);
	KUNIT_EXPECT_NOT_NULL(test, totalcow_target.iterate_devices);
}

/* A cached block is one page; per-bio data stays small. */
static void totalcow_sizes(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, TC_BLOCK_SECTORS << SECTOR_SHIFT, PAGE_SIZE);
	KUNIT_EXPECT_LE(test, sizeof(struct tc_io), 320);
}

static struct kunit_case totalcow_target_test_cases[] = {
	KUNIT_CASE(totalcow_ctr_rejects_bad_tables),
	KUNIT_CASE(totalcow_target_type_is_complete),
	KUNIT_CASE(totalcow_sizes),
	{}
};

static struct kunit_suite totalcow_target_test_suite = {
	.name = "dm-totalcow-target",
	.test_cases = totalcow_target_test_cases,
};

kunit_test_suite(totalcow_target_test_suite);
