/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared extents, the page-alias policy's half (totalcow-extent-share.c):
 * what totalcow-share.c's hooks hand over for files that are not group
 * members.
 */
#ifndef TOTALCOW_EXTENT_SHARE_H
#define TOTALCOW_EXTENT_SHARE_H

#include <linux/fs.h>
#include <linux/page_alias.h>

struct folio_batch;

/*
 * The data of an alias to a canonical page: the top bit of an alias's
 * data, above every group binding's (totalcow-bind.h: id << 8 | sig).
 */
#define TC_EXTENT_ALIAS_DATA	BIT(BITS_PER_XA_VALUE - PAGE_ALIAS_SHIFT - 1)

static inline bool tc_extent_alias(const void *entry)
{
	return xa_page_alias_data(entry) == TC_EXTENT_ALIAS_DATA;
}

bool tc_extent_read_miss(struct file *file, struct address_space *mapping,
			 pgoff_t index, pgoff_t end);
unsigned int tc_extent_resolve(struct address_space *mapping, pgoff_t index,
			       pgoff_t last, struct folio_batch *fbatch);
void tc_extent_broken(struct address_space *mapping, struct folio *folio,
		      bool overwrite);

#endif /* TOTALCOW_EXTENT_SHARE_H */
