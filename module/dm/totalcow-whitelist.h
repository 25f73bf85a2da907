/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow whitelist: the disk ranges (sectors relative to the target)
 * whose blocks may be cached, tagged by the template they belong to.
 */
#ifndef TOTALCOW_WHITELIST_H
#define TOTALCOW_WHITELIST_H

#include <linux/bits.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#define TC_TAG_MAX 64
#define TC_WL_MAX_RANGES BIT(24)

/* A half-open range of sectors: [start, end). */
struct tc_range {
	sector_t start;
	sector_t end;
};

/*
 * An immutable, sorted set of disjoint, non-adjacent ranges, published
 * with RCU. Lookups are binary searches: O(log n).
 */
struct tc_wl_view {
	struct rcu_head rcu;
	unsigned int nr;
	sector_t sectors;
	struct tc_range r[];
};

/* The ranges one template registered, normalised like a view. */
struct tc_wl_tag {
	struct list_head list;
	unsigned int nr;
	sector_t sectors;
	struct tc_range *r;
	char name[TC_TAG_MAX + 1];
};

/*
 * @all covers every registered range: writes check it, so that they drop
 * cached blocks. @active is what reads may cache. They differ only while a
 * whitelist_add waits for the writes that started before the new ranges
 * were visible in @all (see dm-totalcow-target.c).
 */
struct tc_whitelist {
	struct mutex lock;		/* serialises updates */
	/*
	 * The tags and their ranges change under @lock and this; tc_wl_get()
	 * reads them under this alone, never for long: an add holds @lock
	 * while it waits for the device's writes in flight, which a write
	 * stuck below the device can make last, and a read of a template's
	 * sysfs files must not wait for that.
	 */
	spinlock_t tags_lock;
	struct list_head tags;
	unsigned int nr_tags;
	struct tc_wl_view __rcu *all;
	struct tc_wl_view __rcu *active;
};

/* Pure helpers on range arrays (no locking; KUnit-tested). */
unsigned int tc_ranges_normalize(struct tc_range *r, unsigned int n);
unsigned int tc_ranges_union(const struct tc_range *a, unsigned int na,
			     const struct tc_range *b, unsigned int nb,
			     struct tc_range *out);
unsigned int tc_ranges_subtract(const struct tc_range *a, unsigned int na,
				const struct tc_range *b, unsigned int nb,
				struct tc_range *out);
bool tc_ranges_contain(const struct tc_range *a, unsigned int na,
		       const struct tc_range *b, unsigned int nb);

bool tc_view_lookup(const struct tc_wl_view *v, sector_t s, sector_t *next);
bool tc_view_overlaps(const struct tc_wl_view *v, sector_t s, sector_t e);

bool tc_tag_name_valid(const char *name);

void tc_wl_init(struct tc_whitelist *wl);
void tc_wl_destroy(struct tc_whitelist *wl);

/* What an add replaced, until it is committed or taken back. */
struct tc_wl_undo {
	struct tc_wl_tag *tag;
	bool new_tag;
	struct tc_range *r;		/* the tag's ranges before */
	unsigned int nr;
	sector_t sectors;
	struct tc_wl_view *all;		/* @all before (it was @active) */
};

/* Updates: the caller holds wl->lock. */
int tc_wl_add_locked(struct tc_whitelist *wl, const char *tag,
		     struct tc_range *r, unsigned int n, struct tc_wl_undo *undo);
void tc_wl_add_commit_locked(struct tc_whitelist *wl, struct tc_wl_undo *undo);
void tc_wl_add_abort_locked(struct tc_whitelist *wl, struct tc_wl_undo *undo);
void tc_wl_activate_locked(struct tc_whitelist *wl);
int tc_wl_del_locked(struct tc_whitelist *wl, const char *tag,
		     struct tc_range *r, unsigned int n,
		     struct tc_wl_view **removed);
struct tc_wl_view *tc_wl_clear_locked(struct tc_whitelist *wl);
/* Reads: without @lock (takes @tags_lock). */
int tc_wl_get(struct tc_whitelist *wl, const char *tag, unsigned int first,
	      unsigned int max, struct tc_range *out, unsigned int *nr,
	      sector_t *sectors);

#endif /* TOTALCOW_WHITELIST_H */
