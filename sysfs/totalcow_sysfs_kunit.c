// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the TotalCOW sysfs layer (included at the end of
 * totalcow-sysfs.c).
 */

#include <kunit/test.h>

static void tc_sysfs_parse_dev(struct kunit *test)
{
	static const char * const bad[] = {
		"", ":", "254", "254:", ":0", "254:0:1", "a:b", "-1:0", "254:-1",
		"+254:0", "254:+0", " 254:0", "254 :0", "4096:0", "254:1048576",
		"99999999999:0",
	};
	unsigned int i;
	dev_t dev;

	KUNIT_ASSERT_EQ(test, tc_parse_dev("254:0", &dev), 0);
	KUNIT_EXPECT_EQ(test, MAJOR(dev), 254);
	KUNIT_EXPECT_EQ(test, MINOR(dev), 0);
	KUNIT_ASSERT_EQ(test, tc_parse_dev("8:17", &dev), 0);
	KUNIT_EXPECT_EQ(test, dev, MKDEV(8, 17));
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_parse_dev(bad[i], &dev), -EINVAL,
				    "device '%s'", bad[i]);
}

static struct kunit_case tc_sysfs_test_cases[] = {
	KUNIT_CASE(tc_sysfs_parse_dev),
	{}
};

static struct kunit_suite tc_sysfs_test_suite = {
	.name = "totalcow-sysfs",
	.test_cases = tc_sysfs_test_cases,
};

kunit_test_suite(tc_sysfs_test_suite);
