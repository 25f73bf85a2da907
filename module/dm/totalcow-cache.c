// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow block cache: whole pages keyed by disk block number, LRU
 * replacement, and the sequence count that keeps fills racing with writes
 * from publishing stale data.
 *
 * Metadata per cached block: the xarray slot (8 bytes plus its share of a
 * 576-byte node, about 9 bytes when dense). The LRU links and the block
 * number live in the page's own struct page (lru, private), which we own.
 */

#include <linux/mm.h>
#include <linux/xarray.h>

#include "totalcow-cache.h"

void tc_cache_init(struct tc_cache *c, unsigned long capacity)
{
	xa_init_flags(&c->blocks, XA_FLAGS_LOCK_IRQ);
	INIT_LIST_HEAD(&c->lru);
	c->nr_cached = 0;
	c->nr_pending = 0;
	c->capacity = capacity;
	c->writes_inflight = 0;
	c->seq = 0;
	memset(&c->stats, 0, sizeof(c->stats));
	c->admit = TC_ADMIT_FIRST;
	xa_init_flags(&c->ghosts, XA_FLAGS_LOCK_IRQ);
	c->nr_ghosts = 0;
	c->may_wait = NULL;
}

/* No fills are in flight (the target is being destroyed). */
void tc_cache_destroy(struct tc_cache *c)
{
	struct page *page;
	unsigned long idx;

	xa_for_each(&c->blocks, idx, page) {
		if (WARN_ON_ONCE(xa_get_mark(&c->blocks, idx, TC_PENDING)))
			continue;
		list_del(&page->lru);
		put_page(page);
		cond_resched();
	}
	xa_destroy(&c->blocks);
	c->nr_cached = 0;
	xa_destroy(&c->ghosts);
	c->nr_ghosts = 0;
}

/*
 * Read the sequence count before looking at the whitelist: whoever removes
 * ranges publishes the new whitelist before bumping @seq (release), so a
 * fill that sees the new @seq also sees the new whitelist.
 */
unsigned long tc_cache_seq(struct tc_cache *c)
{
	/* Pairs with smp_store_release() in tc_cache_bump(). */
	return smp_load_acquire(&c->seq);
}

/* Called with the xarray lock held, after any whitelist change is published. */
static void tc_cache_bump(struct tc_cache *c)
{
	/* Orders the whitelist update before @seq; see tc_cache_seq(). */
	smp_store_release(&c->seq, c->seq + 1);
}

static bool tc_pending(struct tc_cache *c, unsigned long blk)
{
	return xa_get_mark(&c->blocks, blk, TC_PENDING);
}

/* Drop one uptodate block; called with the xarray lock held. */
static void tc_cache_drop(struct tc_cache *c, struct page *page)
{
	list_del(&page->lru);
	__xa_erase(&c->blocks, page_private(page));
	c->nr_cached--;
	put_page(page);
}

static void tc_cache_shrink_to(struct tc_cache *c, unsigned long target)
{
	while (c->nr_cached > target) {
		tc_cache_drop(c, list_first_entry(&c->lru, struct page, lru));
		c->stats.evictions++;
	}
}

/* The fill that owns the pending block @blk, or NULL; xarray lock held. */
static struct tc_fill *tc_filling(struct tc_cache *c, unsigned long blk)
{
	struct page *page = xa_load(&c->blocks, blk);

	if (!page || !tc_pending(c, blk))
		return NULL;
	return (struct tc_fill *)page_private(page);
}

/*
 * Classify the run of up to @nr blocks starting at @blk by its first block
 * and return its kind; *@count is how many leading blocks share it (for
 * TC_RUN_FILLING: are being filled by the same fill). For a hit (at most TC_HIT_MAX blocks), @pages
 * receives the pages, each with a reference the caller drops, and they
 * become the most recently used. With @pages NULL (readahead probing what
 * to read) nothing is counted, referenced or moved, and a hit run is
 * counted up to @nr blocks.
 */
enum tc_run tc_cache_lookup(struct tc_cache *c, unsigned long blk,
			    unsigned int nr, struct page **pages,
			    unsigned int *count)
{
	XA_STATE(xas, &c->blocks, blk);
	struct tc_fill *fill;
	enum tc_run kind;
	struct page *page;
	unsigned long flags;
	unsigned int i = 0;

	/* One walk down the tree, then along the leaf: no walk per block. */
	xa_lock_irqsave(&c->blocks, flags);
	page = xas_find(&xas, blk + nr - 1);
	if (!page || xas.xa_index != blk) {
		i = page ? xas.xa_index - blk : nr;
		kind = c->writes_inflight ? TC_RUN_BUSY : TC_RUN_ABSENT;
		if (pages)
			c->stats.misses += i;
	} else if (xas_get_mark(&xas, TC_PENDING)) {
		fill = (struct tc_fill *)page_private(page);
		do {
			i++;
		} while (i < nr && (page = xas_next(&xas)) &&
			 xas_get_mark(&xas, TC_PENDING) &&
			 (struct tc_fill *)page_private(page) == fill);
		kind = TC_RUN_FILLING;
	} else if (!pages) {
		do {
			i++;
		} while (i < nr && xas_next(&xas) &&
			 !xas_get_mark(&xas, TC_PENDING));
		kind = TC_RUN_HIT;
	} else {
		do {
			get_page(page);
			list_move_tail(&page->lru, &c->lru);
			pages[i++] = page;
		} while (i < min(nr, TC_HIT_MAX) && (page = xas_next(&xas)) &&
			 !xas_get_mark(&xas, TC_PENDING));
		kind = TC_RUN_HIT;
		c->stats.hits += i;
	}
	xa_unlock_irqrestore(&c->blocks, flags);
	*count = i;
	return kind;
}

/*
 * Claim up to @nr absent blocks from @blk for fill @f, whose pages the
 * caller allocated (and set @f->domain), if nothing changed since @seq was
 * read and no write is in flight. Returns how many leading blocks were claimed (0: do not
 * fill); that becomes @f->nr. The fill keeps its page references: the
 * cache takes its own when the fill publishes (tc_cache_end_fill()).
 */
unsigned int tc_cache_begin_fill(struct tc_cache *c, struct tc_fill *f,
				 unsigned long blk, unsigned int nr,
				 unsigned long seq)
{
	XA_STATE(xas, &c->blocks, blk);
	unsigned long flags;
	unsigned int i;

	f->blk = blk;
	f->seq = seq;
	f->nr = 0;
	bio_list_init(&f->waiters);
	xa_lock_irqsave(&c->blocks, flags);
	if (c->seq != seq || c->writes_inflight) {
		xa_unlock_irqrestore(&c->blocks, flags);
		return 0;
	}
	nr = min(nr, TC_FILL_MAX);
	/* Insert along the leaf; xas_store() allocates nodes GFP_NOWAIT. */
	for (i = 0; i < nr; i++) {
		if (i ? xas_next(&xas) : xas_load(&xas))
			break;		/* claimed meanwhile */
		set_page_private(f->pages[i], (unsigned long)f);
		xas_store(&xas, f->pages[i]);
		if (xas_error(&xas))
			break;
		xas_set_mark(&xas, TC_PENDING);
	}
	c->nr_pending += i;
	f->nr = i;
	xa_unlock_irqrestore(&c->blocks, flags);
	return i;
}

/*
 * Queue @bio, which reads the @nr blocks from @blk in @domain, on the fill
 * that is reading all of them, if the waiting rule (@c->may_wait) lets a
 * reader in @domain wait for it. False if no such fill is in flight (it
 * completed, a write dropped its blocks, or the rule says no): the caller
 * reads the origin itself. The fill's completion serves or requeues the
 * bio.
 */
bool tc_cache_wait(struct tc_cache *c, unsigned long blk, unsigned int nr,
		   const void *domain, struct bio *bio)
{
	struct tc_fill *fill;
	unsigned long flags;
	unsigned int i;
	bool queued = false;

	xa_lock_irqsave(&c->blocks, flags);
	fill = tc_filling(c, blk);
	if (fill && c->may_wait && !c->may_wait(fill->domain, domain))
		fill = NULL;
	for (i = 1; fill && i < nr; i++)
		if (tc_filling(c, blk + i) != fill)
			fill = NULL;
	if (fill) {
		bio_list_add(&fill->waiters, bio);
		c->stats.waited += nr;
		queued = true;
	} else {
		c->stats.misses += nr;
	}
	xa_unlock_irqrestore(&c->blocks, flags);
	return queued;
}

/*
 * A read that was counted as @nr misses (tc_cache_lookup(), tc_cache_wait())
 * found the run claimed or published by another reader before it read
 * the origin, and looks it up again: it read nothing, so far.
 */
void tc_cache_unmiss(struct tc_cache *c, unsigned int nr)
{
	unsigned long flags;

	xa_lock_irqsave(&c->blocks, flags);
	c->stats.misses -= nr;
	xa_unlock_irqrestore(&c->blocks, flags);
}

/*
 * Fill @f's read finished; @ok if it succeeded and its pages hold the
 * data. Publish the pages that are still its own if nothing changed since
 * it started (no whitelisted write began or ended, no range left the
 * whitelist), drop them otherwise; read errors are never cached. The bios
 * that waited go to @served if the fill published (the caller copies the
 * fill's pages to them), to @requeue otherwise (the caller reads the
 * origin again for them: what they would have been given may be stale).
 * Returns whether the fill published. The fill's own page references stay
 * with the caller.
 */
bool tc_cache_end_fill(struct tc_cache *c, struct tc_fill *f, bool ok,
		       struct bio_list *served, struct bio_list *requeue)
{
	XA_STATE(xas, &c->blocks, f->blk);
	struct bio *bio;
	unsigned long flags;
	bool publish;
	unsigned int i;

	xa_lock_irqsave(&c->blocks, flags);
	publish = ok && c->seq == f->seq;
	for (i = 0; i < f->nr; i++) {
		struct page *page = f->pages[i];
		unsigned long blk = f->blk + i;

		if (!publish) {
			if (xa_load(&c->blocks, blk) != page)
				continue;	/* dropped by a write */
			c->nr_pending--;
			__xa_erase(&c->blocks, blk);
			continue;
		}
		/* Publishing stores nothing: walk along the leaf. */
		if ((i ? xas_next(&xas) : xas_load(&xas)) != page)
			continue;	/* dropped by a write or invalidation */
		c->nr_pending--;
		xas_clear_mark(&xas, TC_PENDING);
		set_page_private(page, blk);
		get_page(page);
		list_add_tail(&page->lru, &c->lru);
		c->nr_cached++;
		c->stats.fills++;
	}
	if (publish) {
		bio_list_merge(served, &f->waiters);
	} else {
		bio_list_for_each(bio, &f->waiters)
			c->stats.requeued += bio_sectors(bio) >> TC_BLOCK_SHIFT;
		bio_list_merge(requeue, &f->waiters);
	}
	bio_list_init(&f->waiters);
	tc_cache_shrink_to(c, c->capacity);
	xa_unlock_irqrestore(&c->blocks, flags);
	return publish;
}

/*
 * Drop up to @batch blocks of @first..@last, cached or being filled, and
 * return the number of the block after the last one looked at (0 when the
 * range is done); xarray lock held.
 */
static unsigned long tc_cache_drop_range(struct tc_cache *c, unsigned long first,
					 unsigned long last, unsigned int batch)
{
	XA_STATE(xas, &c->blocks, first);
	struct page *page;

	xas_for_each(&xas, page, last) {
		if (!batch--)
			return xas.xa_index;
		if (xas_get_mark(&xas, TC_PENDING)) {
			/* The fill owns the page and will see @seq changed. */
			xas_store(&xas, NULL);
			c->nr_pending--;
		} else {
			list_del(&page->lru);
			xas_store(&xas, NULL);
			c->nr_cached--;
			put_page(page);
		}
		c->stats.invalidations++;
	}
	return 0;
}

/*
 * A write, discard or write-zeroes to blocks @first..@last (inclusive)
 * that overlap the whitelist is about to be issued: drop those blocks and
 * keep every fill from publishing until tc_cache_write_end().
 */
void tc_cache_write_begin(struct tc_cache *c, unsigned long first,
			  unsigned long last)
{
	unsigned long flags;

	xa_lock_irqsave(&c->blocks, flags);
	tc_cache_bump(c);
	c->writes_inflight++;
	/* A bio's blocks: bounded by the largest bio. */
	tc_cache_drop_range(c, first, last, UINT_MAX);
	xa_unlock_irqrestore(&c->blocks, flags);
}

void tc_cache_write_end(struct tc_cache *c)
{
	unsigned long flags;

	xa_lock_irqsave(&c->blocks, flags);
	tc_cache_bump(c);
	c->writes_inflight--;
	xa_unlock_irqrestore(&c->blocks, flags);
}

/* Blocks dropped per lock hold when a whole range or the cache goes. */
#define TC_DROP_BATCH 256

/*
 * Drop blocks @first..@last and fail fills in flight (whitelist removal,
 * drop_cache), TC_DROP_BATCH blocks per lock hold: the range may be the
 * whole cache, and the lock disables interrupts. The first bump keeps
 * every fill that started earlier from publishing; a fill that starts
 * between two batches read the device after the call began, which is
 * what a read after it would see too (removed ranges are not cacheable
 * any more: the caller published the new whitelist before). May sleep.
 */
void tc_cache_invalidate(struct tc_cache *c, unsigned long first,
			 unsigned long last)
{
	unsigned long flags, next = first;
	bool bumped = false;

	might_sleep();
	do {
		xa_lock_irqsave(&c->blocks, flags);
		if (!bumped)
			tc_cache_bump(c);
		bumped = true;
		next = tc_cache_drop_range(c, next, last, TC_DROP_BATCH);
		xa_unlock_irqrestore(&c->blocks, flags);
		cond_resched();
	} while (next);
}

/* Evict up to @nr least recently used blocks; returns how many. */
unsigned long tc_cache_evict(struct tc_cache *c, unsigned long nr)
{
	unsigned long flags, before;

	xa_lock_irqsave(&c->blocks, flags);
	before = c->nr_cached;
	tc_cache_shrink_to(c, before > nr ? before - nr : 0);
	before -= c->nr_cached;
	xa_unlock_irqrestore(&c->blocks, flags);
	return before;
}

/* New capacity; evicts down to it in batches (see tc_cache_invalidate()). */
void tc_cache_set_capacity(struct tc_cache *c, unsigned long capacity)
{
	unsigned long flags;
	bool more;

	might_sleep();
	do {
		xa_lock_irqsave(&c->blocks, flags);
		c->capacity = capacity;
		tc_cache_shrink_to(c, max(capacity, c->nr_cached > TC_DROP_BATCH ?
					  c->nr_cached - TC_DROP_BATCH : 0));
		more = c->nr_cached > capacity;
		xa_unlock_irqrestore(&c->blocks, flags);
		cond_resched();
	} while (more);
}

void tc_cache_get_stats(struct tc_cache *c, struct tc_cache_stats *st,
			unsigned long *cached, unsigned long *capacity)
{
	unsigned long flags;

	xa_lock_irqsave(&c->blocks, flags);
	*st = c->stats;
	*cached = c->nr_cached;
	*capacity = c->capacity;
	xa_unlock_irqrestore(&c->blocks, flags);
}

void tc_cache_clear_stats(struct tc_cache *c)
{
	unsigned long flags;

	xa_lock_irqsave(&c->blocks, flags);
	memset(&c->stats, 0, sizeof(c->stats));
	xa_unlock_irqrestore(&c->blocks, flags);
}

/* At most this many ghosts, or the capacity if larger: then forget all. */
#define TC_GHOSTS_MIN 4096

/*
 * May the run of @nr absent blocks at @blk be filled? Always with
 * TC_ADMIT_FIRST. With TC_ADMIT_SECOND only if its first block missed
 * before; otherwise its blocks are remembered as ghosts (about 9 bytes
 * each, at most max(capacity, TC_GHOSTS_MIN) of them) and the read just
 * passes through. If a ghost cannot be stored, the run is admitted.
 * Without @remember (readahead: nobody read those blocks) a run that is
 * not admitted leaves no ghosts.
 */
bool tc_cache_admit(struct tc_cache *c, unsigned long blk, unsigned int nr,
		    bool remember)
{
	unsigned long flags, i;
	bool admit = true;

	if (READ_ONCE(c->admit) == TC_ADMIT_FIRST)
		return true;
	xa_lock_irqsave(&c->ghosts, flags);
	if (xa_load(&c->ghosts, blk)) {
		for (i = blk; i < blk + nr; i++)
			if (__xa_erase(&c->ghosts, i))
				c->nr_ghosts--;
		goto out;
	}
	if (!remember) {
		admit = false;
		goto out;
	}
	if (c->nr_ghosts + nr > max(c->capacity, TC_GHOSTS_MIN)) {
		xa_unlock_irqrestore(&c->ghosts, flags);
		xa_destroy(&c->ghosts);
		xa_lock_irqsave(&c->ghosts, flags);
		c->nr_ghosts = 0;
	}
	for (i = blk; i < blk + nr; i++) {
		void *old = __xa_store(&c->ghosts, i, xa_mk_value(1),
				       GFP_NOWAIT | __GFP_NOWARN);

		if (xa_is_err(old))
			goto out;
		if (!old)
			c->nr_ghosts++;
	}
	admit = false;
out:
	xa_unlock_irqrestore(&c->ghosts, flags);
	return admit;
}

/*
 * Forget every ghost (drop_cache: a cold cache has no history either),
 * TC_DROP_BATCH per hold of the lock. May sleep.
 */
void tc_cache_forget_ghosts(struct tc_cache *c)
{
	XA_STATE(xas, &c->ghosts, 0);
	unsigned long flags;
	unsigned int n;
	void *entry;

	might_sleep();
	do {
		n = 0;
		xa_lock_irqsave(&c->ghosts, flags);
		xas_set(&xas, 0);
		xas_for_each(&xas, entry, ULONG_MAX) {
			xas_store(&xas, NULL);
			c->nr_ghosts--;
			if (++n == TC_DROP_BATCH)
				break;
		}
		xa_unlock_irqrestore(&c->ghosts, flags);
		cond_resched();
	} while (n == TC_DROP_BATCH);
}

void tc_cache_set_admit(struct tc_cache *c, enum tc_admit admit)
{
	WRITE_ONCE(c->admit, admit);
	if (admit == TC_ADMIT_FIRST) {
		xa_destroy(&c->ghosts);
		c->nr_ghosts = 0;
	}
}

#if IS_ENABLED(CONFIG_DM_TOTALCOW_CACHE_KUNIT_TEST)
#include "totalcow_cache_kunit.c"
#endif
