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

static ssize_t tc_test_store(ssize_t (*store)(struct kobject *, struct kobj_attribute *,
					      const char *, size_t),
			     const char *buf)
{
	return store(NULL, NULL, buf, strlen(buf));
}

static unsigned int tc_test_nr_templates(struct kunit *test)
{
	/* sysfs_emit() wants a page, as sysfs gives it (kmalloc aligns it). */
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	unsigned int n;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_ASSERT_GT(test, nr_templates_show(NULL, NULL, buf), 0);
	KUNIT_ASSERT_EQ(test, kstrtouint(strim(buf), 10, &n), 0);
	return n;
}

/*
 * Every write file rejects malformed input with -EINVAL (a device that is
 * not a totalcow device: -ENODEV; an unknown template: -ENOENT) and the
 * set of templates stays as it was. No totalcow device exists while KUnit
 * runs at boot, so every well-formed register fails too.
 */
static void tc_sysfs_writes_reject_bad_input(struct kunit *test)
{
	static const struct {
		const char *buf;
		int err;
	} reg[] = {
		{ "", -EINVAL }, { "name", -EINVAL }, { "name 254:0 extra", -EINVAL },
		{ "bad/name 254:0", -EINVAL }, { ". 254:0", -EINVAL }, { ".. 254:0", -EINVAL },
		{ "name 254", -EINVAL }, { "name x:y", -EINVAL },
		{ "0123456789012345678901234567890123456789012345678901234567890123456789 254:0",
		  -EINVAL },
		{ "name 254:0", -ENODEV }, { "name 1:3", -ENODEV },
	}, add[] = {
		{ "", -EINVAL }, { "name", -EINVAL }, { "name 0", -EINVAL },
		{ "name 0 8 16", -EINVAL }, { "name 0 0", -EINVAL }, { "name x 8", -EINVAL },
		{ "name -1 8", -EINVAL }, { "name 8 -8", -EINVAL },
		{ "name 18446744073709551615 8", -EINVAL }, { "name 0 8", -ENOENT },
	}, dereg[] = {
		{ "", -EINVAL }, { "a b", -EINVAL }, { "bad/name", -EINVAL }, { "name", -ENOENT },
	};
	unsigned int i, before = tc_test_nr_templates(test);

	for (i = 0; i < ARRAY_SIZE(reg); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_store(register_store, reg[i].buf),
				    (ssize_t)reg[i].err, "register '%s'", reg[i].buf);
	for (i = 0; i < ARRAY_SIZE(add); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_store(add_extents_store, add[i].buf),
				    (ssize_t)add[i].err, "add_extents '%s'", add[i].buf);
	for (i = 0; i < ARRAY_SIZE(dereg); i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_test_store(deregister_store, dereg[i].buf),
				    (ssize_t)dereg[i].err, "deregister '%s'", dereg[i].buf);
	KUNIT_EXPECT_EQ(test, tc_test_nr_templates(test), before);
}

/*
 * tc_sysfs_emit_at() appends what fits whole and fails with -EFBIG what
 * does not, instead of cutting it short as sysfs_emit_at() does; an error
 * passes through the calls after it.
 */
static void tc_sysfs_emit_at_fails_instead_of_cutting(struct kunit *test)
{
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	int len, i;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = tc_sysfs_emit_at(buf, 0, "%s %d\n", "pages", 42);
	KUNIT_EXPECT_EQ(test, len, 9);
	KUNIT_EXPECT_STREQ(test, buf, "pages 42\n");
	/* Up to the page's last byte but one: the NUL takes the last. */
	for (i = len; i < PAGE_SIZE - 1; i++)
		len = tc_sysfs_emit_at(buf, len, "x");
	KUNIT_EXPECT_EQ(test, len, (int)PAGE_SIZE - 1);
	KUNIT_EXPECT_EQ(test, buf[PAGE_SIZE - 1], '\0');
	KUNIT_EXPECT_EQ(test, tc_sysfs_emit_at(buf, len, "y"), -EFBIG);
	/* A line that does not fit leaves none of itself. */
	len = tc_sysfs_emit_at(buf, PAGE_SIZE - 4, "%s", "abc");
	KUNIT_EXPECT_EQ(test, len, (int)PAGE_SIZE - 1);
	KUNIT_EXPECT_EQ(test, tc_sysfs_emit_at(buf, PAGE_SIZE - 4, "%s", "abcd"),
			-EFBIG);
	KUNIT_EXPECT_EQ(test, buf[PAGE_SIZE - 4], '\0');
	KUNIT_EXPECT_EQ(test, tc_sysfs_emit_at(buf, -EFBIG, "z"), -EFBIG);
	KUNIT_EXPECT_EQ(test, tc_sysfs_emit_at(buf, -ENOMEM, "z"), -ENOMEM);
	/* Nothing is written after an error. */
	KUNIT_EXPECT_EQ(test, buf[0], 'p');
}

static struct kunit_case tc_sysfs_test_cases[] = {
	KUNIT_CASE(tc_sysfs_parse_dev),
	KUNIT_CASE(tc_sysfs_writes_reject_bad_input),
	KUNIT_CASE(tc_sysfs_emit_at_fails_instead_of_cutting),
	{}
};

static struct kunit_suite tc_sysfs_test_suite = {
	.name = "totalcow_sysfs",
	.test_cases = tc_sysfs_test_cases,
};

kunit_test_suite(tc_sysfs_test_suite);
