// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the dm-totalcow target: table parsing, how reads are
 * cut into runs, and how a cached run is copied into a reader's bio.
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
		"/dev/ubda 2 readahead",
		"/dev/ubda 2 readahead 6",
		"/dev/ubda 2 readahead 8192",
		"/dev/ubda 2 readahead -4",
		"/dev/ubda 1 readahead",
		"/dev/ubda 8 cache_size 1 admit first readahead 4 readahead 4",
		"/dev/ubda 4 readahead 4 readahead 4",
		"/dev/ubda 6 admit first cache_size 1 admit second",
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

/* A view of @n ranges for the run tests; freed by the test. */
static struct tc_wl_view *totalcow_test_view(struct kunit *test,
					     const struct tc_range *r, unsigned int n)
{
	struct tc_wl_view *v = kunit_kzalloc(test, struct_size(v, r, n), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, v);
	memcpy(v->r, r, n * sizeof(*r));
	v->nr = n;
	return v;
}

#define B TC_BLOCK_SECTORS

/*
 * How a read is cut into runs: whitelisted whole blocks (at most a fill's
 * worth) go to the cache, everything else passes through, and a run never
 * mixes the two.
 */
static void totalcow_read_runs(struct kunit *test)
{
	/* [8B, 40B) whitelisted, then [40B+3, E*B+5): unaligned at both ends. */
	const sector_t E = 41 + 2 * TC_FILL_MAX;
	const struct tc_range r[] = { { 8 * B, 40 * B }, { 40 * B + 3, E * B + 5 } };
	struct tc_wl_view *v = totalcow_test_view(test, r, 2);
	unsigned int blocks;

	/* Before the whitelist: up to its start, passed through. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 0, 64 * B, &blocks), 8 * B);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	/* Whitelisted blocks: one fill's worth at most. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 41 * B, 2 * TC_FILL_MAX * B, &blocks),
			(sector_t)TC_FILL_MAX * B);
	KUNIT_EXPECT_EQ(test, blocks, TC_FILL_MAX);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 8 * B, 64 * B, &blocks), 32 * B);
	KUNIT_EXPECT_EQ(test, blocks, 32);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 10 * B, 3 * B, &blocks), 3 * B);
	KUNIT_EXPECT_EQ(test, blocks, 3);
	/* A range's end cuts the run, even inside a bio. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 38 * B, 8 * B, &blocks), 2 * B);
	KUNIT_EXPECT_EQ(test, blocks, 2);
	/* Unaligned head: up to the block boundary, passed through. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 10 * B + 1, 8 * B, &blocks), B - 1);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	/* The gap of 3 sectors between the ranges, then a range that starts
	 * mid-block: its first partial block passes through.
	 */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 40 * B, 8 * B, &blocks), 3);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 40 * B + 3, 8 * B, &blocks), B - 3);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 41 * B, 8 * B, &blocks), 8 * B);
	KUNIT_EXPECT_EQ(test, blocks, 8);
	/* The range's partial last block passes through, then nothing. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, (E - 1) * B, 4 * B, &blocks), B);
	KUNIT_EXPECT_EQ(test, blocks, 1);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, E * B, 4 * B, &blocks), 5);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, E * B + 5, 4 * B, &blocks), 4 * B);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	/* A sub-block read inside the whitelist. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(v, 12 * B, 1, &blocks), 1);
	KUNIT_EXPECT_EQ(test, blocks, 0);
	/* No whitelist at all. */
	KUNIT_EXPECT_EQ(test, totalcow_read_run(NULL, 12 * B, 7 * B, &blocks), 7 * B);
	KUNIT_EXPECT_EQ(test, blocks, 0);
}

#undef B

/*
 * A hit is copied into the reader's bio whatever its segments look like:
 * four blocks into segments of odd offsets and lengths across five pages,
 * the bio already advanced 512 bytes into its first segment (as a clone
 * that DM split). Bytes outside the four blocks' span stay untouched, and
 * the bio's own iterator does not move.
 */
static void totalcow_copy_crosses_segments(struct kunit *test)
{
	static const struct { unsigned int page, off, len; } seg[] = {
		{ 0, 0, 1536 }, { 0, 2048, 2048 }, { 1, 512, 3584 },
		{ 2, 0, 4096 }, { 3, 0, 4096 }, { 4, 0, 2048 },
	}, want[] = {	/* where the 16 KiB go, in order */
		{ 0, 512, 1024 }, { 0, 2048, 2048 }, { 1, 512, 3584 },
		{ 2, 0, 4096 }, { 3, 0, 4096 }, { 4, 0, 1536 },
	};
	struct bio_vec table[ARRAY_SIZE(seg)];
	struct page *src[4], *dst[5];
	u8 *flat, *expect;
	unsigned int i, done = 0;
	struct bio bio;

	flat = kunit_kmalloc(test, 4 * PAGE_SIZE, GFP_KERNEL);
	expect = kunit_kzalloc(test, 5 * PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, flat);
	KUNIT_ASSERT_NOT_NULL(test, expect);
	for (i = 0; i < 4 * PAGE_SIZE; i++)
		flat[i] = (i * 7 + i / 4096) ^ 0x5a;
	for (i = 0; i < ARRAY_SIZE(src); i++) {
		src[i] = alloc_page(GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, src[i]);
		memcpy(page_address(src[i]), flat + i * PAGE_SIZE, PAGE_SIZE);
	}
	for (i = 0; i < ARRAY_SIZE(dst); i++) {
		dst[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		KUNIT_ASSERT_NOT_NULL(test, dst[i]);
	}
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		memcpy(expect + want[i].page * PAGE_SIZE + want[i].off,
		       flat + done, want[i].len);
		done += want[i].len;
	}
	KUNIT_ASSERT_EQ(test, done, 4 * TC_BLOCK_SIZE);

	bio_init(&bio, NULL, table, ARRAY_SIZE(table), REQ_OP_READ);
	for (i = 0; i < ARRAY_SIZE(seg); i++)
		__bio_add_page(&bio, dst[seg[i].page], seg[i].len, seg[i].off);
	bio_advance(&bio, 512);
	totalcow_copy_to_bio(&bio, src, 4);

	KUNIT_EXPECT_EQ(test, bio.bi_iter.bi_size, 17408U - 512);
	for (i = 0; i < ARRAY_SIZE(dst); i++)
		KUNIT_EXPECT_EQ_MSG(test, memcmp(page_address(dst[i]),
						 expect + i * PAGE_SIZE, PAGE_SIZE),
				    0, "page %u", i);
	bio_uninit(&bio);
	for (i = 0; i < ARRAY_SIZE(src); i++)
		__free_page(src[i]);
	for (i = 0; i < ARRAY_SIZE(dst); i++)
		__free_page(dst[i]);
}

/* A cached block is one page; per-bio data stays small. */
static void totalcow_sizes(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, TC_BLOCK_SECTORS << SECTOR_SHIFT, PAGE_SIZE);
	KUNIT_EXPECT_LE(test, sizeof(struct tc_io), 320);
}

/*
 * Readahead windows for one stream: a sequential miss starts one behind
 * the read, reaching the mark (the last window's first block) starts the
 * next one after the last, and anything else starts none.
 */
static void totalcow_readahead_windows(struct kunit *test)
{
	struct totalcow_c *tc = kunit_kzalloc(test, sizeof(*tc), GFP_KERNEL);
	unsigned long start = 0;

	KUNIT_ASSERT_NOT_NULL(test, tc);
	spin_lock_init(&tc->ra_lock);
	tc->ra_next = ULONG_MAX;
	tc->ra_mark = ULONG_MAX;

	/* Off: nothing, whatever the reads. */
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 0, 64, TC_RUN_ABSENT, &start));
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 64, 64, TC_RUN_ABSENT, &start));

	tc->ra_blocks = 256;
	tc->ra_next = ULONG_MAX;
	/* A first miss is not sequential. */
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 1000, 64, TC_RUN_ABSENT, &start));
	/* The miss right after it is: the window starts after this read. */
	KUNIT_EXPECT_TRUE(test, totalcow_ra_window(tc, 1064, 64, TC_RUN_ABSENT, &start));
	KUNIT_EXPECT_EQ(test, start, 1128UL);
	KUNIT_EXPECT_EQ(test, tc->ra_mark, 1128UL);
	KUNIT_EXPECT_EQ(test, tc->ra_end, 1128UL + 256);
	/* Reading the mark (being filled ahead) starts the next window. */
	KUNIT_EXPECT_TRUE(test, totalcow_ra_window(tc, 1128, 64, TC_RUN_FILLING, &start));
	KUNIT_EXPECT_EQ(test, start, 1128UL + 256);
	KUNIT_EXPECT_EQ(test, tc->ra_end, 1128UL + 512);
	/* Inside the window, before the new mark: nothing more. */
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 1192, 32, TC_RUN_HIT, &start));
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 1224, 32, TC_RUN_HIT, &start));
	/* A hit is never a sequential miss, a jump elsewhere neither. */
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 5000, 64, TC_RUN_ABSENT, &start));
	KUNIT_EXPECT_FALSE(test, totalcow_ra_window(tc, 5064, 32, TC_RUN_HIT, &start));
	/* A read that ends past the mark starts right after itself. */
	KUNIT_EXPECT_TRUE(test, totalcow_ra_window(tc, 1380, 64, TC_RUN_BUSY, &start));
	KUNIT_EXPECT_EQ(test, start, 1128UL + 512);
	tc->ra_mark = 2000;
	tc->ra_end = 2010;
	KUNIT_EXPECT_TRUE(test, totalcow_ra_window(tc, 1990, 64, TC_RUN_HIT, &start));
	KUNIT_EXPECT_EQ(test, start, 2054UL);
}

static struct kunit_case totalcow_target_test_cases[] = {
	KUNIT_CASE(totalcow_ctr_rejects_bad_tables),
	KUNIT_CASE(totalcow_read_runs),
	KUNIT_CASE(totalcow_copy_crosses_segments),
	KUNIT_CASE(totalcow_sizes),
	KUNIT_CASE(totalcow_readahead_windows),
	{}
};

static struct kunit_suite totalcow_target_test_suite = {
	.name = "dm_totalcow_target",
	.test_cases = totalcow_target_test_cases,
};

kunit_test_suite(totalcow_target_test_suite);
