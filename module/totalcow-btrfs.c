// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: what it asks btrfs (docs/design.md,
 * "Proof without reading"). Lineage comes from the subvolumes' root items
 * (as BTRFS_IOC_GET_SUBVOL_INFO reports them); identity of a range of two
 * files from their extent maps: the same bytes of the same on-disk extent.
 * Built in, next to btrfs, so it may use btrfs's own headers.
 */

#include <linux/bitmap.h>
#include <linux/pagemap.h>

#include "ctree.h"
#include "fs.h"
#include "btrfs_inode.h"
#include "extent_map.h"
#include "ordered-data.h"

#include "totalcow-btrfs.h"

/* Is @dir the root directory of a btrfs subvolume? */
bool tc_btrfs_is_subvol_root(struct inode *dir)
{
	return S_ISDIR(dir->i_mode) &&
	       btrfs_ino(BTRFS_I(dir)) == BTRFS_FIRST_FREE_OBJECTID;
}

/**
 * tc_btrfs_check_lineage - is @member's subvolume a snapshot of @tmpl's?
 * @member: the root directory of the member subvolume
 * @tmpl: the root directory of the template subvolume
 *
 * A snapshot records the UUID of the subvolume it was taken of as its
 * parent UUID, and nothing but snapshot creation sets that (users cannot).
 * A template that came from btrfs receive is accepted under the UUID it
 * was sent as too (its received UUID): then the member was snapshotted
 * from the subvolume the template is a received copy of. Either way,
 * sharing still proves each page (extents, or a full compare).
 *
 * Return: 0, or -EXDEV if @member is not a snapshot of @tmpl (or not a
 * subvolume root, or the two are the same subvolume).
 */
int tc_btrfs_check_lineage(struct inode *member, struct inode *tmpl)
{
	struct btrfs_root *m = BTRFS_I(member)->root;
	struct btrfs_root *t = BTRFS_I(tmpl)->root;
	struct btrfs_fs_info *fs_info = m->fs_info;
	u8 parent[BTRFS_UUID_SIZE], uuid[BTRFS_UUID_SIZE];
	u8 received[BTRFS_UUID_SIZE];

	if (member->i_sb != tmpl->i_sb || m == t ||
	    !tc_btrfs_is_subvol_root(member) || !tc_btrfs_is_subvol_root(tmpl))
		return -EXDEV;
	/* BTRFS_IOC_SET_RECEIVED_SUBVOL changes received_uuid under it. */
	down_read(&fs_info->subvol_sem);
	memcpy(parent, m->root_item.parent_uuid, BTRFS_UUID_SIZE);
	memcpy(uuid, t->root_item.uuid, BTRFS_UUID_SIZE);
	memcpy(received, t->root_item.received_uuid, BTRFS_UUID_SIZE);
	up_read(&fs_info->subvol_sem);
	if (btrfs_is_empty_uuid(parent))
		return -EXDEV;
	if (!memcmp(parent, uuid, BTRFS_UUID_SIZE))
		return 0;
	if (!btrfs_is_empty_uuid(received) &&
	    !memcmp(parent, received, BTRFS_UUID_SIZE))
		return 0;
	return -EXDEV;
}

/*
 * Do @me (member) and @te (template), both covering file offset @pos, put
 * the byte at @pos in the same place on disk? Uncompressed: the same disk
 * address (the extent maps of adjacent extents may be merged in one file's
 * cache and not in the other's, so their bounds need not match).
 * Compressed (never merged): the same extent, compression and offset into
 * its decompressed data. Holes, inline and preallocated extents prove
 * nothing (the compare handles them).
 */
static bool tc_same_bytes(const struct extent_map *me,
			  const struct extent_map *te, u64 pos)
{
	if (me->disk_bytenr >= EXTENT_MAP_LAST_BYTE ||
	    te->disk_bytenr >= EXTENT_MAP_LAST_BYTE)
		return false;
	if ((me->flags | te->flags) & EXTENT_FLAG_PREALLOC)
		return false;
	if (extent_map_compression(me) != extent_map_compression(te))
		return false;
	if (!extent_map_is_compressed(me))
		return btrfs_extent_map_block_start(me) + (pos - me->start) ==
		       btrfs_extent_map_block_start(te) + (pos - te->start);
	return me->disk_bytenr == te->disk_bytenr &&
	       me->disk_num_bytes == te->disk_num_bytes &&
	       me->ram_bytes == te->ram_bytes &&
	       me->offset + (pos - me->start) == te->offset + (pos - te->start);
}

/**
 * tc_btrfs_same_extents - pages the file system records as the same bytes
 * @member: a member file; the caller holds its i_rwsem (shared is enough)
 *	and has checked that no direct I/O is in flight on it
 * @tmpl: its template file, in a read-only subvolume, write-denied
 * @index: the first page
 * @nr: the number of pages
 * @proven: a bitmap of @nr bits, set for each page proven the same; or
 *	NULL to stop at the first page that is not
 *
 * A page is proven when both files map every byte of it to the same byte
 * on disk (tc_same_bytes()) and no ordered extent (a write on its way to
 * disk, buffered or direct) covers the member's range. Pages past the end
 * of either file are proven only if both files have the same size (the
 * tail of the last page reads as zeros in both). The member's page cache is
 * not looked at: the caller aliases only slots that hold no folio, whose
 * data is what the extents say.
 *
 * Return: the number of pages proven.
 */
unsigned long tc_btrfs_same_extents(struct inode *member, struct inode *tmpl,
				    pgoff_t index, unsigned long nr,
				    unsigned long *proven)
{
	struct btrfs_inode *m = BTRFS_I(member), *t = BTRFS_I(tmpl);
	u64 msize = i_size_read(member), tsize = i_size_read(tmpl);
	u64 start = (u64)index << PAGE_SHIFT;
	u64 end = start + ((u64)nr << PAGE_SHIFT);
	struct btrfs_ordered_extent *oe;
	unsigned long n = 0;
	u64 cur, limit;

	if (proven)
		bitmap_zero(proven, nr);
	if (member->i_sb != tmpl->i_sb || !S_ISREG(member->i_mode) ||
	    !S_ISREG(tmpl->i_mode))
		return 0;
	if (msize == tsize)
		limit = round_up(msize, PAGE_SIZE);
	else
		limit = round_down(min(msize, tsize), PAGE_SIZE);
	end = min(end, limit);
	if (start >= end)
		return 0;
	oe = btrfs_lookup_first_ordered_range(m, start, end - start);
	if (oe) {
		btrfs_put_ordered_extent(oe);
		return 0;
	}
	for (cur = start; cur < end;) {
		struct extent_map *me, *te;
		u64 next, first, stop;
		bool same;

		me = btrfs_get_extent(m, NULL, cur, end - cur);
		if (IS_ERR(me))
			break;
		te = btrfs_get_extent(t, NULL, cur, end - cur);
		if (IS_ERR(te)) {
			btrfs_free_extent_map(me);
			break;
		}
		next = min3(btrfs_extent_map_end(me), btrfs_extent_map_end(te),
			    end);
		same = me->start <= cur && te->start <= cur &&
		       tc_same_bytes(me, te, cur);
		btrfs_free_extent_map(te);
		btrfs_free_extent_map(me);
		if (next <= cur)
			break;
		if (!same) {
			if (!proven)
				break;
			cur = next;
			continue;
		}
		/* Only pages wholly inside [cur, next). */
		first = round_up(cur, PAGE_SIZE) >> PAGE_SHIFT;
		stop = (next == end ? end : round_down(next, PAGE_SIZE)) >>
		       PAGE_SHIFT;
		if (stop > first) {
			if (proven)
				bitmap_set(proven, first - index, stop - first);
			n += stop - first;
		}
		cur = next;
	}
	return n;
}

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_KUNIT_TEST)
#include "totalcow_btrfs_kunit.c"
#endif
