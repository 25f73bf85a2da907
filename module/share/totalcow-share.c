// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing (paper §2.2, docs/design/): the policy
 * behind the page-cache alias entries of mm-patches/0002, for the member
 * files of a group (totalcow-group.c, bound to their template files by
 * totalcow-bind.c) and for files whose data extents are shared
 * (totalcow-extent-share.c, to which the hooks hand those files over).
 *
 * A read miss in a bound member file reads the template's pages and the
 * member's (layer 1 serves the second read from memory), screens each
 * pair with the one-byte signature and compares it in full; an identical
 * member page leaves the page cache and an alias entry takes its place.
 * Where the file system records a member range as the very bytes of the
 * template's, its empty slots become aliases without reading at all
 * (tc_alias_proven()). Reads of the alias copy from the template's page.
 * A write or a fault replaces the alias with a private copy, made in
 * memory, and marks the page private. Private mappings of members are
 * totalcow-mmap.c's.
 */

#include <linux/bitmap.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/page_alias.h>
#include <linux/pagemap.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/swap.h>

#include "totalcow-bind.h"
#include "totalcow-canon.h"
#include "totalcow-extent-mmap.h"
#include "totalcow-extent-share.h"
#include "totalcow-group.h"
#include "totalcow-mmap.h"
#include "totalcow-reader-hold.h"
#include "totalcow-share.h"
#include "totalcow-sig.h"

/*
 * Share member page @mf (a reference held) at @index with the template's
 * page @tfolio (uptodate, a reference held) if they are identical. Time
 * spent waiting for @mf's read is added to *@waited.
 */
static void tc_share_page(struct tc_file *tf, struct folio *mf,
			  struct folio *tfolio, pgoff_t index, u64 *waited)
{
	struct tc_group *g = tf->group;
	struct tc_sig_pair *sp;
	bool same = false;
	void *m, *t;
	u8 h, th;

	sp = tc_sigs(tf, index, GFP_KERNEL);
	if (!sp)
		return;		/* no memory: the page stays the member's */
	if (READ_ONCE(sp->sig) & TC_SIG_PRIVATE) {
		tc_count(g, TC_PRIVATE_SKIPS, 1);
		return;
	}
	*waited -= local_clock();
	folio_lock(mf);
	*waited += local_clock();
	if (mf->mapping != tf->mapping || !folio_test_uptodate(mf) ||
	    folio_test_large(mf) || folio_test_dirty(mf) || folio_mapped(mf))
		goto unlock;
	m = kmap_local_folio(mf, 0);
	t = kmap_local_folio(tfolio, 0);
	h = tc_sig_hash(m, PAGE_SIZE);
	th = READ_ONCE(sp->thash);
	if (th == TC_SIG_UNKNOWN) {
		th = tc_sig_hash(t, PAGE_SIZE);
		WRITE_ONCE(sp->thash, th);
	}
	WRITE_ONCE(sp->sig, h);
	switch (tc_sig_screen(h, th)) {
	case TC_SCREEN_HASH:
		tc_count(g, TC_HASH_REJECTS, 1);
		break;
	case TC_SCREEN_PRIVATE:
		break;
	case TC_SCREEN_COMPARE:
		tc_count(g, TC_COMPARES, 1);
		same = !memcmp(m, t, PAGE_SIZE);
		if (!same)
			tc_count(g, TC_MEMCMP_MISMATCHES, 1);
		break;
	}
	kunmap_local(t);
	kunmap_local(m);
	if (same && filemap_replace_folio_alias(tf->mapping, mf, tc_alias(tf, h)) &&
	    !tc_alias_fence(tf))
		tc_count(g, TC_ALIASES_INSTALLED, 1);
unlock:
	folio_unlock(mf);
}

/*
 * Add to @fbatch, referenced, the template's uptodate order-0 folios of
 * [@index, @last], stopping at the first page that has none or when the
 * batch is full: one walk along the template's slots, as the read path
 * walks a file's own. Under RCU. Returns how many were added.
 */
static unsigned int tc_template_folios(struct tc_file *tf, pgoff_t index,
				       pgoff_t last, struct folio_batch *fbatch)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, index);
	struct folio *folio;
	unsigned int n = 0;

	for (folio = xas_load(&xas); folio; folio = xas_next(&xas)) {
		if (xas_retry(&xas, folio))
			continue;
		if (xas.xa_index > last || xa_is_value(folio) ||
		    xa_is_sibling(folio))
			break;
		if (!folio_try_get(folio))
			goto retry;
		if (unlikely(folio != xas_reload(&xas)))
			goto put;
		if (!folio_test_uptodate(folio) || folio_test_large(folio)) {
			folio_put(folio);
			break;
		}
		n++;
		if (!folio_batch_add(fbatch, folio))
			break;
		continue;
put:
		folio_put(folio);
retry:
		xas_reset(&xas);
	}
	return n;
}

/*
 * Set the bits of @live (slots [@index, @last)) whose template page is an
 * uptodate order-0 folio in memory now, and say whether all are. One walk
 * under RCU and no references: a page that goes meanwhile makes an alias
 * that resolves to nothing (aliases_lost) and is read again, as after
 * reclaim. For the members after the first, which find the template's
 * window read already, it stands in for a readahead call that looks up
 * every slot from the root and a wait that references every folio.
 */
static bool tc_template_live(struct tc_file *tf, pgoff_t index, pgoff_t last,
			     unsigned long *live)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, index);
	struct folio *folio;
	unsigned long n = 0;

	bitmap_zero(live, last - index);
	rcu_read_lock();
	xas_for_each(&xas, folio, last - 1) {
		if (xas_retry(&xas, folio) || xa_is_value(folio))
			continue;
		if (folio_test_uptodate(folio) && !folio_test_large(folio)) {
			__set_bit(xas.xa_index - index, live);
			n++;
		}
	}
	rcu_read_unlock();
	return n == last - index;
}

/**
 * tc_empty_slots - which slots of a range a read would fill
 * @mapping: the file's mapping
 * @index: the range's first page
 * @nr: its number of pages
 * @empty: bit i set if slot @index + i holds no folio and no alias (empty,
 *	or a workingset shadow): those the file's readahead would fill
 * @canon: if not NULL, bit i set if the slot holds an alias to a
 *	canonical page (totalcow-extent-share.c)
 *
 * One walk under RCU. A block alias is met once, at whichever of its pages
 * the walk enters it by, and counts for all its pages in the range.
 */
void tc_empty_slots(struct address_space *mapping, pgoff_t index,
		    unsigned long nr, unsigned long *empty,
		    unsigned long *canon)
{
	XA_STATE(xas, &mapping->i_pages, index);
	pgoff_t first, stop;
	void *entry;

	bitmap_fill(empty, nr);
	if (canon)
		bitmap_zero(canon, nr);
	rcu_read_lock();
	xas_for_each(&xas, entry, index + nr - 1) {
		if (xas_retry(&xas, entry))
			continue;
		if (xa_is_value(entry) && !xa_is_page_alias(entry))
			continue;
		stop = 1UL << xas_get_order(&xas);
		first = max(round_down(xas.xa_index, stop), index);
		stop = min(round_down(xas.xa_index, stop) + stop, index + nr);
		bitmap_clear(empty, first - index, stop - first);
		if (canon && xa_is_page_alias(entry) && tc_extent_alias(entry))
			bitmap_set(canon, first - index, stop - first);
	}
	rcu_read_unlock();
}

/*
 * Wait until the template's folios of [@index, @last) that this miss
 * added (bit i of @ours for @index + i) or that its reader asked for
 * ([@index, @need)) are read. Any other folio there was added by another
 * reader, whose read may be throttled in its own I/O cgroup (io.max): a
 * reader of one shared file, as of an overlayfs lower file, waits only
 * for the pages it reads, and so does a member's miss. Of those it asked
 * for, it waits only for reads charged to its own I/O cgroup or an
 * ancestor (tc_fleet_may_wait()): it reads the others of its own file
 * itself, which overlayfs's readers cannot.
 */
static void tc_wait_template(struct tc_fleet_reads *fr,
			     struct address_space *tmapping, pgoff_t index,
			     pgoff_t last, pgoff_t need,
			     const unsigned long *ours)
{
	struct folio_batch fbatch;
	pgoff_t next = index;
	unsigned int i;

	folio_batch_init(&fbatch);
	while (next < last &&
	       filemap_get_folios(tmapping, &next, last - 1, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			struct folio *folio = fbatch.folios[i];
			pgoff_t at = max(folio->index, index);

			if (test_bit(at - index, ours) ||
			    (at < need && (folio_test_uptodate(folio) ||
					   tc_fleet_may_wait(fr, folio))))
				folio_wait_locked(folio);
		}
		folio_batch_release(&fbatch);
	}
}

/*
 * Read the template's pages of [@index, @last) that are not in memory and
 * wait for those reads and for [@index, @need) (tc_wait_template()). Time
 * spent waiting is added to *@waited. Out of line: its readahead state
 * stays off tc_read_miss()'s stack, which holds the window's bitmaps.
 */
static noinline_for_stack void
tc_read_template(struct tc_group *g, struct address_space *tmapping,
		 pgoff_t index, pgoff_t last, pgoff_t need, unsigned long *ours,
		 u64 *waited)
{
	struct file_ra_state ra = { };
	DEFINE_READAHEAD(tractl, NULL, &ra, tmapping, index);
	struct tc_fleet_read r;

	/* Charged to the group's fleet, recorded for its other readers. */
	tc_fleet_read_start(&g->reads, &r, &tractl, last - index, ours);
	*waited -= local_clock();
	tc_wait_template(&g->reads, tmapping, index, last, need, ours);
	*waited += local_clock();
	tc_fleet_read_end(&g->reads, &r);
}

/*
 * Clear the bits of @fresh (slots [@index, @last)) from @need on whose
 * template page is being read by someone else: a folio there, not
 * uptodate. The member does not read those pages of its own now; they
 * stay empty, and the miss that reads them later finds the template's
 * page read (an alias, no read) or waits for it as any reader of it
 * would, so that readers of a fleet that start at once share what they
 * read without waiting for each other's readahead.
 */
static void tc_skip_busy(struct tc_file *tf, pgoff_t index, pgoff_t need,
			 pgoff_t last, unsigned long *fresh)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, need);
	struct folio *folio;

	rcu_read_lock();
	xas_for_each(&xas, folio, last - 1) {
		if (xas_retry(&xas, folio) || xa_is_value(folio))
			continue;
		if (!folio_test_uptodate(folio))
			__clear_bit(xas.xa_index - index, fresh);
	}
	rcu_read_unlock();
}

/*
 * The pages the member's own readahead would read for a read of @req
 * pages at @index (mm/readahead.c's on-demand window, without its
 * asynchronous part), with f_ra set as if it had: the request alone for a
 * random read (or a file advised POSIX_FADV_RANDOM); for a read at the
 * file's start or right after the last one, a first window of up to four
 * times the request; for the read the last window predicted, the window
 * grown fourfold, then twofold, up to ra_pages. The miss replaces the
 * member's synchronous readahead, so it keeps its state. Never more than
 * TC_SHARE_WINDOW pages.
 */
static unsigned long tc_ra_window(struct file *file, pgoff_t index,
				  unsigned long req)
{
	struct file_ra_state *ra = &file->f_ra;
	unsigned long most = max(ra->ra_pages, 1U), size, cur = ra->size;
	pgoff_t prev = (unsigned long long)ra->prev_pos >> PAGE_SHIFT;

	req = clamp(req, 1UL, (unsigned long)TC_SHARE_WINDOW);
	if (file->f_mode & FMODE_RANDOM) {
		/* POSIX_FADV_RANDOM: no readahead */
		size = req;
	} else if (cur && index == ra->start + cur) {
		/* get_next_ra_size() */
		if (cur < most / 16)
			size = 4 * cur;
		else if (cur <= most / 2)
			size = 2 * cur;
		else
			size = most;
	} else if (!index || req > most || index - prev <= 1UL) {
		/* get_init_ra_size() */
		size = roundup_pow_of_two(req);
		if (size <= most / 32)
			size *= 4;
		else if (size <= most / 4)
			size *= 2;
		else
			size = most;
	} else {
		size = req;
	}
	size = clamp(size, req, (unsigned long)TC_SHARE_WINDOW);
	ra->start = index;
	ra->size = size;
	ra->async_size = 0;
	return size;
}

/*
 * ->read_miss: read the template's and the member's pages, then share.
 *
 * The template's pages read are those of the member's own window, the
 * pages its readahead would read, and never more for one miss. The miss
 * waits for the template reads it started and for the template pages its
 * reader asked for, not for other readers' readahead (whose I/O may be
 * throttled in their cgroups); the proof, over whole blocks around the
 * window, aliases only what is in memory by then, and the member reads no
 * page of its own whose template page someone else is still reading
 * (tc_skip_busy()).
 */
static bool tc_read_miss(struct file *file, struct address_space *mapping,
			 pgoff_t index, pgoff_t end)
{
	DECLARE_BITMAP(fresh, TC_SHARE_WINDOW);
	DECLARE_BITMAP(live, TC_PROOF_WINDOW);
	unsigned long *ours = fresh;	/* used up before fresh is set */
	struct file_ra_state ra = { };
	struct address_space *tmapping;
	pgoff_t last, first, plast, need, run, i;
	struct tc_file *tf;
	u64 start, waited = 0;

	/* A clone's pages are its own: they are what its mappings share. */
	if (tc_extent_clone_inode(mapping->host))
		return false;
	tf = tc_file_get(mapping);
	/* A file in a sharing scope shares its extents, not as a member. */
	if (!tf && tc_canon_in_scope(mapping->host))
		return tc_extent_read_miss(file, mapping, index, end);
	if (!tf && !test_bit(AS_PAGE_ALIASES, &mapping->flags)) {
		tf = tc_file_bind(file, mapping);
		/* Or, in no group, it followed its source into a scope. */
		if (!tf && tc_canon_in_scope(mapping->host))
			return tc_extent_read_miss(file, mapping, index, end);
	}
	if (!tf)
		return false;
	/* Up to the template's end, in windows of the member's readahead. */
	last = index + tc_ra_window(file, index, end - index);
	plast = min3(tf->nr_pages,
		     (pgoff_t)DIV_ROUND_UP(i_size_read(mapping->host), PAGE_SIZE),
		     ULONG_MAX - PAGE_ALIAS_BLOCK);
	last = min(last, plast);
	if (index >= last) {
		tc_file_put(tf);
		return false;
	}
	need = clamp(end, index + 1, last);	/* what the reader asked for */
	/*
	 * The extents are proven over whole blocks around the window, so that
	 * aligned runs of template pages in memory become block aliases; the
	 * template's and the member's reads stay within [@index, @last).
	 */
	first = round_down(index, PAGE_ALIAS_BLOCK);
	plast = min3(round_up(last, PAGE_ALIAS_BLOCK), plast,
		     first + TC_PROOF_WINDOW);	/* the bitmaps' size */
	start = local_clock();
	tmapping = tf->tinode->i_mapping;
	{
		/*
		 * The member's blocks are the template's: read them once the
		 * template's reads are done, so that layer 1 serves them from
		 * memory instead of missing on fills still in flight.
		 */
		if (!tc_template_live(tf, index, last, live))
			tc_read_template(tf->group, tmapping, index, last, need,
					 ours, &waited);
		tc_template_live(tf, first, plast, live);
		/* What the extents prove needs no read; the rest is compared. */
		tc_alias_proven(tf, first, plast, live);
		tc_empty_slots(mapping, index, last - index, fresh, NULL);
		tc_skip_busy(tf, index, need, last, fresh);
		if (bitmap_empty(fresh, last - index))
			goto out;
		/* The member's own pages, run by run of the slots left to read. */
		for (i = find_first_bit(fresh, last - index); i < last - index;
		     i = find_next_bit(fresh, last - index, run)) {
			DEFINE_READAHEAD(mractl, file, &ra, mapping, index + i);

			run = find_next_zero_bit(fresh, last - index, i);
			page_cache_ra_unbounded(&mractl, run - i, 0);
		}
	}
	/* New folios wait in this CPU's LRU batch, with a reference. */
	lru_add_drain();
	for (i = index; i < last; i++) {
		struct folio *mf, *tfolio;

		if (!test_bit(i - index, fresh))
			continue;	/* cached before: compared then */
		mf = filemap_get_folio(mapping, i);
		if (IS_ERR(mf))
			continue;	/* an alias, or nothing */
		/* Read by now, or by someone this miss does not wait for. */
		tfolio = filemap_get_folio(tmapping, i);
		if (!IS_ERR(tfolio) && !folio_test_uptodate(tfolio)) {
			folio_put(tfolio);
			tfolio = ERR_PTR(-EAGAIN);
		}
		if (!IS_ERR(tfolio)) {
			if (!folio_test_large(tfolio))
				tc_share_page(tf, mf, tfolio, i, &waited);
			folio_put(tfolio);
		}
		folio_put(mf);
		if (fatal_signal_pending(current))
			break;
	}
out:
	/* CPU: the hook's time less its waits for either file's reads. */
	start = local_clock() - start;
	tc_count(tf->group, TC_SHARE_NS, start - min(waited, start));
	tc_count(tf->group, TC_SHARE_WAIT_NS, min(waited, start));
	tc_file_put(tf);
	return true;
}

/* ->resolve, under RCU: the template's pages of [@index, @last], at once. */
static unsigned int tc_resolve(struct address_space *mapping, pgoff_t index,
			       pgoff_t last, void *entry,
			       struct folio_batch *fbatch)
{
	struct tc_file *tf;
	unsigned int n;

	if (tc_extent_alias(entry))
		return tc_extent_resolve(mapping, index, last, fbatch);
	tf = tc_file_lookup(mapping);
	if (!tf || !tc_alias_ours(tf, entry))
		return 0;
	n = tc_template_folios(tf, index, last, fbatch);
	if (n)
		tc_count(tf->group, TC_ALIASES_RESOLVED, n);
	/* Short, and not for want of room: that page is read again. */
	if (n < last - index + 1 && folio_batch_space(fbatch))
		tc_count(tf->group, TC_ALIASES_LOST, 1);
	return n;
}

/*
 * ->broken: a write or a fault gets a private copy, made in memory; a
 * write that overwrites the whole page (@overwrite) gets a page of its
 * own and no copy, which it would overwrite. A folio left not uptodate is
 * safe whoever reads it: the member's own data at @folio's offset, which
 * the file system reads, is what the template's page holds.
 */
static void tc_broken(struct address_space *mapping, struct folio *folio,
		      void *entry, bool overwrite)
{
	struct folio *tfolio = NULL;
	struct tc_file *tf;

	if (tc_extent_alias(entry)) {
		tc_extent_broken(mapping, folio, overwrite);
		return;
	}
	rcu_read_lock();
	tf = tc_file_lookup(mapping);
	if (tf && tc_alias_ours(tf, entry)) {
		struct tc_sig_pair *sp = NULL;

		/* Under RCU: no sleeping; without memory the mark is skipped. */
		if (folio->index < tf->nr_pages)
			sp = tc_sigs(tf, folio->index, GFP_NOWAIT);
		if (sp)
			WRITE_ONCE(sp->sig, READ_ONCE(sp->sig) | TC_SIG_PRIVATE);
		tc_count(tf->group, TC_COW_BREAKS, 1);
		if (!overwrite && !folio_test_large(folio)) {
			struct folio_batch fbatch;

			folio_batch_init(&fbatch);
			if (tc_template_folios(tf, folio->index, folio->index,
					       &fbatch)) {
				tfolio = fbatch.folios[0];
				tc_count(tf->group, TC_COW_COPIES, 1);
			}
		}
	}
	rcu_read_unlock();
	if (tfolio) {
		folio_copy(folio, tfolio);
		folio_mark_uptodate(folio);
		folio_put(tfolio);
	}
}

static const struct page_alias_ops tc_alias_ops = {
	.resolve = tc_resolve,
	.read_miss = tc_read_miss,
	.broken = tc_broken,
	.release = tc_file_release,
	.mmap_file = tc_mmap_file,
	.backing_release = tc_backing_release,
	.mmap_done = tc_mmap_done,
	.size_changed = tc_size_changed,
	.write_opened = tc_size_changed,
};

/* Bumped by every reclassification (tc_reclassify()). */
static atomic_long_t tc_classify_gen = ATOMIC_LONG_INIT(0);

/*
 * tc_classify_begin - start classifying a file at a read miss
 *
 * Read before anything the classification looks at (groups, members,
 * scopes): a reclassification whose change it could have missed bumps
 * the generation after that change, so a classification that begins
 * with the bump seen sees the change too.
 *
 * Return: what tc_classify_none() needs.
 */
unsigned long tc_classify_begin(void)
{
	return atomic_long_read_acquire(&tc_classify_gen);
}

/*
 * tc_classify_none - mark @mapping as one the policy has no use for
 * @mapping: the file's
 * @gen: tc_classify_begin()'s, read before the classification found no use
 *
 * AS_NO_PAGE_ALIASES keeps the file from read misses until the next
 * tc_reclassify() clears it. That clear may come between the answer and
 * this set, from an admin's change the answer did not see (a member
 * added, a scope enabled; neither is serialised with readers); the file
 * would then miss the change until the one after. Store-buffering with
 * tc_reclassify(): each side writes (the bump there, the bit here), then
 * a full barrier, then reads what the other wrote. If the clear came
 * first, its bump is seen here and the bit is taken back; if not, the
 * clear comes after and takes it. A bit taken back costs one
 * classification more at the next miss.
 */
void tc_classify_none(struct address_space *mapping, unsigned long gen)
{
	set_bit(AS_NO_PAGE_ALIASES, &mapping->flags);
	/* Pairs with tc_reclassify()'s fully ordered bump. */
	smp_mb__after_atomic();
	if (atomic_long_read(&tc_classify_gen) != gen)
		clear_bit(AS_NO_PAGE_ALIASES, &mapping->flags);
}

/*
 * Let every inode of @sb be classified again at its next read miss, after
 * a change that can make a file shared (called after the change is
 * visible). The list lock is dropped every TC_UNBIND_BATCH inodes when a
 * reschedule is due, holding a reference to the inode the walk stands on
 * (as drop_pagecache_sb() does).
 */
void tc_reclassify(struct super_block *sb)
{
	struct inode *inode, *toput = NULL;
	unsigned int n = 0;

	/* Fully ordered: before the clears below (see tc_classify_none()). */
	atomic_long_inc_return(&tc_classify_gen);
	spin_lock(&sb->s_inode_list_lock);
	list_for_each_entry(inode, &sb->s_inodes, i_sb_list) {
		clear_bit(AS_NO_PAGE_ALIASES, &inode->i_mapping->flags);
		if (++n % TC_UNBIND_BATCH || !need_resched())
			continue;
		spin_lock(&inode->i_lock);
		if (inode->i_state & (I_FREEING | I_WILL_FREE | I_NEW)) {
			spin_unlock(&inode->i_lock);
			continue;
		}
		__iget(inode);
		spin_unlock(&inode->i_lock);
		spin_unlock(&sb->s_inode_list_lock);
		iput(toput);
		toput = inode;
		cond_resched();
		spin_lock(&sb->s_inode_list_lock);
	}
	spin_unlock(&sb->s_inode_list_lock);
	iput(toput);
}

#ifdef CONFIG_LOCKDEP
struct lockdep_map tc_reader_hold_map = { .name = "tc_reader_hold" };
#endif

/* Teach lockdep that reclaim may wait for a reader's hold (see the header). */
void __init tc_reader_hold_init(void)
{
	fs_reclaim_acquire(GFP_KERNEL);
	tc_reader_hold_begin();
	tc_reader_hold_end();
	fs_reclaim_release(GFP_KERNEL);
}

static int __init totalcow_share_init(void)
{
	int err;

	tc_reader_hold_init();
	err = tc_fleet_wq_init();
	if (!err)
		err = tc_bind_init();
	if (!err)
		err = tc_groups_init();
	return err ?: page_alias_register(&tc_alias_ops);
}
late_initcall_sync(totalcow_share_init);

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_POLICY_KUNIT_TEST)
#include "totalcow_share_policy_kunit.c"
#endif
