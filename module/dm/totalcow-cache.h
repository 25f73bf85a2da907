/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow block cache: whole pages keyed by block number (the
 * target-relative sector divided by TC_BLOCK_SECTORS).
 */
#ifndef TOTALCOW_CACHE_H
#define TOTALCOW_CACHE_H

#include <linux/bio.h>
#include <linux/bits.h>
#include <linux/blk_types.h>
#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/xarray.h>

#define TC_BLOCK_SIZE PAGE_SIZE
#define TC_BLOCK_SHIFT (PAGE_SHIFT - SECTOR_SHIFT)
#define TC_BLOCK_SECTORS BIT(TC_BLOCK_SHIFT)

/*
 * Blocks one fill reads at most (256 KiB with 4 KiB pages): as large as
 * one request of most disks (64 segments), so that a fill costs the
 * origin no more requests than the read it replaces, and small enough
 * that the copy its completion makes is bounded (see the target).
 */
#define TC_FILL_MAX 64

/* Pages one hit returns at most (the caller's array, on its stack). */
#define TC_HIT_MAX 32

/* What the leading blocks of a run are (tc_cache_lookup()). */
enum tc_run {
	TC_RUN_HIT,	/* cached: pages returned with a reference each */
	TC_RUN_ABSENT,	/* not cached, nobody filling: may be filled */
	TC_RUN_FILLING,	/* being filled: the bio may wait for the fill */
	TC_RUN_BUSY,	/* not cached, writes in flight: read the origin */
};

/*
 * A fill: up to TC_FILL_MAX consecutive blocks read from the origin into
 * @pages, which the fill allocated and owns (a caller's pages never enter
 * the cache). While it is in flight its pages sit in the cache marked
 * TC_PENDING with page_private() pointing to the fill, and reads of those
 * blocks queue their bios on @waiters instead of reading the origin
 * again, if the cache's waiting rule lets a reader of theirs wait for a
 * fill read in @domain (struct tc_cache, @may_wait; the target passes I/O
 * cgroups). @waiters and the pending entries are under the cache's lock.
 */
struct tc_fill {
	const void *domain;
	unsigned long blk;
	unsigned long seq;
	unsigned int nr;
	struct bio_list waiters;
	struct page *pages[TC_FILL_MAX];
};

/*
 * When a whitelisted block that misses is cached: on its first miss, or
 * on its second miss while it is remembered as a ghost (a block number,
 * no data). The second suits page-cache sharing, where the page cache
 * keeps the one copy of a template block that is read once.
 */
enum tc_admit {
	TC_ADMIT_FIRST,
	TC_ADMIT_SECOND,
};

struct tc_cache_stats {
	u64 hits;		/* blocks served from memory */
	u64 misses;		/* whitelisted blocks read from the origin */
	u64 fills;		/* blocks inserted */
	u64 evictions;		/* blocks dropped for space or by reclaim */
	u64 invalidations;	/* blocks dropped by writes and whitelist removal */
	u64 waited;		/* blocks that waited for a fill in flight */
	u64 requeued;		/* of those, re-read: the fill failed or raced */
};

/*
 * The xarray holds one page per block, its lock (irq-safe, fills complete
 * in bio end_io) protects everything here. A page marked TC_PENDING is
 * being filled: the fill owns it, the xarray only points to it. Other
 * pages are uptodate, owned by the cache and on @lru, coldest first.
 * @seq changes whenever a fill in flight may have become stale: a write
 * to a whitelisted block starts or ends, or ranges leave the whitelist. A
 * fill only publishes its pages if @seq did not change since it started.
 */
struct tc_cache {
	struct xarray blocks;
	struct list_head lru;
	unsigned long nr_cached;
	unsigned long nr_pending;
	unsigned long capacity;
	unsigned int writes_inflight;
	unsigned long seq;
	struct tc_cache_stats stats;
	/* Blocks that missed once (admission on second access). */
	enum tc_admit admit;
	struct xarray ghosts;
	unsigned long nr_ghosts;
	/*
	 * The waiting rule: whether a reader in domain @reader may wait for
	 * a fill read in domain @fill. Called under the cache's lock, with
	 * interrupts off: it must not sleep and must take constant time.
	 * NULL: any reader waits for any fill.
	 */
	bool (*may_wait)(const void *fill, const void *reader);
};

#define TC_PENDING XA_MARK_0

void tc_cache_init(struct tc_cache *c, unsigned long capacity);
void tc_cache_destroy(struct tc_cache *c);

unsigned long tc_cache_seq(struct tc_cache *c);
enum tc_run tc_cache_lookup(struct tc_cache *c, unsigned long blk,
			    unsigned int nr, struct page **pages,
			    unsigned int *count);
unsigned int tc_cache_begin_fill(struct tc_cache *c, struct tc_fill *f,
				 unsigned long blk, unsigned int nr,
				 unsigned long seq);
bool tc_cache_wait(struct tc_cache *c, unsigned long blk, unsigned int nr,
		   const void *domain, struct bio *bio);
void tc_cache_unmiss(struct tc_cache *c, unsigned int nr);
bool tc_cache_end_fill(struct tc_cache *c, struct tc_fill *f, bool ok,
		       struct bio_list *served, struct bio_list *requeue);
void tc_cache_write_begin(struct tc_cache *c, unsigned long first,
			  unsigned long last);
void tc_cache_write_end(struct tc_cache *c);
void tc_cache_invalidate(struct tc_cache *c, unsigned long first,
			 unsigned long last);
unsigned long tc_cache_evict(struct tc_cache *c, unsigned long nr);
void tc_cache_set_capacity(struct tc_cache *c, unsigned long capacity);
void tc_cache_get_stats(struct tc_cache *c, struct tc_cache_stats *st,
			unsigned long *cached, unsigned long *capacity);
void tc_cache_clear_stats(struct tc_cache *c);
bool tc_cache_admit(struct tc_cache *c, unsigned long blk, unsigned int nr,
		    bool remember);
void tc_cache_set_admit(struct tc_cache *c, enum tc_admit admit);
void tc_cache_forget_ghosts(struct tc_cache *c);

#endif /* TOTALCOW_CACHE_H */
