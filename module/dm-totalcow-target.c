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
 * completed here), being filled by another bio (pass through), absent
 * (pass through, and the pages read are inserted when the read completes).
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
#include <linux/device-mapper.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "dm-totalcow.h"
#include "totalcow-cache.h"
#include "totalcow-parse.h"
#include "totalcow-whitelist.h"

#define DM_MSG_PREFIX "totalcow"

/* Blocks one bio may fill at a time (128 KiB with 4 KiB pages). */
#define TC_FILL_MAX 32

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
	wait_queue_head_t drain_wq;
	struct shrinker *shrinker;
	u64 __percpu *bypassed;

	struct tc_size size;
	bool size_given;		/* for STATUSTYPE_TABLE */
	bool admit_given;
	enum tc_admit admit;		/* as the table gave it */

	struct list_head live;		/* on totalcow_live once resumed */
	dev_t devt;
};

/* Per-bio data. */
struct tc_io {
	struct bvec_iter iter;		/* the bio's data, for the fill copy */
	unsigned long seq;
	unsigned long blk;
	unsigned short nr_fill;
	unsigned char flags;
	unsigned char epoch;
	struct page *pages[TC_FILL_MAX];
};

#define TC_IO_WRITE	0x1	/* counted in writes[epoch] */
#define TC_IO_WL_WRITE	0x2	/* counted by tc_cache_write_begin() */

/* Live (resumed) targets, by dm device, for the kernel API. */
static LIST_HEAD(totalcow_live);
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
 */
static void totalcow_drain_writes(struct totalcow_c *tc)
{
	unsigned int old = tc->write_epoch;

	lockdep_assert_held(&tc->wl.lock);
	/* Orders the new wl.all before the flip. */
	smp_store_release(&tc->write_epoch, old ^ 1);
	synchronize_rcu();
	wait_event(tc->drain_wq, !atomic_read(&tc->writes[old]));
}

static int totalcow_wl_add(struct totalcow_c *tc, const char *tag,
			   struct tc_range *r, unsigned int n)
{
	int ret;

	mutex_lock(&tc->wl.lock);
	ret = tc_wl_add_locked(&tc->wl, tag, r, n);
	if (!ret) {
		/* Writes that could not see the new ranges must finish. */
		totalcow_drain_writes(tc);
		tc_wl_activate_locked(&tc->wl);
	}
	mutex_unlock(&tc->wl.lock);
	return ret;
}

static int totalcow_wl_del(struct totalcow_c *tc, const char *tag,
			   struct tc_range *r, unsigned int n)
{
	struct tc_wl_view *gone;
	int ret;

	mutex_lock(&tc->wl.lock);
	ret = tc_wl_del_locked(&tc->wl, tag, r, n, &gone);
	if (!ret) {
		totalcow_drop_view(tc, gone);
		kvfree(gone);
	}
	mutex_unlock(&tc->wl.lock);
	return ret;
}

static void totalcow_wl_clear(struct totalcow_c *tc)
{
	struct tc_wl_view *gone;

	mutex_lock(&tc->wl.lock);
	gone = tc_wl_clear_locked(&tc->wl);
	if (gone) {
		totalcow_drop_view(tc, gone);
		kvfree_rcu(gone, rcu);
	}
	mutex_unlock(&tc->wl.lock);
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

/* Add or delete ranges of @tag on the live target of @dev. */
static int totalcow_api_ranges(dev_t dev, const char *tag, struct tc_range *r,
			       unsigned int n, bool add)
{
	struct totalcow_c *tc;
	int ret = -ENODEV;

	mutex_lock(&totalcow_live_lock);
	tc = totalcow_find_live(dev);
	if (tc) {
		ret = totalcow_check_ranges(tc, r, n);
		if (!ret)
			ret = add ? totalcow_wl_add(tc, tag, r, n) :
				    totalcow_wl_del(tc, tag, r, n);
	}
	mutex_unlock(&totalcow_live_lock);
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
	struct totalcow_c *tc;
	int ret = -ENODEV;

	mutex_lock(&totalcow_live_lock);
	tc = totalcow_find_live(dev);
	if (tc) {
		mutex_lock(&tc->wl.lock);
		ret = tc_wl_get_locked(&tc->wl, tag, first, max, out, nr, sectors);
		mutex_unlock(&tc->wl.lock);
	}
	mutex_unlock(&totalcow_live_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_get);

int totalcow_whitelist_clear(dev_t dev)
{
	struct totalcow_c *tc;
	int ret = -ENODEV;

	mutex_lock(&totalcow_live_lock);
	tc = totalcow_find_live(dev);
	if (tc) {
		totalcow_wl_clear(tc);
		ret = 0;
	}
	mutex_unlock(&totalcow_live_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(totalcow_whitelist_clear);

/* I/O */

/*
 * Copy @n blocks between @pages and the data of @bio starting at @iter:
 * into the bio for a hit, out of it for a fill.
 */
static void totalcow_copy(struct bio *bio, struct bvec_iter iter,
			  struct page **pages, unsigned int n, bool to_bio)
{
	unsigned int i, done;

	for (i = 0; i < n; i++) {
		for (done = 0; done < TC_BLOCK_SIZE;) {
			struct bio_vec bv = bio_iter_iovec(bio, iter);
			unsigned int len = min(bv.bv_len, TC_BLOCK_SIZE - done);
			void *blk = page_address(pages[i]) + done;

			if (to_bio)
				memcpy_to_page(bv.bv_page, bv.bv_offset, blk, len);
			else
				memcpy_from_page(blk, bv.bv_page, bv.bv_offset, len);
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

/* Claim and allocate pages for up to @nr absent blocks; returns how many. */
static unsigned int totalcow_start_fill(struct totalcow_c *tc,
					struct bio *bio, struct tc_io *io,
					unsigned long blk, unsigned int nr,
					unsigned long seq)
{
	gfp_t gfp = (bio->bi_opf & REQ_NOWAIT ? GFP_NOWAIT : GFP_NOIO) |
		    __GFP_NORETRY | __GFP_NOWARN;
	unsigned int i, claimed;

	for (i = 0; i < nr; i++) {
		io->pages[i] = alloc_page(gfp);
		if (!io->pages[i])
			break;
	}
	claimed = i ? tc_cache_begin_fill(&tc->cache, blk, i, io->pages, seq) : 0;
	while (i > claimed)
		__free_page(io->pages[--i]);
	if (claimed) {
		io->blk = blk;
		io->seq = seq;
		io->iter = bio->bi_iter;
	}
	return claimed;
}

static int totalcow_map_read(struct totalcow_c *tc, struct bio *bio,
			     struct tc_io *io, sector_t sector)
{
	sector_t next, end, aligned;
	unsigned int nr, count;
	unsigned long seq;
	bool covered;

	if (!rcu_access_pointer(tc->wl.active))
		return totalcow_bypass(tc, bio, sector);

	/* Before the whitelist: see tc_cache_seq(). */
	seq = tc_cache_seq(&tc->cache);
	rcu_read_lock();
	covered = tc_view_lookup(rcu_dereference(tc->wl.active), sector, &next);
	rcu_read_unlock();
	end = min_t(sector_t, sector + bio_sectors(bio), next);

	aligned = round_up(sector, TC_BLOCK_SECTORS);
	nr = (end - min(aligned, end)) >> TC_BLOCK_SHIFT;
	if (!covered || aligned != sector || !nr) {
		/* Not whitelisted, or a partial block: pass it through. */
		if (covered && aligned != sector)
			end = min(end, aligned);
		totalcow_trim(bio, end - sector);
		return totalcow_bypass(tc, bio, sector);
	}

	nr = min(nr, TC_FILL_MAX);
	switch (tc_cache_lookup(&tc->cache, sector >> TC_BLOCK_SHIFT, nr,
				io->pages, &count)) {
	case TC_RUN_HIT:
		totalcow_trim(bio, (sector_t)count << TC_BLOCK_SHIFT);
		totalcow_copy(bio, bio->bi_iter, io->pages, count, true);
		while (count)
			put_page(io->pages[--count]);
		bio_endio(bio);
		return DM_MAPIO_SUBMITTED;
	case TC_RUN_ABSENT:
		totalcow_trim(bio, (sector_t)count << TC_BLOCK_SHIFT);
		if (tc_cache_admit(&tc->cache, sector >> TC_BLOCK_SHIFT, count))
			io->nr_fill = totalcow_start_fill(tc, bio, io,
							  sector >> TC_BLOCK_SHIFT,
							  count, seq);
		return totalcow_remap(tc, bio, sector);
	case TC_RUN_BUSY:
		totalcow_trim(bio, (sector_t)count << TC_BLOCK_SHIFT);
		return totalcow_remap(tc, bio, sector);
	}
	return DM_MAPIO_KILL;
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
	io->nr_fill = 0;
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

	if (io->nr_fill) {
		bool ok = !*error;

		/* Read errors are never cached. */
		if (ok)
			totalcow_copy(bio, io->iter, io->pages, io->nr_fill,
				      false);
		tc_cache_end_fill(&tc->cache, io->blk, io->nr_fill, io->pages,
				  io->seq, ok);
		io->nr_fill = 0;
	}
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
	struct totalcow_c *tc = s->private_data;
	unsigned long n = READ_ONCE(tc->cache.nr_cached);

	return n ? n : SHRINK_EMPTY;
}

static unsigned long totalcow_shrink_scan(struct shrinker *s,
					  struct shrink_control *sc)
{
	struct totalcow_c *tc = s->private_data;

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

static int totalcow_parse_opts(struct dm_target *ti, struct totalcow_c *tc,
			       struct dm_arg_set *as)
{
	static const struct dm_arg _args[] = {
		{0, 4, "Invalid number of optional arguments (0, 2 or 4)"},
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
		if (!strcasecmp(name, "cache_size") && argc) {
			argc--;
			if (tc_parse_size(dm_shift_arg(as), &tc->size)) {
				ti->error = "Invalid cache_size: want <MiB> or <percent>%";
				return -EINVAL;
			}
			tc->size_given = true;
			continue;
		}
		if (!strcasecmp(name, "admit") && argc) {
			argc--;
			if (tc_parse_admit(dm_shift_arg(as), &tc->admit)) {
				ti->error = "Invalid admit: want first or second";
				return -EINVAL;
			}
			tc->admit_given = true;
			continue;
		}
		ti->error = "Unknown or incomplete optional argument";
		return -EINVAL;
	}
	if (as->argc) {
		ti->error = "Too many arguments";
		return -EINVAL;
	}
	return 0;
}

/*
 * Construct a totalcow mapping:
 *   <origin_dev> [<#opt_args> [cache_size <MiB|percent%>]
 *   [admit first|second]]
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
	init_waitqueue_head(&tc->drain_wq);
	tc_cache_init(&tc->cache, totalcow_capacity(tc));
	tc_cache_set_admit(&tc->cache, tc->admit);
	tc_wl_init(&tc->wl);
	tc->devt = disk_devt(dm_disk(dm_table_get_md(ti->table)));

	tc->shrinker = shrinker_alloc(0, "dm-totalcow:%u:%u", MAJOR(tc->devt),
				      MINOR(tc->devt));
	if (!tc->shrinker) {
		r = -ENOMEM;
		ti->error = "Cannot allocate shrinker";
		goto bad_cache;
	}
	tc->shrinker->count_objects = totalcow_shrink_count;
	tc->shrinker->scan_objects = totalcow_shrink_scan;
	tc->shrinker->private_data = tc;
	shrinker_register(tc->shrinker);

	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->num_write_zeroes_bios = 1;
	ti->per_io_data_size = sizeof(struct tc_io);
	ti->private = tc;
	return 0;

bad_cache:
	tc_wl_destroy(&tc->wl);
	tc_cache_destroy(&tc->cache);
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
	mutex_unlock(&totalcow_live_lock);

	shrinker_free(tc->shrinker);
	tc_wl_destroy(&tc->wl);
	tc_cache_destroy(&tc->cache);
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
 *   <whitelist_sectors> <templates>
 *
 * hits, misses, fills, evictions and invalidations count blocks of
 * TC_BLOCK_SIZE (4 KiB); bypassed counts reads (bios, or parts of bios)
 * that went to the origin without looking at the cache: outside the
 * whitelist or not block-aligned. Misses are
 * whitelisted blocks read from the origin. The whitelist figures count
 * merged extents of all templates and the sectors they cover.
 *
 * STATUSTYPE_TABLE: <origin_dev> [<#opt_args> [cache_size <MiB|percent%>]
 * [admit first|second]]
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
		DMEMIT("%llu %llu %llu %llu %llu %llu %lu/%lu %u %llu %u",
		       st.hits, st.misses, totalcow_bypassed(tc), st.fills,
		       st.evictions, st.invalidations, cached, capacity,
		       extents, (unsigned long long)sectors, templates);
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s", tc->origin->name);
		if (tc->size_given || tc->admit_given)
			DMEMIT(" %u", 2 * (tc->size_given + tc->admit_given));
		if (tc->size_given) {
			DMEMIT(" cache_size ");
			totalcow_emit_size(tc, result, maxlen, &sz);
		}
		if (tc->admit_given)
			DMEMIT(" admit %s", totalcow_admit_name(tc));
		break;
	case STATUSTYPE_IMA:
		DMEMIT_TARGET_NAME_VERSION(ti->type);
		DMEMIT(",origin_name=%s,cache_size=", tc->origin->name);
		totalcow_emit_size(tc, result, maxlen, &sz);
		DMEMIT(",admit=%s;", totalcow_admit_name(tc));
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
 *   drop_cache
 *   clear_stats
 */
static int totalcow_message(struct dm_target *ti, unsigned int argc,
			    char **argv, char *result, unsigned int maxlen)
{
	struct totalcow_c *tc = ti->private;
	enum tc_admit admit;
	struct tc_size size;

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
		totalcow_wl_clear(tc);
		return 0;
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
	if (!strcasecmp(argv[0], "drop_cache")) {
		if (argc != 1)
			goto bad_args;
		tc_cache_invalidate(&tc->cache, 0, ULONG_MAX);
		return 0;
	}
	if (!strcasecmp(argv[0], "clear_stats")) {
		int cpu;

		if (argc != 1)
			goto bad_args;
		tc_cache_clear_stats(&tc->cache);
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
	.version = {1, 0, 0},
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
module_dm(totalcow);

MODULE_DESCRIPTION(DM_NAME " disk-address read cache for snapshot templates");
MODULE_AUTHOR("TotalCOW developers <totalcow@users.noreply.example>");
MODULE_LICENSE("GPL");

#if IS_ENABLED(CONFIG_DM_TOTALCOW_KUNIT_TEST)
#include "dm_totalcow_target_kunit.c"
#endif
