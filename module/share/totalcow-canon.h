/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The canonical data cache (docs/design/shared-extents.md): per btrfs file
 * system and sharing scope, one hidden page cache indexed by logical (disk)
 * address, holding the bytes of checksummed data
 * extents, read and verified by logical address. Files that refer to the
 * same extent are only users of its pages.
 */
#ifndef TOTALCOW_CANON_H
#define TOTALCOW_CANON_H

#include <linux/fs.h>
#include <linux/sizes.h>
#include <linux/types.h>

struct extent_map;
struct folio;
struct folio_batch;
struct tc_canon_scope;
struct tc_lineage;

/*
 * A canonical key names one page of a scope's canonical pages. A page of
 * a regular extent: its logical address, page aligned. A page of a
 * compressed extent: its index in the scope's second mapping, shifted by
 * PAGE_SHIFT, with TC_CANON_KEY_Z set. Such an index is the extent's
 * logical address (4 KiB aligned) with, in its low 12 bits, the extent's
 * length on disk in 4 KiB units less one (5 bits), its compression (2)
 * and the page's place in the decompressed bytes (5): every page of
 * every compressed extent has its own, and a claim about an extent (its
 * length, its compression) that differs names other pages, never the
 * same ones with other bytes. Adjacent pages of an extent have adjacent
 * keys, as adjacent pages of a regular extent do. Bits 1-5 of such a key
 * (not of the index) hold the extent's decompressed length in pages less
 * one, so that a read can take the whole extent at once.
 */
#define TC_CANON_KEY_Z		1ULL
#define TC_CANON_Z_MAX		SZ_128K		/* BTRFS_MAX_COMPRESSED */
#define TC_CANON_Z_PAGE_BITS	5
#define TC_CANON_Z_TYPE_SHIFT	TC_CANON_Z_PAGE_BITS
#define TC_CANON_Z_LEN_SHIFT	(TC_CANON_Z_TYPE_SHIFT + 2)
/* An index and its key (index << PAGE_SHIFT) stay below 2^63. */
#define TC_CANON_Z_LIMIT	(1ULL << (63 - PAGE_SHIFT))

static inline bool tc_canon_key_compressed(u64 key)
{
	return key & TC_CANON_KEY_Z;
}

/* The page's index in the mapping its key names. */
static inline pgoff_t tc_canon_key_index(u64 key)
{
	return key >> PAGE_SHIFT;
}

/* What a compressed extent's page index says about the extent. */
static inline u64 tc_canon_zindex_bytenr(pgoff_t index)
{
	return (u64)index & ~(u64)(SZ_4K - 1);
}

static inline u32 tc_canon_zindex_len(pgoff_t index)
{
	return (((index >> TC_CANON_Z_LEN_SHIFT) & 31) + 1) * SZ_4K;
}

static inline int tc_canon_zindex_type(pgoff_t index)
{
	return (index >> TC_CANON_Z_TYPE_SHIFT) & 3;
}

/* The index of the extent's first decompressed page. */
static inline pgoff_t tc_canon_zindex_first(pgoff_t index)
{
	return index & ~(pgoff_t)((1 << TC_CANON_Z_PAGE_BITS) - 1);
}

/* How many pages of decompressed bytes the extent of @key has. */
static inline unsigned int tc_canon_key_zpages(u64 key)
{
	return ((key >> 1) & 31) + 1;
}

bool tc_canon_zkey(u64 disk_bytenr, u64 disk_len, int type, u64 ram_bytes,
		   u64 offset, u64 *key);
bool tc_canon_zrange(u64 start, u64 len, pgoff_t *first, pgoff_t *last);

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
void tc_canon_keep_unchanged(struct tc_canon_scope *s, u64 gen,
			     const u64 *keys, const u64 *gens,
			     unsigned long *pages, unsigned long nr);

bool tc_canon_logical(const struct extent_map *em, u64 pos, u64 *logical);
unsigned long tc_canon_prove(struct inode *inode, pgoff_t index,
			     unsigned long nr, u64 *logicals,
			     unsigned long *proven, loff_t *isize,
			     struct tc_canon_scope *s, u64 *gens);
bool tc_canon_zero_from(struct tc_canon_scope *s, u64 logical, size_t from);
unsigned int tc_canon_folios(struct inode *inode, pgoff_t index, pgoff_t last,
			     struct folio_batch *fbatch);
void tc_canon_fleet_read(struct tc_canon_scope *s, void (*fn)(void *arg),
			 void *arg);
void tc_canon_readahead(struct tc_canon_scope *s, u64 logical,
			unsigned long nr, unsigned long *added);
struct address_space *tc_canon_mapping(struct tc_canon_scope *s, u64 key);
bool tc_canon_page_usable(struct folio *folio);
void tc_canon_count(struct tc_canon_scope *s, unsigned long aliased);
void tc_canon_count_mmap(struct tc_canon_scope *s, bool shared);
void tc_canon_count_mmap_unshared(struct tc_canon_scope *s);
u64 tc_canon_scope_id(struct tc_canon_scope *s);
unsigned long tc_canon_cached_keys(struct inode *inode, pgoff_t index,
				   unsigned long nr, u64 *keys);

/* What a scope holds and did, for sysfs. */
struct tc_canon_stats {
	unsigned long pages;
	unsigned long compressed_pages;	/* of them, compressed extents' */
	u64 reads;
	u64 read_failures;
	u64 invalidations;
	u64 aliased;	/* file pages aliased to the scope's pages */
	u64 resolved;	/* aliases resolved to them by reads */
	u64 mmaps_shared;	/* private mappings that map a clone */
	u64 mmaps_private;	/* and those that map their own file */
};

void tc_canon_scope_stats(struct tc_canon_scope *s, struct tc_canon_stats *st);
ssize_t tc_canon_show(char *buf);
void tc_canon_prune_kick(void);

#endif /* TOTALCOW_CANON_H */
