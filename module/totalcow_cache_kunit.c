// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the dm-totalcow block cache (included at the end of
 * totalcow-cache.c). Fills are driven by hand, the way the target drives
 * them from map and end_io.
 */

#include <kunit/test.h>

static void tc_test_cache_exit(void *data)
{
	tc_cache_destroy(data);
}

static struct tc_cache *tc_test_cache(struct kunit *test, unsigned long cap)
{
	struct tc_cache *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, c);
	tc_cache_init(c, cap);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, tc_test_cache_exit, c), 0);
	return c;
}

/* Fresh pages whose first byte is @tag + i. */
static void tc_test_pages(struct kunit *test, struct page **pages,
			  unsigned int n, u8 tag)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, pages[i]);
		memset(page_address(pages[i]), tag + i, PAGE_SIZE);
	}
}

/* Fill @n blocks from @blk in one go; returns how many were claimed. */
static unsigned int tc_test_fill(struct kunit *test, struct tc_cache *c,
				 unsigned long blk, unsigned int n, u8 tag)
{
	struct page *pages[8];
	unsigned long seq = tc_cache_seq(c);
	unsigned int got, i;

	tc_test_pages(test, pages, n, tag);
	got = tc_cache_begin_fill(c, blk, n, pages, seq);
	for (i = got; i < n; i++)
		__free_page(pages[i]);
	if (got)
		tc_cache_end_fill(c, blk, got, pages, seq, true);
	return got;
}

static void tc_test_put(struct page **pages, unsigned int n)
{
	while (n)
		put_page(pages[--n]);
}

static void tc_cache_fill_then_hit(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 100);
	struct page *pages[8];
	unsigned int count;

	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 10, 4, pages, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 4);
	KUNIT_EXPECT_EQ(test, tc_test_fill(test, c, 10, 4, 0x40), 4);

	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 10, 8, pages, &count), TC_RUN_HIT);
	KUNIT_ASSERT_EQ(test, count, 4);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(pages[0]), 0x40);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(pages[3]), 0x43);
	tc_test_put(pages, count);

	/* A run stops where the kind changes. */
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 8, 8, pages, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 4);
	KUNIT_EXPECT_EQ(test, c->stats.fills, 4);
	KUNIT_EXPECT_EQ(test, c->stats.hits, 4);
}

static void tc_cache_read_error_is_not_cached(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 100);
	unsigned long seq = tc_cache_seq(c);
	struct page *pages[2];
	unsigned int count;

	tc_test_pages(test, pages, 2, 0);
	KUNIT_ASSERT_EQ(test, tc_cache_begin_fill(c, 0, 2, pages, seq), 2);
	tc_cache_end_fill(c, 0, 2, pages, seq, false);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 2, pages, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
}

/* A second reader of a block being filled passes through; no double fill. */
static void tc_cache_concurrent_miss_fills_once(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 100);
	unsigned long seq = tc_cache_seq(c);
	struct page *first[2], *second[2], *hits[2];
	unsigned int count;

	tc_test_pages(test, first, 2, 1);
	tc_test_pages(test, second, 2, 9);
	KUNIT_ASSERT_EQ(test, tc_cache_begin_fill(c, 0, 2, first, seq), 2);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 2, hits, &count), TC_RUN_BUSY);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_EQ(test, tc_cache_begin_fill(c, 0, 2, second, seq), 0);
	__free_page(second[0]);
	__free_page(second[1]);
	tc_cache_end_fill(c, 0, 2, first, seq, true);
	KUNIT_EXPECT_EQ(test, c->stats.fills, 2);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 2, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[1]), 2);
	tc_test_put(hits, count);
}

/*
 * The race the design is about: a fill reads the old data, a write to the
 * block starts and completes, then the fill completes. It must not publish.
 * Fills that start while the write is in flight must not even begin.
 */
static void tc_cache_fill_racing_write_is_dropped(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 100);
	struct page *pages[1], *late[1], *hits[1];
	unsigned long seq = tc_cache_seq(c), seq2;
	unsigned int count;

	tc_test_pages(test, pages, 1, 0xaa);
	KUNIT_ASSERT_EQ(test, tc_cache_begin_fill(c, 5, 1, pages, seq), 1);
	tc_cache_write_begin(c, 5, 5);
	KUNIT_EXPECT_EQ(test, c->stats.invalidations, 1);

	/* While the write is in flight, nobody may fill. */
	seq2 = tc_cache_seq(c);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_BUSY);
	tc_test_pages(test, late, 1, 0xbb);
	KUNIT_EXPECT_EQ(test, tc_cache_begin_fill(c, 5, 1, late, seq2), 0);
	__free_page(late[0]);

	tc_cache_write_end(c);
	tc_cache_end_fill(c, 5, 1, pages, seq, true);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_ABSENT);

	/* A fill that read @seq before the write ended is stale too. */
	tc_test_pages(test, late, 1, 0xcc);
	tc_cache_write_begin(c, 5, 5);
	seq2 = tc_cache_seq(c);
	tc_cache_write_end(c);
	KUNIT_EXPECT_EQ(test, tc_cache_begin_fill(c, 5, 1, late, seq2), 0);
	__free_page(late[0]);

	/* After the write, a fresh fill works. */
	KUNIT_EXPECT_EQ(test, tc_test_fill(test, c, 5, 1, 0xdd), 1);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[0]), 0xdd);
	tc_test_put(hits, count);
}

static void tc_cache_write_drops_cached_blocks(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 100);
	struct page *hits[8];
	unsigned int count;

	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 0, 8, 0), 8);
	tc_cache_write_begin(c, 2, 3);
	tc_cache_write_end(c);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 6);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 8, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, count, 2);
	tc_test_put(hits, count);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 2, 8, hits, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 2);

	tc_cache_invalidate(c, 0, ULONG_MAX);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_EQ(test, c->stats.invalidations, 8);
}

static void tc_cache_lru_eviction_and_capacity(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 3);
	struct page *hits[1];
	unsigned int count;

	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 0, 1, 0), 1);
	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 1, 1, 0), 1);
	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 2, 1, 0), 1);
	/* Touch block 0: block 1 is now the coldest. */
	KUNIT_ASSERT_EQ(test, tc_cache_lookup(c, 0, 1, hits, &count), TC_RUN_HIT);
	tc_test_put(hits, count);
	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 3, 1, 0), 1);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 3);
	KUNIT_EXPECT_EQ(test, c->stats.evictions, 1);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 1, 1, hits, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 1, hits, &count), TC_RUN_HIT);
	tc_test_put(hits, count);

	/* Shrinking evicts the coldest (2, then 3), not the one just used. */
	tc_cache_set_capacity(c, 1);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 1);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 1, hits, &count), TC_RUN_HIT);
	tc_test_put(hits, count);

	KUNIT_EXPECT_EQ(test, tc_cache_evict(c, 10), 1);
	KUNIT_EXPECT_EQ(test, tc_cache_evict(c, 10), 0);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
}

/* A page handed to a reader survives eviction until the reader drops it. */
static void tc_cache_hit_page_outlives_eviction(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 10);
	struct page *hits[1];
	unsigned int count;

	KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, 7, 1, 0x77), 1);
	KUNIT_ASSERT_EQ(test, tc_cache_lookup(c, 7, 1, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, page_ref_count(hits[0]), 2);
	tc_cache_invalidate(c, 7, 7);
	KUNIT_EXPECT_EQ(test, page_ref_count(hits[0]), 1);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[0]), 0x77);
	put_page(hits[0]);
}

static void tc_cache_admits_on_second_miss(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 8);
	unsigned long i;

	/* First access: always. */
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4));

	tc_cache_set_admit(c, TC_ADMIT_SECOND);
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 10, 4));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 4);
	/* The second miss of a run's first block admits, and forgets. */
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 0);
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 10, 1));
	/* A run inside an earlier one's ghosts. */
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 20, 4));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 22, 2));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 3);

	/* Bounded: never more than max(capacity, TC_GHOSTS_MIN) ghosts. */
	for (i = 0; i < 3 * TC_GHOSTS_MIN; i += 8) {
		tc_cache_admit(c, 1000 + i, 8);
		KUNIT_ASSERT_LE(test, c->nr_ghosts, (unsigned long)TC_GHOSTS_MIN);
	}
	/* Back to first: the ghosts go. */
	tc_cache_set_admit(c, TC_ADMIT_FIRST);
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 0);
	KUNIT_EXPECT_TRUE(test, xa_empty(&c->ghosts));
}

static struct kunit_case tc_cache_test_cases[] = {
	KUNIT_CASE(tc_cache_fill_then_hit),
	KUNIT_CASE(tc_cache_read_error_is_not_cached),
	KUNIT_CASE(tc_cache_concurrent_miss_fills_once),
	KUNIT_CASE(tc_cache_fill_racing_write_is_dropped),
	KUNIT_CASE(tc_cache_write_drops_cached_blocks),
	KUNIT_CASE(tc_cache_lru_eviction_and_capacity),
	KUNIT_CASE(tc_cache_hit_page_outlives_eviction),
	KUNIT_CASE(tc_cache_admits_on_second_miss),
	{}
};

static struct kunit_suite tc_cache_test_suite = {
	.name = "dm-totalcow-cache",
	.test_cases = tc_cache_test_cases,
};

kunit_test_suite(tc_cache_test_suite);
