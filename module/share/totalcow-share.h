/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The page-alias policy (totalcow-share.c): what its two halves, group
 * members (totalcow-bind.c) and shared extents (totalcow-extent-share.c),
 * and their sysfs files have in common.
 */
#ifndef TOTALCOW_SHARE_H
#define TOTALCOW_SHARE_H

#include <linux/types.h>

struct address_space;
struct super_block;

void tc_empty_slots(struct address_space *mapping, pgoff_t index,
		    unsigned long nr, unsigned long *empty,
		    unsigned long *canon);
unsigned long tc_classify_begin(void);
void tc_classify_none(struct address_space *mapping, unsigned long gen);
void tc_reclassify(struct super_block *sb);

#endif /* TOTALCOW_SHARE_H */
