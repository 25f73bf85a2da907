/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Private mappings of member files that map the template file
 * (totalcow-mmap.c): the page-alias hooks totalcow-share.c registers.
 */
#ifndef TOTALCOW_MMAP_H
#define TOTALCOW_MMAP_H

#include <linux/types.h>

struct file;
struct inode;
struct tc_clone;

struct file *tc_mmap_file(struct file *file, unsigned long prot);
void tc_mmap_done(struct file *file, struct file *alias, bool mapped);
void tc_backing_release(struct file *file);
void tc_size_changed(struct inode *inode);
int tc_mmap_track(struct file *alias, struct file *user, u64 version,
		  struct tc_clone *clone);

#endif /* TOTALCOW_MMAP_H */
