/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TotalCOW page-cache sharing: the I/O cgroup that reads of shared pages
 * are charged to, and which readers may wait for them (totalcow-fleet.c).
 */
#ifndef TOTALCOW_FLEET_H
#define TOTALCOW_FLEET_H

#include <linux/list.h>
#include <linux/lockdep_types.h>
#include <linux/pagemap.h>
#include <linux/spinlock.h>

#include "../dm/totalcow-cgroup.h"

/* Reads of one group's template pages in flight, charged to its fleet. */
struct tc_fleet_reads {
	struct tc_fleet fleet;
	spinlock_t lock;		/* @list, @nr */
	struct list_head list;		/* tc_fleet_read */
	unsigned int nr;		/* at most TC_FLEET_READS_MAX */
};

/* The most reads in flight a group records: the walk under its lock. */
#define TC_FLEET_READS_MAX 32

/*
 * One miss's read of [@index, @index + @nr) of @mapping, on its stack from
 * tc_fleet_read_start() to tc_fleet_read_end(): bit i of @added is set
 * (atomically, as the read runs) once the read added the folio at
 * @index + i, before that folio's read starts.
 */
struct tc_fleet_read {
	struct list_head node;
	struct address_space *mapping;
	pgoff_t index;
	unsigned long nr;
	unsigned long *added;
	struct cgroup_subsys_state *css;	/* charged to, referenced */
	bool listed;
};

void tc_fleet_reads_init(struct tc_fleet_reads *fr);
void tc_fleet_reads_destroy(struct tc_fleet_reads *fr);
/* What a fleet's shared reads are of: each kind has a worker queue. */
enum tc_fleet_kind {
	TC_FLEET_TEMPLATE,		/* a group's template pages */
	TC_FLEET_CANON,			/* a scope's canonical pages */
	TC_FLEET_KINDS
};

struct cgroup_subsys_state *__tc_fleet_run(struct tc_fleet *fl,
					   enum tc_fleet_kind kind,
					   void (*fn)(void *arg), void *arg,
					   struct lock_class_key *key);
/* __tc_fleet_run() with a lockdep class of the caller's own. */
#define tc_fleet_run(fl, kind, fn, arg)					\
	({								\
		static struct lock_class_key __key;			\
									\
		__tc_fleet_run(fl, kind, fn, arg, &__key);		\
	})
void tc_fleet_read_start(struct tc_fleet_reads *fr, struct tc_fleet_read *r,
			 struct readahead_control *ractl, unsigned long nr,
			 unsigned long *added);
void tc_fleet_read_end(struct tc_fleet_reads *fr, struct tc_fleet_read *r);
bool tc_fleet_may_wait(struct tc_fleet_reads *fr, struct folio *folio);
struct cgroup_subsys_state *tc_fleet_tag_folio(struct folio *folio);
void tc_fleet_untag_folio(struct folio *folio, struct cgroup_subsys_state *css);
bool tc_fleet_may_wait_tagged(struct folio *folio);
int tc_fleet_wq_init(void);

#endif /* TOTALCOW_FLEET_H */
