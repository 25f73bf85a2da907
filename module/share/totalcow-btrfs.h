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
#include <linux/types.h>

bool tc_btrfs_is_subvol_root(struct inode *dir);
int tc_btrfs_hold_readonly(struct inode *dir);
void tc_btrfs_release_readonly(struct inode *dir);
u64 tc_btrfs_subvol_writer(struct inode *dir);
int tc_btrfs_check_lineage(struct inode *member, struct inode *tmpl);
u64 tc_btrfs_subvol_id(struct inode *inode);
int tc_btrfs_lineage_hops(struct inode *inode, struct inode *tmpl, int max_hops);
int tc_btrfs_ancestors(struct inode *inode, u64 *ids, int max);
bool tc_btrfs_subvol_exists(struct super_block *sb, u64 id);
char *tc_btrfs_subvol_name(struct super_block *sb, u64 id);
unsigned long tc_btrfs_same_extents(struct inode *member, struct inode *tmpl,
				    pgoff_t index, unsigned long nr,
				    unsigned long *proven);
struct inode *tc_btrfs_extent_template(struct inode *member,
				       struct inode *tdir,
				       struct inode *prefer);

#endif /* TOTALCOW_BTRFS_H */
