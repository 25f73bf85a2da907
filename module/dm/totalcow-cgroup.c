// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow: which I/O cgroup a fill is charged to, and which readers may
 * wait for it.
 *
 * A read of a block that another bio is filling can wait for that fill
 * instead of reading the origin again: that is how N containers started
 * from snapshots of one template read a shared block once. But a fill's
 * bio is charged to one I/O cgroup, and the limits of that cgroup and of
 * its ancestors (io.max, io.latency, io.cost) can hold it back. A reader in
 * a cgroup that those limits do not cover must not wait at their rate: a
 * container under a low io.max would otherwise slow every other
 * container's reads of the template.
 *
 * The rule: a reader may wait for a fill charged to its own cgroup or to
 * one of its ancestors (tc_cg_may_wait()). Every limit that can hold such a
 * fill back holds the reader's own read of the origin too, so waiting
 * never makes it slower than reading the origin itself, whatever the
 * limits are.
 *
 * For the rule to let a fleet share, fills are charged to the fleet's
 * cgroup rather than to their reader's: the closest common ancestor of the
 * cgroups of every reader that missed so far (struct tc_fleet), an
 * ancestor of each of them. Container engines give each container a cgroup
 * of its own under one parent (lxc.payload.*, machine.slice,
 * system.slice, a pod's): the fleet's cgroup starts as the parent of the
 * first reader's, so that siblings share from the first fill on, and it
 * widens when a reader from elsewhere misses. Fills read before it widened
 * stay charged where they were: readers outside that cgroup read the
 * origin instead of waiting for them. An admin who knows the fleet's
 * cgroup can pin it (message fleet_cgroup): readers below it share,
 * readers elsewhere fill in cgroups of their own, and it never widens.
 *
 * So a container's own limits below the target do not hold back the
 * fills of template blocks it happens to read first: those are the
 * fleet's reads, charged to the fleet, as btrfs's shared metadata and the
 * page cache's shared pages are nobody's alone. Limits on the totalcow
 * device itself, where engines put a container's io.max, act before the
 * target and hold all of its reads, hits and fills alike.
 */

#include <linux/blk-cgroup.h>
#include <linux/cgroup.h>
#include <linux/err.h>

#include "totalcow-cgroup.h"

/*
 * The waiting rule: whether a reader in I/O cgroup @reader may wait for a
 * fill charged to @fill (both cgroup_subsys_state of the io controller;
 * NULL without blk-cgroup). Constant time, no locks: the cache calls it
 * under its lock with interrupts off.
 */
bool tc_cg_may_wait(const void *fill, const void *reader)
{
	const struct cgroup_subsys_state *f = fill, *r = reader;

	if (!f)
		return true;
	return r && cgroup_is_descendant(r->cgroup, f->cgroup);
}

/*
 * The cgroup fills are charged to once @reader misses too: @fleet if it is
 * @reader's or an ancestor of it, otherwise the closest common ancestor of
 * the two; without a fleet yet, the parent of @reader (or @reader, the
 * root). Takes at most @reader's depth steps of constant time, and no
 * locks; the caller holds a reference on @reader, which pins its
 * ancestors.
 */
struct cgroup_subsys_state *tc_cg_widen(struct cgroup_subsys_state *fleet,
					struct cgroup_subsys_state *reader)
{
	struct cgroup_subsys_state *css;

	if (!fleet)
		return reader->parent ?: reader;
	if (cgroup_is_descendant(reader->cgroup, fleet->cgroup))
		return fleet;
	for (css = reader; css->parent; css = css->parent)
		if (cgroup_is_descendant(fleet->cgroup, css->cgroup))
			break;
	return css;
}

void tc_fleet_init(struct tc_fleet *fl)
{
	RCU_INIT_POINTER(fl->css, NULL);
	fl->pinned = false;
	spin_lock_init(&fl->lock);
}

void tc_fleet_destroy(struct tc_fleet *fl)
{
	struct cgroup_subsys_state *css = rcu_dereference_protected(fl->css, true);

	if (css)
		css_put(css);
}

/*
 * The cgroup to charge a fill for a reader in @reader to, with a reference
 * for the caller (NULL if @reader is NULL: no blk-cgroup). Widens the
 * fleet's cgroup first if @reader is outside it. A retry means another
 * reader widened it meanwhile, which happens at most once per level.
 */
struct cgroup_subsys_state *tc_fleet_get(struct tc_fleet *fl,
					 struct cgroup_subsys_state *reader)
{
	struct cgroup_subsys_state *fleet, *wider;

	if (!reader)
		return NULL;
	for (;;) {
		rcu_read_lock();
		fleet = rcu_dereference(fl->css);
		/* A pinned fleet's outsiders fill in their own cgroups. */
		if (READ_ONCE(fl->pinned) && fleet &&
		    !cgroup_is_descendant(reader->cgroup, fleet->cgroup)) {
			rcu_read_unlock();
			css_get(reader);
			return reader;
		}
		wider = tc_cg_widen(fleet, reader);
		/* The fleet holds a reference; it may have just replaced it. */
		if (wider == fleet && css_tryget(fleet)) {
			rcu_read_unlock();
			return fleet;
		}
		rcu_read_unlock();

		spin_lock(&fl->lock);
		if (rcu_access_pointer(fl->css) != fleet || fl->pinned) {
			spin_unlock(&fl->lock);
			continue;
		}
		/* @wider is @reader or its ancestor, or the fleet's: pinned. */
		css_get(wider);
		if (wider != fleet) {
			css_get(wider);
			rcu_assign_pointer(fl->css, wider);
		}
		spin_unlock(&fl->lock);
		if (fleet && wider != fleet)
			css_put(fleet);
		return wider;
	}
}

/*
 * Pin the fleet's cgroup to @css, whose reference it takes over, or with
 * NULL let it start anew from the next reader and widen (auto). Fills in
 * flight keep the cgroup they are charged to.
 */
void tc_fleet_set(struct tc_fleet *fl, struct cgroup_subsys_state *css)
{
	struct cgroup_subsys_state *old;

	spin_lock(&fl->lock);
	old = rcu_replace_pointer(fl->css, css, lockdep_is_held(&fl->lock));
	WRITE_ONCE(fl->pinned, !!css);
	spin_unlock(&fl->lock);
	if (old)
		css_put(old);
}

/*
 * Pin the fleet's cgroup to the cgroup v2 directory @path (from the root
 * of the cgroup2 mount, e.g. "/machine.slice"): its I/O cgroup, which is
 * that of the closest ancestor with the io controller if it has none.
 */
int tc_fleet_pin_path(struct tc_fleet *fl, const char *path)
{
#ifdef CONFIG_BLK_CGROUP
	struct cgroup *cgrp;
	struct cgroup_subsys_state *css;

	if (path[0] != '/')
		return -EINVAL;
	cgrp = cgroup_get_from_path(path);
	if (IS_ERR(cgrp))
		return PTR_ERR(cgrp);
	css = cgroup_get_e_css(cgrp, &io_cgrp_subsys);
	cgroup_put(cgrp);
	tc_fleet_set(fl, css);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/* The id of the fleet's cgroup (0: none yet), and whether it is pinned. */
u64 tc_fleet_id(struct tc_fleet *fl, bool *pinned)
{
	struct cgroup_subsys_state *css;
	u64 id = 0;

	rcu_read_lock();
	css = rcu_dereference(fl->css);
	if (css)
		id = cgroup_id(css->cgroup);
	*pinned = READ_ONCE(fl->pinned);
	rcu_read_unlock();
	return id;
}

#if IS_ENABLED(CONFIG_DM_TOTALCOW_CGROUP_KUNIT_TEST)
#include "totalcow_cgroup_kunit.c"
#endif
