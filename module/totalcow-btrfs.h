/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What TotalCOW page-cache sharing asks btrfs: whether a subvolume is a
 * snapshot of another. The only file that looks into btrfs's internals.
 */
#ifndef TOTALCOW_BTRFS_H
#define TOTALCOW_BTRFS_H

#include <linux/fs.h>
#include <linux/types.h>

bool tc_btrfs_is_subvol_root(struct inode *dir);
int tc_btrfs_check_lineage(struct inode *member, struct inode *tmpl);

#endif /* TOTALCOW_BTRFS_H */
