// SPDX-License-Identifier: GPL-2.0-only
/*
 * Shared extents, mapped (docs/design/mapped-files.md, "Mapped pages of
 * shared extents"). A canonical page cannot be mapped into a user's VMA: its
 * mapping is indexed by disk address, which a file's pages follow extent
 * by extent, so rmap could not find the VMA. A private mapping
 * (MAP_PRIVATE: executables, libraries) of a file in a sharing scope maps
 * a *clone* instead: an unlinked file on the same file system whose
 * extents are the file's (a reflink, made with the file system's own
 * clone), through a backing file that keeps the user's path, exactly as
 * a group member's mapping maps its template (totalcow-mmap.c). Every
 * private mapping of a file whose pages are the same extents, in the same
 * scope, maps the same clone: one copy of the mapped pages for a fleet of
 * reflinked copies or snapshots. The clone's pages are its own (rmap,
 * reclaim, truncate: stock); the clone holds its extents, so their disk
 * space is never handed out again while it lives; nobody can write it.
 * An open of the file for writing makes its mappings map the file itself
 * first (->write_opened), so that they show its changes, as a member's.
 *
 * A clone no mapping uses any more stays for TC_CLONE_IDLE, at most
 * TC_CLONE_IDLE_MAX of them, so that a process started again and again
 * (a shell loop, a build) maps the clone its last run left, rather than
 * making and deleting one each time. It holds an inode reference, not a
 * mount: an unmount is not made busy by it, and the file system's close
 * drops it (tc_extent_clone_close(), from close_ctree() before its
 * commit: the unlinked file is deleted there).
 *
 * Which clone: the file's pages' canonical keys (the extent and offset of
 * each, tc_canon_prove()) and its size, hashed to find candidates, then
 * compared key by key with the candidate's, under the file system's
 * handout generation: two files whose every page is the same page of the
 * same extent, at one time no disk range was handed out, hold the same
 * bytes. A file that changes meanwhile (its i_version) maps itself.
 */

#include <linux/backing-file.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/iversion.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/pagemap.h>
#include <linux/page_alias.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/siphash.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "canon.h"
#include "reflink.h"
#include "totalcow-btrfs.h"
#include "totalcow-canon.h"
#include "totalcow-extent-mmap.h"
#include "totalcow-mmap.h"

/* Pages proven at once; a file of more pages than the limit maps itself. */
#define TC_CLONE_CHUNK		256
#define TC_CLONE_MAX_PAGES	(256 * 1024)
/* Comparisons a handout elsewhere on the file system may spoil. */
#define TC_CLONE_TRIES		3
/* How long, and how many, clones no mapping uses are kept. */
#define TC_CLONE_IDLE		(60 * HZ)
#define TC_CLONE_IDLE_MAX	1024
/* Clones the reaper frees at once, outside the lock. */
#define TC_CLONE_REAP_BATCH	32
/*
 * Clones at most, in use or not, and the tables' size: lookups walk a
 * bucket under tc_clones_lock (by digest) or on every read miss (by
 * inode), so a tenant mapping many layouts at once must not lengthen
 * them without bound. Past the cap a mapping is private.
 */
#define TC_CLONE_HASH_BITS	12
#define TC_CLONE_MAX		(4 << TC_CLONE_HASH_BITS)

/*
 * A clone: an unlinked, never-linkable file whose inode is held (@inode)
 * while backing files of it live (@users, under tc_clones_lock) and for
 * TC_CLONE_IDLE after (on tc_clones_idle, since @idle_since); its last
 * iput() deletes it. Found by its keys' hash, in its scope only. Each
 * holds a reference to btrfs's hook key, so that the file system's close
 * reaches tc_extent_clone_close() while any clone lives.
 */
struct tc_clone {
	struct hlist_node node;		/* in tc_clones, by @digest */
	struct hlist_node inode_node;	/* in tc_clone_inodes (RCU), by inode */
	/* In tc_clone_origins, by the file it was made from (its origin). */
	struct hlist_node origin_node;
	struct list_head idle;		/* in tc_clones_idle while unused */
	struct list_head dying;		/* in tc_clones_dying until freed */
	struct rcu_head rcu;
	u64 digest;
	u64 scope;			/* tc_canon_scope_id() */
	struct super_block *sb;
	u64 origin_subvol;		/* the origin's subvolume and inode */
	unsigned long origin_ino;
	loff_t size;
	struct inode *inode;
	unsigned long users;
	unsigned long idle_since;	/* jiffies */
};

static DEFINE_HASHTABLE(tc_clones, TC_CLONE_HASH_BITS);
static DEFINE_HASHTABLE(tc_clone_inodes, TC_CLONE_HASH_BITS);
static DEFINE_HASHTABLE(tc_clone_origins, TC_CLONE_HASH_BITS);
static LIST_HEAD(tc_clones_idle);	/* oldest first */
static unsigned int tc_clones_nr_idle;
/* Unpublished, for the reaper to free (on @idle). */
static LIST_HEAD(tc_clones_doomed);
static DEFINE_SPINLOCK(tc_clones_lock);
static atomic_t tc_clones_live = ATOMIC_INIT(0);
/* Clones unpublished and not yet freed: a close waits for its own. */
static LIST_HEAD(tc_clones_dying);
static siphash_key_t tc_clone_key;
/* Who makes clones: the mapper may not write the file's directory. */
static const struct cred *tc_clone_cred;

/* A walk's buffers: one chunk's keys of each file. */
struct tc_clone_walk {
	u64 a[TC_CLONE_CHUNK];
	u64 b[TC_CLONE_CHUNK];
	DECLARE_BITMAP(proven, TC_CLONE_CHUNK);
};

/* Is @inode a clone? Its reads are its own, never aliased. */
bool tc_extent_clone_inode(struct inode *inode)
{
	struct tc_clone *c;
	bool found = false;

	if (!atomic_read(&tc_clones_live))
		return false;
	rcu_read_lock();
	hash_for_each_possible_rcu(tc_clone_inodes, c, inode_node,
				   (unsigned long)inode) {
		if (c->inode == inode) {
			found = true;
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/*
 * The keys of pages @index.. of @inode (@nr of them) into @keys: false
 * unless every one has a key and the file is still @size bytes. From the
 * cached maps if they have them all (a range being read, which holds its
 * extent lock until its I/O completes, is answered: a fleet starting
 * faults its clone in while others map it), else proven.
 */
static bool tc_clone_keys(struct inode *inode, pgoff_t index,
			  unsigned long nr, loff_t size, u64 *keys,
			  unsigned long *proven)
{
	loff_t isize;

	if (tc_canon_cached_keys(inode, index, nr, keys) == nr)
		return i_size_read(inode) == size;
	return tc_canon_prove(inode, index, nr, keys, proven, &isize, NULL,
			      NULL) == nr &&
	       isize == size;
}

/*
 * The hash of @inode's pages' keys and size, in @digest; false if a page
 * has no key (a hole, an inline or preallocated extent, a range being
 * written) or the file is empty or too large.
 */
static bool tc_clone_digest(struct inode *inode, struct tc_clone_walk *w,
			    u64 *digest)
{
	loff_t size = i_size_read(inode);
	pgoff_t nr_pages = DIV_ROUND_UP(size, PAGE_SIZE), i;
	u64 h;

	if (!size || nr_pages > TC_CLONE_MAX_PAGES)
		return false;
	h = siphash_1u64(size, &tc_clone_key);
	for (i = 0; i < nr_pages; i += TC_CLONE_CHUNK) {
		unsigned long nr = min_t(pgoff_t, nr_pages - i, TC_CLONE_CHUNK);
		unsigned long j;

		if (!tc_clone_keys(inode, i, nr, size, w->a, w->proven))
			return false;
		for (j = 0; j < nr; j++)
			h = siphash_2u64(h, w->a[j], &tc_clone_key);
		cond_resched();
	}
	*digest = h;
	return true;
}

/*
 * Are @a's and @b's pages the same pages of the same extents? Compared
 * key by key, chunk by chunk, with no disk range handed out from the
 * first proof to the last (tc_canon_unchanged()): a key then names one
 * extent's bytes throughout. A handout meanwhile spoils the comparison,
 * which is tried again; a real difference ends it.
 */
static bool tc_clone_same(struct tc_canon_scope *s, struct inode *a,
			  struct inode *b, struct tc_clone_walk *w)
{
	loff_t size = i_size_read(a);
	pgoff_t nr_pages = DIV_ROUND_UP(size, PAGE_SIZE), i;
	int tries;

	for (tries = 0; tries < TC_CLONE_TRIES; tries++) {
		u64 gen = tc_canon_gen(s);
		bool same = true;

		for (i = 0; same && i < nr_pages; i += TC_CLONE_CHUNK) {
			unsigned long nr = min_t(pgoff_t, nr_pages - i,
						 TC_CLONE_CHUNK);

			same = tc_clone_keys(a, i, nr, size, w->a, w->proven) &&
			       tc_clone_keys(b, i, nr, size, w->b, w->proven) &&
			       !memcmp(w->a, w->b, nr * sizeof(u64));
			cond_resched();
		}
		if (tc_canon_unchanged(s, gen))
			return same;
	}
	return false;
}

static void tc_clone_reap(struct work_struct *work);
static DECLARE_DELAYED_WORK(tc_clone_reaper, tc_clone_reap);

/*
 * Unpublish idle @c onto @dead, for tc_clone_free() outside the lock;
 * tc_clones_lock held. Until that free, a close of its file system waits
 * for it (tc_extent_clone_close()).
 */
static void tc_clone_unlink(struct tc_clone *c, struct list_head *dead)
{
	hash_del(&c->node);
	hash_del_rcu(&c->inode_node);
	hash_del(&c->origin_node);
	list_move_tail(&c->idle, dead);
	list_add_tail(&c->dying, &tc_clones_dying);
	tc_clones_nr_idle--;
}

/* Free unpublished @c: its last iput() deletes the file. */
static void tc_clone_free(struct tc_clone *c)
{
	atomic_dec(&tc_clones_live);
	iput(c->inode);
	btrfs_canon_disable();
	spin_lock(&tc_clones_lock);
	list_del(&c->dying);
	spin_unlock(&tc_clones_lock);
	kfree_rcu(c, rcu);
	wake_up_var(&tc_clones_dying);
}

/* Is a clone of @sb unpublished but not yet freed? */
static bool tc_clone_dying_on(struct super_block *sb)
{
	struct tc_clone *c;
	bool found = false;

	spin_lock(&tc_clones_lock);
	list_for_each_entry(c, &tc_clones_dying, dying) {
		if (c->sb == sb) {
			found = true;
			break;
		}
	}
	spin_unlock(&tc_clones_lock);
	return found;
}

/*
 * Free the doomed clones and those idle for TC_CLONE_IDLE, a batch at a
 * time. Deleting a clone is a transaction of its file system, which waits
 * while that one is frozen; the reaper frees clones of every file system,
 * so it frees each only inside its file system's freeze protection, taken
 * without waiting: a clone of a frozen (or freezing) file system is left
 * doomed, and tried again a second later. So nothing of another file
 * system waits for a thaw: not the reaper, not a munmap() that dooms a
 * clone, not an unmount waiting for its own clones.
 */
static void tc_clone_reap(struct work_struct *work)
{
	unsigned long next = 0, now;
	struct tc_clone *c, *tmp;
	LIST_HEAD(dead);
	LIST_HEAD(frozen);
	int n = 0;

	spin_lock(&tc_clones_lock);
	/* One reading: a tick between two could make @next 0, not re-armed. */
	now = jiffies;
	while ((c = list_first_entry_or_null(&tc_clones_idle, struct tc_clone,
					     idle))) {
		if (time_before(now, c->idle_since + TC_CLONE_IDLE)) {
			next = c->idle_since + TC_CLONE_IDLE - now;
			break;
		}
		if (n++ == TC_CLONE_REAP_BATCH) {
			next = 1;
			break;
		}
		tc_clone_unlink(c, &dead);
	}
	list_splice_init(&tc_clones_doomed, &dead);
	spin_unlock(&tc_clones_lock);
	list_for_each_entry_safe(c, tmp, &dead, idle) {
		struct super_block *sb = c->sb;

		if (!sb_start_write_trylock(sb)) {
			list_move_tail(&c->idle, &frozen);
			continue;
		}
		/* As an unlink's iput() is: inside the freeze protection. */
		list_del(&c->idle);
		tc_clone_free(c);
		sb_end_write(sb);
	}
	if (!list_empty(&frozen)) {
		spin_lock(&tc_clones_lock);
		list_splice_tail(&frozen, &tc_clones_doomed);
		spin_unlock(&tc_clones_lock);
		if (!next || next > HZ)
			next = HZ;
	}
	if (next)
		mod_delayed_work(system_wq, &tc_clone_reaper, next);
}

/*
 * Release what tc_clone_get() returned. The last user leaves the clone
 * idle; if there are too many, the oldest idle one is doomed, for the
 * reaper to free: the caller (munmap(), a process's exit) never deletes a
 * file, which would make it wait for that file's file system.
 */
void tc_extent_clone_put(struct tc_clone *c)
{
	bool doomed = false;

	spin_lock(&tc_clones_lock);
	if (!--c->users) {
		c->idle_since = jiffies;
		list_add_tail(&c->idle, &tc_clones_idle);
		if (++tc_clones_nr_idle > TC_CLONE_IDLE_MAX) {
			tc_clone_unlink(list_first_entry(&tc_clones_idle,
							 struct tc_clone, idle),
					&tc_clones_doomed);
			doomed = true;
		}
	}
	spin_unlock(&tc_clones_lock);
	if (doomed)
		mod_delayed_work(system_wq, &tc_clone_reaper, 0);
	else if (!delayed_work_pending(&tc_clone_reaper))
		schedule_delayed_work(&tc_clone_reaper, TC_CLONE_IDLE);
}

/**
 * tc_extent_clone_close - drop the clones of a file system being closed
 * @sb: its super block, from close_ctree() (btrfs's ->close hook), after
 *	the VFS evicted its unused inodes and before the last commit
 *
 * Every clone of @sb is idle or doomed: a mapping holds its mount, so a
 * file system with one is not being closed, nor is a frozen one (a freeze
 * holds an active reference). The last iput() of each deletes it; the
 * commit that follows makes that durable (an unclean stop leaves orphans,
 * which the next mount deletes). Clones of @sb that the reaper took off
 * the lists before, and is freeing, are waited for: an iput() after
 * close_ctree() would be a use after free. The wait is bounded by those
 * iput()s (at most TC_CLONE_REAP_BATCH and the doomed ones of @sb, none
 * of which waits for another file system), and the dying list's walk by
 * as many clones.
 */
void tc_extent_clone_close(struct super_block *sb)
{
	struct tc_clone *c, *next;
	LIST_HEAD(dead);

	spin_lock(&tc_clones_lock);
	list_for_each_entry_safe(c, next, &tc_clones_idle, idle)
		if (c->sb == sb)
			tc_clone_unlink(c, &dead);
	list_for_each_entry_safe(c, next, &tc_clones_doomed, idle)
		if (c->sb == sb)
			list_move_tail(&c->idle, &dead);
	spin_unlock(&tc_clones_lock);
	list_for_each_entry_safe(c, next, &dead, idle) {
		list_del(&c->idle);
		tc_clone_free(c);
	}
	/*
	 * The lock orders a freer's list_del() before its look at the wait
	 * queue, and our joining the queue before our look at the list.
	 */
	wait_var_event(&tc_clones_dying, !tc_clone_dying_on(sb));
}

/*
 * Clone @file whole into a new unlinked file beside it: its inode, with a
 * reference, or NULL. Made under the kernel's credential in @file's
 * directory. It never waits for anything another process can hold for as
 * long as it likes while it holds the file system's write access, which
 * a freeze, every writer behind the freeze and a remount read-only wait
 * for (docs/design/mapped-files.md, "Who waits for whom"): a frozen or read-only file
 * system makes none (mmap() never waits for a thaw), nor does a file
 * whose inode lock, mmap lock or direct I/O a reader holds
 * (btrfs_clone_file_nowait()).
 *
 * The clone's size counts against the mapper's file-size limit, as any
 * clone's does (generic_write_check_limits(), which sends SIGXFSZ): a
 * mapper under a smaller one (ulimit -f, a sandbox) makes none, and maps
 * a clone only if one was made already.
 */
static struct inode *tc_clone_make(struct file *file)
{
	struct inode *inode = file_inode(file), *clone = NULL;
	struct super_block *sb = inode->i_sb;
	struct path parent = { .mnt = file->f_path.mnt };
	const struct cred *old;
	struct file *tmp;
	loff_t ret;

	if ((u64)i_size_read(inode) > rlimit(RLIMIT_FSIZE))
		return NULL;
	/*
	 * In mnt_want_write()'s order, but never waiting for a thaw. Write
	 * access to the mount is held, not only looked at: a remount
	 * read-only meanwhile would otherwise meet an orphan made under it.
	 */
	if (!sb_start_write_trylock(sb))
		return NULL;
	if (mnt_get_write_access(parent.mnt)) {
		sb_end_write(sb);
		return NULL;
	}
	parent.dentry = dget_parent(file->f_path.dentry);
	old = override_creds(tc_clone_cred);
	tmp = kernel_tmpfile_open(mnt_idmap(parent.mnt), &parent,
				  S_IFREG | 0400,
				  O_RDWR | O_LARGEFILE | O_EXCL, tc_clone_cred);
	revert_creds(old);
	dput(parent.dentry);
	if (IS_ERR(tmp)) {
		mnt_put_write_access(parent.mnt);
		sb_end_write(sb);
		return NULL;
	}
	/*
	 * The file system's own clone, to the end of @file, inside the
	 * freeze protection taken above (vfs_clone_file_range() would wait
	 * for a thaw), and giving up rather than wait for @file's locks.
	 */
	ret = btrfs_clone_file_nowait(file, tmp);
	mnt_put_write_access(parent.mnt);
	sb_end_write(sb);
	if (ret >= 0 && i_size_read(file_inode(tmp)) == i_size_read(inode)) {
		clone = file_inode(tmp);
		ihold(clone);
	}
	fput(tmp);
	return clone;
}

/*
 * The published clone of @digest's keys in scope @scope on @sb, @size
 * bytes, with a user for the caller, or NULL; tc_clones_lock held.
 */
static struct tc_clone *tc_clone_find(u64 digest, u64 scope,
				      struct super_block *sb, loff_t size)
{
	struct tc_clone *c;

	hash_for_each_possible(tc_clones, c, node, digest) {
		if (c->digest == digest && c->scope == scope && c->sb == sb &&
		    c->size == size) {
			if (!c->users++) {
				list_del_init(&c->idle);
				tc_clones_nr_idle--;
			}
			return c;
		}
	}
	return NULL;
}

static u64 tc_clone_origin_hash(const struct tc_clone *c)
{
	return siphash_3u64((unsigned long)c->sb, c->origin_subvol,
			    c->origin_ino, &tc_clone_key);
}

/*
 * Make room for a clone of @fresh's origin (its sb and origin set) with
 * @fresh's keys; tc_clones_lock held. A file has one clone of its own at
 * most: one made from it before, of another layout (the file was written
 * since), holds extents the file no longer has, whose space nobody sees
 * in use (no quota, no du) and the file's owner cannot get back. Unused,
 * it is doomed (@doomed set: the caller wakes the reaper); in use, no
 * clone of the new layout is made, and the mapping maps the file itself.
 * So a reader who maps a file after each of its owner's rewrites keeps
 * at most one old copy of it on disk. A clone found by its keys from
 * another file (a reflink, a snapshot) keeps its own origin: its extents
 * are that file's.
 *
 * Return: false if the file's clone of another layout is in use.
 */
static bool tc_clone_origin_free(const struct tc_clone *fresh, bool *doomed)
{
	struct tc_clone *c;

	hash_for_each_possible(tc_clone_origins, c, origin_node,
			       tc_clone_origin_hash(fresh)) {
		if (c->sb != fresh->sb || c->origin_subvol != fresh->origin_subvol ||
		    c->origin_ino != fresh->origin_ino || c->digest == fresh->digest)
			continue;
		if (c->users)
			return false;
		tc_clone_unlink(c, &tc_clones_doomed);
		*doomed = true;
		return true;
	}
	return true;
}

/*
 * Publish @fresh (its inode, digest, scope, sb, origin and size set),
 * with one user, unless a clone of the same keys was published meanwhile:
 * that one is returned with a user, and @fresh is not published (the
 * caller drops it), nor if TC_CLONE_MAX clones live or its origin's clone
 * of another layout is in use (ERR_PTR(-EBUSY)). The caller enabled
 * btrfs's hook for @fresh (the code patching may sleep: not under the
 * lock).
 */
static struct tc_clone *tc_clone_add(struct tc_clone *fresh)
{
	bool doomed = false;
	struct tc_clone *c;

	spin_lock(&tc_clones_lock);
	c = tc_clone_find(fresh->digest, fresh->scope, fresh->sb, fresh->size);
	if (!c && (atomic_read(&tc_clones_live) >= TC_CLONE_MAX ||
		   !tc_clone_origin_free(fresh, &doomed))) {
		c = ERR_PTR(-EBUSY);
	} else if (!c) {
		c = fresh;
		c->users = 1;
		INIT_LIST_HEAD(&c->idle);
		hash_add(tc_clones, &c->node, c->digest);
		hash_add_rcu(tc_clone_inodes, &c->inode_node,
			     (unsigned long)c->inode);
		hash_add(tc_clone_origins, &c->origin_node,
			 tc_clone_origin_hash(c));
		atomic_inc(&tc_clones_live);
	}
	spin_unlock(&tc_clones_lock);
	if (doomed)
		mod_delayed_work(system_wq, &tc_clone_reaper, 0);
	return c;
}

/*
 * Make a clone of @file, whose keys hash to @digest, and publish it, or
 * use the one another mapper published meanwhile. Nobody waits for a
 * clone being made, nor does its making wait for the file's locks, which
 * any reader of the file, in another container, may hold for as long as
 * it likes (an O_DIRECT read it throttles): such a making fails, and the
 * mapping maps the file itself. Mappers of the same keys at once each
 * make one and all but the first drop theirs: one copy of the pages still.
 * @mine: whether the clone returned is the one made here.
 */
static struct tc_clone *tc_clone_build(struct tc_canon_scope *s,
				       struct file *file, u64 digest,
				       struct tc_clone_walk *w, bool *mine)
{
	struct tc_clone *fresh, *c;
	bool ok, doomed = false;
	u64 made;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	if (!fresh)
		return ERR_PTR(-ENOMEM);
	fresh->digest = digest;
	fresh->sb = file_inode(file)->i_sb;
	fresh->origin_subvol = tc_btrfs_subvol_id(file_inode(file));
	fresh->origin_ino = file_inode(file)->i_ino;
	/* Before the making: a clone it could not publish holds extents too. */
	spin_lock(&tc_clones_lock);
	ok = tc_clone_origin_free(fresh, &doomed);
	spin_unlock(&tc_clones_lock);
	if (doomed)
		mod_delayed_work(system_wq, &tc_clone_reaper, 0);
	if (!ok) {
		kfree(fresh);
		return ERR_PTR(-EBUSY);
	}
	fresh->inode = tc_clone_make(file);
	/*
	 * Its keys must be @digest's: a file changed between its proof and
	 * the clone (a write, a defragmentation) would publish an entry that
	 * every later mapping finds and none can use.
	 */
	if (!fresh->inode || !tc_clone_digest(fresh->inode, w, &made) ||
	    made != digest) {
		iput(fresh->inode);
		kfree(fresh);
		return ERR_PTR(-EBUSY);
	}
	fresh->scope = tc_canon_scope_id(s);
	fresh->size = i_size_read(fresh->inode);
	btrfs_canon_enable();
	c = tc_clone_add(fresh);	/* past the cap: an error, not ours */
	*mine = c == fresh;
	if (!*mine) {
		btrfs_canon_disable();
		iput(fresh->inode);
		kfree(fresh);
	}
	return c;
}

/*
 * The clone in @s whose pages are @file's, with a user for the caller:
 * found and compared key by key, or made if there is none (a mapping
 * that raced with another mapper's making uses the first one published).
 * ERR_PTR(-EBUSY) if none can be used: its making failed, or the file's
 * range is locked or changed, or a handout spoiled the comparison. The
 * mapping is then private.
 */
static struct tc_clone *tc_clone_get(struct tc_canon_scope *s,
				     struct file *file, u64 digest,
				     struct tc_clone_walk *w)
{
	struct inode *inode = file_inode(file);
	struct tc_clone *c;
	bool mine = false;

	spin_lock(&tc_clones_lock);
	c = tc_clone_find(digest, tc_canon_scope_id(s), inode->i_sb,
			  i_size_read(inode));
	spin_unlock(&tc_clones_lock);
	if (!c)
		c = tc_clone_build(s, file, digest, w, &mine);
	if (IS_ERR(c) || mine || tc_clone_same(s, inode, c->inode, w))
		return c;
	tc_extent_clone_put(c);
	return ERR_PTR(-EBUSY);
}

/*
 * A backing file of @c for a mapping of @file: @file's path for the user,
 * and @file's mount, so that noexec and nosuid are @file's. The clone's
 * dentry is a disconnected one (it has no name), as a file handle's.
 */
static struct file *tc_clone_open(struct tc_clone *c, struct file *file)
{
	struct path path = { .mnt = file->f_path.mnt };
	struct file *alias;

	ihold(c->inode);
	path.dentry = d_obtain_alias(c->inode);
	if (IS_ERR(path.dentry))
		return ERR_CAST(path.dentry);
	alias = backing_file_open(file, O_RDONLY | O_LARGEFILE, &path,
				  file->f_cred);
	dput(path.dentry);
	return alias;
}

/**
 * tc_extent_mmap_file - the file to map for a private mapping of @file
 * @file: a file in a sharing scope, being mapped MAP_PRIVATE
 *
 * A clone of @file whose pages every other private mapping of the same
 * extents in the scope maps too, opened as a backing file with @file's
 * path. Only when the mapping's data is @file's: it was opened for
 * reading, nobody has it open for writing, no page of its cache is dirty
 * or under writeback, every page is a page of a data extent, and its
 * i_version did not move from before the proof to after the open. A
 * truncation of @file makes its substituted mappings map it again
 * (tc_size_changed(), tc_mmap_done()).
 *
 * Return: the backing file, or NULL to map @file itself.
 */
struct file *tc_extent_mmap_file(struct file *file)
{
	struct inode *inode = file_inode(file);
	struct address_space *mapping = file->f_mapping;
	struct tc_clone_walk *w = NULL;
	struct tc_canon_scope *s;
	struct file *alias = NULL;
	struct tc_clone *c = NULL;
	u64 version, digest;

	if (!S_ISREG(inode->i_mode) || !tc_canon_in_scope(inode))
		return NULL;
	s = tc_canon_hold(inode);
	if (!s)
		return NULL;
	/* Someone may write it while it is mapped: keep it coherent. */
	if (!(file->f_mode & FMODE_READ) || !tc_clone_cred ||
	    inode_is_open_for_write(inode))
		goto out;
	w = kmalloc(sizeof(*w), GFP_KERNEL_ACCOUNT);
	if (!w)
		goto out;
	/* As for a member (totalcow-mmap.c): before the proof. */
	set_bit(AS_PAGE_ALIAS_MAPPED, &mapping->flags);
	version = inode_query_iversion(inode);
	if (mapping_tagged(mapping, PAGECACHE_TAG_DIRTY) ||
	    mapping_tagged(mapping, PAGECACHE_TAG_WRITEBACK) ||
	    !tc_clone_digest(inode, w, &digest))
		goto out;
	c = tc_clone_get(s, file, digest, w);
	if (IS_ERR(c)) {
		c = NULL;
		goto out;
	}
	alias = tc_clone_open(c, file);
	if (IS_ERR(alias)) {
		alias = NULL;
		goto out;
	}
	/* From here the record holds the clone's user, until the release. */
	if (tc_mmap_track(alias, file, version, c)) {
		fput(alias);
		alias = NULL;
		goto out;
	}
	c = NULL;
	/* A change that raced with the proof: map @file after all. */
	if (!inode_eq_iversion(inode, version) ||
	    mapping_tagged(mapping, PAGECACHE_TAG_DIRTY) ||
	    mapping_tagged(mapping, PAGECACHE_TAG_WRITEBACK)) {
		fput(alias);
		alias = NULL;
	}
out:
	if (c)
		tc_extent_clone_put(c);
	tc_canon_count_mmap(s, alias);
	tc_canon_release(s);
	kfree(w);
	return alias;
}

static int __init tc_extent_mmap_init(void)
{
	get_random_bytes(&tc_clone_key, sizeof(tc_clone_key));
	tc_clone_cred = prepare_kernel_cred(&init_task);
	return tc_clone_cred ? 0 : -ENOMEM;
}
late_initcall(tc_extent_mmap_init);

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_EXTENT_MMAP_KUNIT_TEST)
#include "totalcow_extent_mmap_kunit.c"
#endif
