/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow: which I/O cgroup a fill is charged to, and which readers may
 * wait for it (Documentation: docs/dm-totalcow.rst, "I/O cgroups").
 */
#ifndef TOTALCOW_CGROUP_H
#define TOTALCOW_CGROUP_H

#include <linux/cgroup.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>

/*
 * The I/O cgroup of a target's fleet: the closest common ancestor of the
 * cgroups of the readers whose misses it filled so far (at first, the
 * parent of the first one's). Fills are charged to it. It only ever
 * widens, towards the root; @css holds a reference.
 */
struct tc_fleet {
	struct cgroup_subsys_state __rcu *css;
	bool pinned;			/* by the admin: never widens */
	spinlock_t lock;		/* publishes @css and @pinned */
};

bool tc_cg_may_wait(const void *fill, const void *reader);
struct cgroup_subsys_state *tc_cg_widen(struct cgroup_subsys_state *fleet,
					struct cgroup_subsys_state *reader);
void tc_fleet_init(struct tc_fleet *fl);
void tc_fleet_destroy(struct tc_fleet *fl);
struct cgroup_subsys_state *tc_fleet_get(struct tc_fleet *fl,
					 struct cgroup_subsys_state *reader);
void tc_fleet_set(struct tc_fleet *fl, struct cgroup_subsys_state *css);
int tc_fleet_pin_path(struct tc_fleet *fl, const char *path);
u64 tc_fleet_id(struct tc_fleet *fl, bool *pinned);

#endif
