/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What TotalCOW page-cache sharing asks btrfs: whether a subvolume is a
 * snapshot of another, to keep a template read-only, and which pages of two files the file system
 * records as the same bytes on disk. The only file that looks into
 * btrfs's internals.
 */
#ifndef TOTALCOW_BTRFS_H
#define TOTALCOW_BTRFS_H

#include <linux/fs.h>
#include <linux/minmax.h>
#include <linux/string.h>
#include <linux/types.h>
#include <uapi/linux/btrfs.h>

/*
 * How many snapshots back tc_btrfs_lineage() may look: as far as a
 * snapshot follows its source into a sharing scope (tc_canon_follow());
 * automatic group membership looks fewer (TC_AUTO_HOPS).
 */
#define TC_LINEAGE_HOPS 8

/*
 * A subvolume's sources, nearest first (tc_btrfs_lineage()): the parent
 * UUID of each hop, and the id of each subvolume a parent UUID still
 * names on the same file system (all but the last, if the chain ends at
 * one that names none).
 */
struct tc_lineage {
	int n;		/* parent UUIDs in @parent */
	int ids;	/* of them, the first @ids have their id in @id */
	bool whole;	/* the chain ended within the hops the walk looked */
	u8 parent[TC_LINEAGE_HOPS][BTRFS_UUID_SIZE];
	u64 id[TC_LINEAGE_HOPS];
};

/*
 * How far back the subvolume of lineage @l descends from the subvolume
 * with @uuid and @received (tc_btrfs_subvol_uuids()): 1 if it is a
 * snapshot of it (or of the subvolume it was received from), 2 if a
 * snapshot of such a snapshot, and so on; -EXDEV if not within @max hops
 * of @l. No lookup, no lock: for use under the locks readers share.
 */
static inline int tc_lineage_hops(const struct tc_lineage *l, const u8 *uuid,
				  const u8 *received, int max)
{
	bool by_received = memchr_inv(received, 0, BTRFS_UUID_SIZE);
	int i;

	for (i = 0; i < min(l->n, max); i++) {
		if (!memcmp(l->parent[i], uuid, BTRFS_UUID_SIZE) ||
		    (by_received &&
		     !memcmp(l->parent[i], received, BTRFS_UUID_SIZE)))
			return i + 1;
	}
	return -EXDEV;
}

bool tc_btrfs_is_subvol_root(struct inode *dir);
int tc_btrfs_hold_readonly(struct inode *dir);
void tc_btrfs_release_readonly(struct inode *dir);
u64 tc_btrfs_subvol_writer(struct inode *dir);
int tc_btrfs_check_lineage(struct inode *member, struct inode *tmpl);
u64 tc_btrfs_subvol_id(struct inode *inode);
int tc_btrfs_lineage(struct inode *inode, struct tc_lineage *l, int max);
void tc_btrfs_subvol_uuids(struct inode *tmpl, u8 *uuid, u8 *received);
bool tc_btrfs_subvol_exists(struct super_block *sb, u64 id);
char *tc_btrfs_subvol_name(struct super_block *sb, u64 id);
unsigned long tc_btrfs_same_extents(struct inode *member, struct inode *tmpl,
				    pgoff_t index, unsigned long nr,
				    unsigned long *proven);
struct inode *tc_btrfs_extent_template(struct inode *member,
				       struct inode *tdir,
				       struct inode *prefer);

#endif /* TOTALCOW_BTRFS_H */
