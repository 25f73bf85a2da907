/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Groups of a template subvolume and its member snapshots
 * (totalcow-group.c): what the binding (totalcow-bind.c) and the policy
 * (totalcow-share.c, totalcow-mmap.c) read of them and count in them.
 */
#ifndef TOTALCOW_GROUP_H
#define TOTALCOW_GROUP_H

#include <linux/atomic.h>
#include <linux/build_bug.h>
#include <linux/cred.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/path.h>
#include <linux/spinlock.h>

#include "../dm/totalcow-whitelist.h"
#include "totalcow-btrfs.h"
#include "totalcow-fleet.h"

struct file;

/* How many snapshots deep an automatic member may descend from the template. */
#define TC_AUTO_HOPS 4
static_assert(TC_AUTO_HOPS <= TC_LINEAGE_HOPS);

enum tc_stat {
	TC_FILES_BOUND,
	TC_FILES_REFUSED,
	TC_ALIASES_INSTALLED,
	TC_ALIASES_PROVEN,
	TC_ALIASES_RESOLVED,
	TC_ALIASES_LOST,
	TC_PRIVATE_SKIPS,
	TC_HASH_REJECTS,
	TC_MEMCMP_MISMATCHES,
	TC_COMPARES,
	TC_COW_BREAKS,
	TC_SHARE_NS,
	TC_MMAPS_SHARED,
	TC_MMAPS_PRIVATE,
	TC_FILES_BOUND_BY_EXTENTS,
	TC_SHARE_WAIT_NS,
	TC_MEMBERS_JOINED,
	TC_COW_COPIES,
	TC_PROOFS_STALE,
	TC_NR_STATS
};

/*
 * A member subvolume: added by an admin (groups/add), with its root's path
 * held; or joined by itself (automatic, the group's "auto" file), known by
 * its subvolume id only, so that it holds no mount busy and no subvolume
 * from being deleted.
 */
struct tc_member {
	struct list_head list;
	struct list_head files;	/* its bound tc_files, under tc_files_lock */
	struct path root;	/* groups/add; unset when automatic */
	u32 dev;		/* st_dev of the subvolume */
	bool automatic;
	struct super_block *sb;	/* automatic: the template's */
	u64 subvol;		/* automatic: its subvolume id */
	/* Not automatic: readers binding with its root held (tc_file_bind()). */
	atomic_t binders;
};

struct tc_group {
	struct kobject kobj;
	struct list_head list;
	char name[TC_TAG_MAX + 1];
	struct path template;
	u32 tdev;			/* st_dev of the template subvolume */
	const struct cred *cred;	/* its creator's: bindings look up with it */
	bool ro_held;			/* tc_btrfs_hold_readonly() on the template */
	/* The template subvolume's UUIDs (it is read-only: they stay). */
	u8 tuuid[BTRFS_UUID_SIZE];
	u8 treceived[BTRFS_UUID_SIZE];
	bool auto_join;			/* descendants join at their first read */
	/*
	 * tc_member: changed under tc_groups_lock and @members_lock, walked
	 * under either. The shows take @members_lock alone: a write holds
	 * tc_groups_lock across work that grows with the group (unbinding
	 * every file of a member, lineage lookups), and a monitoring read
	 * must not wait for it.
	 */
	struct list_head members;
	spinlock_t members_lock;	/* @members, for the shows */
	struct list_head files;		/* tc_file, under tc_files_lock */
	atomic_long_t stats[TC_NR_STATS];
	atomic_long_t policy_bytes;	/* of its files' signature chunks */
	/* Readers binding a file of it outside tc_groups_lock (tc_file_bind()). */
	atomic_t binders;
	/* Its misses' template reads in flight, charged to its fleet. */
	struct tc_fleet_reads reads;
};

/* Groups, their members, and the groups/ files. */
extern struct mutex tc_groups_lock;

static inline void tc_count(struct tc_group *g, enum tc_stat s, long n)
{
	atomic_long_add(n, &g->stats[s]);
}

u32 tc_path_dev(const struct path *path);
struct tc_member *tc_find_member(const struct path *path, struct tc_group **gp);
void tc_binders_get(struct tc_group *g, struct tc_member *m);
void tc_binders_put(struct tc_group *g, struct tc_member *m);
bool tc_auto_possible(struct inode *inode);
struct tc_member *tc_auto_join(struct file *file, const struct tc_lineage *l,
			       struct tc_member **spare, struct tc_group **gp);
bool tc_in_template_subvol(struct inode *inode);
unsigned long tc_prune_delay(void);
int tc_groups_init(void);

#endif /* TOTALCOW_GROUP_H */
