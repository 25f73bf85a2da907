/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The canonical data cache's state: a file system's cache and its scopes,
 * shared by totalcow-canon.c (scopes, regular extents, invalidation) and
 * totalcow-canon-compressed.c (compressed extents' reads).
 */
#ifndef TOTALCOW_CANON_INTERNAL_H
#define TOTALCOW_CANON_INTERNAL_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/pagemap.h>
#include <linux/xarray.h>

#include "../dm/totalcow-cgroup.h"
#include "totalcow-canon.h"

struct btrfs_bio;
struct btrfs_fs_info;

/* The cache of one file system: fs_info->canon. */
#define TC_CANON_REGION_SHIFT	20
#define TC_CANON_REGIONS	1024

struct tc_canon_fs {
	struct list_head node;		/* in tc_canon_filesystems */
	/* Once unpublished: in tc_canon_dead_filesystems until freed. */
	struct list_head dead;
	struct hlist_node burial;	/* in its unpublisher's burial */
	/* Its scopes unpublished and not yet freed: it outlives them. */
	atomic_t dead_scopes;
	struct btrfs_fs_info *fs_info;
	/* Bumped whenever a data range is handed out again. */
	atomic64_t gen;
	/*
	 * Bumped whenever a data range of the region is handed out again:
	 * a region is 1 MiB of logical addresses, and the regions TC_CANON_
	 * REGIONS apart share a counter (tc_canon_region()).
	 */
	atomic64_t region_gen[TC_CANON_REGIONS];
	/* Scopes; changed under tc_canon_mutex, walked under tc_canon_srcu. */
	struct list_head scopes;
	/*
	 * Subvolume id -> its scope, marked TC_CANON_FOLLOWED if it joined by
	 * following its source (tc_canon_follow()); or a value: TC_CANON_OUT
	 * if an admin took it out, else the follow_gen at which it was last
	 * found to descend from no scope. Loaded under RCU or tc_canon_srcu.
	 */
	struct xarray subvols;
	/* Bumped by every enable and disable, under tc_canon_mutex. */
	unsigned long follow_gen;
};

#define TC_CANON_FOLLOWED	XA_MARK_1
#define TC_CANON_OUT		xa_mk_value(0)
/* A subvolume found to descend from no scope at @gen (never TC_CANON_OUT). */
#define tc_canon_none_at(gen)	xa_mk_value(((gen) << 1) | 1)

struct tc_canon_scope {
	struct list_head node;
	struct hlist_node burial;	/* once unpublished, in its unpublisher's */
	/* tc_canon_hold()s not yet released: its burial waits for them. */
	atomic_t holders;
	struct tc_canon_fs *cfs;
	/* An anonymous inode whose page cache is the canonical mapping. */
	struct inode *inode;
	/* Another: the pages of compressed extents (tc_canon_zkey()). */
	struct inode *zinode;
	unsigned long nr_subvols;	/* under tc_canon_mutex */
	atomic64_t reads;
	atomic64_t read_failures;
	atomic64_t invalidations;
	atomic64_t aliased;
	atomic64_t resolved;
	/* Private mappings of its files: mapping a clone, or their own. */
	atomic64_t mmaps_shared;
	atomic64_t mmaps_private;
	u64 id;				/* never reused (clones name it) */
	/* The I/O cgroup its misses' reads are charged to (totalcow-fleet.c). */
	struct tc_fleet fleet;
	char name[TC_CANON_SCOPE_NAME_MAX + 1];
};

/*
 * A page whose bytes may be gone: its read ends not uptodate, and an
 * uptodate one is never handed out (tc_canon_usable()); the next read of
 * the address reads it again. PG_checked is the owner's flag, and the
 * canonical mappings are ours.
 */
#define tc_canon_folio_stale	folio_test_checked
#define tc_canon_folio_set_stale folio_set_checked

/* May @folio be handed out as its address's bytes? */
static inline bool tc_canon_usable(struct folio *folio)
{
	return folio_test_uptodate(folio) && !folio_test_large(folio) &&
	       !tc_canon_folio_stale(folio);
}

/*
 * A read of the bytes at [@logical, @logical + @len) by logical address,
 * as scrub reads them, into @nr folios: every sector is checked against
 * the checksum tree, and a read that fails or does not match is read
 * again from the next mirror, until none is left. A page's read
 * (totalcow-canon.c) and a compressed extent's (totalcow-canon-
 * compressed.c) embed one. The caller sets @fs_info to @end_io, then
 * calls tc_canon_lread_prepare() and tc_canon_lread_submit(); @end_io
 * gets the struct as its bbio's private and calls tc_canon_lread_end().
 */
#define TC_CANON_LREAD_MAX	TC_CANON_Z_MAX
static_assert(PAGE_SIZE <= TC_CANON_LREAD_MAX);

struct tc_canon_lread {
	struct btrfs_fs_info *fs_info;
	u64 logical;
	u32 len;		/* sector aligned, at most TC_CANON_LREAD_MAX */
	unsigned int nr;
	struct folio **folios;	/* @len's bytes, a page each, in order */
	u8 *csums;		/* room for a checksum per sector of @len */
	void (*end_io)(struct btrfs_bio *bbio);
	int mirror;
	int num_copies;
};

int tc_canon_lread_prepare(struct tc_canon_lread *r);
void tc_canon_lread_submit(struct tc_canon_lread *r);
int tc_canon_lread_end(struct tc_canon_lread *r, struct btrfs_bio *bbio);

/* The compressed extents' mapping's (totalcow-canon-compressed.c). */
extern const struct address_space_operations tc_canon_zaops;

#endif /* TOTALCOW_CANON_INTERNAL_H */
