// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW's canonical data cache (totalcow-canon.h;
 * docs/design/shared-extents.md).
 *
 * Per btrfs file system that opted in, and per sharing scope, a hidden
 * page cache (an anonymous inode on a pseudo file system of ours) indexed
 * by logical address >> PAGE_SHIFT holds the bytes of data extents. A page
 * is read by logical address, as scrub reads, and verified against the
 * checksum tree, which is keyed by logical address too: a page whose
 * sectors do not all have a checksum is never read (btrfs writes in place
 * only where there are none), and a page that does not match them is read
 * from the next mirror or not at all. Nothing writes through these
 * mappings and nothing maps them.
 *
 * An address may hold other bytes once btrfs hands its space out again
 * (mm-patches/0015: fs/btrfs/canon.h): the reservation bumps the file
 * system's generation and its range's regions' (1 MiB each), so that
 * whoever proved an extent before can tell that the proof may be stale
 * (tc_canon_gen(), tc_canon_unchanged(); per page,
 * tc_canon_keep_unchanged()), and drops the pages of the range; a page it
 * finds locked (a read in flight) it marks stale instead of waiting for
 * it, and that read then fails.
 *
 * Why a page in a canonical mapping always holds the current bytes of its
 * address: a page is inserted before its read looks the checksums up, and
 * a reservation bumps the generation before it walks the mappings, with a
 * full barrier on both sides (tc_canon_read_folio(), tc_canon_forget()).
 * So either the walk finds the page (and drops it, or marks it stale so
 * that its read fails and nobody hands it out), or the read's checksum
 * lookup comes after the reservation, and therefore
 * after the old extent's checksums were deleted (btrfs deletes them when
 * the extent is freed, before its space is unpinned): it then finds no
 * checksum, or the checksums of bytes written after the reservation, and
 * reads those. The old bytes cannot outlive the reservation in the cache.
 */

#include <linux/bitmap.h>
#include <linux/ctype.h>
#include <linux/highmem.h>
#include <linux/fs_context.h>
#include <linux/magic.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/page_alias.h>
#include <linux/pagemap.h>
#include <linux/pseudo_fs.h>
#include <linux/slab.h>
#include <linux/srcu.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "ctree.h"
#include "fs.h"
#include "bio.h"
#include "block-group.h"
#include "btrfs_inode.h"
#include "canon.h"
#include "disk-io.h"
#include "extent_map.h"
#include "file-item.h"
#include "ordered-data.h"
#include "super.h"
#include "volumes.h"

#include "../../sysfs/totalcow-sysfs.h"
#include "totalcow-btrfs.h"
#include "totalcow-canon.h"
#include "totalcow-canon-internal.h"
#include "totalcow-extent-mmap.h"
#include "totalcow-fleet.h"
#include "totalcow-group.h"
#include "totalcow-reader-hold.h"

#define TC_CANON_MAGIC		0x74636e6e	/* "tcnn" */
/* btrfs sectors are at least 4 KiB. */
#define TC_CANON_LREAD_SECTORS	(TC_CANON_LREAD_MAX / SZ_4K)

/* One page's read. */
struct tc_canon_io {
	struct tc_canon_scope *s;
	struct folio *folio;
	struct cgroup_subsys_state *css;	/* its tag (totalcow-fleet.c) */
	struct tc_canon_lread r;
	u8 csums[];
};

/* Scopes and file systems change under it. */
static DEFINE_MUTEX(tc_canon_mutex);
/* Changed under tc_canon_mutex, walked under it or tc_canon_srcu. */
static LIST_HEAD(tc_canon_filesystems);
/*
 * Scopes and file systems are unpublished under tc_canon_mutex into the
 * burial of the call that does it, which frees them after it
 * (tc_canon_bury()). A holder of a scope (a reader waiting for its reads,
 * which go at the rate of its I/O cgroup: one an attacker throttles to a
 * byte a second) delays the burial of that scope only. No lock is held
 * while a burial waits, and a call buries only what it unpublished: an
 * enable, a disable, a listing or another file system's unmount never
 * waits for a scope it did not take out. A file system's state, once
 * unpublished, is listed here until freed: the close hook waits for it,
 * whoever buries it, since its reads go to the file system's devices.
 */
struct tc_canon_burial {
	struct hlist_head scopes;
	struct hlist_head filesystems;
};

static LIST_HEAD(tc_canon_dead_filesystems);
static DEFINE_SPINLOCK(tc_canon_dead_lock);
/*
 * Held for lookups only, never across a wait for I/O: tc_canon_hold()
 * counts its holder in the scope before it leaves, so that the grace
 * period a burial waits for is short whoever reads.
 */
DEFINE_STATIC_SRCU(tc_canon_srcu);
static struct vfsmount *tc_canon_mnt;

static struct tc_canon_fs *tc_canon_fs_of(struct btrfs_fs_info *fs_info)
{
	return srcu_dereference_check(fs_info->canon, &tc_canon_srcu,
				      lockdep_is_held(&tc_canon_mutex));
}

/*
 * Under RCU or tc_canon_srcu: the scope @inode's subvolume is in, or NULL.
 * A scope freed meanwhile is freed only after both grace periods.
 */
static struct tc_canon_scope *tc_canon_scope_of(struct inode *inode)
{
	struct tc_canon_scope *s;
	struct tc_canon_fs *cfs;

	if (!static_branch_unlikely(&btrfs_canon_key) ||
	    inode->i_sb->s_magic != BTRFS_SUPER_MAGIC)
		return NULL;
	cfs = rcu_dereference_check(btrfs_sb(inode->i_sb)->canon,
				    srcu_read_lock_held(&tc_canon_srcu));
	if (!cfs)
		return NULL;
	s = xa_load(&cfs->subvols, btrfs_root_id(BTRFS_I(inode)->root));
	return xa_is_value(s) ? NULL : s;
}

/**
 * tc_canon_logical - the canonical key of a page of a file
 * @em: the file's extent map covering @pos
 * @pos: the page's file offset (page aligned)
 * @logical: set to the page's key (totalcow-canon.h): for a regular
 *	extent, the logical address of the page's first byte
 *
 * Return: whether the whole page is one run of bytes of a data extent: of
 * a regular one, starting at a page-aligned logical address, or a page
 * of a compressed one's decompressed bytes (tc_canon_zkey()). Holes,
 * inline and preallocated extents have none; a page that an extent map
 * ends inside (the tail of a file) neither.
 */
bool tc_canon_logical(const struct extent_map *em, u64 pos, u64 *logical)
{
	u64 l;

	if (em->disk_bytenr >= EXTENT_MAP_LAST_BYTE ||
	    (em->flags & EXTENT_FLAG_PREALLOC))
		return false;
	if (!PAGE_ALIGNED(pos) || pos < em->start ||
	    pos - em->start >= em->len || em->len - (pos - em->start) < PAGE_SIZE)
		return false;
	/* Compressed maps are never merged: @em is one extent item's. */
	if (extent_map_is_compressed(em))
		return tc_canon_zkey(em->disk_bytenr, em->disk_num_bytes,
				     extent_map_compression(em), em->ram_bytes,
				     em->offset + (pos - em->start), logical);
	l = btrfs_extent_map_block_start(em) + (pos - em->start);
	if (!PAGE_ALIGNED(l))
		return false;
	*logical = l;
	return true;
}

/*
 * Can @sb's file system have canonical mappings? Not with mixed block
 * groups (a data range may come back as metadata, which btrfs reserves
 * with its tree locks held, where the reservation hook must not wait), not
 * zoned (a write lands where the zone's pointer is, not where it was
 * reserved), not with a RAID stripe tree (a read without an inode looks
 * stripes up in the commit root: data of the running transaction would
 * not be found), not with sectors larger than a page, and not without data
 * checksums (mounted rescue=ignoredatacsums, or a checksum tree that did
 * not load under rescue=ignorebadroots: a canonical page is proven by its
 * checksums, and there is no checksum root to look them up in).
 */
int tc_canon_fs_eligible(struct super_block *sb)
{
	struct btrfs_fs_info *fs_info;

	if (sb->s_magic != BTRFS_SUPER_MAGIC)
		return -EINVAL;
	fs_info = btrfs_sb(sb);
	if (btrfs_fs_incompat(fs_info, MIXED_GROUPS) || btrfs_is_zoned(fs_info) ||
	    btrfs_fs_incompat(fs_info, RAID_STRIPE_TREE) ||
	    fs_info->sectorsize > PAGE_SIZE ||
	    test_bit(BTRFS_FS_STATE_NO_DATA_CSUMS, &fs_info->fs_state))
		return -EOPNOTSUPP;
	return 0;
}

bool tc_canon_scope_name_valid(const char *name)
{
	size_t i, len = strlen(name);

	if (!len || len > TC_CANON_SCOPE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum(name[i]) && !strchr("_.-", name[i]))
			return false;
	return true;
}

/**
 * tc_canon_lread_prepare - check that a read by logical address may go
 * @r: the read, its fields up to @end_io set
 *
 * Only data block groups are read (the index comes from data extents),
 * and only sectors that all have a checksum (btrfs writes in place only
 * where there are none); their checksums go to @r->csums.
 *
 * Return: 0 and @r ready for its first mirror; -EIO if the range is not
 * all in one data block group; -ENODATA if a sector of it has no
 * checksum; or the checksum lookup's error.
 */
int tc_canon_lread_prepare(struct tc_canon_lread *r)
{
	struct btrfs_fs_info *fs_info = r->fs_info;
	DECLARE_BITMAP(found, TC_CANON_LREAD_SECTORS);
	struct btrfs_block_group *bg;
	bool data;
	int ret;

	if (WARN_ON_ONCE(r->len > TC_CANON_LREAD_MAX))
		return -EIO;
	bg = btrfs_lookup_block_group(fs_info, r->logical);
	if (!bg)
		return -EIO;
	data = (bg->flags & BTRFS_BLOCK_GROUP_TYPE_MASK) == BTRFS_BLOCK_GROUP_DATA &&
	       r->logical + r->len <= bg->start + bg->length;
	btrfs_put_block_group(bg);
	if (!data)
		return -EIO;

	bitmap_zero(found, TC_CANON_LREAD_SECTORS);
	ret = btrfs_lookup_csums_bitmap(btrfs_csum_root(fs_info, r->logical),
					NULL, r->logical,
					r->logical + r->len - 1, r->csums,
					found);
	if (ret < 0)
		return ret;
	if (!bitmap_full(found, r->len >> fs_info->sectorsize_bits))
		return -ENODATA;
	r->num_copies = btrfs_num_copies(fs_info, r->logical, r->len);
	r->mirror = 1;
	return 0;
}

/* Read @r from its current mirror; @r->end_io gets @r as its private. */
void tc_canon_lread_submit(struct tc_canon_lread *r)
{
	struct btrfs_bio *bbio;
	unsigned int i;

	bbio = btrfs_bio_alloc(r->nr, REQ_OP_READ, r->fs_info, r->end_io, r);
	bbio->bio.bi_iter.bi_sector = r->logical >> SECTOR_SHIFT;
	for (i = 0; i < r->nr; i++)
		bio_add_folio_nofail(&bbio->bio, r->folios[i],
				     min_t(u32, PAGE_SIZE, r->len - i * PAGE_SIZE),
				     0);
	btrfs_submit_bbio(bbio, r->mirror);
}

/* Do the bytes read match every sector's checksum? */
static bool tc_canon_lread_verify(struct tc_canon_lread *r)
{
	struct btrfs_fs_info *fs_info = r->fs_info;
	u8 csum[BTRFS_CSUM_SIZE];
	u32 off, i = 0;

	for (off = 0; off < r->len; off += fs_info->sectorsize, i++)
		if (btrfs_check_sector_csum(fs_info,
					    folio_page(r->folios[off >> PAGE_SHIFT], 0),
					    offset_in_page(off), csum,
					    r->csums + i * fs_info->csum_size))
			return false;
	return true;
}

/**
 * tc_canon_lread_end - a read by logical address has ended
 * @r: the read
 * @bbio: its bio, which this puts
 *
 * In @r->end_io, in btrfs's end-I/O worker (process context).
 *
 * Return: 0 if the bytes read match their checksums; -EINPROGRESS if
 * not and @r went to the next mirror (@r->end_io will be called again:
 * the caller must not touch @r); -EIO if no mirror is left.
 */
int tc_canon_lread_end(struct tc_canon_lread *r, struct btrfs_bio *bbio)
{
	bool ok = bbio->bio.bi_status == BLK_STS_OK;

	bio_put(&bbio->bio);
	if (ok && tc_canon_lread_verify(r))
		return 0;
	if (r->mirror < r->num_copies) {
		r->mirror++;
		tc_canon_lread_submit(r);
		return -EINPROGRESS;
	}
	return -EIO;
}

/* In btrfs's end-I/O worker (process context). */
static void tc_canon_end_io(struct btrfs_bio *bbio)
{
	struct tc_canon_lread *r = bbio->private;
	struct tc_canon_io *io = container_of(r, struct tc_canon_io, r);
	int ret = tc_canon_lread_end(r, bbio);
	bool ok = !ret;

	if (ret == -EINPROGRESS)
		return;
	if (!ok)
		atomic64_inc(&io->s->read_failures);
	/*
	 * Its address was handed out again while it was read: the bytes may
	 * be the old ones (tc_canon_drop()). Checked under the folio lock,
	 * which the reservation's walk found taken when it marked it.
	 */
	if (tc_canon_folio_stale(io->folio))
		ok = false;
	tc_fleet_untag_folio(io->folio, io->css);
	folio_end_read(io->folio, ok);
	kfree(io);
}

/*
 * ->read_folio of a canonical mapping: @folio is locked and already in the
 * mapping (filemap inserted it).
 */
static int tc_canon_read_folio(struct file *file, struct folio *folio)
{
	struct tc_canon_scope *s = folio->mapping->host->i_private;
	struct btrfs_fs_info *fs_info = s->cfs->fs_info;
	u32 nsect = PAGE_SIZE >> fs_info->sectorsize_bits;
	struct tc_canon_io *io;
	int ret;

	atomic64_inc(&s->reads);
	/*
	 * A new read: a stale mark from a reservation that came before it no
	 * longer applies, since the lookup below comes after that
	 * reservation; one made from now on fails this read.
	 */
	folio_clear_checked(folio);
	/*
	 * Pairs with the barrier in tc_canon_forget(): either a reservation's
	 * walk finds this folio, or the lookup below sees the checksum tree as
	 * it is after the reservation (see the top of this file).
	 */
	smp_mb();
	io = kmalloc(struct_size(io, csums, nsect * fs_info->csum_size), GFP_NOFS);
	if (!io) {
		ret = -ENOMEM;
		goto fail;
	}
	io->s = s;
	io->folio = folio;
	io->r = (struct tc_canon_lread) {
		.fs_info = fs_info,
		.logical = folio_pos(folio),
		.len = PAGE_SIZE,
		.nr = 1,
		.folios = &io->folio,
		.csums = io->csums,
		.end_io = tc_canon_end_io,
	};
	ret = tc_canon_lread_prepare(&io->r);
	if (ret)
		goto fail;
	/* Who may wait for this read: see totalcow-fleet.c. */
	io->css = tc_fleet_tag_folio(folio);
	tc_canon_lread_submit(&io->r);
	return 0;

fail:
	kfree(io);
	atomic64_inc(&s->read_failures);
	folio_unlock(folio);
	return ret;
}

static const struct address_space_operations tc_canon_aops = {
	.read_folio	= tc_canon_read_folio,
	.dirty_folio	= noop_dirty_folio,
	.migrate_folio	= filemap_migrate_folio,
};

/* The generation to read before proving which extent a file refers to. */
u64 tc_canon_gen(struct tc_canon_scope *s)
{
	/* Pairs with the barrier in tc_canon_forget(). */
	return atomic64_read_acquire(&s->cfs->gen);
}

/* The counter of the region of logical address @logical. */
static atomic64_t *tc_canon_region(struct tc_canon_fs *cfs, u64 logical)
{
	return &cfs->region_gen[(logical >> TC_CANON_REGION_SHIFT) %
				TC_CANON_REGIONS];
}

/*
 * The guard of canonical key @key, read while the extent it names is the
 * file's (under the proof's extent lock): its region's counter for a
 * regular page. A compressed key is guarded by the file system's
 * generation (the extent's disk range may span two regions): 0 here.
 */
static u64 tc_canon_key_gen(struct tc_canon_fs *cfs, u64 key)
{
	if (tc_canon_key_compressed(key))
		return 0;
	/* Pairs with the barrier in tc_canon_forget(). */
	return atomic64_read_acquire(tc_canon_region(cfs, key));
}

/**
 * tc_canon_keep_unchanged - drop the pages a handout may have spoiled
 * @s: the scope, held
 * @gen: the file system's generation, read before the proof
 * @keys: the pages' keys, from tc_canon_prove()
 * @gens: their guards, from the same proof
 * @pages: a bitmap of @nr pages; cleared for each page whose key may name
 *	other bytes now
 * @nr: the number of pages
 *
 * A handout anywhere on the file system moves the generation; only one in
 * a page's region can be its address's. A page of a regular extent is
 * kept if no range of its region was handed out since its proof, which
 * read the region's counter while the extent was the file's (the extent
 * lock holds every change of the file's extents off, and an extent's
 * space is handed out only once it is freed): a handout of its address
 * comes after that reading, and moves the counter. A compressed page is
 * kept only if nothing was handed out at all. So a writer elsewhere on
 * the file system spoils only the misses of its own regions.
 */
void tc_canon_keep_unchanged(struct tc_canon_scope *s, u64 gen,
			     const u64 *keys, const u64 *gens,
			     unsigned long *pages, unsigned long nr)
{
	unsigned long i;

	/* As tc_canon_unchanged(): the pages and proofs read before. */
	smp_mb();
	if (atomic64_read(&s->cfs->gen) == gen)
		return;
	for_each_set_bit(i, pages, nr)
		if (tc_canon_key_compressed(keys[i]) ||
		    atomic64_read(tc_canon_region(s->cfs, keys[i])) != gens[i])
			__clear_bit(i, pages);
}

/* Has no data range been handed out since @gen was read? */
bool tc_canon_unchanged(struct tc_canon_scope *s, u64 gen)
{
	/*
	 * Orders the caller's reads of the page and of its proof before the
	 * generation; pairs with the barrier in tc_canon_forget().
	 */
	smp_mb();
	return atomic64_read(&s->cfs->gen) == gen;
}

/**
 * tc_canon_prove - the logical addresses of a range of a file's pages
 * @inode: a regular btrfs file; the caller holds its mapping's
 *	invalidate_lock, and read its mapping's alias count and the
 *	generation (tc_canon_gen()) before calling
 * @index: the first page
 * @nr: the number of pages
 * @logicals: set, for each page proven, to its logical address
 * @proven: a bitmap of @nr bits, set for each page proven
 * @isize: set to the file size the proof read
 * @s: the file's scope, held, if the caller wants @gens; else NULL
 * @gens: if @s, set for each page proven to its guard, which
 *	tc_canon_keep_unchanged() compares
 *
 * A page is proven when the file's extent map, which btrfs's own read of
 * the page would use, puts the whole page in one data extent: a regular
 * one at a page-aligned logical address, or a page of a compressed one's
 * decompressed bytes (tc_canon_logical()), with no
 * write to the range on its way (an ordered extent). The file's last
 * page, if partial, is proven too, but is the canonical page only if the
 * extent's bytes past the file's end are zeroes, as btrfs's read of the
 * page makes them: the caller checks that (tc_canon_zero_from()). Files
 * without checksums or with fs-verity (whose pages btrfs verifies as it
 * reads them) prove nothing. A page whose checksums are missing is found
 * out by the canonical read, which then fails.
 *
 * Return: the number of pages proven.
 */
unsigned long tc_canon_prove(struct inode *inode, pgoff_t index,
			     unsigned long nr, u64 *logicals,
			     unsigned long *proven, loff_t *isize,
			     struct tc_canon_scope *s, u64 *gens)
{
	struct btrfs_inode *bi = BTRFS_I(inode);
	u64 start = (u64)index << PAGE_SHIFT;
	u64 end = start + ((u64)nr << PAGE_SHIFT);
	struct extent_state *cached = NULL;
	struct btrfs_ordered_extent *oe;
	unsigned long n = 0;
	u64 cur, pos;

	bitmap_zero(proven, nr);
	*isize = i_size_read(inode);
	if (!S_ISREG(inode->i_mode) || IS_VERITY(inode) ||
	    (bi->flags & (BTRFS_INODE_NODATASUM | BTRFS_INODE_NODATACOW)))
		return 0;
	end = min(end, round_up((u64)*isize, PAGE_SIZE));
	if (start >= end)
		return 0;
	/*
	 * btrfs_get_extent() puts what it read of the subvolume's tree into
	 * the extent map cache; every btrfs caller holds the range's extent
	 * lock, which a clone, dedupe or relocation of the range takes before
	 * it drops the cached maps, so that a map read before the change is
	 * never cached after it. Without it a stale map would outlive the
	 * extent and, once its space holds other data, show that data to
	 * this file's reads. Try it: a range being written or cloned is read
	 * the ordinary way.
	 */
	if (!btrfs_try_lock_extent(&bi->io_tree, start, end - 1, &cached))
		return 0;
	oe = btrfs_lookup_first_ordered_range(bi, start, end - start);
	if (oe) {
		btrfs_put_ordered_extent(oe);
		goto unlock;
	}
	for (cur = start; cur < end;) {
		struct extent_map *em = btrfs_get_extent(bi, NULL, cur, end - cur);
		u64 next;

		if (IS_ERR(em))
			break;
		next = min(btrfs_extent_map_end(em), end);
		for (pos = round_up(max(cur, em->start), PAGE_SIZE);
		     pos + PAGE_SIZE <= next; pos += PAGE_SIZE) {
			unsigned long i = (pos - start) >> PAGE_SHIFT;

			if (tc_canon_logical(em, pos, &logicals[i])) {
				if (s)
					gens[i] = tc_canon_key_gen(s->cfs,
								   logicals[i]);
				__set_bit(i, proven);
				n++;
			}
		}
		btrfs_free_extent_map(em);
		if (next <= cur)
			break;
		cur = next;
	}
unlock:
	btrfs_unlock_extent(&bi->io_tree, start, end - 1, &cached);
	return n;
}

/*
 * The cached extent map of the page at @pos, of a walk forward: @em if it
 * covers the page, else the cache's (@em put); NULL if the cache has none.
 */
static struct extent_map *tc_canon_cached_map(struct extent_map_tree *tree,
					      struct extent_map *em, u64 pos)
{
	if (em && pos + PAGE_SIZE <= btrfs_extent_map_end(em))
		return em;
	if (em)
		btrfs_free_extent_map(em);
	read_lock(&tree->lock);
	em = lookup_extent_mapping(tree, pos, PAGE_SIZE);
	read_unlock(&tree->lock);
	return em;
}

/**
 * tc_canon_folios - the canonical pages a file's pages are, under RCU
 * @inode: a btrfs file
 * @index: the first page
 * @last: the last page
 * @fbatch: gets the folios, each with a reference
 *
 * What an alias to the canonical mapping stands for, resolved through the
 * file's extent map as it is now (relocation moves an extent without
 * touching the files' page caches; a write replaces the alias first).
 * Only maps in the extent map cache are used, and only uptodate pages:
 * anything else ends the run and is read again.
 *
 * Return: how many pages from @index were added to @fbatch.
 */
unsigned int tc_canon_folios(struct inode *inode, pgoff_t index, pgoff_t last,
			     struct folio_batch *fbatch)
{
	struct extent_map_tree *tree = &BTRFS_I(inode)->extent_tree;
	struct tc_canon_scope *s = tc_canon_scope_of(inode);
	struct extent_map *em = NULL;
	unsigned int n = 0;
	pgoff_t i;
	u64 gen;

	/* fs-verity may have been enabled since the alias was stored. */
	if (!s || IS_VERITY(inode))
		return 0;
	/*
	 * A preemptible RCU section can be preempted between the map lookup
	 * and the page lookup, long enough for the file's extent to change,
	 * its space to be handed out again and the new owner's page to be
	 * read in at the same address: a page got after the generation moved
	 * is not used.
	 */
	gen = tc_canon_gen(s);
	for (i = index; i <= last && folio_batch_space(fbatch); i++) {
		u64 pos = (u64)i << PAGE_SHIFT, l;
		struct folio *folio;

		em = tc_canon_cached_map(tree, em, pos);
		if (!em)
			break;
		if (!tc_canon_logical(em, pos, &l))
			break;
		folio = filemap_get_folio(tc_canon_mapping(s, l),
					  tc_canon_key_index(l));
		if (IS_ERR(folio))
			break;
		if (!tc_canon_usable(folio) || !tc_canon_unchanged(s, gen)) {
			folio_put(folio);
			break;
		}
		folio_batch_add(fbatch, folio);
		n++;
	}
	if (em)
		btrfs_free_extent_map(em);
	if (n)
		atomic64_add(n, &s->resolved);
	return n;
}

/**
 * tc_canon_zero_from - are a canonical page's bytes from @from on zeroes?
 * @s: the scope, held
 * @logical: the page's logical address
 * @from: an offset into the page
 *
 * For a file's last, partial page: btrfs's own read of it zeroes what
 * lies past the file's end, so the canonical page is that page only if
 * the extent holds zeroes there (btrfs writes them so; a truncation
 * rewrites the block).
 *
 * Return: true if the page is in memory, uptodate, and zero from @from.
 */
bool tc_canon_zero_from(struct tc_canon_scope *s, u64 logical, size_t from)
{
	struct folio *folio = filemap_get_folio(tc_canon_mapping(s, logical),
						tc_canon_key_index(logical));
	bool zero = false;

	if (IS_ERR(folio))
		return false;
	if (tc_canon_usable(folio)) {
		void *kaddr = kmap_local_folio(folio, 0);

		zero = !memchr_inv(kaddr + from, 0, PAGE_SIZE - from);
		kunmap_local(kaddr);
	}
	folio_put(folio);
	return zero;
}

/*
 * Remove from @mapping the pages of [@first, @first + @nr) that can never
 * be handed out: one whose read failed (an I/O error, no memory, a
 * reservation of its address while it was read) is left not uptodate, and
 * one a reservation marked stale while another had it locked stays
 * marked. Readahead skips a page that is present, so such a page would
 * keep its address from being read again until reclaim took it: every
 * file of the scope that refers to it would read its own copy. A locked
 * page is left to whoever holds it (a read in flight decides for itself).
 */
static void tc_canon_evict_unusable(struct address_space *mapping,
				    pgoff_t first, unsigned long nr)
{
	struct folio_batch fbatch;
	pgoff_t next = first;
	unsigned int i;

	if (!nr)
		return;
	/* One walk of the range: on a miss, few of its pages are present. */
	folio_batch_init(&fbatch);
	while (filemap_get_folios(mapping, &next, first + nr - 1, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			struct folio *folio = fbatch.folios[i];

			if (tc_canon_usable(folio) || !folio_trylock(folio))
				continue;
			if (folio->mapping == mapping && !tc_canon_usable(folio))
				filemap_remove_folio(folio);
			folio_unlock(folio);
		}
		folio_batch_release(&fbatch);
	}
}

/**
 * tc_canon_readahead - start reading canonical pages that are not in memory
 * @s: the scope, held
 * @logical: the first page's key (totalcow-canon.h)
 * @nr: the number of pages
 * @added: a bitmap of @nr bits: bit i set if this call started page i's
 *	read (page_alias_readahead())
 *
 * One run of adjacent keys; the reads are submitted, not waited for.
 * A page left by a read that failed is read again.
 */
void tc_canon_readahead(struct tc_canon_scope *s, u64 logical,
			unsigned long nr, unsigned long *added)
{
	struct file_ra_state ra = { };
	struct address_space *mapping = tc_canon_mapping(s, logical);
	DEFINE_READAHEAD(ractl, NULL, &ra, mapping, tc_canon_key_index(logical));

	tc_canon_evict_unusable(mapping, tc_canon_key_index(logical), nr);
	bitmap_zero(added, nr);
	page_alias_readahead(&ractl, nr, added);
}

/**
 * tc_canon_fleet_read - start a miss's reads of canonical pages
 * @s: the scope, held
 * @fn: starts the reads (tc_canon_readahead()), waits for none
 * @arg: its argument
 *
 * Charged to the scope's fleet, not to the reader (totalcow-fleet.c):
 * one tenant's io.max does not hold back the reads another waits for.
 */
void tc_canon_fleet_read(struct tc_canon_scope *s, void (*fn)(void *arg),
			 void *arg)
{
	struct cgroup_subsys_state *css;

	css = tc_fleet_run(&s->fleet, TC_FLEET_CANON, fn, arg);

	if (css)
		css_put(css);
}

/* May a canonical page got from tc_canon_mapping() be used? */
bool tc_canon_page_usable(struct folio *folio)
{
	return tc_canon_usable(folio);
}

/* The canonical mapping of a scope that holds the page of @key. */
struct address_space *tc_canon_mapping(struct tc_canon_scope *s, u64 key)
{
	return tc_canon_key_compressed(key) ? s->zinode->i_mapping :
					      s->inode->i_mapping;
}

/* Count file pages the policy aliased to a scope's pages. */
void tc_canon_count(struct tc_canon_scope *s, unsigned long aliased)
{
	if (aliased)
		atomic64_add(aliased, &s->aliased);
}

void tc_canon_count_mmap(struct tc_canon_scope *s, bool shared)
{
	atomic64_inc(shared ? &s->mmaps_shared : &s->mmaps_private);
}

/* A mapping counted as shared maps its file after all. */
void tc_canon_count_mmap_unshared(struct tc_canon_scope *s)
{
	atomic64_dec(&s->mmaps_shared);
	atomic64_inc(&s->mmaps_private);
}

u64 tc_canon_scope_id(struct tc_canon_scope *s)
{
	return s->id;
}

/**
 * tc_canon_cached_keys - the keys of a file's pages, from its cached maps
 * @inode: a btrfs file
 * @index: the first page
 * @nr: how many
 * @keys: gets each page's key (tc_canon_logical())
 *
 * Like tc_canon_prove(), but only from maps in the extent map cache, as
 * tc_canon_folios() resolves aliases, and without the extent lock: a
 * range being read (whose lock a read holds until its I/O completes) is
 * answered too. The cache is what the file's extents are now; a clone,
 * dedupe or relocation drops the maps it replaces. Checksum-less,
 * nodatacow and fs-verity files have none.
 *
 * Return: how many pages from @index have a key.
 */
unsigned long tc_canon_cached_keys(struct inode *inode, pgoff_t index,
				   unsigned long nr, u64 *keys)
{
	struct extent_map_tree *tree = &BTRFS_I(inode)->extent_tree;
	struct extent_map *em = NULL;
	unsigned long n;

	if (IS_VERITY(inode) || (BTRFS_I(inode)->flags &
				 (BTRFS_INODE_NODATASUM | BTRFS_INODE_NODATACOW)))
		return 0;
	for (n = 0; n < nr; n++) {
		u64 pos = ((u64)index + n) << PAGE_SHIFT;

		em = tc_canon_cached_map(tree, em, pos);
		if (!em)
			break;
		if (!tc_canon_logical(em, pos, &keys[n]))
			break;
	}
	if (em)
		btrfs_free_extent_map(em);
	return n;
}

/*
 * Drop the pages of [@start, @start + @len) from every scope. A
 * reservation (@wait) bumps the generation first and waits for reads of
 * the range in flight; an unpin only drops what is not being read, to
 * give the memory back early.
 */
/*
 * Drop the pages of [@first, @last] from @mapping, without waiting for a
 * locked one: a read in flight may have been started by a reader whose
 * I/O cgroup throttles it, and the reservation must not go at its rate.
 * A locked page is marked stale instead: if its read is in flight, the
 * read checks the mark before it ends (tc_canon_end_io()), under the
 * same folio lock; if it was uptodate and locked by someone else
 * (reclaim, migration), no one hands it out any more.
 */
static unsigned long tc_canon_drop(struct address_space *mapping,
				   pgoff_t first, pgoff_t last)
{
	struct folio_batch fbatch;
	unsigned long dropped = 0;
	pgoff_t next = first;
	unsigned int i;

	folio_batch_init(&fbatch);
	while (next <= last &&
	       filemap_get_folios(mapping, &next, last, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			struct folio *folio = fbatch.folios[i];

			if (!folio_trylock(folio)) {
				tc_canon_folio_set_stale(folio);
				continue;
			}
			if (folio->mapping == mapping) {
				filemap_remove_folio(folio);
				dropped++;
			}
			folio_unlock(folio);
		}
		folio_batch_release(&fbatch);
		cond_resched();
	}
	return dropped;
}

/* Drop [@first, @last] of @mapping, for tc_canon_forget(). */
static void tc_canon_forget_range(struct tc_canon_scope *s,
				  struct address_space *mapping,
				  pgoff_t first, pgoff_t last, bool reserved)
{
	unsigned long before = READ_ONCE(mapping->nrpages);

	if (!before)
		return;
	if (reserved) {
		atomic64_add(tc_canon_drop(mapping, first, last),
			     &s->invalidations);
		return;
	}
	invalidate_mapping_pages(mapping, first, last);
	if (READ_ONCE(mapping->nrpages) < before)
		atomic64_add(before - READ_ONCE(mapping->nrpages),
			     &s->invalidations);
}

static void tc_canon_forget(struct tc_canon_fs *cfs, u64 start, u64 len,
			    bool reserved)
{
	pgoff_t first = start >> PAGE_SHIFT;
	pgoff_t last = (start + len - 1) >> PAGE_SHIFT;
	pgoff_t zfirst, zlast;
	struct tc_canon_scope *s;
	bool z;

	if (!len)
		return;
	if (reserved) {
		u64 r, first_region = start >> TC_CANON_REGION_SHIFT;
		u64 last_region = (start + len - 1) >> TC_CANON_REGION_SHIFT;

		atomic64_inc(&cfs->gen);
		/* At most every counter once: the walk is bounded. */
		if (last_region - first_region >= TC_CANON_REGIONS)
			last_region = first_region + TC_CANON_REGIONS - 1;
		for (r = first_region; r <= last_region; r++)
			atomic64_inc(tc_canon_region(cfs,
						     r << TC_CANON_REGION_SHIFT));
		/* Pairs with the barriers of the reads (both mappings). */
		smp_mb();
	}
	/* Compressed extents whose bytes on disk meet the range. */
	z = tc_canon_zrange(start, len, &zfirst, &zlast);
	list_for_each_entry_srcu(s, &cfs->scopes, node,
				 srcu_read_lock_held(&tc_canon_srcu)) {
		tc_canon_forget_range(s, s->inode->i_mapping, first, last,
				      reserved);
		if (z)
			tc_canon_forget_range(s, s->zinode->i_mapping, zfirst,
					      zlast, reserved);
	}
}

/* btrfs's hooks: a range handed out (@reserved) or unpinned. */
static void tc_canon_hook(struct btrfs_fs_info *fs_info, u64 start, u64 len,
			  bool reserved)
{
	int idx = srcu_read_lock(&tc_canon_srcu);
	struct tc_canon_fs *cfs = tc_canon_fs_of(fs_info);

	if (cfs)
		tc_canon_forget(cfs, start, len, reserved);
	srcu_read_unlock(&tc_canon_srcu, idx);
}

static void tc_canon_hook_reserved(struct btrfs_fs_info *fs_info, u64 start,
				   u64 len)
{
	tc_canon_hook(fs_info, start, len, true);
}

static void tc_canon_hook_unpinned(struct btrfs_fs_info *fs_info, u64 start,
				   u64 len)
{
	tc_canon_hook(fs_info, start, len, false);
}

static struct tc_canon_scope *tc_canon_find(struct tc_canon_fs *cfs,
					    const char *name)
{
	struct tc_canon_scope *s;

	list_for_each_entry_srcu(s, &cfs->scopes, node,
				 srcu_read_lock_held(&tc_canon_srcu) ||
				 lockdep_is_held(&tc_canon_mutex))
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

/*
 * After the scope was unpublished and an SRCU grace period passed: no new
 * holder can find it. Waits for those that did, then for its reads in
 * flight.
 */
static void tc_canon_scope_free(struct tc_canon_scope *s)
{
	wait_var_event(&s->holders, !atomic_read(&s->holders));
	truncate_inode_pages_final(s->inode->i_mapping);
	iput(s->inode);
	if (s->zinode) {
		truncate_inode_pages_final(s->zinode->i_mapping);
		iput(s->zinode);
	}
	tc_fleet_destroy(&s->fleet);
	kfree(s);
}

/*
 * Unpublish @cfs into @b, to be freed with every scope left in it by
 * tc_canon_bury(); called with tc_canon_mutex held.
 */
static void tc_canon_fs_free(struct tc_canon_fs *cfs, struct tc_canon_burial *b)
{
	lockdep_assert_held(&tc_canon_mutex);
	list_del_rcu(&cfs->node);
	rcu_assign_pointer(cfs->fs_info->canon, NULL);
	hlist_add_head(&cfs->burial, &b->filesystems);
	spin_lock(&tc_canon_dead_lock);
	list_add_tail(&cfs->dead, &tc_canon_dead_filesystems);
	spin_unlock(&tc_canon_dead_lock);
}

/*
 * Free what @b holds (tc_canon_put_empty(), tc_canon_fs_free()) once its
 * holders are gone: lookups under tc_canon_srcu and resolvers under RCU
 * (grace periods), then a scope's holders and reads in flight. A file
 * system's state goes after its scopes, also those other burials hold.
 * Called without tc_canon_mutex.
 */
static void tc_canon_bury(struct tc_canon_burial *b)
{
	struct tc_canon_scope *s, *stmp;
	struct hlist_node *next;
	struct tc_canon_fs *cfs;

	if (hlist_empty(&b->scopes) && hlist_empty(&b->filesystems))
		return;
	synchronize_srcu(&tc_canon_srcu);
	synchronize_rcu();
	hlist_for_each_entry_safe(s, next, &b->scopes, burial) {
		cfs = s->cfs;
		tc_canon_scope_free(s);
		if (atomic_dec_and_test(&cfs->dead_scopes))
			wake_up_var(&cfs->dead_scopes);
	}
	hlist_for_each_entry_safe(cfs, next, &b->filesystems, burial) {
		list_for_each_entry_safe(s, stmp, &cfs->scopes, node)
			tc_canon_scope_free(s);
		wait_var_event(&cfs->dead_scopes, !atomic_read(&cfs->dead_scopes));
		xa_destroy(&cfs->subvols);
		spin_lock(&tc_canon_dead_lock);
		list_del(&cfs->dead);
		spin_unlock(&tc_canon_dead_lock);
		kvfree(cfs);
		/* Orders the list's change before the waiter's check. */
		smp_mb();
		wake_up_var(&tc_canon_dead_filesystems);
		page_alias_disable();
		btrfs_canon_disable();
	}
}

/* A burial left to a worker: the caller must not wait for holders. */
struct tc_canon_burial_work {
	struct work_struct work;
	struct tc_canon_burial b;
};

static void tc_canon_bury_work(struct work_struct *work)
{
	struct tc_canon_burial_work *bw =
		container_of(work, struct tc_canon_burial_work, work);

	tc_canon_bury(&bw->b);
	kfree(bw);
}

/*
 * Bury @b in a worker; in the caller only if there is no memory for one.
 * The close hook still waits for a file system's state buried so.
 */
static void tc_canon_bury_later(struct tc_canon_burial *b)
{
	struct tc_canon_burial_work *bw;

	if (hlist_empty(&b->scopes) && hlist_empty(&b->filesystems))
		return;
	bw = kzalloc(sizeof(*bw), GFP_KERNEL);
	if (!bw) {
		tc_canon_bury(b);
		return;
	}
	INIT_WORK(&bw->work, tc_canon_bury_work);
	hlist_move_list(&b->scopes, &bw->b.scopes);
	hlist_move_list(&b->filesystems, &bw->b.filesystems);
	queue_work(system_unbound_wq, &bw->work);
}

/* Is state of @fs_info unpublished and not yet freed? */
static bool tc_canon_fs_dying(struct btrfs_fs_info *fs_info)
{
	struct tc_canon_fs *cfs;
	bool dying = false;

	spin_lock(&tc_canon_dead_lock);
	list_for_each_entry(cfs, &tc_canon_dead_filesystems, dead) {
		if (cfs->fs_info == fs_info) {
			dying = true;
			break;
		}
	}
	spin_unlock(&tc_canon_dead_lock);
	return dying;
}

/*
 * Unmount starts: clones of its files that no mapping uses are deleted
 * (totalcow-extent-mmap.c), and every read of the file system's scopes
 * ends first. A file system that has no canonical state, and none being
 * freed, returns at once.
 */
static void tc_canon_hook_close(struct btrfs_fs_info *fs_info)
{
	struct tc_canon_burial burial = { };
	struct tc_canon_fs *cfs;

	/* Clones of its files no mapping uses: whatever became of the scopes. */
	tc_extent_clone_close(fs_info->sb);
	mutex_lock(&tc_canon_mutex);
	cfs = tc_canon_fs_of(fs_info);
	if (cfs)
		tc_canon_fs_free(cfs, &burial);
	mutex_unlock(&tc_canon_mutex);
	tc_canon_bury(&burial);
	/* A disable of its last scope may be burying its state still. */
	wait_var_event(&tc_canon_dead_filesystems, !tc_canon_fs_dying(fs_info));
}

static const struct btrfs_canon_ops tc_canon_btrfs_ops = {
	.reserved	= tc_canon_hook_reserved,
	.unpinned	= tc_canon_hook_unpinned,
	.close		= tc_canon_hook_close,
};

static struct inode *
tc_canon_new_inode(struct tc_canon_scope *s,
		   const struct address_space_operations *aops)
{
	struct inode *inode = alloc_anon_inode(tc_canon_mnt->mnt_sb);
	struct address_space *mapping;

	if (IS_ERR(inode))
		return inode;
	/*
	 * On its super block's list, as new_inode() puts a file's inode:
	 * drop_caches walks that list, so an admin's "echo 1" drops clean
	 * canonical pages as it drops every file's. That is what reclaim
	 * does already (aliases hold no reference: a dropped page is a miss
	 * that reads again); the aops have no ->release_folio or
	 * ->free_folio, so an invalidation running with its own reference
	 * after the scope is freed never touches i_private.
	 */
	inode_sb_list_add(inode);
	inode->i_private = s;
	inode->i_size = MAX_LFS_FILESIZE;
	mapping = inode->i_mapping;
	mapping->a_ops = aops;
	/* Reads look checksums up in btrfs trees: no reclaim into file systems. */
	mapping_set_gfp_mask(mapping, mapping_gfp_constraint(mapping, ~__GFP_FS));
	return inode;
}

/* A scope's two canonical mappings: regular and compressed extents. */
static int tc_canon_new_inodes(struct tc_canon_scope *s)
{
	struct inode *inode = tc_canon_new_inode(s, &tc_canon_aops);

	if (IS_ERR(inode))
		return PTR_ERR(inode);
	s->zinode = tc_canon_new_inode(s, &tc_canon_zaops);
	if (IS_ERR(s->zinode)) {
		iput(inode);
		s->zinode = NULL;
		return -ENOMEM;
	}
	s->inode = inode;
	return 0;
}

/* A new file system state; tc_canon_mutex held. */
static struct tc_canon_fs *tc_canon_fs_new(struct btrfs_fs_info *fs_info)
{
	struct tc_canon_fs *cfs = kvzalloc(sizeof(*cfs), GFP_KERNEL);

	if (!cfs)
		return NULL;
	cfs->fs_info = fs_info;
	atomic64_set(&cfs->gen, 0);
	INIT_LIST_HEAD(&cfs->scopes);
	/* Nodes charged to whoever stores: a reader that follows, an admin. */
	xa_init_flags(&cfs->subvols, XA_FLAGS_ACCOUNT);
	btrfs_canon_enable();
	page_alias_enable();
	rcu_assign_pointer(fs_info->canon, cfs);
	list_add_tail_rcu(&cfs->node, &tc_canon_filesystems);
	return cfs;
}

static atomic64_t tc_canon_scope_ids = ATOMIC64_INIT(0);

/* A new scope of @cfs, with its canonical mapping; tc_canon_mutex held. */
static struct tc_canon_scope *tc_canon_scope_new(struct tc_canon_fs *cfs,
						 const char *name)
{
	struct tc_canon_scope *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return NULL;
	strscpy(s->name, name, sizeof(s->name));
	s->id = atomic64_inc_return(&tc_canon_scope_ids);
	if (tc_canon_new_inodes(s)) {
		kfree(s);
		return NULL;
	}
	tc_fleet_init(&s->fleet);
	s->cfs = cfs;
	list_add_tail_rcu(&s->node, &cfs->scopes);
	return s;
}

/*
 * Unpublish @s into @b if no subvolume is in it any more, and @cfs with
 * its last scope, for tc_canon_bury() to free; tc_canon_mutex held.
 */
static void tc_canon_put_empty(struct tc_canon_fs *cfs,
			       struct tc_canon_scope *s,
			       struct tc_canon_burial *b)
{
	if (s && !s->nr_subvols) {
		list_del_rcu(&s->node);
		atomic_inc(&cfs->dead_scopes);
		hlist_add_head(&s->burial, &b->scopes);
	}
	if (list_empty(&cfs->scopes))
		tc_canon_fs_free(cfs, b);
}

/*
 * Is entry @e of subvolume @id of @cfs one a deletion of the subvolume
 * makes stale: one that followed its source, or a value (taken out, or
 * found to follow nothing)? Enabled ones stay until disabled.
 */
static bool tc_canon_prunable(struct tc_canon_fs *cfs, unsigned long id,
			      void *e)
{
	return xa_is_value(e) || xa_get_mark(&cfs->subvols, id, TC_CANON_FOLLOWED);
}

/*
 * Forget subvolume @id of @cfs, found deleted, if its entry is prunable;
 * tc_canon_mutex held. One that followed its source leaves its scope,
 * which tc_canon_put_empties() then frees if it was the last.
 */
static void tc_canon_forget_subvol(struct tc_canon_fs *cfs, unsigned long id)
{
	void *e;

	lockdep_assert_held(&tc_canon_mutex);
	e = xa_load(&cfs->subvols, id);
	if (!e || !tc_canon_prunable(cfs, id, e))
		return;
	xa_erase(&cfs->subvols, id);
	if (!xa_is_value(e)) {
		struct tc_canon_scope *s = e;

		s->nr_subvols--;
	}
}

/*
 * Forget the subvolumes of @cfs that were deleted: one that followed its
 * source leaves its scope, a value entry goes. Subvolume ids are never
 * reused, so such an entry would only hold memory, and its scope alive.
 * Enabled ones stay until disabled. A root lookup per entry, bounded by
 * the file system's subvolumes; tc_canon_mutex held (a disable's: the
 * worker, below, looks up without it). The scopes it empties are for
 * tc_canon_put_empties().
 */
static void tc_canon_prune(struct tc_canon_fs *cfs)
{
	unsigned long id;
	void *e;

	xa_for_each(&cfs->subvols, id, e) {
		if (!tc_canon_prunable(cfs, id, e) ||
		    tc_btrfs_subvol_exists(cfs->fs_info->sb, id))
			continue;
		tc_canon_forget_subvol(cfs, id);
		cond_resched();
	}
}

/*
 * Free the scopes of @cfs that no subvolume is in, and @cfs with its last
 * scope; tc_canon_mutex held. Return: whether @cfs was freed.
 */
static bool tc_canon_put_empties(struct tc_canon_fs *cfs,
				 struct tc_canon_burial *b)
{
	struct tc_canon_scope *s;
	bool last;

again:
	list_for_each_entry(s, &cfs->scopes, node) {
		if (s->nr_subvols)
			continue;
		last = list_is_singular(&cfs->scopes);
		tc_canon_put_empty(cfs, s, b);	/* @cfs too if @s was its last */
		if (last)
			return true;
		goto again;
	}
	return false;
}

/*
 * Deleted subvolumes leave their scopes here, every
 * totalcow.prune_interval_ms (totalcow-group.c) while any file system has
 * prunable entries, and not when extents/scopes is read: a read changes
 * nothing. A follow or a disable, which make such entries, queues it.
 *
 * The root lookups run under tc_canon_srcu only, not tc_canon_mutex,
 * which every tenant's first read takes (tc_canon_follow()) and which
 * must not wait for the root tree's reads. The SRCU read section keeps
 * each listed tc_canon_fs and its btrfs_fs_info alive: whoever unpublishes
 * one (an unmount's close hook, the disable of its last scope) frees it
 * after a grace period, and the close hook, which comes first in
 * close_ctree(), returns only after that, so the lookups never meet a
 * file system being torn down. A subvolume found deleted stays deleted
 * (ids are never reused); under the mutex its entry is looked at again,
 * as it is now, and only a prunable one goes: an enable that came
 * meanwhile keeps it. A file system unpublished meanwhile is skipped (its
 * entries go with it). Scopes left empty are buried by a worker of their
 * own (tc_canon_bury_later()), since a burial waits for the scope's
 * holders and this must not wait for a tenant's throttled read.
 */
static void tc_canon_prune_all(struct work_struct *work);
static DECLARE_DEFERRABLE_WORK(tc_canon_prune_work, tc_canon_prune_all);

static void tc_canon_prune_all(struct work_struct *work)
{
	struct tc_canon_burial burial = { };
	struct tc_canon_fs *cfs;
	bool left = false;
	unsigned long id;
	int idx;
	void *e;

	idx = srcu_read_lock(&tc_canon_srcu);
	list_for_each_entry_srcu(cfs, &tc_canon_filesystems, node,
				 srcu_read_lock_held(&tc_canon_srcu)) {
		xa_for_each(&cfs->subvols, id, e) {
			if (rcu_access_pointer(cfs->fs_info->canon) != cfs)
				break;
			if (!tc_canon_prunable(cfs, id, e))
				continue;
			if (tc_btrfs_subvol_exists(cfs->fs_info->sb, id)) {
				left = true;
				continue;
			}
			mutex_lock(&tc_canon_mutex);
			if (tc_canon_fs_of(cfs->fs_info) == cfs) {
				tc_canon_forget_subvol(cfs, id);
				/* @cfs too, with its last scope. */
				tc_canon_put_empties(cfs, &burial);
			}
			mutex_unlock(&tc_canon_mutex);
			cond_resched();
		}
	}
	srcu_read_unlock(&tc_canon_srcu, idx);
	tc_canon_bury_later(&burial);
	/*
	 * A follow or a disable after its entry was passed over queues the
	 * next run itself: the pending bit was cleared before this one ran.
	 */
	if (left)
		queue_delayed_work(system_unbound_wq, &tc_canon_prune_work,
				   tc_prune_delay());
}

/* Look for deleted subvolumes at the next interval (no-op if queued). */
static void tc_canon_prune_later(void)
{
	queue_delayed_work(system_unbound_wq, &tc_canon_prune_work,
			   tc_prune_delay());
}

/* A new interval (totalcow.prune_interval_ms): look now. */
void tc_canon_prune_kick(void)
{
	mod_delayed_work(system_unbound_wq, &tc_canon_prune_work, 0);
}

/**
 * tc_canon_enable - put a subvolume's files in a sharing scope
 * @inode: an inode of the subvolume (the caller holds a reference to a
 *	mount of its file system)
 * @name: the scope (tc_canon_scope_name_valid()), made with its canonical
 *	mapping if the file system has none of that name
 *
 * Snapshots made from the subvolume follow it into the scope
 * (tc_canon_follow()). One that followed its source into a scope may be
 * put in another, or in the same as enabled itself.
 *
 * Return: 0; -EEXIST if the subvolume was enabled in a scope already;
 * -EINVAL for a bad name or a file system that is not btrfs; -EOPNOTSUPP
 * for one that cannot share extents (tc_canon_fs_eligible()); -ENOMEM.
 */
int tc_canon_enable(struct inode *inode, const char *name)
{
	struct tc_canon_scope *s, *old = NULL;
	struct tc_canon_burial burial = { };
	struct super_block *sb = inode->i_sb;
	struct tc_canon_fs *cfs;
	u64 subvol;
	int ret;

	ret = tc_canon_fs_eligible(sb);
	if (ret)
		return ret;
	if (!tc_canon_scope_name_valid(name))
		return -EINVAL;
	subvol = btrfs_root_id(BTRFS_I(inode)->root);

	mutex_lock(&tc_canon_mutex);
	cfs = tc_canon_fs_of(btrfs_sb(sb));
	if (cfs) {
		old = xa_load(&cfs->subvols, subvol);
		if (xa_is_value(old))
			old = NULL;	/* out, or in none: enabled now */
		if (old && !xa_get_mark(&cfs->subvols, subvol,
					TC_CANON_FOLLOWED)) {
			ret = -EEXIST;
			goto out;
		}
	}
	if (!cfs)
		cfs = tc_canon_fs_new(btrfs_sb(sb));
	if (!cfs) {
		ret = -ENOMEM;
		goto out;
	}
	s = tc_canon_find(cfs, name);
	if (!s)
		s = tc_canon_scope_new(cfs, name);
	if (s)
		ret = xa_err(xa_store(&cfs->subvols, subvol, s, GFP_KERNEL));
	else
		ret = -ENOMEM;
	if (!ret) {
		xa_clear_mark(&cfs->subvols, subvol, TC_CANON_FOLLOWED);
		s->nr_subvols++;
		WRITE_ONCE(cfs->follow_gen, cfs->follow_gen + 1);
		/* Its aliases resolve through the new scope from now on. */
		if (old) {
			old->nr_subvols--;
			tc_canon_put_empty(cfs, old, &burial);
		}
	} else {
		tc_canon_put_empty(cfs, s, &burial);
	}
out:
	mutex_unlock(&tc_canon_mutex);
	tc_canon_bury(&burial);
	return ret;
}

/**
 * tc_canon_disable - take a subvolume's files out of a scope
 * @inode: an inode of the subvolume
 * @name: the scope it is in
 *
 * The scope goes with its last subvolume (waiting for its users and its
 * reads in flight, without tc_canon_mutex), and the file system's state
 * with its last scope.
 * Aliases to the scope's pages left in files resolve to nothing from then
 * on, and those pages are read again. The subvolume, and snapshots made
 * from it later, stay out of every scope until enabled: they do not
 * follow their sources back in (tc_canon_follow()). Snapshots that
 * followed it before stay in the scope.
 *
 * Return: 0, or -ENOENT if the subvolume is not in that scope.
 */
int tc_canon_disable(struct inode *inode, const char *name)
{
	struct tc_canon_scope *s = NULL;
	struct tc_canon_burial burial = { };
	struct tc_canon_fs *cfs;
	u64 subvol;

	if (inode->i_sb->s_magic != BTRFS_SUPER_MAGIC)
		return -ENOENT;
	subvol = btrfs_root_id(BTRFS_I(inode)->root);
	mutex_lock(&tc_canon_mutex);
	cfs = tc_canon_fs_of(btrfs_sb(inode->i_sb));
	if (cfs)
		s = xa_load(&cfs->subvols, subvol);
	if (s && !xa_is_value(s) && !strcmp(s->name, name)) {
		/* Replaces an entry: no allocation, no failure. */
		xa_store(&cfs->subvols, subvol, TC_CANON_OUT, GFP_KERNEL);
		xa_clear_mark(&cfs->subvols, subvol, TC_CANON_FOLLOWED);
		s->nr_subvols--;
		WRITE_ONCE(cfs->follow_gen, cfs->follow_gen + 1);
	} else {
		s = NULL;
	}
	if (s) {
		tc_canon_prune(cfs);
		tc_canon_put_empties(cfs, &burial);
	}
	mutex_unlock(&tc_canon_mutex);
	tc_canon_bury(&burial);
	/* Its TC_CANON_OUT entry goes once the subvolume is deleted. */
	if (s)
		tc_canon_prune_later();
	return s ? 0 : -ENOENT;
}

/* Is @inode's subvolume in a sharing scope? */
bool tc_canon_in_scope(struct inode *inode)
{
	bool in;

	if (!static_branch_unlikely(&btrfs_canon_key))
		return false;
	rcu_read_lock();
	in = tc_canon_scope_of(inode);
	rcu_read_unlock();
	return in;
}

/*
 * The scope of the nearest of @ids (a subvolume's sources, nearest first:
 * tc_btrfs_lineage()) that is in one, unless an admin took out one
 * nearer (TC_CANON_OUT); NULL if none. @subvols is a tc_canon_fs's,
 * tc_canon_mutex held.
 */
static struct tc_canon_scope *tc_canon_follow_pick(struct xarray *subvols,
						   const u64 *ids, int n)
{
	void *e;
	int i;

	for (i = 0; i < n; i++) {
		e = xa_load(subvols, ids[i]);
		if (e == TC_CANON_OUT)
			return NULL;
		if (e && !xa_is_value(e))
			return e;
	}
	return NULL;
}

/*
 * xas_nomem() reads the flags of its state's array. While tc_canon_mutex
 * is not held, tc_canon_follow()'s state points here, at an array that
 * cannot go away: the node it allocates belongs to no array until a
 * store takes it. A store needs a node per level it adds; subvolume ids
 * are small, and a few rounds cover any that is not.
 */
static DEFINE_XARRAY(tc_canon_follow_nomem);
#define TC_CANON_FOLLOW_ROUNDS 4

/**
 * tc_canon_follow - put a snapshot in the scope of the subvolume it was made from
 * @inode: a file whose subvolume is in no scope, at a read of it
 * @l: its subvolume's lineage if the caller read it (tc_btrfs_lineage()),
 *	or NULL: read here, if it is needed, unless @l holds the whole chain
 *
 * A subvolume made by snapshot from one in a scope (enabled, or itself
 * following, at most TC_LINEAGE_HOPS snapshots back) joins that
 * scope: a fleet's containers made from an enabled image share with it
 * without an admin step each. Only a subvolume's owner (or
 * CAP_SYS_ADMIN) may snapshot it, and the snapshot holds the source's
 * data, so it joins its source's trust domain (docs/design/scopes.md). One an
 * admin took out stays out, and so do snapshots made from it. A subvolume
 * found to follow nothing is not looked up again until the next enable or
 * disable. The lookup (a UUID tree search per hop) runs without locks;
 * its entry is charged to the reader, whose reclaim runs without
 * tc_canon_mutex (totalcow-reader-hold.h).
 *
 * Return: 1 if @inode's subvolume is in a scope now, 0 if not, -ENOMEM
 * if it may be later.
 */
int tc_canon_follow(struct inode *inode, const struct tc_lineage *l)
{
	XA_STATE(xas, &tc_canon_follow_nomem, 0);
	int err, in = 0, rounds = 0;
	struct tc_lineage read;
	struct tc_canon_scope *s;
	u64 subvol;
	struct tc_canon_fs *cfs;
	unsigned long gen = 0;
	void *e = NULL;

	if (!static_branch_unlikely(&btrfs_canon_key) ||
	    inode->i_sb->s_magic != BTRFS_SUPER_MAGIC)
		return 0;
	subvol = btrfs_root_id(BTRFS_I(inode)->root);
	rcu_read_lock();
	cfs = rcu_dereference(btrfs_sb(inode->i_sb)->canon);
	if (cfs) {
		e = xa_load(&cfs->subvols, subvol);
		gen = READ_ONCE(cfs->follow_gen);
	}
	rcu_read_unlock();
	if (!cfs || e == TC_CANON_OUT || e == tc_canon_none_at(gen))
		return 0;
	if (e && !xa_is_value(e))
		return 1;
	if (!l || !l->whole) {
		err = tc_btrfs_lineage(inode, &read, TC_LINEAGE_HOPS);
		if (err)
			return err;
		l = &read;
	}
again:
	mutex_lock(&tc_canon_mutex);
	tc_reader_hold_begin();
	cfs = tc_canon_fs_of(btrfs_sb(inode->i_sb));
	if (!cfs)
		goto out;
	e = xa_load(&cfs->subvols, subvol);
	if (e && !xa_is_value(e)) {
		in = 1;
		goto out;
	}
	if (e == TC_CANON_OUT)
		goto out;
	s = tc_canon_follow_pick(&cfs->subvols, l->id, l->ids);
	if (!s && cfs->follow_gen != gen)
		goto out;
	/* Nodes from xas.xa_alloc, else GFP_NOWAIT (no reclaim here). */
	xas.xa = &cfs->subvols;
	xas_set(&xas, subvol);
	xas_lock(&xas);
	xas_store(&xas, s ?: tc_canon_none_at(gen));
	if (s && !xas_error(&xas))
		xas_set_mark(&xas, TC_CANON_FOLLOWED);
	xas_unlock(&xas);
	if (s && !xas_error(&xas)) {
		s->nr_subvols++;
		in = 1;
	}
	/* Stored, either way: the entry goes once the subvolume is deleted. */
	if (!xas_error(&xas))
		tc_canon_prune_later();
	xas.xa = &tc_canon_follow_nomem;
out:
	tc_reader_hold_end();
	mutex_unlock(&tc_canon_mutex);
	/*
	 * The store needed a node: made here, without the mutex, charged to
	 * the reader with reclaim as any of its allocations; then again.
	 */
	if (rounds++ < TC_CANON_FOLLOW_ROUNDS &&
	    xas_nomem(&xas, GFP_KERNEL_ACCOUNT))
		goto again;
	in = xas_error(&xas) ?: in;
	xas_destroy(&xas);
	return in;
}

/**
 * tc_canon_hold - the scope of a file, held across sleeps until released
 * @inode: a file
 *
 * The burial of a scope (its last subvolume disabled, its file system
 * unmounted) waits for its holders; nothing else does. A holder is
 * counted in its scope, not kept inside tc_canon_srcu: a reader may hold
 * across its I/O, at the rate its I/O cgroup allows.
 *
 * Return: the scope, to be released with tc_canon_release(); or NULL.
 */
struct tc_canon_scope *tc_canon_hold(struct inode *inode)
{
	struct tc_canon_scope *s;
	int idx;

	idx = srcu_read_lock(&tc_canon_srcu);
	s = tc_canon_scope_of(inode);
	/* Before the grace period a burial waits for: it sees this count. */
	if (s)
		atomic_inc(&s->holders);
	srcu_read_unlock(&tc_canon_srcu, idx);
	return s;
}

/* Release what tc_canon_hold() returned; @s is not used after this. */
void tc_canon_release(struct tc_canon_scope *s)
{
	/* Fully ordered: the holder's use of @s comes before the burial's. */
	if (atomic_dec_and_test(&s->holders))
		wake_up_var(&s->holders);
}

void tc_canon_scope_stats(struct tc_canon_scope *s, struct tc_canon_stats *st)
{
	st->compressed_pages = READ_ONCE(s->zinode->i_mapping->nrpages);
	st->pages = READ_ONCE(s->inode->i_mapping->nrpages) +
		    st->compressed_pages;
	st->reads = atomic64_read(&s->reads);
	st->read_failures = atomic64_read(&s->read_failures);
	st->invalidations = atomic64_read(&s->invalidations);
	st->aliased = atomic64_read(&s->aliased);
	st->resolved = atomic64_read(&s->resolved);
	st->mmaps_shared = atomic64_read(&s->mmaps_shared);
	st->mmaps_private = atomic64_read(&s->mmaps_private);
}

/**
 * tc_canon_show - every scope, a line each, for sysfs
 * @buf: a sysfs page
 *
 * "<fsid> <scope> pages <n> compressed_pages <n> reads <n> read_failures
 * <n> invalidations <n> aliased <n> resolved <n> mmaps_shared <n>
 * mmaps_private <n> subvolumes <id>... followed <id>...\n": the
 * subvolumes enabled, then those that followed their sources in
 * (docs/ABI/testing/sysfs-kernel-mm-totalcow). Changes nothing and takes
 * no mutex: the file systems and scopes are walked under tc_canon_srcu,
 * whose grace period their burial waits for, and the subvolumes with the
 * xarray's own RCU walk, so a read waits neither for an enable, a disable
 * or the prune worker (which drops deleted subvolumes) nor for a
 * tenant's read. A followed subvolume deleted since the worker last
 * looked is not listed (a root lookup, as the worker's; the file system
 * lives while the walk holds tc_canon_srcu: see tc_canon_prune_all()),
 * and leaves the scope, freeing it if it was the last, when the worker
 * looks again. Each line is of one moment of its scope; two lines need
 * not be of the same.
 *
 * Return: the bytes written, or -EFBIG if the table does not fit in the
 * page (never a table cut short).
 */
ssize_t tc_canon_show(char *buf)
{
	struct tc_canon_stats st;
	struct tc_canon_scope *s;
	struct tc_canon_fs *cfs;
	int len = 0, idx;

	idx = srcu_read_lock(&tc_canon_srcu);
	list_for_each_entry_srcu(cfs, &tc_canon_filesystems, node,
				 srcu_read_lock_held(&tc_canon_srcu)) {
		list_for_each_entry_srcu(s, &cfs->scopes, node,
					 srcu_read_lock_held(&tc_canon_srcu)) {
			struct tc_canon_scope *in;
			unsigned long id;

			tc_canon_scope_stats(s, &st);
			len = tc_sysfs_emit_at(buf, len,
					       "%pU %s pages %lu compressed_pages %lu reads %llu read_failures %llu invalidations %llu aliased %llu resolved %llu mmaps_shared %llu mmaps_private %llu subvolumes",
					       cfs->fs_info->fs_devices->fsid, s->name,
					       st.pages, st.compressed_pages, st.reads,
					       st.read_failures,
					       st.invalidations, st.aliased,
					       st.resolved, st.mmaps_shared,
					       st.mmaps_private);
			xa_for_each(&cfs->subvols, id, in)
				if (in == s &&
				    !xa_get_mark(&cfs->subvols, id,
						 TC_CANON_FOLLOWED))
					len = tc_sysfs_emit_at(buf, len, " %lu", id);
			len = tc_sysfs_emit_at(buf, len, " followed");
			xa_for_each_marked(&cfs->subvols, id, in,
					   TC_CANON_FOLLOWED)
				if (in == s &&
				    tc_btrfs_subvol_exists(cfs->fs_info->sb, id))
					len = tc_sysfs_emit_at(buf, len, " %lu", id);
			len = tc_sysfs_emit_at(buf, len, "\n");
			if (len < 0)
				goto out;
		}
	}
out:
	srcu_read_unlock(&tc_canon_srcu, idx);
	return len;
}

static int tc_canon_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, TC_CANON_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type tc_canon_fs_type = {
	.name		= "totalcow_canon",
	.init_fs_context = tc_canon_init_fs_context,
	.kill_sb	= kill_anon_super,
};

static int __init tc_canon_init(void)
{
	tc_canon_mnt = kern_mount(&tc_canon_fs_type);
	if (IS_ERR(tc_canon_mnt))
		return PTR_ERR(tc_canon_mnt);
	btrfs_canon_register(&tc_canon_btrfs_ops);
	return 0;
}
fs_initcall(tc_canon_init);

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_CANON_KUNIT_TEST)
#include "totalcow_canon_kunit.c"
#endif
