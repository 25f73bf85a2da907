/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The canonical data cache (docs/design.md, "Shared extents, declared or
 * not"): per btrfs file system and sharing scope, one hidden page cache
 * indexed by logical (disk) address, holding the bytes of checksummed data
 * extents, read and verified by logical address. Files that refer to the
 * same extent are only users of its pages.
 */
#ifndef TOTALCOW_CANON_H
#define TOTALCOW_CANON_H

#include <linux/fs.h>
#include <linux/types.h>

struct extent_map;
struct folio;
struct folio_batch;
struct tc_canon_scope;
struct tc_lineage;

/* Scopes: a name of at most this many bytes ([a-zA-Z0-9_.-]). */
#define TC_CANON_SCOPE_NAME_MAX	32

int tc_canon_fs_eligible(struct super_block *sb);
bool tc_canon_scope_name_valid(const char *name);
int tc_canon_enable(struct inode *inode, const char *scope);
int tc_canon_disable(struct inode *inode, const char *scope);

bool tc_canon_in_scope(struct inode *inode);
int tc_canon_follow(struct inode *inode, const struct tc_lineage *l);
struct tc_canon_scope *tc_canon_hold(struct inode *inode);
void tc_canon_release(struct tc_canon_scope *s);

u64 tc_canon_gen(struct tc_canon_scope *s);
bool tc_canon_unchanged(struct tc_canon_scope *s, u64 gen);

bool tc_canon_logical(const struct extent_map *em, u64 pos, u64 *logical);
unsigned long tc_canon_prove(struct inode *inode, pgoff_t index,
			     unsigned long nr, u64 *logicals,
			     unsigned long *proven, loff_t *isize);
bool tc_canon_zero_from(struct tc_canon_scope *s, u64 logical, size_t from);
unsigned int tc_canon_folios(struct inode *inode, pgoff_t index, pgoff_t last,
			     struct folio_batch *fbatch);
void tc_canon_readahead(struct tc_canon_scope *s, u64 logical,
			unsigned long nr, unsigned long *added);
struct address_space *tc_canon_mapping(struct tc_canon_scope *s);
bool tc_canon_page_usable(struct folio *folio);
void tc_canon_count(struct tc_canon_scope *s, unsigned long aliased);

/* What a scope holds and did, for sysfs. */
struct tc_canon_stats {
	unsigned long pages;
	u64 reads;
	u64 read_failures;
	u64 invalidations;
	u64 aliased;	/* file pages aliased to the scope's pages */
	u64 resolved;	/* aliases resolved to them by reads */
};

void tc_canon_scope_stats(struct tc_canon_scope *s, struct tc_canon_stats *st);
ssize_t tc_canon_show(char *buf);

#endif /* TOTALCOW_CANON_H */
