// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for dm-totalcow argument parsing (included at the end of
 * totalcow-parse.c). Malformed input must be rejected, never guessed at.
 */

#include <kunit/test.h>

static void tc_parse_size_accepts_mib_and_percent(struct kunit *test)
{
	struct tc_size s;

	KUNIT_ASSERT_EQ(test, tc_parse_size("256", &s), 0);
	KUNIT_EXPECT_EQ(test, s.value, 256);
	KUNIT_EXPECT_FALSE(test, s.percent);
	KUNIT_EXPECT_EQ(test, tc_size_blocks(&s, 1000), 256UL << (20 - PAGE_SHIFT));

	KUNIT_ASSERT_EQ(test, tc_parse_size("10%", &s), 0);
	KUNIT_EXPECT_EQ(test, s.value, 10);
	KUNIT_EXPECT_TRUE(test, s.percent);
	KUNIT_EXPECT_EQ(test, tc_size_blocks(&s, 1000), 100);
	KUNIT_EXPECT_EQ(test, tc_size_blocks(&s, 5), 1);

	KUNIT_ASSERT_EQ(test, tc_parse_size("100%", &s), 0);
	KUNIT_ASSERT_EQ(test, tc_parse_size("1048576", &s), 0);
}

static void tc_parse_size_rejects_garbage(struct kunit *test)
{
	static const char * const bad[] = {
		"", "%", "0", "0%", "101%", "1048577", "-1", "+1", " 1", "1 ",
		"12x", "1.5", "0x10", "10%%", "%10", "99999999999999999999999",
	};
	struct tc_size s = { .value = 42, .percent = false };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		KUNIT_EXPECT_EQ_MSG(test, tc_parse_size(bad[i], &s), -EINVAL,
				    "size '%s'", bad[i]);
		KUNIT_EXPECT_EQ(test, s.value, 42);
	}
}

static int tc_test_ranges(const char *line, sector_t dev, struct tc_range *r,
			  const char **error)
{
	char **argv;
	int argc, ret;

	argv = argv_split(GFP_KERNEL, line, &argc);
	if (!argv)
		return -ENOMEM;
	ret = tc_parse_ranges(argc, argv, dev, r, error);
	argv_free(argv);
	return ret;
}

static void tc_parse_ranges_accepts_pairs(struct kunit *test)
{
	struct tc_range r[3];
	const char *error = NULL;

	KUNIT_ASSERT_EQ(test, tc_test_ranges("0 8 1000 24 992 8", 1024, r, &error), 0);
	KUNIT_EXPECT_EQ(test, r[0].start, 0);
	KUNIT_EXPECT_EQ(test, r[0].end, 8);
	KUNIT_EXPECT_EQ(test, r[1].start, 1000);
	KUNIT_EXPECT_EQ(test, r[1].end, 1024);
	KUNIT_EXPECT_EQ(test, r[2].end, 1000);
	KUNIT_EXPECT_NULL(test, error);
}

static void tc_parse_ranges_rejects_garbage(struct kunit *test)
{
	static const char * const bad[] = {
		"",				/* no ranges */
		"8",				/* odd */
		"0 8 16",			/* odd */
		"0 0",				/* empty */
		"1020 8",			/* beyond the end */
		"1024 1",			/* starts at the end */
		"18446744073709551615 2",	/* overflows */
		"0x10 8", "-1 8", "+1 8", "1 8x", "a b",
	};
	struct tc_range r[3];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *error = NULL;

		KUNIT_EXPECT_EQ_MSG(test, tc_test_ranges(bad[i], 1024, r, &error),
				    -EINVAL, "ranges '%s'", bad[i]);
		KUNIT_EXPECT_NOT_NULL_MSG(test, error, "ranges '%s'", bad[i]);
	}
}

static void tc_parse_admit_takes_first_and_second(struct kunit *test)
{
	static const char * const bad[] = { "", "First", "2", "second ", "firstly" };
	enum tc_admit a;
	unsigned int i;

	KUNIT_ASSERT_EQ(test, tc_parse_admit("first", &a), 0);
	KUNIT_EXPECT_EQ(test, a, TC_ADMIT_FIRST);
	KUNIT_ASSERT_EQ(test, tc_parse_admit("second", &a), 0);
	KUNIT_EXPECT_EQ(test, a, TC_ADMIT_SECOND);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		a = TC_ADMIT_SECOND;
		KUNIT_EXPECT_EQ(test, tc_parse_admit(bad[i], &a), -EINVAL);
		KUNIT_EXPECT_EQ(test, a, TC_ADMIT_SECOND);
	}
}

static void tc_parse_readahead_takes_whole_blocks(struct kunit *test)
{
	static const char * const bad[] = {
		"", "-4", "+4", "2", "6", "4k", "4096 ", "4100", "8192", "x",
	};
	unsigned int blocks, i;

	KUNIT_ASSERT_EQ(test, tc_parse_readahead("0", &blocks), 0);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	KUNIT_ASSERT_EQ(test, tc_parse_readahead("1024", &blocks), 0);
	KUNIT_EXPECT_EQ(test, blocks, 1024 / (TC_BLOCK_SIZE / SZ_1K));
	KUNIT_ASSERT_EQ(test, tc_parse_readahead("4096", &blocks), 0);
	KUNIT_EXPECT_EQ(test, blocks, 4096 / (TC_BLOCK_SIZE / SZ_1K));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		blocks = 7;
		KUNIT_EXPECT_EQ_MSG(test, tc_parse_readahead(bad[i], &blocks),
				    -EINVAL, "readahead '%s'", bad[i]);
		KUNIT_EXPECT_EQ(test, blocks, 7);
	}
}

static struct kunit_case tc_parse_test_cases[] = {
	KUNIT_CASE(tc_parse_size_accepts_mib_and_percent),
	KUNIT_CASE(tc_parse_size_rejects_garbage),
	KUNIT_CASE(tc_parse_ranges_accepts_pairs),
	KUNIT_CASE(tc_parse_ranges_rejects_garbage),
	KUNIT_CASE(tc_parse_admit_takes_first_and_second),
	KUNIT_CASE(tc_parse_readahead_takes_whole_blocks),
	{}
};

static struct kunit_suite tc_parse_test_suite = {
	.name = "dm_totalcow_parse",
	.test_cases = tc_parse_test_cases,
};

kunit_test_suite(tc_parse_test_suite);
