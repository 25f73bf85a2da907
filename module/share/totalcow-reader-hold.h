/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A reader's holds of the locks that every tenant's first reads take:
 * tc_groups_lock in tc_file_bind() and tc_canon_mutex in
 * tc_canon_follow(). Nothing inside them may enter direct reclaim. A
 * reader's allocations are charged to its memory cgroup, and at its
 * memory.max a charge runs that cgroup's reclaim (seconds, with its
 * writeback throttled by io.max); every other tenant's first read would
 * queue behind it. So such a hold looks things up and allocates before
 * it locks, and rechecks once locked what it found.
 *
 * Lockdep holds the code to that, as mm/mmu_notifier.c does for its
 * invalidate map: tc_reader_hold_init() takes tc_reader_hold_map inside
 * fs_reclaim once, so an allocation that may reclaim with __GFP_FS inside
 * a hold, or a wait inside one for a lock that is held across such an
 * allocation elsewhere, is reported as a lock inversion (and fails a test
 * on a debug kernel). It sees neither GFP_NOFS allocations nor the wait
 * for the mutex itself: an admin's write that allocates while holding
 * one of these mutexes is not held to the rule.
 */
#ifndef TOTALCOW_READER_HOLD_H
#define TOTALCOW_READER_HOLD_H

#include <linux/init.h>
#include <linux/lockdep.h>

#ifdef CONFIG_LOCKDEP
extern struct lockdep_map tc_reader_hold_map;
#endif

/* Inside the lock: from here to tc_reader_hold_end(), no reclaim. */
static inline void tc_reader_hold_begin(void)
{
	lock_map_acquire(&tc_reader_hold_map);
}

static inline void tc_reader_hold_end(void)
{
	lock_map_release(&tc_reader_hold_map);
}

void __init tc_reader_hold_init(void);

#endif /* TOTALCOW_READER_HOLD_H */
