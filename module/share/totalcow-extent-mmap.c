// SPDX-License-Identifier: GPL-2.0-only
/*
 * Shared extents, mapped (docs/design.md, "Mapped pages of shared
 * extents"). A canonical page cannot be mapped into a user's VMA: its
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
 * space is never handed out again while it lives; nobody can write it,
 * so a mapping shows the file's data as of mmap(), as a member's does.
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
#include <linux/sched/task.h>
#include <linux/siphash.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "canon.h"
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
/* How long a mapping waits for a clone another mapper is making. */
#define TC_CLONE_WAIT		(2 * HZ)
/* Clones the reaper frees at once, outside the lock. */
#define TC_CLONE_REAP_BATCH	32

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
	struct list_head idle;		/* in tc_clones_idle while unused */
	struct rcu_head rcu;
	u64 digest;
	u64 scope;			/* tc_canon_scope_id() */
	struct super_block *sb;
	loff_t size;
	/* NULL while @building, and if the making failed. */
	struct inode *inode;
	unsigned long users;
	unsigned long idle_since;	/* jiffies */
	bool building;
};

static DEFINE_HASHTABLE(tc_clones, 8);
static DEFINE_HASHTABLE(tc_clone_inodes, 8);
static LIST_HEAD(tc_clones_idle);	/* oldest first */
static unsigned int tc_clones_nr_idle;
static DEFINE_SPINLOCK(tc_clones_lock);
static atomic_t tc_clones_live = ATOMIC_INIT(0);
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
	return tc_canon_prove(inode, index, nr, keys, proven, &isize) == nr &&
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

/* Unpublish idle @c onto @dead; tc_clones_lock held. */
static void tc_clone_unlink(struct tc_clone *c, struct list_head *dead)
{
	hash_del(&c->node);
	hash_del_rcu(&c->inode_node);
	list_move_tail(&c->idle, dead);
	tc_clones_nr_idle--;
}

/* Free the clones on @dead: the last iput() deletes each file. */
static void tc_clone_free(struct list_head *dead)
{
	struct tc_clone *c, *next;

	list_for_each_entry_safe(c, next, dead, idle) {
		atomic_dec(&tc_clones_live);
		iput(c->inode);
		btrfs_canon_disable();
		kfree_rcu(c, rcu);
	}
}

/* Free the clones idle for TC_CLONE_IDLE, a batch at a time. */
static void tc_clone_reap(struct work_struct *work)
{
	unsigned long next = 0;
	struct tc_clone *c;
	LIST_HEAD(dead);
	int n = 0;

	spin_lock(&tc_clones_lock);
	while ((c = list_first_entry_or_null(&tc_clones_idle, struct tc_clone,
					     idle))) {
		if (time_before(jiffies, c->idle_since + TC_CLONE_IDLE)) {
			next = c->idle_since + TC_CLONE_IDLE - jiffies;
			break;
		}
		if (n++ == TC_CLONE_REAP_BATCH) {
			next = 1;
			break;
		}
		tc_clone_unlink(c, &dead);
	}
	spin_unlock(&tc_clones_lock);
	tc_clone_free(&dead);
	if (next)
		schedule_delayed_work(&tc_clone_reaper, next);
}

/*
 * Release what tc_clone_get() returned. The last user
 * leaves the clone idle, and the oldest idle one goes if there are too
 * many.
 */
void tc_extent_clone_put(struct tc_clone *c)
{
	LIST_HEAD(dead);

	spin_lock(&tc_clones_lock);
	if (!--c->users && !c->inode) {
		/* Its making failed: unpublished then, never in the RCU table. */
		spin_unlock(&tc_clones_lock);
		kfree(c);
		return;
	}
	if (!c->users) {
		c->idle_since = jiffies;
		list_add_tail(&c->idle, &tc_clones_idle);
		if (++tc_clones_nr_idle > TC_CLONE_IDLE_MAX)
			tc_clone_unlink(list_first_entry(&tc_clones_idle,
							 struct tc_clone, idle),
					&dead);
	}
	spin_unlock(&tc_clones_lock);
	tc_clone_free(&dead);
	if (!delayed_work_pending(&tc_clone_reaper))
		schedule_delayed_work(&tc_clone_reaper, TC_CLONE_IDLE);
}

/**
 * tc_extent_clone_close - drop the clones of a file system being closed
 * @sb: its super block, from close_ctree() (btrfs's ->close hook), after
 *	the VFS evicted its unused inodes and before the last commit
 *
 * Every clone of @sb is idle: a mapping holds its mount, so a file system
 * with one is not being closed. The last iput() of each deletes it; the
 * commit that follows makes that durable (an unclean stop leaves orphans,
 * which the next mount deletes).
 */
void tc_extent_clone_close(struct super_block *sb)
{
	struct tc_clone *c, *next;
	LIST_HEAD(dead);

	if (!atomic_read(&tc_clones_live))
		return;
	spin_lock(&tc_clones_lock);
	list_for_each_entry_safe(c, next, &tc_clones_idle, idle)
		if (c->sb == sb)
			tc_clone_unlink(c, &dead);
	spin_unlock(&tc_clones_lock);
	tc_clone_free(&dead);
}

/*
 * Clone @file whole into a new unlinked file beside it: its inode, with a
 * reference, or NULL. Made under the kernel's credential in @file's
 * directory. A frozen or read-only file system makes none: mmap() never
 * waits for a thaw.
 */
static struct inode *tc_clone_make(struct file *file)
{
	struct inode *inode = file_inode(file), *clone = NULL;
	struct super_block *sb = inode->i_sb;
	struct path parent = { .mnt = file->f_path.mnt };
	const struct cred *old;
	struct file *tmp;
	loff_t ret;

	if (!file->f_op->remap_file_range || __mnt_is_readonly(parent.mnt) ||
	    !sb_start_write_trylock(sb))
		return NULL;
	parent.dentry = dget_parent(file->f_path.dentry);
	old = override_creds(tc_clone_cred);
	tmp = kernel_tmpfile_open(mnt_idmap(parent.mnt), &parent,
				  S_IFREG | 0400,
				  O_RDWR | O_LARGEFILE | O_EXCL, tc_clone_cred);
	revert_creds(old);
	dput(parent.dentry);
	if (IS_ERR(tmp)) {
		sb_end_write(sb);
		return NULL;
	}
	/*
	 * The file system's own clone, to the end of @file, called as
	 * vfs_clone_file_range() does but inside the freeze protection
	 * taken above (that one would wait for a thaw).
	 */
	ret = file->f_op->remap_file_range(file, 0, tmp, 0, 0, 0);
	sb_end_write(sb);
	if (ret >= 0 && i_size_read(file_inode(tmp)) == i_size_read(inode)) {
		clone = file_inode(tmp);
		ihold(clone);
	}
	fput(tmp);
	return clone;
}

/*
 * Make the clone @c stands for, with the caller's user: published, or
 * left failed (no inode) for those waiting on it.
 */
static void tc_clone_build(struct tc_clone *c, struct file *file)
{
	struct inode *clone = tc_clone_make(file);

	/* It may patch code (the first clone on no scope): not under the lock. */
	if (clone)
		btrfs_canon_enable();
	spin_lock(&tc_clones_lock);
	if (clone) {
		c->inode = clone;
		atomic_inc(&tc_clones_live);
		hash_add_rcu(tc_clone_inodes, &c->inode_node,
			     (unsigned long)clone);
	} else {
		hash_del(&c->node);	/* nobody finds a failed one */
	}
	spin_unlock(&tc_clones_lock);
	/* Pairs with the acquire in tc_clone_get(): @c->inode first. */
	smp_store_release(&c->building, false);
	wake_up_var(&c->building);
}

/*
 * The clone in @s whose pages are @file's, with a user for the caller:
 * found and compared key by key, or made if there is none. A clone being
 * made for the same keys (a fleet mapping one file at once) is waited
 * for, at most TC_CLONE_WAIT: one copy, not one each. ERR_PTR(-EBUSY) if
 * one may be but cannot be used (its making failed or is slow; the file's
 * range is locked, changed, or a handout spoiled the comparison): the
 * mapping is then private, rather than a second clone of the same bytes.
 */
static struct tc_clone *tc_clone_get(struct tc_canon_scope *s,
				     struct file *file, u64 digest,
				     struct tc_clone_walk *w)
{
	struct inode *inode = file_inode(file);
	loff_t size = i_size_read(inode);
	u64 scope = tc_canon_scope_id(s);
	struct tc_clone *c, *fresh;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	if (!fresh)
		return ERR_PTR(-ENOMEM);
	spin_lock(&tc_clones_lock);
	hash_for_each_possible(tc_clones, c, node, digest) {
		if (c->digest == digest && c->scope == scope &&
		    c->sb == inode->i_sb && c->size == size) {
			if (!c->users++) {
				list_del_init(&c->idle);
				tc_clones_nr_idle--;
			}
			spin_unlock(&tc_clones_lock);
			kfree(fresh);
			goto found;
		}
	}
	c = fresh;
	c->digest = digest;
	c->scope = scope;
	c->sb = inode->i_sb;
	c->size = size;
	c->users = 1;
	c->building = true;
	INIT_LIST_HEAD(&c->idle);
	hash_add(tc_clones, &c->node, digest);
	spin_unlock(&tc_clones_lock);
	tc_clone_build(c, file);
	if (c->inode)
		return c;
	tc_extent_clone_put(c);
	return ERR_PTR(-EBUSY);
found:
	/* Acquire: pairs with tc_clone_build()'s release, @c->inode after. */
	wait_var_event_timeout(&c->building, !smp_load_acquire(&c->building),
			       TC_CLONE_WAIT);
	/* Acquire, as above: the wait may have timed out. */
	if (!smp_load_acquire(&c->building) && c->inode &&
	    tc_clone_same(s, inode, c->inode, w))
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

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_KUNIT_TEST)
#include "totalcow_extent_mmap_kunit.c"
#endif
