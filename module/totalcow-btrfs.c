// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: what it asks btrfs (docs/design.md).
 * Lineage comes from the subvolumes' root items (as
 * BTRFS_IOC_GET_SUBVOL_INFO reports them). Built in, next to btrfs, so it
 * may use btrfs's own headers.
 */

#include "ctree.h"
#include "fs.h"
#include "btrfs_inode.h"

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
