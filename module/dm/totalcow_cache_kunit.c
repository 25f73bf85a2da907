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

/*
 * Begin a fill of @n fresh pages tagged @tag at @blk, as of @seq; *@got
 * is how many blocks it claimed. The pages it did not claim are freed.
 */
static struct tc_fill *tc_test_begin_seq(struct kunit *test, struct tc_cache *c,
					 unsigned long blk, unsigned int n, u8 tag,
					 unsigned long seq, unsigned int *got)
{
	struct tc_fill *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, f);
	tc_test_pages(test, f->pages, n, tag);
	*got = tc_cache_begin_fill(c, f, blk, n, seq);
	KUNIT_EXPECT_EQ(test, f->nr, *got);
	for (i = *got; i < n; i++)
		put_page(f->pages[i]);
	return f;
}

static struct tc_fill *tc_test_begin(struct kunit *test, struct tc_cache *c,
				     unsigned long blk, unsigned int n, u8 tag,
				     unsigned int *got)
{
	return tc_test_begin_seq(test, c, blk, n, tag, tc_cache_seq(c), got);
}

static void tc_test_put(struct page **pages, unsigned int n)
{
	while (n)
		put_page(pages[--n]);
}

/* End @f the way the target does: the fill drops its own references. */
static bool tc_test_end(struct tc_cache *c, struct tc_fill *f, bool ok,
			struct bio_list *served, struct bio_list *requeue)
{
	bool published = tc_cache_end_fill(c, f, ok, served, requeue);

	tc_test_put(f->pages, f->nr);
	return published;
}

/* Fill @n blocks from @blk in one go; returns how many were claimed. */
static unsigned int tc_test_fill(struct kunit *test, struct tc_cache *c,
				 unsigned long blk, unsigned int n, u8 tag)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_fill *f;
	unsigned int got;

	f = tc_test_begin(test, c, blk, n, tag, &got);
	if (got)
		KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	return got;
}

static void tc_test_bio_free(void *bio)
{
	bio_uninit(bio);
	kfree(bio);
}

/* A read bio of @nr blocks, with no data: only waits are tested with it. */
static struct bio *tc_test_bio(struct kunit *test, unsigned int nr)
{
	struct bio *bio = bio_kmalloc(0, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, bio);
	bio_init(bio, NULL, NULL, 0, REQ_OP_READ);
	bio->bi_iter.bi_size = nr * TC_BLOCK_SIZE;
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, tc_test_bio_free, bio), 0);
	return bio;
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

/*
 * The cache holds its own reference to a published page; the fill's goes
 * when the fill is done with it. Pages of fills in flight are the fill's.
 */
static void tc_cache_fill_pages_belong_to_the_fill(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct tc_fill *f;
	unsigned int got;

	f = tc_test_begin(test, c, 0, 2, 0x10, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	KUNIT_EXPECT_EQ(test, page_ref_count(f->pages[0]), 1);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 2);
	KUNIT_EXPECT_TRUE(test, tc_cache_end_fill(c, f, true, &served, &requeue));
	KUNIT_EXPECT_EQ(test, page_ref_count(f->pages[0]), 2);
	KUNIT_EXPECT_EQ(test, page_private(f->pages[1]), 1);
	tc_test_put(f->pages, f->nr);
	KUNIT_EXPECT_EQ(test, page_ref_count(f->pages[1]), 1);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 2);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);

	/* A write drops a pending page from the cache, not from the fill. */
	f = tc_test_begin(test, c, 4, 2, 0x20, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	tc_cache_write_begin(c, 5, 5);
	KUNIT_EXPECT_EQ(test, page_ref_count(f->pages[1]), 1);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(f->pages[1]), 0x21);
	tc_cache_write_end(c);
	KUNIT_EXPECT_FALSE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_EQ(test, c->nr_cached, 2);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
}

static void tc_cache_read_error_is_not_cached(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct bio *waiter = tc_test_bio(test, 1);
	struct page *pages[2];
	struct tc_fill *f;
	unsigned int count, got;

	f = tc_test_begin(test, c, 0, 2, 0, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 1, 1, NULL, waiter));
	KUNIT_EXPECT_FALSE(test, tc_test_end(c, f, false, &served, &requeue));
	/* The waiter reads the origin itself, and gets its own error. */
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&served));
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&requeue), waiter);
	KUNIT_EXPECT_EQ(test, c->stats.requeued, 1);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 2, pages, &count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
}

/*
 * A second reader of blocks being filled waits for the fill and is served
 * from it: the origin is read once, and nobody fills twice.
 */
static void tc_cache_concurrent_miss_waits_for_the_fill(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct bio *w1 = tc_test_bio(test, 3), *w2 = tc_test_bio(test, 1);
	struct page *hits[4];
	struct tc_fill *f;
	unsigned int count, got;

	f = tc_test_begin(test, c, 0, 4, 1, &got);
	KUNIT_ASSERT_EQ(test, got, 4);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 1, 8, hits, &count), TC_RUN_FILLING);
	KUNIT_EXPECT_EQ(test, count, 3);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 1, 3, NULL, w1));
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 3, 1, NULL, w2));
	tc_test_begin(test, c, 0, 2, 9, &got);
	KUNIT_EXPECT_EQ(test, got, 0);

	KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&served), w1);
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&served), w2);
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&served));
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&requeue));
	KUNIT_EXPECT_EQ(test, c->stats.waited, 4);
	KUNIT_EXPECT_EQ(test, c->stats.fills, 4);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 4, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[1]), 2);
	tc_test_put(hits, count);
	/* Done: waiting on it is refused, the bio reads the origin. */
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 0, 1, NULL, tc_test_bio(test, 1)));
}

/*
 * Two readers look the cold run of 4 blocks at 0 up before either claims
 * it; the first claims it (the fill returned), the second's claim fails
 * and it uncounts its misses: *@count is its run, to look up again.
 */
static struct tc_fill *tc_test_lose_claim(struct kunit *test, struct tc_cache *c,
					  unsigned int *count)
{
	struct page *hits[4];
	unsigned int first, got;
	struct tc_fill *f;

	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 4, hits, &first), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 4, hits, count), TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, c->stats.misses, 8);
	f = tc_test_begin(test, c, 0, first, 1, &got);
	KUNIT_ASSERT_EQ(test, got, 4);
	tc_test_begin(test, c, 0, *count, 9, &got);
	KUNIT_EXPECT_EQ(test, got, 0);
	tc_cache_unmiss(c, *count);
	KUNIT_EXPECT_EQ(test, c->stats.misses, 4);
	return f;
}

/*
 * Two readers on two CPUs look the same cold run up before either claims
 * it (the interleaving one CPU without preemption never produces): both
 * see it absent and count misses; the second's claim fails. It uncounts
 * its misses, looks again, finds the first one's fill and waits for it:
 * the origin is read once, and the stats say so (a target that read the
 * origin after a lost claim read 1.03x with 8 readers on 2 CPUs).
 */
static void tc_cache_lost_claim_looks_again_and_waits(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct bio *w = tc_test_bio(test, 4);
	struct page *hits[4];
	unsigned int count2;
	struct tc_fill *f = tc_test_lose_claim(test, c, &count2);

	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, count2, hits, &count2), TC_RUN_FILLING);
	KUNIT_EXPECT_EQ(test, count2, 4);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 0, count2, NULL, w));
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&served), w);
	KUNIT_EXPECT_EQ(test, c->stats.misses, 4);
	KUNIT_EXPECT_EQ(test, c->stats.waited, 4);
	KUNIT_EXPECT_EQ(test, c->stats.fills, 4);
}

/*
 * The same, and the second reader is then held up (preempted) for as long
 * as the first one's fill takes: by its second look the fill is in
 * flight, by its wait it has published, so there is nothing to wait for.
 * Its third look finds the run cached (TC_MAP_TRIES): still one origin
 * read, counted once (a target that read the origin after its second look
 * read 1.03x in a CI run on 2 vCPUs of a loaded host).
 */
static void tc_cache_fill_done_before_the_wait_is_a_hit_on_the_third_look(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct page *hits[4];
	unsigned int count2;
	struct tc_fill *f = tc_test_lose_claim(test, c, &count2);

	/* Second look: the fill is in flight; it publishes before the wait. */
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, count2, hits, &count2), TC_RUN_FILLING);
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&served));
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 0, count2, NULL, tc_test_bio(test, 4)));
	tc_cache_unmiss(c, count2);

	/* Third look: cached, the fill's bytes. */
	KUNIT_ASSERT_EQ(test, tc_cache_lookup(c, 0, count2, hits, &count2), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, count2, 4);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[3]), 4);
	tc_test_put(hits, count2);
	KUNIT_EXPECT_EQ(test, c->stats.misses, 4);
	KUNIT_EXPECT_EQ(test, c->stats.hits, 4);
	KUNIT_EXPECT_EQ(test, c->stats.fills, 4);
	KUNIT_EXPECT_EQ(test, c->stats.waited, 0);
}

/* Domains of a fake hierarchy for the waiting rule's tests. */
struct tc_test_domain {
	const struct tc_test_domain *parent;
};

/* The target's rule, on the fake hierarchy: @fill is @reader or above it. */
static bool tc_test_may_wait(const void *fill, const void *reader)
{
	const struct tc_test_domain *d;

	for (d = reader; d; d = d->parent)
		if (d == fill)
			return true;
	return false;
}

/*
 * The cache applies the waiting rule it is given: a reader waits for a
 * fill of its own domain or of an ancestor, never for one of a sibling
 * or of a descendant (the target passes I/O cgroups).
 */
static void tc_cache_wait_follows_the_rule(struct kunit *test)
{
	static const struct tc_test_domain root, a = { &root }, b = { &root },
					     a1 = { &a };
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct tc_fill *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	struct tc_fill *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	unsigned int n;

	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_NOT_NULL(test, g);
	c->may_wait = tc_test_may_wait;
	tc_test_pages(test, f->pages, 2, 7);
	f->domain = &a;
	KUNIT_ASSERT_EQ(test, tc_cache_begin_fill(c, f, 0, 2, tc_cache_seq(c)), 2);
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 0, 2, &b, tc_test_bio(test, 2)));
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 0, 1, &root, tc_test_bio(test, 1)));
	KUNIT_EXPECT_EQ(test, c->stats.waited, 0);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 1, 1, &a, tc_test_bio(test, 1)));
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 0, 2, &a1, tc_test_bio(test, 2)));
	KUNIT_EXPECT_EQ(test, c->stats.waited, 3);
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	for (n = 0; bio_list_pop(&served); n++)
		;
	KUNIT_EXPECT_EQ(test, n, 2);

	/* A fill of the root: everybody waits. */
	tc_test_pages(test, g->pages, 1, 9);
	g->domain = &root;
	KUNIT_ASSERT_EQ(test, tc_cache_begin_fill(c, g, 5, 1, tc_cache_seq(c)), 1);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 5, 1, &b, tc_test_bio(test, 1)));
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 5, 1, &a1, tc_test_bio(test, 1)));
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, g, true, &served, &requeue));
	KUNIT_EXPECT_EQ(test, c->stats.waited, 5);
}

/* A wait covers blocks of one fill in flight, or nothing. */
static void tc_cache_wait_needs_one_fill(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct tc_fill *a, *b;
	struct page *hits[4];
	unsigned int count, got;

	a = tc_test_begin(test, c, 0, 2, 1, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	b = tc_test_begin(test, c, 2, 2, 5, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	/* The run of one fill stops where the next fill's blocks start. */
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, 4, hits, &count), TC_RUN_FILLING);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 1, 2, NULL, tc_test_bio(test, 2)));
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 4, 1, NULL, tc_test_bio(test, 1)));
	KUNIT_EXPECT_EQ(test, c->stats.waited, 0);
	KUNIT_EXPECT_EQ(test, c->stats.misses, 3);
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, a, true, &served, &requeue));
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, b, true, &served, &requeue));
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&served));
}

/*
 * The race the design is about: a fill reads the old data, a write to the
 * block starts and completes, then the fill completes. It must not
 * publish, and bios that waited for it read the origin again. Fills that
 * start while the write is in flight must not even begin.
 */
static void tc_cache_fill_racing_write_is_dropped(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct bio *waiter = tc_test_bio(test, 2);
	struct page *hits[2];
	struct tc_fill *f;
	unsigned long seq = tc_cache_seq(c), seq2;
	unsigned int count, got;

	f = tc_test_begin_seq(test, c, 5, 2, 0xaa, seq, &got);
	KUNIT_ASSERT_EQ(test, got, 2);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 5, 2, NULL, waiter));
	tc_cache_write_begin(c, 5, 5);
	KUNIT_EXPECT_EQ(test, c->stats.invalidations, 1);

	/* While the write is in flight, nobody may fill or wait. */
	seq2 = tc_cache_seq(c);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_BUSY);
	KUNIT_EXPECT_FALSE(test, tc_cache_wait(c, 5, 1, NULL, tc_test_bio(test, 1)));
	tc_test_begin_seq(test, c, 5, 1, 0xbb, seq2, &got);
	KUNIT_EXPECT_EQ(test, got, 0);

	tc_cache_write_end(c);
	KUNIT_EXPECT_FALSE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_TRUE(test, bio_list_empty(&served));
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&requeue), waiter);
	KUNIT_EXPECT_EQ(test, c->stats.requeued, 2);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_ABSENT);

	/* A write elsewhere in the whitelist also keeps a fill from publishing. */
	f = tc_test_begin(test, c, 5, 1, 0xcc, &got);
	KUNIT_ASSERT_EQ(test, got, 1);
	tc_cache_write_begin(c, 900, 900);
	tc_cache_write_end(c);
	KUNIT_EXPECT_FALSE(test, tc_test_end(c, f, true, &served, &requeue));

	/* A fill that read @seq before the write ended is stale too. */
	tc_cache_write_begin(c, 5, 5);
	seq2 = tc_cache_seq(c);
	tc_cache_write_end(c);
	tc_test_begin_seq(test, c, 5, 1, 0xcc, seq2, &got);
	KUNIT_EXPECT_EQ(test, got, 0);

	/* After the write, a fresh fill works. */
	KUNIT_EXPECT_EQ(test, tc_test_fill(test, c, 5, 1, 0xdd), 1);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 5, 1, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[0]), 0xdd);
	tc_test_put(hits, count);
}

/* Whitelist removal fails fills in flight; their waiters read again. */
static void tc_cache_invalidate_requeues_waiters(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 100);
	struct bio *waiter = tc_test_bio(test, 1);
	struct tc_fill *f;
	unsigned int got;

	f = tc_test_begin(test, c, 0, 1, 0, &got);
	KUNIT_ASSERT_EQ(test, got, 1);
	KUNIT_EXPECT_TRUE(test, tc_cache_wait(c, 0, 1, NULL, waiter));
	tc_cache_invalidate(c, 0, ULONG_MAX);
	KUNIT_EXPECT_FALSE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_PTR_EQ(test, bio_list_pop(&requeue), waiter);
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

/* Dropping the whole cache or shrinking it works in bounded batches. */
static void tc_cache_large_drops_are_batched(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 4096);
	unsigned long i;

	for (i = 0; i < 3000; i += TC_FILL_MAX)
		KUNIT_ASSERT_EQ(test, tc_test_fill(test, c, i, TC_FILL_MAX, 0), TC_FILL_MAX);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 3008);
	tc_cache_set_capacity(c, 100);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 100);
	KUNIT_EXPECT_EQ(test, c->stats.evictions, 2908);
	tc_cache_set_capacity(c, 4096);
	for (i = 0; i < 3000; i += TC_FILL_MAX)
		tc_test_fill(test, c, i, TC_FILL_MAX, 0);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 3008);
	tc_cache_invalidate(c, 1000, 2999);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 1008);
	tc_cache_invalidate(c, 0, ULONG_MAX);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 0);
	KUNIT_EXPECT_TRUE(test, xa_empty(&c->blocks));
	KUNIT_EXPECT_TRUE(test, list_empty(&c->lru));
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

/*
 * Runs are found by walking along the xarray's leaves (64 slots each):
 * fills, runs and hits that cross a leaf boundary, an absent run that
 * ends at a block far away, and the cap on the pages one hit returns.
 */
static void tc_cache_runs_cross_leaves(struct kunit *test)
{
	struct bio_list served = BIO_EMPTY_LIST, requeue = BIO_EMPTY_LIST;
	struct tc_cache *c = tc_test_cache(test, 4096);
	struct page *hits[TC_HIT_MAX];
	struct tc_fill *f;
	unsigned int count, got, i;

	/* 60..123 straddles the leaf boundary at 64. */
	KUNIT_EXPECT_EQ(test, tc_test_fill(test, c, 60, TC_FILL_MAX, 0), TC_FILL_MAX);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 0, TC_FILL_MAX, hits, &count),
			TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 60);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 124, TC_FILL_MAX, hits, &count),
			TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, TC_FILL_MAX);

	/* A hit returns at most TC_HIT_MAX pages, in order, across the leaf. */
	KUNIT_ASSERT_EQ(test, tc_cache_lookup(c, 50 + TC_HIT_MAX / 2, TC_FILL_MAX,
					      hits, &count), TC_RUN_HIT);
	KUNIT_ASSERT_EQ(test, count, TC_HIT_MAX);
	for (i = 0; i < count; i++)
		KUNIT_EXPECT_EQ(test, page_private(hits[i]), 50 + TC_HIT_MAX / 2 + i);
	tc_test_put(hits, count);

	/* A fill claims up to the first block it finds present. */
	f = tc_test_begin(test, c, 20, TC_FILL_MAX, 0x10, &got);
	KUNIT_EXPECT_EQ(test, got, 40);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, 30, TC_FILL_MAX, hits, &count),
			TC_RUN_FILLING);
	KUNIT_EXPECT_EQ(test, count, 30);
	KUNIT_EXPECT_TRUE(test, tc_test_end(c, f, true, &served, &requeue));
	KUNIT_EXPECT_EQ(test, c->nr_pending, 0);
	KUNIT_EXPECT_EQ(test, c->nr_cached, 40 + TC_FILL_MAX);
	KUNIT_ASSERT_EQ(test, tc_cache_lookup(c, 59, 2, hits, &count), TC_RUN_HIT);
	KUNIT_EXPECT_EQ(test, count, 2);
	KUNIT_EXPECT_EQ(test, *(u8 *)page_address(hits[0]), 0x10 + 39);
	tc_test_put(hits, count);

	/* A fill at a block past the tree's end grows it. */
	KUNIT_EXPECT_EQ(test, tc_test_fill(test, c, 1UL << 30, 3, 0), 3);
	KUNIT_EXPECT_EQ(test, tc_cache_lookup(c, (1UL << 30) - 1, 4, hits, &count),
			TC_RUN_ABSENT);
	KUNIT_EXPECT_EQ(test, count, 1);
}

static void tc_cache_admits_on_second_miss(struct kunit *test)
{
	struct tc_cache *c = tc_test_cache(test, 8);
	unsigned long i;

	/* First access: always. */
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4, true));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4, true));

	tc_cache_set_admit(c, TC_ADMIT_SECOND);
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 10, 4, true));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 4);
	/* The second miss of a run's first block admits, and forgets. */
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4, true));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 0);
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 10, 1, true));
	/* Readahead's question leaves no ghosts, and admits only ghosts. */
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 40, 4, false));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 1);
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 40, 4, false));
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 50, 4, true));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 50, 4, false));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 1);
	/* A run inside an earlier one's ghosts. */
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 20, 4, true));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 22, 2, true));
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 3);

	/* Bounded: never more than max(capacity, TC_GHOSTS_MIN) ghosts. */
	for (i = 0; i < 3 * TC_GHOSTS_MIN; i += 8) {
		tc_cache_admit(c, 1000 + i, 8, true);
		KUNIT_ASSERT_LE(test, c->nr_ghosts, (unsigned long)TC_GHOSTS_MIN);
	}
	/* drop_cache forgets them: the next miss is a first one again. */
	KUNIT_EXPECT_GT(test, c->nr_ghosts, 0);
	tc_cache_forget_ghosts(c);
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 0);
	KUNIT_EXPECT_TRUE(test, xa_empty(&c->ghosts));
	KUNIT_EXPECT_FALSE(test, tc_cache_admit(c, 10, 4, true));
	KUNIT_EXPECT_TRUE(test, tc_cache_admit(c, 10, 4, true));

	/* Back to first: the ghosts go. */
	tc_cache_set_admit(c, TC_ADMIT_FIRST);
	KUNIT_EXPECT_EQ(test, c->nr_ghosts, 0);
	KUNIT_EXPECT_TRUE(test, xa_empty(&c->ghosts));
}

static struct kunit_case tc_cache_test_cases[] = {
	KUNIT_CASE(tc_cache_fill_then_hit),
	KUNIT_CASE(tc_cache_fill_pages_belong_to_the_fill),
	KUNIT_CASE(tc_cache_read_error_is_not_cached),
	KUNIT_CASE(tc_cache_concurrent_miss_waits_for_the_fill),
	KUNIT_CASE(tc_cache_lost_claim_looks_again_and_waits),
	KUNIT_CASE(tc_cache_fill_done_before_the_wait_is_a_hit_on_the_third_look),
	KUNIT_CASE(tc_cache_wait_needs_one_fill),
	KUNIT_CASE(tc_cache_wait_follows_the_rule),
	KUNIT_CASE(tc_cache_fill_racing_write_is_dropped),
	KUNIT_CASE(tc_cache_invalidate_requeues_waiters),
	KUNIT_CASE(tc_cache_large_drops_are_batched),
	KUNIT_CASE(tc_cache_write_drops_cached_blocks),
	KUNIT_CASE(tc_cache_lru_eviction_and_capacity),
	KUNIT_CASE(tc_cache_hit_page_outlives_eviction),
	KUNIT_CASE(tc_cache_admits_on_second_miss),
	KUNIT_CASE(tc_cache_runs_cross_leaves),
	{}
};

static struct kunit_suite tc_cache_test_suite = {
	.name = "dm_totalcow_cache",
	.test_cases = tc_cache_test_cases,
};

kunit_test_suite(tc_cache_test_suite);
