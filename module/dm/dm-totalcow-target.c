// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow: a read cache keyed by disk address, limited to the extents
 * of registered template files (see docs/dm-totalcow.rst).
 *
 * N btrfs snapshots of a template share its data blocks on disk, but each
 * snapshot's file is read and cached separately. Below the file system
 * the N reads of a shared block all go to one disk address: this target
 * serves all but the first from memory. Only whitelisted ranges (the
 * extents of template files) are cached; any other I/O passes through.
 *
 * Reads: a bio is handled as a run of one kind at a time; if the bio is
 * longer than the run, dm_accept_partial_bio() gives the rest back to DM
 * core, which maps it as a new bio. Runs are: outside the whitelist or not
 * block-aligned (pass through), cached (copied from memory, the bio is
 * completed here), being filled (the bio waits for the fill and is
 * completed from it), absent (a fill: the target reads the blocks into
 * pages it owns with a bio of its own, and completes the caller's bio by
 * copying from them). A caller's pages are never copied into the cache:
 * an O_DIRECT read's pages are user memory, writable during the read.
 *
 * Writes, discards and write-zeroes that overlap the whitelist drop the
 * blocks they touch before they are issued, and keep every fill from
 * publishing while they are in flight (tc_cache_write_begin/end()). A fill
 * publishes only if the cache's sequence count did not change between its
 * start and its completion, so a fill that raced with a write never
 * leaves stale data behind.
 *
 * A whitelist_add must not make a range cacheable while a write that did
 * not see the range yet (it started earlier) is in flight: new ranges go
 * to the whitelist that writes check first, then totalcow_drain_writes()
 * waits for every write that started before, then they become cacheable.
 * (This is what SRCU's srcu_down_read()/srcu_up_read() would do, but
 * Tiny SRCU, used on !SMP kernels such as UML, does not wake a waiting
 * synchronize_srcu() when the last reader leaves from interrupt context,
 * which is where bios complete.)
 */

#include <linux/bio.h>
#include <linux/blk-cgroup.h>
#include <linux/cgroup.h>
#include <linux/device-mapper.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "dm-totalcow.h"
#include "totalcow-cache.h"
#include "totalcow-cgroup.h"
#include "totalcow-compat.h"
#include "totalcow-parse.h"
#include "totalcow-whitelist.h"

#define DM_MSG_PREFIX "totalcow"

/* Without a cache_size option: 10% of RAM. */
#define TC_DEFAULT_PERCENT 10

struct totalcow_c {
	struct dm_target *ti;
	struct dm_dev *origin;
	struct tc_cache cache;
	struct tc_whitelist wl;
	/* Writes in flight, by epoch; see totalcow_drain_writes(). */
	atomic_t writes[2];
	unsigned int write_epoch;
	wait_queue_head_t drain_wq;	/* also for api_users */
	atomic_t api_users;		/* kernel API calls in progress */
	struct shrinker *shrinker;
	u64 __percpu *bypassed;
	struct workqueue_struct *wq;	/* bios that waited for a fill */
	struct tc_fleet fleet;		/* the I/O cgroup fills are charged to */

	struct tc_size size;
	bool size_given;		/* for STATUSTYPE_TABLE */
	bool admit_given;
	enum tc_admit admit;		/* as the table gave it */
	bool ra_given;

	/* Sequential readahead, one stream; see totalcow_ra_window(). */
	spinlock_t ra_lock;
	unsigned long ra_next;		/* block after the last whitelisted read */
	unsigned long ra_mark;		/* a read of it starts the next window */
	unsigned long ra_end;		/* end of what was read ahead */
	unsigned int ra_blocks;		/* window; 0: no readahead */
	atomic64_t readahead;		/* blocks read ahead */

	struct list_head live;		/* on totalcow_live once resumed */
	struct list_head all;		/* on totalcow_all */
	dev_t devt;
};

/* totalcow_read_kind(): look the run up again (never returned to dm). */
#define TC_MAPIO_RETRY	(-1)

/*
 * How many times a read looks its run up before it reads the origin
 * without the cache. A look is outdated only if another CPU moved the
 * run's first block on between it and what the read then did: from absent
 * to being filled (another reader's fill claimed it first) or from being
 * filled to cached (that fill published before this read could wait for
 * it). The read then did nothing and looks again. Those two moves are all
 * a block makes until a write, an invalidation or an eviction drops it,
 * so the third look finds the run cached, or absent again because it was
 * dropped, when reading the origin is what any reader would do. Two looks
 * were not enough: a reader preempted for as long as a fill takes, after
 * losing the claim to it, read the origin a second time.
 */
#define TC_MAP_TRIES	3

/* Per-bio data. */
struct tc_io {
	sector_t sector;		/* target-relative, for a requeue */
	unsigned long blk;		/* first block, while waiting on a fill */
	unsigned char flags;
	unsigned char epoch;
};

/*
 * A fill in flight: the target's own read of up to TC_FILL_MAX blocks into
 * its own pages, and the bio that asked for it (@owner), which is completed
 * by copying from those pages once the read is done; readahead fills have
 * no owner.
 */
struct tc_fill_io {
	struct tc_fill fill;
	struct totalcow_c *tc;
	struct cgroup_subsys_state *css;	/* charged to; fill.domain */
	struct bio *owner;
	struct bio_list served, requeue;	/* waiters, after completion */
	struct work_struct work;
	struct bio bio;
	struct bio_vec bvecs[TC_FILL_MAX];
};

static struct kmem_cache *tc_fill_cache;

#define TC_IO_WRITE	0x1	/* counted in writes[epoch] */
#define TC_IO_WL_WRITE	0x2	/* counted by tc_cache_write_begin() */

/*
 * Live (resumed) targets, by dm device, for the kernel API; all targets,
 * to refuse a second one in a table.
 */
static LIST_HEAD(totalcow_live);
static LIST_HEAD(totalcow_all);
static DEFINE_MUTEX(totalcow_live_lock);

/* Whitelist changes */

static void totalcow_drop_view(struct totalcow_c *tc, struct tc_wl_view *v)
{
	unsigned int i;

	for (i = 0; i < v->nr; i++)
		tc_cache_invalidate(&tc->cache, v->r[i].start >> TC_BLOCK_SHIFT,
				    (v->r[i].end - 1) >> TC_BLOCK_SHIFT);
}

/*
 * Wait until every write that may not have seen the whitelist published
 * just before has completed. Called with the whitelist lock held, after
 * publishing a new wl.all. A write reads the epoch, counts itself in it
 * and looks at wl.all inside one RCU read-side section. After the flip
 * and a grace period, every write that read the old epoch has counted
 * itself there, and every write that reads the new one was ordered after
 * the flip, hence after the new whitelist: it sees it. So waiting for the
 * old epoch's count to drop to zero is enough, and new writes cannot
 * starve the wait (the classic two-counter SRCU).
 *
 * The waits are killable: a write stuck in the origin must not hang the
 * caller for good. An interrupted drain leaves writes counted in the epoch
 * that is no longer current; nothing adds to that count any more, so the
 * next drain waits for it to reach zero before it flips again.
 */
static int totalcow_drain_writes(struct totalcow_c *tc)
{
	unsigned int old = tc->write_epoch;
	int r;

	lockdep_assert_held(&tc->wl.lock);
	r = wait_event_killable(tc->drain_wq, !atomic_read(&tc->writes[old ^ 1]));
	if (r)
		return -EINTR;
	/* Orders the new wl.all before the flip. */
	smp_store_release(&tc->write_epoch, old ^ 1);
	synchronize_rcu();
	r = wait_event_killable(tc->drain_wq, !atomic_read(&tc->writes[old]));
	return r ? -EINTR : 0;
}

static int totalcow_wl_add(struct totalcow_c *tc, const char *tag,
			   struct tc_range *r, unsigned int n)
{
	struct tc_wl_undo undo;
	int ret;

	if (mutex_lock_killable(&tc->wl.lock))
		return -EINTR;
	ret = tc_wl_add_locked(&tc->wl, tag, r, n, &undo);
	if (!ret) {
		/* Writes that could not see the new ranges must finish. */
		ret = totalcow_drain_writes(tc);
		if (ret)
			tc_wl_add_abort_locked(&tc->wl, &undo);
		else
			tc_wl_add_commit_locked(&tc->wl, &undo);
	}
	mutex_unlock(&tc->wl.lock);
	return ret;
}

static int totalcow_wl_del(struct totalcow_c *tc, const char *tag,
			   struct tc_range *r, unsigned int n)
{
	struct tc_wl_view *gone;
	int ret;

	if (mutex_lock_killable(&tc->wl.lock))
		return -EINTR;
	ret = tc_wl_del_locked(&tc->wl, tag, r, n, &gone);
	if (!ret) {
		totalcow_drop_view(tc, gone);
		kvfree(gone);
	}
	mutex_unlock(&tc->wl.lock);
	return ret;
}

static int totalcow_wl_clear(struct totalcow_c *tc)
{
	struct tc_wl_view *gone;

	if (mutex_lock_killable(&tc->wl.lock))
		return -EINTR;
	gone = tc_wl_clear_locked(&tc->wl);
	if (gone) {
		totalcow_drop_view(tc, gone);
		kvfree_rcu(gone, rcu);
	}
	mutex_unlock(&tc->wl.lock);
	return 0;
}

/* Kernel API (sysfs layer) */

/* Ranges from the kernel API get the checks messages get when parsed. */
static int totalcow_check_ranges(struct totalcow_c *tc,
				 const struct tc_range *r, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (r[i].start >= r[i].end || r[i].end > tc->ti->len)
			return -EINVAL;
	return 0;
}

static struct totalcow_c *totalcow_find_live(dev_t dev)
{
	struct totalcow_c *tc;

	lockdep_assert_held(&totalcow_live_lock);
	list_for_each_entry(tc, &totalcow_live, live)
		if (tc->devt == dev)
			return tc;
	return NULL;
}

/*
 * The live target of @dev, held for a kernel API call (the destructor
 * waits for it), or NULL. The live-devices lock is not held during the
 * call: a call that waits for a stuck write of one device must not block
 * the resume of another, nor other calls.
 */
static struct totalcow_c *totalcow_get_live(dev_t dev)
{
	struct totalcow_c *tc;

	mutex_lock(&totalcow_live_lock);
	tc = totalcow_find_live(dev);
	if (tc)
		atomic_inc(&tc->api_users);
	mutex_unlock(&totalcow_live_lock);
	return tc;
}

static void totalcow_put_live(struct totalcow_c *tc)
{
	if (atomic_dec_and_test(&tc->api_users))
		wake_up_all(&tc->drain_wq);
}

/* Add or delete ranges of @tag on the live target of @dev. */
static int totalcow_api_ranges(dev_t dev, const char *tag, struct tc_range *r,
			       unsigned int n, bool add)
{
	struct totalcow_c *tc = totalcow_get_live(dev);
	int ret;

	if (!tc)
		return -ENODEV;
	ret = totalcow_check_ranges(tc, r, n);
	if (!ret)
		ret = add ? totalcow_wl_add(tc, tag, r, n) :
			    totalcow_wl_del(tc, tag, r, n);
	totalcow_put_live(tc);
	return ret;
}

int totalcow_whitelist_add(dev_t dev, const char *tag, struct tc_range *r,
			   unsigned int n)
{
	return totalcow_api_ranges(dev, tag, r, n, true);
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_add);

int totalcow_whitelist_del(dev_t dev, const char *tag, struct tc_range *r,
			   unsigned int n)
{
	return totalcow_api_ranges(dev, tag, r, n, false);
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_del);

/*
 * Copy up to @max ranges of template @tag, starting with its @first, to
 * @out and return how many were copied; *@nr and *@sectors get the
 * template's totals. -ENODEV: no live target; -ENOENT: no such template.
 */
int totalcow_whitelist_get(dev_t dev, const char *tag, unsigned int first,
			   unsigned int max, struct tc_range *out,
			   unsigned int *nr, sector_t *sectors)
{
	struct totalcow_c *tc = totalcow_get_live(dev);
	int ret;

	if (!tc)
		return -ENODEV;
	/* Not under wl.lock, which an add holds while writes drain. */
	ret = tc_wl_get(&tc->wl, tag, first, max, out, nr, sectors);
	totalcow_put_live(tc);
	return ret;
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_get);

int totalcow_whitelist_clear(dev_t dev)
{
	struct totalcow_c *tc = totalcow_get_live(dev);
	int ret;

	if (!tc)
		return -ENODEV;
	ret = totalcow_wl_clear(tc);
	totalcow_put_live(tc);
	return ret;
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_clear);

/* I/O */

/* Copy @n blocks from @pages into the data of @bio, from its start. */
static void totalcow_copy_to_bio(struct bio *bio, struct page **pages,
				 unsigned int n)
{
	struct bvec_iter iter = bio->bi_iter;
	unsigned int i, done;

	for (i = 0; i < n; i++) {
		for (done = 0; done < TC_BLOCK_SIZE;) {
			struct bio_vec bv = bio_iter_iovec(bio, iter);
			unsigned int len = min(bv.bv_len, TC_BLOCK_SIZE - done);

			memcpy_to_page(bv.bv_page, bv.bv_offset,
				       page_address(pages[i]) + done, len);
			bio_advance_iter_single(bio, &iter, len);
			done += len;
		}
	}
}

static int totalcow_remap(struct totalcow_c *tc, struct bio *bio,
			  sector_t sector)
{
	bio_set_dev(bio, tc->origin->bdev);
	if (bio_sectors(bio))
		bio->bi_iter.bi_sector = sector;
	return DM_MAPIO_REMAPPED;
}

static int totalcow_bypass(struct totalcow_c *tc, struct bio *bio,
			   sector_t sector)
{
	this_cpu_inc(*tc->bypassed);
	return totalcow_remap(tc, bio, sector);
}

/* Limit @bio to its first @sectors; DM core maps the rest separately. */
static void totalcow_trim(struct bio *bio, sector_t sectors)
{
	if (sectors < bio_sectors(bio))
		dm_accept_partial_bio(bio, sectors);
}

static void totalcow_fill_free(struct tc_fill_io *fio, unsigned int nr_pages)
{
	while (nr_pages)
		put_page(fio->fill.pages[--nr_pages]);
	if (fio->css)
		css_put(fio->css);
	kmem_cache_free(tc_fill_cache, fio);
}

/*
 * A bio that waited for a fill that did not publish (its read failed, or
 * a write or a whitelist change raced with it) reads the origin itself:
 * what the fill read may be older than what the bio must see.
 */
static void totalcow_requeue(struct totalcow_c *tc, struct bio *bio)
{
	struct tc_io *io = dm_per_bio_data(bio, sizeof(struct tc_io));

	totalcow_remap(tc, bio, io->sector);
	submit_bio_noacct(bio);
}

/*
 * Bios that waited for a fill (process context): copies for those the fill
 * served, the origin again for the others. Then the fill is freed.
 */
static void totalcow_fill_waiters(struct work_struct *work)
{
	struct tc_fill_io *fio = container_of(work, struct tc_fill_io, work);
	struct tc_io *io;
	struct bio *bio;

	while ((bio = bio_list_pop(&fio->served))) {
		io = dm_per_bio_data(bio, sizeof(struct tc_io));
		totalcow_copy_to_bio(bio, fio->fill.pages + (io->blk - fio->fill.blk),
				     bio_sectors(bio) >> TC_BLOCK_SHIFT);
		bio_endio(bio);
	}
	while ((bio = bio_list_pop(&fio->requeue)))
		totalcow_requeue(fio->tc, bio);
	totalcow_fill_free(fio, fio->fill.nr);
}

/*
 * The fill's read finished (any context, often an interrupt): publish or
 * drop its pages and complete the bio that asked for it, which gets what
 * the origin returned, error included, as if it had read the origin
 * itself (one copy of at most TC_FILL_MAX blocks, the bound of the time
 * spent here). The bios that waited, however many, are left to the
 * target's workqueue: they get copies only if the fill published.
 */
static void totalcow_fill_endio(struct bio *bio)
{
	struct tc_fill_io *fio = bio->bi_private;
	blk_status_t status = bio->bi_status;

	bio_list_init(&fio->served);
	bio_list_init(&fio->requeue);
	tc_cache_end_fill(&fio->tc->cache, &fio->fill, !status, &fio->served,
			  &fio->requeue);
	bio_uninit(bio);

	if (fio->owner) {
		if (status)
			fio->owner->bi_status = status;
		else
			totalcow_copy_to_bio(fio->owner, fio->fill.pages,
					     fio->fill.nr);
		bio_endio(fio->owner);
	}

	if (bio_list_empty(&fio->served) && bio_list_empty(&fio->requeue)) {
		totalcow_fill_free(fio, fio->fill.nr);
		return;
	}
	INIT_WORK(&fio->work, totalcow_fill_waiters);
	queue_work(fio->tc->wq, &fio->work);
}

/*
 * The I/O cgroup @bio is throttled in. DM core's clones carry no
 * association until they are remapped: make the one the remap would.
 */
static struct cgroup_subsys_state *totalcow_domain(struct bio *bio)
{
	if (!bio_blkcg_css(bio))
		bio_associate_blkg(bio);
	return bio_blkcg_css(bio);
}

/* Flags of the caller's read that its fill keeps. */
#define TC_FILL_OPF (REQ_SYNC | REQ_META | REQ_PRIO | REQ_NOWAIT)

/*
 * Fill up to @nr absent blocks from @blk for @bio: allocate pages, claim
 * the blocks and read them from the origin into those pages; @bio is
 * completed from them. Anything that fails (no memory, blocks claimed
 * meanwhile, a write started) sends @bio to the origin without a fill.
 */
/*
 * A fill of up to @nr absent blocks from @blk for a reader in I/O cgroup
 * @reader: allocate its pages and claim the blocks. It is charged to the
 * fleet's cgroup (totalcow-cgroup.c), which readers of that cgroup and
 * below may wait for. NULL if there is no memory or nothing could be
 * claimed (blocks claimed meanwhile, a write started, or anything changed
 * since @seq).
 */
static struct tc_fill_io *totalcow_fill_alloc(struct totalcow_c *tc,
					      gfp_t gfp,
					      struct cgroup_subsys_state *reader,
					      unsigned long blk,
					      unsigned int nr,
					      unsigned long seq, bool *lost)
{
	struct tc_fill_io *fio;
	unsigned int i, got;

	if (lost)
		*lost = false;
	/*
	 * A write or a whitelist change since @seq: every claim with it
	 * fails, so allocate nothing (a read then goes to the origin at once).
	 */
	if (tc_cache_seq(&tc->cache) != seq)
		return NULL;

	fio = kmem_cache_alloc(tc_fill_cache, gfp);
	if (!fio)
		return NULL;
	/* Before the claim: waiters look at fill.domain from then on. */
	fio->css = tc_fleet_get(&tc->fleet, reader);
	fio->fill.domain = fio->css;
	/* The bulk allocator fills the NULL slots, from the first. */
	memset(fio->fill.pages, 0, nr * sizeof(fio->fill.pages[0]));
	i = tc_alloc_pages_bulk(gfp, nr, fio->fill.pages);
	got = i ? tc_cache_begin_fill(&tc->cache, &fio->fill, blk, i, seq) : 0;
	if (!got) {
		/* Pages, but no claim: another fill or a write came first. */
		if (lost)
			*lost = i;
		totalcow_fill_free(fio, i);
		return NULL;
	}
	while (i > got)
		put_page(fio->fill.pages[--i]);
	fio->tc = tc;
	fio->owner = NULL;
	return fio;
}

/*
 * The origin read of @fio's claimed blocks, charged to the cgroup the fill
 * is (totalcow_fill_alloc()); not yet submitted.
 */
static void totalcow_fill_bio(struct tc_fill_io *fio, blk_opf_t opf,
			      unsigned short ioprio)
{
	unsigned int i;

	bio_init(&fio->bio, fio->tc->origin->bdev, fio->bvecs, fio->fill.nr,
		 REQ_OP_READ | opf);
	if (fio->css)
		bio_associate_blkg_from_css(&fio->bio, fio->css);
	fio->bio.bi_iter.bi_sector = (sector_t)fio->fill.blk << TC_BLOCK_SHIFT;
	fio->bio.bi_ioprio = ioprio;
	fio->bio.bi_end_io = totalcow_fill_endio;
	fio->bio.bi_private = fio;
	for (i = 0; i < fio->fill.nr; i++)
		__bio_add_page(&fio->bio, fio->fill.pages[i], TC_BLOCK_SIZE, 0);
}

static int totalcow_fill(struct totalcow_c *tc, struct bio *bio,
			 unsigned long blk, unsigned int nr, unsigned long seq,
			 sector_t sector, bool last)
{
	gfp_t gfp = (bio->bi_opf & REQ_NOWAIT ? GFP_NOWAIT : GFP_NOIO) |
		    __GFP_NORETRY | __GFP_NOWARN;
	struct tc_fill_io *fio;
	bool lost;

	fio = totalcow_fill_alloc(tc, gfp, totalcow_domain(bio), blk, nr, seq,
				  &lost);
	if (!fio)
		return lost && !last ? TC_MAPIO_RETRY :
				       totalcow_remap(tc, bio, sector);
	totalcow_trim(bio, (sector_t)fio->fill.nr << TC_BLOCK_SHIFT);
	fio->owner = bio;
	totalcow_fill_bio(fio, bio->bi_opf & TC_FILL_OPF, bio->bi_ioprio);
	submit_bio_noacct(&fio->bio);
	return DM_MAPIO_SUBMITTED;
}

/*
 * The leading run of a read of @len sectors at @sector that is one kind
 * for the whitelist @v: returns its length in sectors. *@blocks is the
 * number of whole whitelisted blocks it starts with (at most
 * TC_FILL_MAX, and then the run is exactly those blocks), or 0 if the run
 * must pass through: it is not whitelisted, or it is the unaligned head
 * of a bio up to the first block boundary, or the partial block at the
 * edge of a range.
 */
static sector_t totalcow_read_run(const struct tc_wl_view *v, sector_t sector,
				  sector_t len, unsigned int *blocks)
{
	sector_t next, end, aligned, nr;
	bool covered = tc_view_lookup(v, sector, &next);

	end = min(sector + len, next);
	aligned = round_up(sector, TC_BLOCK_SECTORS);
	nr = (end - min(aligned, end)) >> TC_BLOCK_SHIFT;
	*blocks = 0;
	if (!covered || aligned != sector || !nr) {
		if (covered && aligned != sector)
			end = min(end, aligned);
		return end - sector;
	}
	*blocks = min_t(sector_t, nr, TC_FILL_MAX);
	return (sector_t)*blocks << TC_BLOCK_SHIFT;
}

/*
 * Sequential readahead, the page cache's (mm/readahead.c) in miniature,
 * for one stream per target: a whitelisted read that misses right after
 * the previous whitelisted read (a sequential miss), or that reaches the
 * first block of the window read ahead last (the mark), starts reading
 * the next window of ra_blocks ahead, so that the origin reads what the
 * reader asks for next while the reader's last fill is copied. True with
 * the window's first block in *@start; the caller reads it ahead.
 */
static bool totalcow_ra_window(struct totalcow_c *tc, unsigned long blk,
			       unsigned int count, enum tc_run kind,
			       unsigned long *start)
{
	unsigned int window = READ_ONCE(tc->ra_blocks);
	unsigned long end = blk + count;
	bool go = false;

	if (!window)
		return false;
	spin_lock(&tc->ra_lock);
	if (blk <= tc->ra_mark && tc->ra_mark < end) {
		*start = max(tc->ra_end, end);
		go = true;
	} else if (kind == TC_RUN_ABSENT && blk == tc->ra_next) {
		*start = end;
		go = true;
	}
	if (go) {
		tc->ra_mark = *start;
		tc->ra_end = *start + window;
	}
	tc->ra_next = end;
	spin_unlock(&tc->ra_lock);
	return go;
}

/*
 * Read ahead one window from @start for a reader in @css: the absent
 * whitelisted blocks, in fills of at most TC_FILL_MAX, up to where the
 * whitelisted run ends. Blocks cached or being filled are passed over; it
 * never waits (no memory, writes in flight or blocks claimed meanwhile end
 * it) and the admission policy applies as to any read. Nobody's pages are
 * involved but the fills' own; bios that meet these fills wait for them.
 */
static void totalcow_readahead(struct totalcow_c *tc,
			       struct cgroup_subsys_state *css,
			       unsigned long start, unsigned short ioprio)
{
	gfp_t gfp = GFP_NOWAIT | __GFP_NORETRY | __GFP_NOWARN;
	unsigned long blk = start, end = start + READ_ONCE(tc->ra_blocks);
	struct tc_wl_view *v;
	struct tc_fill_io *fio;
	unsigned int nr, count;
	unsigned long seq;

	while (blk < end) {
		seq = tc_cache_seq(&tc->cache);
		nr = 0;
		rcu_read_lock();
		v = rcu_dereference(tc->wl.active);
		if (v)
			totalcow_read_run(v, (sector_t)blk << TC_BLOCK_SHIFT,
					  (sector_t)(end - blk) << TC_BLOCK_SHIFT,
					  &nr);
		rcu_read_unlock();
		if (!nr)
			return;
		switch (tc_cache_lookup(&tc->cache, blk, nr, NULL, &count)) {
		case TC_RUN_ABSENT:
			if (!tc_cache_admit(&tc->cache, blk, count, false))
				break;
			fio = totalcow_fill_alloc(tc, gfp, css, blk, count, seq,
						  NULL);
			if (!fio)
				return;
			count = fio->fill.nr;
			atomic64_add(count, &tc->readahead);
			totalcow_fill_bio(fio, REQ_RAHEAD, ioprio);
			submit_bio_noacct(&fio->bio);
			break;
		case TC_RUN_BUSY:
			return;
		default:
			break;
		}
		blk += count;
	}
}

/*
 * Read the run of @count blocks from @blk that tc_cache_lookup() found to
 * be @kind (@bio is trimmed to it): from the cache, by a fill, by waiting
 * for the fill in flight, or from the origin. On SMP another CPU's reader
 * can claim the run or publish its fill between the lookup and this, which
 * one CPU never sees without a sleep in between: then, unless @last, this
 * returns TC_MAPIO_RETRY having done nothing, and the caller looks again
 * (the run is filling or cached by now) instead of reading the origin a
 * second time (TC_MAP_TRIES).
 */
static int totalcow_read_kind(struct totalcow_c *tc, struct bio *bio,
			      struct tc_io *io, enum tc_run kind,
			      struct page **pages, unsigned long blk,
			      unsigned int count, unsigned long seq,
			      sector_t sector, bool last)
{
	switch (kind) {
	case TC_RUN_HIT:
		totalcow_copy_to_bio(bio, pages, count);
		while (count)
			put_page(pages[--count]);
		bio_endio(bio);
		return DM_MAPIO_SUBMITTED;
	case TC_RUN_ABSENT:
		if (!tc_cache_admit(&tc->cache, blk, count, true))
			return totalcow_remap(tc, bio, sector);
		return totalcow_fill(tc, bio, blk, count, seq, sector, last);
	case TC_RUN_FILLING:
		io->blk = blk;
		io->sector = sector;
		/* The fill may complete the bio before this returns. */
		if (tc_cache_wait(&tc->cache, blk, count, totalcow_domain(bio), bio))
			return DM_MAPIO_SUBMITTED;
		return last ? totalcow_remap(tc, bio, sector) : TC_MAPIO_RETRY;
	default:
		return totalcow_remap(tc, bio, sector);
	}
}

static int totalcow_map_read(struct totalcow_c *tc, struct bio *bio,
			     struct tc_io *io, sector_t sector)
{
	struct cgroup_subsys_state *css = NULL;
	struct page *pages[TC_HIT_MAX];
	unsigned long seq, blk, ra_start;
	unsigned short ioprio = 0;
	unsigned int nr, count, tries;
	enum tc_run kind;
	sector_t len;
	bool ra;
	int ret;

	if (!rcu_access_pointer(tc->wl.active))
		return totalcow_bypass(tc, bio, sector);

	/* Before the whitelist: see tc_cache_seq(). */
	seq = tc_cache_seq(&tc->cache);
	rcu_read_lock();
	len = totalcow_read_run(rcu_dereference(tc->wl.active), sector,
				bio_sectors(bio), &nr);
	rcu_read_unlock();
	if (!nr) {
		totalcow_trim(bio, len);
		return totalcow_bypass(tc, bio, sector);
	}

	blk = sector >> TC_BLOCK_SHIFT;
	kind = tc_cache_lookup(&tc->cache, blk, nr, pages, &count);
	totalcow_trim(bio, (sector_t)count << TC_BLOCK_SHIFT);
	ra = totalcow_ra_window(tc, blk, count, kind, &ra_start);
	if (ra) {
		/* @bio may be completed below: keep what readahead needs. */
		css = totalcow_domain(bio);
		if (css)
			css_get(css);
		ioprio = bio->bi_ioprio;
	}

	for (tries = 1; ; tries++) {
		ret = totalcow_read_kind(tc, bio, io, kind, pages, blk, count,
					 seq, sector, tries == TC_MAP_TRIES);
		if (ret != TC_MAPIO_RETRY)
			break;
		/* Counted as misses, but nothing was read from the origin. */
		tc_cache_unmiss(&tc->cache, count);
		kind = tc_cache_lookup(&tc->cache, blk, count, pages, &count);
		totalcow_trim(bio, (sector_t)count << TC_BLOCK_SHIFT);
	}

	if (ra) {
		totalcow_readahead(tc, css, ra_start, ioprio);
		if (css)
			css_put(css);
	}
	return ret;
}

static void totalcow_track_write(struct totalcow_c *tc, struct bio *bio,
				 struct tc_io *io, sector_t sector)
{
	sector_t end = sector + bio_sectors(bio);
	bool overlaps;

	rcu_read_lock();
	/* Pairs with the flip in totalcow_drain_writes(); count, then look. */
	io->epoch = smp_load_acquire(&tc->write_epoch);
	atomic_inc(&tc->writes[io->epoch]);
	io->flags |= TC_IO_WRITE;
	overlaps = tc_view_overlaps(rcu_dereference(tc->wl.all), sector, end);
	rcu_read_unlock();
	if (overlaps) {
		tc_cache_write_begin(&tc->cache, sector >> TC_BLOCK_SHIFT,
				     (end - 1) >> TC_BLOCK_SHIFT);
		io->flags |= TC_IO_WL_WRITE;
	}
}

static int totalcow_map(struct dm_target *ti, struct bio *bio)
{
	struct totalcow_c *tc = ti->private;
	struct tc_io *io = dm_per_bio_data(bio, sizeof(struct tc_io));
	sector_t sector = dm_target_offset(ti, bio->bi_iter.bi_sector);

	io->flags = 0;
	if (!bio_sectors(bio))
		return totalcow_remap(tc, bio, sector);
	if (bio_op(bio) == REQ_OP_READ)
		return totalcow_map_read(tc, bio, io, sector);
	if (op_is_write(bio_op(bio)))
		totalcow_track_write(tc, bio, io, sector);
	return totalcow_remap(tc, bio, sector);
}

static int totalcow_end_io(struct dm_target *ti, struct bio *bio,
			   blk_status_t *error)
{
	struct totalcow_c *tc = ti->private;
	struct tc_io *io = dm_per_bio_data(bio, sizeof(struct tc_io));

	if (io->flags & TC_IO_WL_WRITE)
		tc_cache_write_end(&tc->cache);
	if ((io->flags & TC_IO_WRITE) &&
	    atomic_dec_and_test(&tc->writes[io->epoch]) &&
	    wq_has_sleeper(&tc->drain_wq))
		wake_up(&tc->drain_wq);
	io->flags = 0;
	return DM_ENDIO_DONE;
}

/* Memory pressure */

static unsigned long totalcow_shrink_count(struct shrinker *s,
					   struct shrink_control *sc)
{
	struct totalcow_c *tc = tc_shrinker_private(s);
	unsigned long n = READ_ONCE(tc->cache.nr_cached);

	return n ? n : SHRINK_EMPTY;
}

static unsigned long totalcow_shrink_scan(struct shrinker *s,
					  struct shrink_control *sc)
{
	struct totalcow_c *tc = tc_shrinker_private(s);

	return tc_cache_evict(&tc->cache, sc->nr_to_scan);
}

/* Construction, destruction, status, messages */

static unsigned long totalcow_capacity(struct totalcow_c *tc)
{
	return tc_size_blocks(&tc->size, totalram_pages());
}

static const char *totalcow_admit_name(struct totalcow_c *tc)
{
	return tc->admit == TC_ADMIT_SECOND ? "second" : "first";
}

static unsigned int totalcow_ra_kib(struct totalcow_c *tc)
{
	return READ_ONCE(tc->ra_blocks) * (TC_BLOCK_SIZE / SZ_1K);
}

static int totalcow_parse_opts(struct dm_target *ti, struct totalcow_c *tc,
			       struct dm_arg_set *as)
{
	static const struct dm_arg _args[] = {
		{0, 6, "Invalid number of optional arguments (0, 2, 4 or 6)"},
	};
	unsigned int argc;
	const char *name;
	int r;

	if (!as->argc)
		return 0;
	r = dm_read_arg_group(_args, as, &argc, &ti->error);
	if (r)
		return r;
	while (argc) {
		name = dm_shift_arg(as);
		argc--;
		if (!strcasecmp(name, "cache_size") && argc && !tc->size_given) {
			argc--;
			if (tc_parse_size(dm_shift_arg(as), &tc->size)) {
				ti->error = "Invalid cache_size: want <MiB> or <percent>%";
				return -EINVAL;
			}
			tc->size_given = true;
			continue;
		}
		if (!strcasecmp(name, "admit") && argc && !tc->admit_given) {
			argc--;
			if (tc_parse_admit(dm_shift_arg(as), &tc->admit)) {
				ti->error = "Invalid admit: want first or second";
				return -EINVAL;
			}
			tc->admit_given = true;
			continue;
		}
		if (!strcasecmp(name, "readahead") && argc && !tc->ra_given) {
			argc--;
			if (tc_parse_readahead(dm_shift_arg(as), &tc->ra_blocks)) {
				ti->error = "Invalid readahead: want <KiB>, 0..4096 in 4s";
				return -EINVAL;
			}
			tc->ra_given = true;
			continue;
		}
		ti->error = "Unknown, incomplete or repeated optional argument";
		return -EINVAL;
	}
	if (as->argc) {
		ti->error = "Too many arguments";
		return -EINVAL;
	}
	return 0;
}

/* Does the table being built already hold a totalcow target? */
static bool totalcow_table_has_other(struct dm_target *ti)
{
	struct totalcow_c *tc;

	lockdep_assert_held(&totalcow_live_lock);
	list_for_each_entry(tc, &totalcow_all, all)
		if (tc->ti->table == ti->table)
			return true;
	return false;
}

/*
 * Construct a totalcow mapping:
 *   <origin_dev> [<#opt_args> [cache_size <MiB|percent%>]
 *   [admit first|second] [readahead <KiB>]]
 */
static int totalcow_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct totalcow_c *tc;
	const char *origin;
	int r;

	if (argc < 1) {
		ti->error = "Invalid argument count: <origin_dev> [<#opt_args> <opt>...]";
		return -EINVAL;
	}

	tc = kzalloc(sizeof(*tc), GFP_KERNEL);
	if (!tc) {
		ti->error = "Cannot allocate totalcow context";
		return -ENOMEM;
	}
	tc->ti = ti;
	tc->size.value = TC_DEFAULT_PERCENT;
	tc->size.percent = true;
	INIT_LIST_HEAD(&tc->live);
	spin_lock_init(&tc->ra_lock);
	tc->ra_next = ULONG_MAX;
	tc->ra_mark = ULONG_MAX;

	origin = dm_shift_arg(&as);
	r = totalcow_parse_opts(ti, tc, &as);
	if (r)
		goto bad_free;

	r = dm_get_device(ti, origin, dm_table_get_mode(ti->table), &tc->origin);
	if (r) {
		ti->error = "Origin device lookup failed";
		goto bad_free;
	}

	r = -ENOMEM;
	tc->bypassed = alloc_percpu(u64);
	if (!tc->bypassed) {
		ti->error = "Cannot allocate statistics";
		goto bad_put;
	}
	tc->wq = alloc_workqueue("dm-totalcow", WQ_MEM_RECLAIM | WQ_HIGHPRI | TC_WQ_PERCPU, 0);
	if (!tc->wq) {
		ti->error = "Cannot allocate workqueue";
		goto bad_percpu;
	}
	init_waitqueue_head(&tc->drain_wq);
	tc_cache_init(&tc->cache, totalcow_capacity(tc));
	tc->cache.may_wait = tc_cg_may_wait;
	tc_fleet_init(&tc->fleet);
	tc_cache_set_admit(&tc->cache, tc->admit);
	tc_wl_init(&tc->wl);
	tc->devt = disk_devt(dm_disk(dm_table_get_md(ti->table)));

	/* Its callbacks may run from here on (see totalcow-compat.h). */
	tc->shrinker = tc_shrinker_alloc(totalcow_shrink_count,
					 totalcow_shrink_scan, tc,
					 "dm-totalcow:%u:%u", MAJOR(tc->devt),
					 MINOR(tc->devt));
	if (!tc->shrinker) {
		r = -ENOMEM;
		ti->error = "Cannot allocate shrinker";
		goto bad_cache;
	}

	/* The kernel API names a target by its dm device: one per device. */
	mutex_lock(&totalcow_live_lock);
	if (totalcow_table_has_other(ti)) {
		mutex_unlock(&totalcow_live_lock);
		ti->error = "Only one totalcow target per device";
		r = -EINVAL;
		goto bad_shrinker;
	}
	list_add(&tc->all, &totalcow_all);
	mutex_unlock(&totalcow_live_lock);
	tc_shrinker_register(tc->shrinker);

	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->num_write_zeroes_bios = 1;
	ti->per_io_data_size = sizeof(struct tc_io);
	ti->private = tc;
	return 0;

bad_shrinker:
	tc_shrinker_free(tc->shrinker);
bad_cache:
	tc_wl_destroy(&tc->wl);
	tc_cache_destroy(&tc->cache);
	destroy_workqueue(tc->wq);
bad_percpu:
	free_percpu(tc->bypassed);
bad_put:
	dm_put_device(ti, tc->origin);
bad_free:
	kfree(tc);
	return r;
}

static void totalcow_dtr(struct dm_target *ti)
{
	struct totalcow_c *tc = ti->private;

	mutex_lock(&totalcow_live_lock);
	list_del_init(&tc->live);
	list_del(&tc->all);
	mutex_unlock(&totalcow_live_lock);
	/* No new API call can find it; wait for those in progress. */
	wait_event(tc->drain_wq, !atomic_read(&tc->api_users));

	tc_shrinker_free(tc->shrinker);
	/* Fill completions still running after their last bio ended. */
	destroy_workqueue(tc->wq);
	tc_wl_destroy(&tc->wl);
	tc_cache_destroy(&tc->cache);
	tc_fleet_destroy(&tc->fleet);
	free_percpu(tc->bypassed);
	dm_put_device(ti, tc->origin);
	kfree(tc);
}

/* The resumed table is the one the kernel API talks to. */
static void totalcow_resume(struct dm_target *ti)
{
	struct totalcow_c *tc = ti->private, *old;

	mutex_lock(&totalcow_live_lock);
	old = totalcow_find_live(tc->devt);
	if (old && old != tc)
		list_del_init(&old->live);
	if (list_empty(&tc->live))
		list_add(&tc->live, &totalcow_live);
	mutex_unlock(&totalcow_live_lock);
}

static u64 totalcow_bypassed(struct totalcow_c *tc)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *per_cpu_ptr(tc->bypassed, cpu);
	return sum;
}

static void totalcow_emit_size(struct totalcow_c *tc, char *result,
			       unsigned int maxlen, unsigned int *szp)
{
	unsigned int sz = *szp;

	DMEMIT("%llu%s", tc->size.value, tc->size.percent ? "%" : "");
	*szp = sz;
}

/*
 * Status (STATUSTYPE_INFO), one line:
 *   <hits> <misses> <bypassed> <fills> <evictions> <invalidations>
 *   <cached_blocks>/<capacity_blocks> <whitelist_extents>
 *   <whitelist_sectors> <templates> <waited> <requeued> <readahead>
 *
 * hits, misses, fills, evictions and invalidations count blocks of
 * TC_BLOCK_SIZE (4 KiB); bypassed counts reads (bios, or parts of bios)
 * that went to the origin without looking at the cache: outside the
 * whitelist or not block-aligned. Misses are
 * whitelisted blocks read from the origin. Waited counts blocks that
 * found a fill in flight and waited for it instead; requeued, those of
 * them read from the origin after all because the fill failed or raced
 * with a write. The whitelist figures count
 * merged extents of all templates and the sectors they cover. Readahead
 * counts blocks read ahead (not counted in misses).
 *
 * STATUSTYPE_TABLE: <origin_dev> [<#opt_args> [cache_size <MiB|percent%>]
 * [admit first|second] [readahead <KiB>]]
 */
static void totalcow_status(struct dm_target *ti, status_type_t type,
			    unsigned int status_flags, char *result,
			    unsigned int maxlen)
{
	struct totalcow_c *tc = ti->private;
	struct tc_cache_stats st;
	unsigned long cached, capacity;
	struct tc_wl_view *v;
	unsigned int extents = 0, templates;
	sector_t sectors = 0;
	unsigned int sz = 0;
	bool pinned;
	u64 fleet;

	switch (type) {
	case STATUSTYPE_INFO:
		tc_cache_get_stats(&tc->cache, &st, &cached, &capacity);
		rcu_read_lock();
		v = rcu_dereference(tc->wl.all);
		if (v) {
			extents = v->nr;
			sectors = v->sectors;
		}
		rcu_read_unlock();
		templates = READ_ONCE(tc->wl.nr_tags);
		fleet = tc_fleet_id(&tc->fleet, &pinned);
		DMEMIT("%llu %llu %llu %llu %llu %llu %lu/%lu %u %llu %u %llu %llu %lld %llu %s",
		       st.hits, st.misses, totalcow_bypassed(tc), st.fills,
		       st.evictions, st.invalidations, cached, capacity,
		       extents, (unsigned long long)sectors, templates,
		       st.waited, st.requeued,
		       (long long)atomic64_read(&tc->readahead), fleet,
		       pinned ? "pinned" : "auto");
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s", tc->origin->name);
		if (tc->size_given || tc->admit_given || tc->ra_given)
			DMEMIT(" %u", 2 * (tc->size_given + tc->admit_given +
					   tc->ra_given));
		if (tc->size_given) {
			DMEMIT(" cache_size ");
			totalcow_emit_size(tc, result, maxlen, &sz);
		}
		if (tc->admit_given)
			DMEMIT(" admit %s", totalcow_admit_name(tc));
		if (tc->ra_given)
			DMEMIT(" readahead %u", totalcow_ra_kib(tc));
		break;
	case STATUSTYPE_IMA:
		DMEMIT_TARGET_NAME_VERSION(ti->type);
		DMEMIT(",origin_name=%s,cache_size=", tc->origin->name);
		totalcow_emit_size(tc, result, maxlen, &sz);
		DMEMIT(",admit=%s,readahead=%u;", totalcow_admit_name(tc),
		       totalcow_ra_kib(tc));
		break;
	}
}

static int totalcow_message_ranges(struct totalcow_c *tc, unsigned int argc,
				   char **argv, bool add)
{
	const char *tag = argv[1], *error = NULL;
	unsigned int n = (argc - 2) / 2;
	struct tc_range *r = NULL;
	int ret;

	if (!tc_tag_name_valid(tag)) {
		DMERR("%s: invalid template tag '%s' (1-%u of [A-Za-z0-9._:+-])",
		      argv[0], tag, TC_TAG_MAX);
		return -EINVAL;
	}
	if (n) {
		r = kvmalloc_array(n, sizeof(*r), GFP_KERNEL);
		if (!r) {
			DMERR("%s %s: out of memory for %u ranges", argv[0], tag, n);
			return -ENOMEM;
		}
		ret = tc_parse_ranges(argc - 2, argv + 2, tc->ti->len, r, &error);
		if (ret) {
			DMERR("%s %s: %s", argv[0], tag, error);
			goto out;
		}
	}
	ret = add ? totalcow_wl_add(tc, tag, r, n) : totalcow_wl_del(tc, tag, r, n);
	if (ret == -ENOENT)
		DMERR("%s %s: %s", argv[0], tag, n ?
		      "no such template, or range not registered for it" :
		      "no such template");
	else if (ret == -ENOSPC)
		DMERR("%s %s: more than %lu whitelist extents", argv[0], tag,
		      TC_WL_MAX_RANGES);
	else if (ret == -EINTR)
		DMERR("%s %s: interrupted while waiting for writes in flight; nothing changed",
		      argv[0], tag);
	else if (ret)
		DMERR("%s %s: failed (%d)", argv[0], tag, ret);
out:
	kvfree(r);
	return ret;
}

/*
 * Messages:
 *   whitelist_add <tag> <start> <length> [<start> <length>...]
 *   whitelist_del <tag> [<start> <length>...]
 *   whitelist_clear
 *   cache_size <MiB|percent%>
 *   admit first|second
 *   readahead <KiB>
 *   drop_cache
 *   clear_stats
 *   fleet_cgroup <cgroup v2 path>|auto
 */
static int totalcow_message(struct dm_target *ti, unsigned int argc,
			    char **argv, char *result, unsigned int maxlen)
{
	struct totalcow_c *tc = ti->private;
	enum tc_admit admit;
	struct tc_size size;
	unsigned int blocks;

	if (!argc)
		goto bad;
	if (!strcasecmp(argv[0], "whitelist_add")) {
		if (argc < 4 || argc % 2)
			goto bad_args;
		return totalcow_message_ranges(tc, argc, argv, true);
	}
	if (!strcasecmp(argv[0], "whitelist_del")) {
		if (argc < 2 || argc % 2)
			goto bad_args;
		return totalcow_message_ranges(tc, argc, argv, false);
	}
	if (!strcasecmp(argv[0], "whitelist_clear")) {
		if (argc != 1)
			goto bad_args;
		return totalcow_wl_clear(tc);
	}
	if (!strcasecmp(argv[0], "cache_size")) {
		if (argc != 2)
			goto bad_args;
		if (tc_parse_size(argv[1], &size)) {
			DMERR("cache_size: '%s' is not <MiB> (1..1048576) or <percent>%% (1..100)",
			      argv[1]);
			return -EINVAL;
		}
		tc->size = size;
		tc->size_given = true;
		tc_cache_set_capacity(&tc->cache, totalcow_capacity(tc));
		return 0;
	}
	if (!strcasecmp(argv[0], "admit")) {
		if (argc != 2)
			goto bad_args;
		if (tc_parse_admit(argv[1], &admit)) {
			DMERR("admit: '%s' is not first or second", argv[1]);
			return -EINVAL;
		}
		tc->admit_given = true;
		tc->admit = admit;
		tc_cache_set_admit(&tc->cache, admit);
		return 0;
	}
	if (!strcasecmp(argv[0], "readahead")) {
		if (argc != 2)
			goto bad_args;
		if (tc_parse_readahead(argv[1], &blocks)) {
			DMERR("readahead: '%s' is not <KiB>, a multiple of %lu up to %u",
			      argv[1], TC_BLOCK_SIZE / SZ_1K, TC_READAHEAD_MAX_KIB);
			return -EINVAL;
		}
		tc->ra_given = true;
		WRITE_ONCE(tc->ra_blocks, blocks);
		return 0;
	}
	if (!strcasecmp(argv[0], "drop_cache")) {
		if (argc != 1)
			goto bad_args;
		tc_cache_invalidate(&tc->cache, 0, ULONG_MAX);
		tc_cache_forget_ghosts(&tc->cache);
		return 0;
	}
	if (!strcasecmp(argv[0], "fleet_cgroup")) {
		int ret;

		if (argc != 2)
			goto bad_args;
		if (!strcasecmp(argv[1], "auto")) {
			tc_fleet_set(&tc->fleet, NULL);
			return 0;
		}
		ret = tc_fleet_pin_path(&tc->fleet, argv[1]);
		if (ret)
			DMERR("fleet_cgroup: '%s' is not auto or a cgroup v2 path from / (%d)",
			      argv[1], ret);
		return ret == -EOPNOTSUPP ? ret : ret ? -EINVAL : 0;
	}
	if (!strcasecmp(argv[0], "clear_stats")) {
		int cpu;

		if (argc != 1)
			goto bad_args;
		tc_cache_clear_stats(&tc->cache);
		atomic64_set(&tc->readahead, 0);
		for_each_possible_cpu(cpu) {
			u64 *bypassed = per_cpu_ptr(tc->bypassed, cpu);

			*bypassed = 0;
		}
		return 0;
	}
bad:
	DMERR("unrecognised message '%s'", argc ? argv[0] : "");
	return -EINVAL;
bad_args:
	DMERR("%s: wrong number of arguments", argv[0]);
	return -EINVAL;
}

static int totalcow_iterate_devices(struct dm_target *ti,
				    iterate_devices_callout_fn fn, void *data)
{
	struct totalcow_c *tc = ti->private;

	return fn(ti, tc->origin, 0, ti->len, data);
}

static struct target_type totalcow_target = {
	.name = "totalcow",
	.version = {1, 3, 0},
	.module = THIS_MODULE,
	.ctr = totalcow_ctr,
	.dtr = totalcow_dtr,
	.map = totalcow_map,
	.end_io = totalcow_end_io,
	.resume = totalcow_resume,
	.status = totalcow_status,
	.message = totalcow_message,
	.iterate_devices = totalcow_iterate_devices,
};

static int __init dm_totalcow_init(void)
{
	int r;

	tc_fill_cache = KMEM_CACHE(tc_fill_io, 0);
	if (!tc_fill_cache)
		return -ENOMEM;
	r = dm_register_target(&totalcow_target);
	if (r)
		kmem_cache_destroy(tc_fill_cache);
	return r;
}

static void __exit dm_totalcow_exit(void)
{
	dm_unregister_target(&totalcow_target);
	kmem_cache_destroy(tc_fill_cache);
}

module_init(dm_totalcow_init);
module_exit(dm_totalcow_exit);

MODULE_DESCRIPTION(DM_NAME " disk-address read cache for snapshot templates");
MODULE_AUTHOR("TotalCOW developers <totalcow@users.noreply.example>");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");

#if IS_ENABLED(CONFIG_DM_TOTALCOW_TARGET_KUNIT_TEST)
#include "dm_totalcow_target_kunit.c"
#endif
