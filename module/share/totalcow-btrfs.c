// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: what it asks btrfs
 * (docs/design/policy.md, "Proof without reading"). Lineage comes from the subvolumes' root items
 * (as BTRFS_IOC_GET_SUBVOL_INFO reports them); identity of a range of two
 * files from their extent maps: the same bytes of the same on-disk extent.
 * Built in, next to btrfs, so it may use btrfs's own headers.
 */

#define pr_fmt(fmt) "totalcow: " fmt

#include <linux/bitmap.h>
#include <linux/pagemap.h>

#include "ctree.h"
#include "fs.h"
#include "accessors.h"
#include "btrfs_inode.h"
#include "disk-io.h"
#include "extent-tree.h"
#include "extent-io-tree.h"
#include "extent_map.h"
#include "ordered-data.h"
#include "super.h"

#include "totalcow-btrfs.h"

/* Is @dir the root directory of a btrfs subvolume? */
bool tc_btrfs_is_subvol_root(struct inode *dir)
{
	return S_ISDIR(dir->i_mode) &&
	       btrfs_ino(BTRFS_I(dir)) == BTRFS_FIRST_FREE_OBJECTID;
}

/**
 * tc_btrfs_hold_readonly - keep a read-only subvolume read-only
 * @dir: the root directory of the subvolume
 *
 * A template must not become writable, nor be deleted, while a group
 * shares its pages. btrfs has the mechanism for a subvolume that must
 * stay read-only while someone reads it: a send in progress, which it
 * counts per subvolume and which makes BTRFS_IOC_SUBVOL_SETFLAGS (`btrfs
 * property set ... ro false`) and subvolume deletion fail with EPERM.
 * The hold is counted the same way, checked under subvol_sem (which both
 * of those take for writing) and the root item lock, as send does.
 *
 * Return: 0, -EINVAL if the subvolume is not read-only, or -EAGAIN if a
 * dedupe into it is running (send refuses then too).
 */
int tc_btrfs_hold_readonly(struct inode *dir)
{
	struct btrfs_root *root = BTRFS_I(dir)->root;
	int err = 0;

	down_read(&root->fs_info->subvol_sem);
	spin_lock(&root->root_item_lock);
	if (!btrfs_root_readonly(root))
		err = -EINVAL;
	else if (root->dedupe_in_progress)
		err = -EAGAIN;
	else
		root->send_in_progress++;
	spin_unlock(&root->root_item_lock);
	up_read(&root->fs_info->subvol_sem);
	if (!err)
		pr_info("subvolume %llu held read-only while a group shares it (btrfs reports attempts to make it writable or delete it as during send)\n",
			btrfs_root_id(root));
	return err;
}

/**
 * tc_btrfs_subvol_writer - a file of a subvolume that is or may be written
 * @dir: the root directory of a read-only subvolume
 *
 * btrfs refuses to open a file of a read-only subvolume for writing, but a
 * descriptor opened before the subvolume was made read-only (or a shared
 * writable mapping it made) keeps writing. Looks for such a file among the
 * subvolume's inodes in memory (a file not in memory has neither a writer
 * nor dirty pages): one open for writing, or with pages dirty or under
 * writeback. The walk holds only RCU (btrfs inodes are freed after a grace
 * period) and yields every XA_CHECK_SCHED inodes, so that a subvolume of
 * millions of cached inodes costs time, not latency.
 *
 * Return: the inode number of the first such file, or 0 if none.
 */
u64 tc_btrfs_subvol_writer(struct inode *dir)
{
	struct btrfs_root *root = BTRFS_I(dir)->root;
	XA_STATE(xas, &root->inodes, 0);
	struct btrfs_inode *bi;
	unsigned int n = 0;
	u64 ino = 0;

	rcu_read_lock();
	xas_for_each(&xas, bi, ULONG_MAX) {
		struct inode *inode;

		if (xas_retry(&xas, bi))
			continue;
		inode = &bi->vfs_inode;
		if (S_ISREG(inode->i_mode) &&
		    (atomic_read(&inode->i_writecount) > 0 ||
		     mapping_tagged(inode->i_mapping, PAGECACHE_TAG_DIRTY) ||
		     mapping_tagged(inode->i_mapping, PAGECACHE_TAG_WRITEBACK))) {
			ino = btrfs_ino(bi);
			break;
		}
		if (++n % XA_CHECK_SCHED)
			continue;
		xas_pause(&xas);
		rcu_read_unlock();
		cond_resched();
		rcu_read_lock();
	}
	rcu_read_unlock();
	return ino;
}

/* Let the subvolume of @dir be made writable or deleted again. */
void tc_btrfs_release_readonly(struct inode *dir)
{
	struct btrfs_root *root = BTRFS_I(dir)->root;

	spin_lock(&root->root_item_lock);
	root->send_in_progress--;
	WARN_ON_ONCE(root->send_in_progress < 0);
	spin_unlock(&root->root_item_lock);
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

/* The id of the subvolume @inode belongs to. */
u64 tc_btrfs_subvol_id(struct inode *inode)
{
	return btrfs_root_id(BTRFS_I(inode)->root);
}

/*
 * The id of the subvolume whose UUID is @uuid, from the UUID tree (which
 * snapshot creation updates in the same transaction). Several subvolumes
 * with one UUID (possible only by a forged send stream) give the first.
 */
static int tc_uuid_subvol(struct btrfs_fs_info *fs_info, const u8 *uuid,
			  u64 *id)
{
	struct btrfs_root *uuid_root = fs_info->uuid_root;
	struct btrfs_path *path;
	struct btrfs_key key;
	__le64 le;
	int ret;

	if (!uuid_root)
		return -ENOENT;
	key.objectid = get_unaligned_le64(uuid);
	key.type = BTRFS_UUID_KEY_SUBVOL;
	key.offset = get_unaligned_le64(uuid + sizeof(u64));
	path = btrfs_alloc_path();
	if (!path)
		return -ENOMEM;
	ret = btrfs_search_slot(NULL, uuid_root, &key, path, 0, 0);
	if (ret > 0)
		ret = -ENOENT;
	if (!ret && btrfs_item_size(path->nodes[0], path->slots[0]) < sizeof(le))
		ret = -ENOENT;
	if (!ret) {
		read_extent_buffer(path->nodes[0], &le,
				   btrfs_item_ptr_offset(path->nodes[0],
							 path->slots[0]),
				   sizeof(le));
		*id = le64_to_cpu(le);
	}
	btrfs_free_path(path);
	return ret;
}

/* The parent UUID of @root into @parent; the reference to @root is dropped. */
static void tc_parent_uuid(struct btrfs_fs_info *fs_info,
			   struct btrfs_root *root, u8 *parent)
{
	down_read(&fs_info->subvol_sem);
	memcpy(parent, root->root_item.parent_uuid, BTRFS_UUID_SIZE);
	up_read(&fs_info->subvol_sem);
	btrfs_put_root(root);
}

/*
 * The subvolume whose UUID is @uuid, referenced, with its id in *@id; or
 * ERR_PTR(-ENOMEM), or another error if there is none (deleted, or on
 * another file system).
 */
static struct btrfs_root *tc_uuid_root(struct btrfs_fs_info *fs_info,
				       const u8 *uuid, u64 *id)
{
	int err = tc_uuid_subvol(fs_info, uuid, id);

	return err ? ERR_PTR(err) : btrfs_get_fs_root(fs_info, *id, true);
}

/**
 * tc_btrfs_lineage - the subvolumes @inode's subvolume was snapshotted from
 * @inode: any inode of the subvolume to look at
 * @l: set to them, nearest first: the UUID of the subvolume it is a
 *	snapshot of, then that one's parent UUID, and so on; and the id of
 *	each of them that still exists
 * @max: how many hops to look, at most TC_LINEAGE_HOPS
 *
 * Follows parent UUIDs, which only snapshot creation sets (a received
 * UUID plays no part): a lookup in the UUID tree and in the subvolume
 * roots per hop, @max hops at most whatever the chain. A chain that
 * leaves the file system's subvolumes (a deleted intermediate, a parent
 * on another file system) ends there: its last parent UUID is kept, with
 * no id. @l->whole says whether the chain ended within @max hops, so that
 * a caller that looks farther knows whether it must walk again. The
 * lookups run before any lock that other readers wait for is taken
 * (totalcow-reader-hold.h).
 *
 * Return: 0 with @l set, or -ENOMEM.
 */
int tc_btrfs_lineage(struct inode *inode, struct tc_lineage *l, int max)
{
	struct btrfs_fs_info *fs_info = inode_to_fs_info(inode);
	struct btrfs_root *root = btrfs_grab_root(BTRFS_I(inode)->root);

	l->n = 0;
	l->ids = 0;
	l->whole = true;
	while (l->n < min(max, TC_LINEAGE_HOPS)) {
		u8 *parent = l->parent[l->n];

		tc_parent_uuid(fs_info, root, parent);
		root = NULL;
		if (btrfs_is_empty_uuid(parent))
			return 0;
		l->n++;
		root = tc_uuid_root(fs_info, parent, &l->id[l->ids]);
		if (IS_ERR(root))
			return PTR_ERR(root) == -ENOMEM ? -ENOMEM : 0;
		l->ids++;
	}
	/* Stopped at @max: whatever is farther was not looked at. */
	l->whole = false;
	btrfs_put_root(root);
	return 0;
}

/* The UUID and received UUID of @tmpl's subvolume, for tc_lineage_hops(). */
void tc_btrfs_subvol_uuids(struct inode *tmpl, u8 *uuid, u8 *received)
{
	struct btrfs_fs_info *fs_info = inode_to_fs_info(tmpl);
	struct btrfs_root *t = BTRFS_I(tmpl)->root;

	down_read(&fs_info->subvol_sem);
	memcpy(uuid, t->root_item.uuid, BTRFS_UUID_SIZE);
	memcpy(received, t->root_item.received_uuid, BTRFS_UUID_SIZE);
	up_read(&fs_info->subvol_sem);
}

/* Does subvolume @id of @sb's file system still exist (not deleted)? */
bool tc_btrfs_subvol_exists(struct super_block *sb, u64 id)
{
	struct btrfs_root *root = btrfs_get_fs_root(btrfs_sb(sb), id, true);

	if (IS_ERR(root))
		return PTR_ERR(root) == -ENOMEM;	/* cannot tell: keep it */
	btrfs_put_root(root);
	return true;
}

/* The path of subvolume @id from the file system's top (kmalloc'd), or NULL. */
char *tc_btrfs_subvol_name(struct super_block *sb, u64 id)
{
	char *name = btrfs_get_subvol_name_from_objectid(btrfs_sb(sb), id);

	return IS_ERR(name) ? NULL : name;
}

/*
 * btrfs_get_extent() of a file that may change (a member), under the
 * range's extent lock, as every btrfs caller holds it: a clone, dedupe or
 * relocation of the range takes that lock before it drops the cached
 * maps, so a map read before the change is never cached after it (a
 * stale cached map would show the file bytes that are no longer its own,
 * and, once their space is handed out again, someone else's). Tried, not
 * waited for: a range being written or cloned proves nothing now.
 */
static struct extent_map *tc_get_extent_locked(struct btrfs_inode *bi, u64 start,
					       u64 len)
{
	struct extent_state *cached = NULL;
	struct extent_map *em;

	if (!btrfs_try_lock_extent(&bi->io_tree, start, start + len - 1, &cached))
		return ERR_PTR(-EAGAIN);
	em = btrfs_get_extent(bi, NULL, start, len);
	btrfs_unlock_extent(&bi->io_tree, start, start + len - 1, &cached);
	return em;
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

		me = tc_get_extent_locked(m, cur, end - cur);
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

/*
 * Binding by extents (docs/design/policy.md): a member file
 * that is a reflink copy of a template file under another name is found
 * from the references of its first data extents. Every number below bounds
 * the work one binding may do, whatever the fleet shares.
 */
#define TC_BIND_EXTENTS	4	/* data extents of the member looked at */
#define TC_BIND_STEPS	8	/* extent maps (holes included) walked */
#define TC_BIND_REFS	64	/* references of one extent read */
#define TC_BIND_TRIES	4	/* template inodes tried for one extent */

/* Template inode numbers to try for one extent, best first. */
struct tc_ref_cands {
	u64 ino[TC_BIND_TRIES];
	unsigned int nr;
};

/*
 * Note the data reference (@root, @ino, @offset) of an extent: a file
 * (@ino of subvolume @root) whose offset @offset is where the extent's
 * first byte would be (btrfs keys a data reference by file offset minus
 * offset into the extent). It is a candidate if that is where the member
 * has it (@want): the same file offsets. A reference of the template's own
 * subvolume (@troot) is the answer; others (the subvolume the template was
 * snapshotted from, other members' copies) name an inode number that the
 * template may have too, as snapshots keep inode numbers, and are kept,
 * without duplicates, while there is room.
 *
 * Return: true if the template's own reference was found: look no further.
 */
static bool tc_ref_note(struct tc_ref_cands *c, u64 root, u64 ino,
			u64 offset, u64 want, u64 troot)
{
	unsigned int i;

	if (offset != want || ino < BTRFS_FIRST_FREE_OBJECTID ||
	    ino > BTRFS_LAST_FREE_OBJECTID)
		return false;
	if (root == troot) {
		c->ino[0] = ino;
		c->nr = 1;
		return true;
	}
	for (i = 0; i < c->nr; i++)
		if (c->ino[i] == ino)
			return false;
	if (c->nr < TC_BIND_TRIES)
		c->ino[c->nr++] = ino;
	return false;
}

/*
 * Candidates from the references of the data extent at @bytenr that holds
 * logical address @logical, as of the last transaction commit: the commit
 * root is searched without tree locks, under commit_root_sem taken shared,
 * as btrfs's own backref walks do without a transaction. At most
 * TC_BIND_REFS references are read; references by parent leaf (shared data
 * references) name no inode and are skipped. An extent not committed yet
 * (new data) has no item there: no candidate, for the price of one search.
 */
static int tc_extent_candidates(struct btrfs_fs_info *fs_info, u64 bytenr,
				u64 logical, u64 want, u64 troot,
				struct tc_ref_cands *c)
{
	struct btrfs_root *extent_root = btrfs_extent_root(fs_info, bytenr);
	struct btrfs_extent_data_ref *dref;
	struct btrfs_extent_item *ei;
	struct extent_buffer *leaf;
	struct btrfs_path *path;
	unsigned long ptr, end;
	unsigned int seen = 0;
	struct btrfs_key key;
	int ret, slot, type;

	if (!extent_root)
		return -ENOENT;
	path = btrfs_alloc_path();
	if (!path)
		return -ENOMEM;
	path->search_commit_root = 1;
	path->skip_locking = 1;
	key.objectid = bytenr;
	key.type = BTRFS_EXTENT_ITEM_KEY;
	key.offset = 0;
	down_read(&fs_info->commit_root_sem);
	ret = btrfs_search_slot(NULL, extent_root, &key, path, 0, 0);
	if (ret < 0)
		goto out;
	if (path->slots[0] >= btrfs_header_nritems(path->nodes[0])) {
		ret = btrfs_next_leaf(extent_root, path);
		if (ret)
			goto out;
	}
	leaf = path->nodes[0];
	slot = path->slots[0];
	btrfs_item_key_to_cpu(leaf, &key, slot);
	ret = 0;
	if (key.objectid != bytenr || key.type != BTRFS_EXTENT_ITEM_KEY ||
	    logical < bytenr || logical - bytenr >= key.offset)
		goto out;
	ei = btrfs_item_ptr(leaf, slot, struct btrfs_extent_item);
	if (!(btrfs_extent_flags(leaf, ei) & BTRFS_EXTENT_FLAG_DATA))
		goto out;
	/* Inline references follow the item (no tree block info for data). */
	ptr = (unsigned long)(ei + 1);
	end = (unsigned long)ei + btrfs_item_size(leaf, slot);
	while (ptr < end && seen++ < TC_BIND_REFS) {
		struct btrfs_extent_inline_ref *iref = (void *)ptr;

		type = btrfs_extent_inline_ref_type(leaf, iref);
		if (!btrfs_extent_inline_ref_size(type))
			goto out;	/* not ours to judge: no candidate */
		if (type == BTRFS_EXTENT_DATA_REF_KEY) {
			dref = (struct btrfs_extent_data_ref *)&iref->offset;
			if (tc_ref_note(c, btrfs_extent_data_ref_root(leaf, dref),
					btrfs_extent_data_ref_objectid(leaf, dref),
					btrfs_extent_data_ref_offset(leaf, dref),
					want, troot))
				goto out;
		}
		ptr += btrfs_extent_inline_ref_size(type);
	}
	/* Then keyed references: (bytenr, EXTENT_DATA_REF / SHARED_DATA_REF). */
	while (seen++ < TC_BIND_REFS) {
		ret = btrfs_next_item(extent_root, path);
		if (ret) {
			ret = min(ret, 0);
			break;
		}
		leaf = path->nodes[0];
		slot = path->slots[0];
		btrfs_item_key_to_cpu(leaf, &key, slot);
		if (key.objectid != bytenr || key.type > BTRFS_SHARED_DATA_REF_KEY)
			break;
		if (key.type != BTRFS_EXTENT_DATA_REF_KEY)
			continue;
		dref = btrfs_item_ptr(leaf, slot, struct btrfs_extent_data_ref);
		if (tc_ref_note(c, btrfs_extent_data_ref_root(leaf, dref),
				btrfs_extent_data_ref_objectid(leaf, dref),
				btrfs_extent_data_ref_offset(leaf, dref), want,
				troot))
			break;
	}
out:
	up_read(&fs_info->commit_root_sem);
	btrfs_free_path(path);
	return ret < 0 ? ret : 0;
}

/* Does @t put the byte at @em->start where @em (a member's map) does? */
static bool tc_same_at(struct btrfs_inode *t, const struct extent_map *em)
{
	struct extent_map *te;
	bool same;

	te = btrfs_get_extent(t, NULL, em->start, em->len);
	if (IS_ERR(te))
		return false;
	same = te->start <= em->start && em->start < btrfs_extent_map_end(te) &&
	       tc_same_bytes(em, te, em->start);
	btrfs_free_extent_map(te);
	return same;
}

/* The regular file @ino of @troot, if it has @em's first byte as @em has. */
static struct inode *tc_try_template(struct inode *member,
				     struct btrfs_root *troot, u64 ino,
				     const struct extent_map *em)
{
	struct inode *t = btrfs_iget(ino, troot);

	if (IS_ERR(t))
		return t;
	if (t != member && t->i_sb == member->i_sb && S_ISREG(t->i_mode) &&
	    t->i_nlink && tc_same_at(BTRFS_I(t), em))
		return t;
	iput(t);
	return ERR_PTR(-ENOENT);
}

/**
 * tc_btrfs_extent_template - the template file a member file's extents are
 * @member: a regular file of a member subvolume
 * @tdir: the root directory of the template subvolume
 * @prefer: the template file at @member's path, or NULL
 *
 * Looks at @member's first data extents (at most TC_BIND_EXTENTS, holes,
 * preallocated ranges and new, unshared extents skipped; an inline extent
 * ends the search) for a regular file of the template's subvolume that
 * maps the extent's byte at the same file offset to the same byte on disk:
 * @prefer if it does (no search), else one that the extent's references
 * name (tc_extent_candidates()). The answer is a hint: every page is still
 * proven from both files' extents or compared before it is shared.
 *
 * Return: a reference to the template inode found, or ERR_PTR(-ENOENT) if
 * there is none, ERR_PTR(-EAGAIN) if @member's extents are being changed,
 * or ERR_PTR(-ENOMEM).
 */
struct inode *tc_btrfs_extent_template(struct inode *member,
				       struct inode *tdir,
				       struct inode *prefer)
{
	struct btrfs_root *troot = BTRFS_I(tdir)->root;
	struct btrfs_fs_info *fs_info = troot->fs_info;
	struct inode *found = ERR_PTR(-ENOENT);
	u64 size = i_size_read(member), pos = 0;
	unsigned int extents = 0, steps = 0;

	if (member->i_sb != tdir->i_sb || !S_ISREG(member->i_mode) ||
	    BTRFS_I(member)->root == troot)
		return found;
	while (pos < size && extents < TC_BIND_EXTENTS &&
	       steps++ < TC_BIND_STEPS) {
		struct tc_ref_cands c = { };
		struct extent_map *em;
		unsigned int i;
		u64 next;
		int err;

		/* Being written or cloned (-EAGAIN): asked again later. */
		em = tc_get_extent_locked(BTRFS_I(member), pos, size - pos);
		if (IS_ERR(em))
			return ERR_CAST(em);
		next = btrfs_extent_map_end(em);
		if (em->disk_bytenr == EXTENT_MAP_INLINE || next <= pos) {
			btrfs_free_extent_map(em);
			break;
		}
		if (em->disk_bytenr >= EXTENT_MAP_LAST_BYTE ||
		    (em->flags & EXTENT_FLAG_PREALLOC)) {
			btrfs_free_extent_map(em);
			pos = next;
			continue;
		}
		extents++;
		if (prefer && tc_same_at(BTRFS_I(prefer), em)) {
			btrfs_free_extent_map(em);
			ihold(prefer);
			return prefer;
		}
		err = tc_extent_candidates(fs_info, em->disk_bytenr,
					   extent_map_is_compressed(em) ?
					   em->disk_bytenr :
					   btrfs_extent_map_block_start(em),
					   em->start - em->offset,
					   btrfs_root_id(troot), &c);
		for (i = 0; !err && i < c.nr && IS_ERR(found); i++)
			found = tc_try_template(member, troot, c.ino[i], em);
		btrfs_free_extent_map(em);
		if (err == -ENOMEM)
			return ERR_PTR(err);
		if (!IS_ERR(found) || PTR_ERR(found) == -ENOMEM)
			return found;
		found = ERR_PTR(-ENOENT);
		pos = next;
	}
	return found;
}

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_BTRFS_KUNIT_TEST)
#include "totalcow_btrfs_kunit.c"
#endif
