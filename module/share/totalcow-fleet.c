// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: the I/O cgroup that reads of shared pages
 * are charged to, and which readers may wait for them.
 *
 * A shared page (a template's page that members alias, a scope's
 * canonical page) is read once, by whichever reader misses on it first,
 * and every other reader that needs it meanwhile waits for that read
 * instead of reading the disk again: that is how N containers started at
 * once read a shared block once. But a read's bios are charged to one I/O
 * cgroup, and the limits of that cgroup and of its ancestors (io.max,
 * io.latency, io.cost) can hold it back for as long as they like. Were
 * the shared read charged to the reader that happened to miss first, a
 * container under a low io.max (its own, or one it set for itself) would
 * make every other container wait at its rate: overlayfs's readers of one
 * lower file do, and so did a member's miss.
 *
 * So, as dm-totalcow does with its fills (module/dm/totalcow-cgroup.c,
 * which these share):
 *
 *  - The reads a miss starts of shared pages are charged to the fleet's
 *    I/O cgroup, the closest common ancestor of the cgroups of the readers
 *    that missed so far (struct tc_fleet: a group's, a scope's), not to
 *    the reader's: tc_fleet_run() runs them in a worker associated with
 *    that cgroup (kthread_associate_blkcg(), as the loop driver runs a
 *    request in its issuer's), while the reader waits for the submission
 *    only. The pages' memory stays charged to the reader's memory cgroup
 *    (set_active_memcg()), as it would be if it had read them itself. A
 *    fleet's shared reads are the fleet's, as dm-totalcow's fills and
 *    btrfs's shared metadata are: a container's own io.max below the
 *    fleet does not hold them back, the fleet's does.
 *
 *  - A reader waits for a shared page someone else is reading only if
 *    that read is charged to its own I/O cgroup or to an ancestor of it
 *    (tc_cg_may_wait()): every limit that can hold such a read back holds
 *    the reader's own read of the disk too, so waiting never makes it
 *    slower than reading the page itself. Otherwise it reads the page of
 *    its own file itself, unshared.
 *
 * Which cgroup a page being read is charged to is known for the reads
 * this file starts: a template's folio belongs to the file system, so
 * a group records its misses' reads in flight, with the bitmap of the
 * folios each added (struct tc_fleet_read, tc_fleet_may_wait()); a
 * canonical folio is the scope's own, and its ->private names the cgroup
 * its read is charged to while it is read
 * (tc_fleet_tag_folio(), tc_fleet_may_wait_tagged()). A read this file
 * did not start (a reader of the template file itself, a private mapping
 * of it faulting) is charged to whoever started it and is not waited for.
 */

#include <linux/backing-dev.h>
#include <linux/blk-cgroup.h>
#include <linux/cgroup.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/page_alias.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/workqueue.h>

#include "totalcow-fleet.h"

/*
 * A queue per kind of shared page: a scope's miss waits for its worker
 * holding its file's invalidate_lock, and a group's worker takes a
 * template's; with one queue (and its rescuer, which runs one work at a
 * time) a scope's reader could wait behind a group's read.
 */
static struct workqueue_struct *tc_fleet_wq[TC_FLEET_KINDS];

/* The I/O cgroup current's bios are charged to, referenced; NULL: none. */
static struct cgroup_subsys_state *tc_fleet_reader(void)
{
#ifdef CONFIG_BLK_CGROUP
	struct cgroup_subsys_state *css = kthread_blkcg();

	if (css) {
		css_get(css);
		return css;
	}
	return task_get_css(current, io_cgrp_id);
#else
	return NULL;
#endif
}

struct tc_fleet_call {
	struct work_struct work;
	void (*fn)(void *arg);
	void *arg;
	struct cgroup_subsys_state *css;
	struct mem_cgroup *memcg;
};

static void tc_fleet_work(struct work_struct *work)
{
	struct tc_fleet_call *c = container_of(work, struct tc_fleet_call, work);
	struct mem_cgroup *old;

	kthread_associate_blkcg(c->css);
	old = set_active_memcg(c->memcg);
	c->fn(c->arg);
	set_active_memcg(old);
	kthread_associate_blkcg(NULL);
}

/*
 * The I/O cgroup to charge the caller's shared reads to, referenced (NULL
 * without blk-cgroup): @fl's, widened to take in the caller's first; *@own
 * if that is the caller's own (its reads are charged there anyway).
 */
static struct cgroup_subsys_state *tc_fleet_css(struct tc_fleet *fl,
						bool *own)
{
	struct cgroup_subsys_state *reader = tc_fleet_reader();
	struct cgroup_subsys_state *css;

	css = reader ? tc_fleet_get(fl, reader) : NULL;
	*own = css == reader || !css;
	if (reader)
		css_put(reader);
	return css;
}

/*
 * Run @fn(@arg) with its bios charged to @css: inline if it is the
 * caller's own (@own), else in a worker of @kind's queue associated with
 * it, the caller's memory cgroup charged for what it allocates; returns
 * once @fn has. @key: lockdep's class for the wait for the worker, one
 * per caller (tc_fleet_run()): what @fn locks is the caller's, and callers
 * that hold a lock of a class another's @fn takes do not wait for each
 * other's workers. The queues have rescuers: a reader that reclaim waits
 * for still gets its reads submitted.
 */
static void tc_fleet_call(struct cgroup_subsys_state *css, bool own,
			  enum tc_fleet_kind kind, void (*fn)(void *arg),
			  void *arg, struct lock_class_key *key)
{
	struct workqueue_struct *wq = tc_fleet_wq[kind];
	struct tc_fleet_call c;

	if (own || !wq) {
		fn(arg);
		return;
	}
	c.css = css;
	c.fn = fn;
	c.arg = arg;
	c.memcg = get_mem_cgroup_from_current();
	INIT_WORK_ONSTACK_KEY(&c.work, tc_fleet_work, key);
	queue_work(wq, &c.work);
	flush_work(&c.work);
	destroy_work_on_stack(&c.work);
	mem_cgroup_put(c.memcg);
}

/**
 * __tc_fleet_run - start reads of shared pages on behalf of a fleet
 * @fl: the fleet (a group's, a scope's)
 * @kind: what the reads are of
 * @fn: starts the reads; it must not wait for them
 * @arg: its argument
 * @key: see tc_fleet_call()
 *
 * Runs @fn(@arg) with its bios charged to @fl's I/O cgroup, widened to
 * take in the caller's first (tc_fleet_call()).
 *
 * Return: the I/O cgroup the reads were charged to, referenced (NULL
 * without blk-cgroup).
 */
struct cgroup_subsys_state *__tc_fleet_run(struct tc_fleet *fl,
					   enum tc_fleet_kind kind,
					   void (*fn)(void *arg), void *arg,
					   struct lock_class_key *key)
{
	bool own;
	struct cgroup_subsys_state *css = tc_fleet_css(fl, &own);

	tc_fleet_call(css, own, kind, fn, arg, key);
	return css;
}

void tc_fleet_reads_init(struct tc_fleet_reads *fr)
{
	tc_fleet_init(&fr->fleet);
	spin_lock_init(&fr->lock);
	INIT_LIST_HEAD(&fr->list);
	fr->nr = 0;
}

/* Once no miss can start a read: none is in flight. */
void tc_fleet_reads_destroy(struct tc_fleet_reads *fr)
{
	WARN_ON_ONCE(fr->nr || !list_empty(&fr->list));
	tc_fleet_destroy(&fr->fleet);
}

/*
 * List @r, a read charged to @css, in @fr if there is room. Its bitmap,
 * cleared, fills in as its folios are added (page_alias_readahead() sets
 * each bit atomically), and readers test it meanwhile.
 */
static void tc_fleet_record(struct tc_fleet_reads *fr, struct tc_fleet_read *r,
			    struct address_space *mapping, pgoff_t index,
			    unsigned long nr, unsigned long *added,
			    struct cgroup_subsys_state *css)
{
	r->mapping = mapping;
	r->index = index;
	r->nr = nr;
	r->added = added;
	r->css = css;
	spin_lock(&fr->lock);
	r->listed = fr->nr < TC_FLEET_READS_MAX;
	if (r->listed) {
		list_add(&r->node, &fr->list);
		fr->nr++;
	}
	spin_unlock(&fr->lock);
}

struct tc_fleet_ra {
	struct readahead_control *ractl;
	unsigned long nr;
	unsigned long *added;
};

static void tc_fleet_ra(void *arg)
{
	struct tc_fleet_ra *ra = arg;

	page_alias_readahead(ra->ractl, ra->nr, ra->added);
}

/**
 * tc_fleet_read_start - read ahead a group's template pages for its fleet
 * @fr: the group's reads in flight
 * @r: the record of this read, on the caller's stack
 * @ractl: the readahead request, at the range's first page
 * @nr: the range's length in pages
 * @added: page_alias_readahead()'s bitmap of the pages this read added
 *
 * page_alias_readahead(), charged to the fleet (tc_fleet_run()), recorded
 * in @fr so that the group's other readers may wait for the pages it
 * added (tc_fleet_may_wait()) until tc_fleet_read_end(@fr, @r), which the
 * caller calls once it has waited for them itself. A group records at
 * most TC_FLEET_READS_MAX reads; the pages of one it does not record are
 * read by whoever else needs them meanwhile.
 */
void tc_fleet_read_start(struct tc_fleet_reads *fr, struct tc_fleet_read *r,
			 struct readahead_control *ractl, unsigned long nr,
			 unsigned long *added)
{
	static struct lock_class_key key;
	struct tc_fleet_ra ra = { .ractl = ractl, .nr = nr, .added = added };
	struct cgroup_subsys_state *css;
	bool own;

	/* Listed before any folio of it is added: no reader waits unrecorded. */
	css = tc_fleet_css(&fr->fleet, &own);
	bitmap_zero(added, nr);
	tc_fleet_record(fr, r, ractl->mapping, readahead_index(ractl), nr,
			added, css);
	tc_fleet_call(css, own, TC_FLEET_TEMPLATE, tc_fleet_ra, &ra, &key);
}

void tc_fleet_read_end(struct tc_fleet_reads *fr, struct tc_fleet_read *r)
{
	if (r->listed) {
		spin_lock(&fr->lock);
		list_del(&r->node);
		fr->nr--;
		spin_unlock(&fr->lock);
	}
	if (r->css)
		css_put(r->css);
}

/* The reader's I/O cgroup, under RCU; NULL without blk-cgroup. */
static struct cgroup_subsys_state *tc_fleet_reader_rcu(void)
{
#ifdef CONFIG_BLK_CGROUP
	return kthread_blkcg() ?: task_css(current, io_cgrp_id);
#else
	return NULL;
#endif
}

/*
 * Whether a reader in I/O cgroup @reader may wait for the folio being read
 * at @index of @mapping: if a recorded read of @fr, submitted, added it
 * and is charged to @reader or an ancestor. At most TC_FLEET_READS_MAX
 * records, walked under @fr's lock.
 */
static bool __tc_fleet_may_wait(struct tc_fleet_reads *fr,
				struct address_space *mapping, pgoff_t index,
				const struct cgroup_subsys_state *reader)
{
	struct tc_fleet_read *r;
	bool ok = false;

	spin_lock(&fr->lock);
	list_for_each_entry(r, &fr->list, node) {
		if (r->mapping != mapping ||
		    index < r->index || index - r->index >= r->nr ||
		    !test_bit(index - r->index, r->added))
			continue;
		ok = tc_cg_may_wait(r->css, reader);
		break;
	}
	spin_unlock(&fr->lock);
	return ok;
}

/**
 * tc_fleet_may_wait - may the caller wait for a template folio's read?
 * @fr: the reads in flight of the template's group
 * @folio: the folio, referenced, found not uptodate
 *
 * True if one of the group's recorded reads added @folio's slot (its bit,
 * set as the folio was added and before its read started) and is charged
 * to the caller's I/O cgroup or an ancestor. A folio found before its bit
 * is set (the instant between its adding and the bit) is not waited for:
 * the caller reads its own page.
 *
 * A record lives until its miss has waited for the folios it added, so
 * the folio it added at a slot is the one there until then, unless it left
 * the page cache: reclaim and invalidation take no folio locked for its
 * read, and an uptodate one is not waited for here. What is left is a
 * page read, reclaimed, and added and locked by a reader elsewhere, all
 * in the instant between that miss's last wait and its
 * tc_fleet_read_end(): a reader's wait there is the one it would make for
 * any reader of a shared file, and nobody can time it.
 */
bool tc_fleet_may_wait(struct tc_fleet_reads *fr, struct folio *folio)
{
	bool ok;

	rcu_read_lock();
	ok = __tc_fleet_may_wait(fr, folio->mapping, folio->index,
				 tc_fleet_reader_rcu());
	rcu_read_unlock();
	return ok;
}

/*
 * A canonical folio being read names the I/O cgroup its read is charged
 * to in ->private (the scope's mappings are ours, and nothing moves or
 * reclaims a folio locked for its read), from before its bio is submitted
 * until its read ends. The tag holds a reference, dropped only after the
 * tag is cleared (tc_fleet_untag_folio()), and a reader looks at the
 * cgroup it names under RCU only: cgroups are freed a grace period after
 * their last reference, so what a reader finds is alive.
 *
 * Return: the reference to pass to tc_fleet_untag_folio().
 */
struct cgroup_subsys_state *tc_fleet_tag_folio(struct folio *folio)
{
	struct cgroup_subsys_state *css = tc_fleet_reader();

	WRITE_ONCE(folio->private, css);
	return css;
}

/* At the end of the read, before the folio is unlocked. */
void tc_fleet_untag_folio(struct folio *folio, struct cgroup_subsys_state *css)
{
	WRITE_ONCE(folio->private, NULL);
	if (css)
		css_put(css);
}

static bool __tc_fleet_may_wait_tagged(struct folio *folio,
				       const struct cgroup_subsys_state *reader)
{
	const struct cgroup_subsys_state *css = READ_ONCE(folio->private);

	return !css || tc_cg_may_wait(css, reader);
}

/**
 * tc_fleet_may_wait_tagged - may the caller wait for a canonical folio?
 * @folio: the folio, referenced, found locked and not uptodate
 *
 * True if its read is charged to the caller's I/O cgroup or an ancestor,
 * or if its read is not submitted yet (no tag): a folio is locked untagged
 * only from its readahead's adding it to its submission, by one reader,
 * or for the moment a reservation's walk or an eviction holds its lock.
 */
bool tc_fleet_may_wait_tagged(struct folio *folio)
{
	bool ok;

	rcu_read_lock();
	ok = __tc_fleet_may_wait_tagged(folio, tc_fleet_reader_rcu());
	rcu_read_unlock();
	return ok;
}

int __init tc_fleet_wq_init(void)
{
	static const char *const names[TC_FLEET_KINDS] = {
		[TC_FLEET_TEMPLATE] = "totalcow_fleet_template",
		[TC_FLEET_CANON] = "totalcow_fleet_canon",
	};
	int i;

	for (i = 0; i < TC_FLEET_KINDS; i++) {
		tc_fleet_wq[i] = alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM,
						 0, names[i]);
		if (!tc_fleet_wq[i])
			return -ENOMEM;
	}
	return 0;
}

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_FLEET_KUNIT_TEST)
#include "totalcow_fleet_kunit.c"
#endif
