// SPDX-License-Identifier: GPL-2.0-only
/*
 * Shared extents, the page-alias policy's half
 * (docs/design/shared-extents.md). A file whose subvolume is in a sharing
 * scope (extents/enable) gets, on a read miss, aliases to the scope's
 * canonical pages (totalcow-canon.c) for the pages its extent map proves
 * are bytes of a data extent; a read resolves them through the file's
 * extent map as it is then; a write or a fault gets a private copy. Group
 * members are shared with their template as before (totalcow-share.c,
 * which calls in here for every other file).
 *
 * A miss, for a window of two aligned blocks around the page asked for:
 * 1. reads the file's alias count and the scope's generation, then takes
 *    the mapping's invalidate_lock (shared); btrfs truncates, punches and
 *    clones without it, so an alias may land past a new end or over a
 *    changed range: harmless, since an alias is resolved through the
 *    file's extent map at every read, and the proof holds the range's
 *    extent lock while it loads maps, so that the map cache is never
 *    left with a map a clone or dedupe replaced (tc_canon_prove());
 * 2. proves the pages (tc_canon_prove()): each empty slot, or one holding
 *    an alias of ours whose canonical page was reclaimed, whose page the
 *    extent map puts at a canonical key: a logical address, or a page of a
 *    compressed extent (tc_canon_logical()); the file's partial last page
 *    only if the extent holds zeroes past the file's end, as btrfs's own
 *    read of the page makes it (tc_canon_zero_from());
 * 3. reads the canonical pages not in memory, run by run of adjacent
 *    addresses, and waits for the reads it started and for the pages its
 *    reader asked for; never for another reader's read of a page it did
 *    not ask for, which may run at that reader's throttled rate;
 * 4. stores aliases in the empty slots whose canonical page is uptodate,
 *    except those of pages in whose region a data range was handed out
 *    since the proof (tc_canon_keep_unchanged()), and none if a folio left
 *    the mapping (the alias count, checked by filemap_add_page_aliases()).
 * Pages it does not alias are read into the file's own page cache as
 * without sharing.
 */

#include <linux/bitmap.h>
#include <linux/highmem.h>
#include <linux/pagemap.h>
#include <linux/page_alias.h>
#include <linux/pagevec.h>
#include <linux/slab.h>

#include "totalcow-canon.h"
#include "totalcow-extent-share.h"
#include "totalcow-fleet.h"
#include "totalcow-share.h"

/* Pages one miss proves and aliases: two aligned blocks. */
#define TC_EXTENT_WINDOW	(2 * PAGE_ALIAS_BLOCK)

/*
 * Start the read of every decompressed page of the compressed extent of
 * slot @i's key, and of the slots of the window from @i on in the same
 * extent, set in @added those whose read it started. A read decompresses
 * the extent into the pages it reads: the whole extent at once is one
 * read of it, where the window's edge would otherwise make two.
 *
 * Return: the first slot after them.
 */
static unsigned long tc_extent_zread(struct tc_canon_scope *s,
				     const u64 *logicals,
				     const unsigned long *want,
				     unsigned long nr, unsigned long i,
				     unsigned long *added)
{
	DECLARE_BITMAP(run_added, TC_EXTENT_WINDOW);
	pgoff_t first = tc_canon_zindex_first(tc_canon_key_index(logicals[i]));
	unsigned long j;

	/* Readahead sets the extent's bits; a later slot's claim may be longer. */
	bitmap_zero(run_added, TC_EXTENT_WINDOW);
	tc_canon_readahead(s, logicals[i] -
			   ((tc_canon_key_index(logicals[i]) - first) << PAGE_SHIFT),
			   tc_canon_key_zpages(logicals[i]), run_added);
	for (j = i; j < nr && test_bit(j, want) &&
	     tc_canon_key_compressed(logicals[j]) &&
	     tc_canon_zindex_first(tc_canon_key_index(logicals[j])) == first; j++)
		if (test_bit(tc_canon_key_index(logicals[j]) - first, run_added))
			__set_bit(j, added);
	return j;
}

/*
 * Start the reads of the canonical pages of the slots in @want, a run of
 * adjacent logical addresses at a time (a compressed extent at a time:
 * tc_extent_zread()); set in @added the slots whose read this call
 * started.
 */
static void tc_extent_read(struct tc_canon_scope *s, const u64 *logicals,
			   const unsigned long *want, unsigned long nr,
			   unsigned long *added)
{
	DECLARE_BITMAP(run_added, TC_EXTENT_WINDOW);
	unsigned long i, run, j;

	bitmap_zero(added, nr);
	for (i = find_first_bit(want, nr); i < nr;
	     i = find_next_bit(want, nr, run)) {
		if (tc_canon_key_compressed(logicals[i])) {
			run = tc_extent_zread(s, logicals, want, nr, i, added);
			continue;
		}
		for (run = i + 1; run < nr && test_bit(run, want) &&
		     logicals[run] == logicals[run - 1] + PAGE_SIZE; run++)
			;
		tc_canon_readahead(s, logicals[i], run - i, run_added);
		for_each_set_bit(j, run_added, run - i)
			__set_bit(i + j, added);
	}
}

struct tc_extent_read_args {
	struct tc_canon_scope *s;
	const u64 *logicals;
	const unsigned long *want;
	unsigned long nr;
	unsigned long *added;
};

static void tc_extent_read_fn(void *arg)
{
	struct tc_extent_read_args *a = arg;

	tc_extent_read(a->s, a->logicals, a->want, a->nr, a->added);
}

/*
 * Wait for the canonical pages of @want whose read this miss started
 * (@added) or that its reader asked for ([@need_first, @need_end) of the
 * window), of these last only those whose read is charged to the
 * reader's I/O cgroup or an ancestor (totalcow-fleet.c): the reader reads
 * the others of its own file itself. Set in @ready those uptodate by then.
 */
static void tc_extent_wait(struct tc_canon_scope *s, const u64 *logicals,
			   const unsigned long *want, unsigned long nr,
			   const unsigned long *added, unsigned long need_first,
			   unsigned long need_end, unsigned long *ready)
{
	unsigned long i;

	bitmap_zero(ready, nr);
	for_each_set_bit(i, want, nr) {
		struct folio *folio;

		folio = filemap_get_folio(tc_canon_mapping(s, logicals[i]),
					  tc_canon_key_index(logicals[i]));
		if (IS_ERR(folio))
			continue;
		if (test_bit(i, added) ||
		    (i >= need_first && i < need_end &&
		     (folio_test_uptodate(folio) ||
		      tc_fleet_may_wait_tagged(folio))))
			if (folio_wait_locked_killable(folio)) {
				folio_put(folio);
				break;
			}
		if (tc_canon_page_usable(folio))
			__set_bit(i, ready);
		folio_put(folio);
	}
}

/**
 * tc_extent_read_miss - ->read_miss for a file that is not a group member
 * @file: the file read
 * @mapping: its mapping
 * @index: the first page the reader wants
 * @end: one past the last
 *
 * Return: true if page @index is an alias to an uptodate canonical page
 * now (the read resolves it); false to read the file's own pages.
 */
bool tc_extent_read_miss(struct file *file, struct address_space *mapping,
			 pgoff_t index, pgoff_t end)
{
	DECLARE_BITMAP(empty, TC_EXTENT_WINDOW);
	DECLARE_BITMAP(want, TC_EXTENT_WINDOW);
	DECLARE_BITMAP(added, TC_EXTENT_WINDOW);
	DECLARE_BITMAP(ready, TC_EXTENT_WINDOW);
	struct inode *inode = mapping->host;
	unsigned long nr = TC_EXTENT_WINDOW, seq;
	struct tc_extent_read_args rd;
	pgoff_t first = round_down(index, PAGE_ALIAS_BLOCK);
	struct tc_canon_scope *s;
	bool handled = false;
	long aliased = 0;
	u64 *logicals, *gens;
	loff_t isize;
	pgoff_t tail;
	u64 gen;

	if (first > ULONG_MAX - nr)
		return false;
	s = tc_canon_hold(inode);
	if (!s)
		return false;
	/* The keys, then their guards. */
	logicals = kmalloc_array(2 * nr, sizeof(*logicals), GFP_KERNEL);
	if (!logicals)
		goto out;
	gens = logicals + nr;
	gen = tc_canon_gen(s);
	seq = filemap_page_alias_seq(mapping);
	filemap_invalidate_lock_shared(mapping);
	if (!tc_canon_prove(inode, first, nr, logicals, want, &isize, s, gens))
		goto unlock;
	tc_empty_slots(mapping, first, nr, empty, ready);
	bitmap_or(ready, ready, empty, nr);
	bitmap_and(want, want, ready, nr);
	if (bitmap_empty(want, nr))
		goto unlock;
	rd = (struct tc_extent_read_args){
		.s = s, .logicals = logicals, .want = want, .nr = nr,
		.added = added,
	};
	tc_canon_fleet_read(s, tc_extent_read_fn, &rd);
	tc_extent_wait(s, logicals, want, nr, added, index - first,
		       min_t(pgoff_t, end, first + nr) - first, ready);
	/* A partial last page: only if the extent holds zeroes past the end. */
	tail = isize >> PAGE_SHIFT;
	if (offset_in_page(isize) && tail >= first && tail - first < nr &&
	    test_bit(tail - first, ready) &&
	    !tc_canon_zero_from(s, logicals[tail - first], offset_in_page(isize)))
		__clear_bit(tail - first, ready);
	/* Pages whose address may have been handed out since the proof. */
	tc_canon_keep_unchanged(s, gen, logicals, gens, ready, nr);
	handled = test_bit(index - first, ready);
	bitmap_and(ready, ready, empty, nr);
	if (!bitmap_empty(ready, nr)) {
		aliased = filemap_add_page_aliases(mapping, first, nr, ready,
						   xa_mk_page_alias(TC_EXTENT_ALIAS_DATA),
						   seq);
		if (aliased < 0) {
			/* Nothing stored: only an alias that was there serves. */
			handled = handled && !test_bit(index - first, empty);
			aliased = 0;
		}
	}
unlock:
	filemap_invalidate_unlock_shared(mapping);
	tc_canon_count(s, aliased);
	kfree(logicals);
out:
	tc_canon_release(s);
	return handled;
}

/* ->resolve for an alias to a canonical page, under RCU. */
unsigned int tc_extent_resolve(struct address_space *mapping, pgoff_t index,
			       pgoff_t last, struct folio_batch *fbatch)
{
	return tc_canon_folios(mapping->host, index, last, fbatch);
}

/*
 * ->broken for an alias to a canonical page: a private copy of it, or
 * nothing for a whole-page overwrite. A folio left not uptodate (the
 * canonical page was reclaimed) is read from the file's own extent, which
 * holds the same bytes.
 */
void tc_extent_broken(struct address_space *mapping, struct folio *folio,
		      bool overwrite)
{
	struct folio_batch fbatch;

	if (overwrite || folio_test_large(folio))
		return;
	folio_batch_init(&fbatch);
	rcu_read_lock();
	tc_canon_folios(mapping->host, folio->index, folio->index, &fbatch);
	rcu_read_unlock();
	if (folio_batch_count(&fbatch)) {
		loff_t isize = i_size_read(mapping->host);

		folio_copy(folio, fbatch.folios[0]);
		/*
		 * As btrfs's read of the page would: zeroes past the end (a
		 * truncation whose block rewrite failed leaves old bytes).
		 */
		if (folio->index == isize >> PAGE_SHIFT)
			folio_zero_segment(folio, offset_in_page(isize), PAGE_SIZE);
		else if (folio->index > isize >> PAGE_SHIFT)
			folio_zero_segment(folio, 0, PAGE_SIZE);
		folio_mark_uptodate(folio);
		folio_batch_release(&fbatch);
	}
}
