/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Private mappings of files in sharing scopes, which map a clone shared
 * by every mapping of the same extents (totalcow-extent-mmap.c).
 */
#ifndef TOTALCOW_EXTENT_MMAP_H
#define TOTALCOW_EXTENT_MMAP_H

#include <linux/types.h>

struct file;
struct inode;
struct super_block;
struct tc_clone;

struct file *tc_extent_mmap_file(struct file *file);
void tc_extent_clone_put(struct tc_clone *c);
bool tc_extent_clone_inode(struct inode *inode);
void tc_extent_clone_close(struct super_block *sb);

#endif /* TOTALCOW_EXTENT_MMAP_H */
