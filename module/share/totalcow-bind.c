// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: member files bound to their template
 * files, and the proofs that a member's pages are the template's
 * (docs/design/policy.md and docs/design/groups-and-proofs.md).
 *
 * A member file is bound to the template file at the same relative path
 * if that file has the same inode number and generation (a snapshot keeps
 * both; a renamed or replaced file does not), lies in the member's own
 * subvolume (not a nested one) and can be denied writes (like a running
 * executable: ETXTBSY) for as long as the binding lives; failing that, to
 * the template file that holds the member's first data extent (a reflink
 * copy, a renamed file). A binding lives in a lookup table keyed by the
 * member's mapping, carries the identity its alias entries bear, and
 * keeps the policy's one-byte signatures per page.
 *
 * Where the file system records a member range as the very bytes of the
 * template's (the same on-disk extents, totalcow-btrfs.c), its empty
 * slots become aliases without reading at all (tc_alias_proven()); a
 * private mapping of a member file whose every page is so
 * (tc_file_proven()) maps the template file (totalcow-mmap.c). Content is
 * always proven (extents) or verified (compare, totalcow-share.c), and a
 * member must be a snapshot of the template (its parent UUID), so a
 * wrongly configured group is refused or wastes work but never returns a
 * wrong byte.
 */

#include <kunit/visibility.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/iversion.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/page_alias.h>
#include <linux/pagemap.h>
#include <linux/rhashtable.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "totalcow-bind.h"
#include "totalcow-btrfs.h"
#include "totalcow-canon.h"
#include "totalcow-group.h"
#include "totalcow-reader-hold.h"
#include "totalcow-share.h"
#include "totalcow-sig.h"

static const struct rhashtable_params tc_file_params = {
	.key_len = sizeof(struct address_space *),
	.key_offset = offsetof(struct tc_file, mapping),
	.head_offset = offsetof(struct tc_file, node),
	.automatic_shrinking = true,
};

static struct rhashtable tc_files;
DEFINE_SPINLOCK(tc_files_lock);
static struct workqueue_struct *tc_wq;	/* frees unbound files */
static atomic_long_t tc_next_id;	/* binding identities */

/*
 * After storing aliases for @tf: if it was unbound meanwhile, its unbind
 * may have cleared the mapping before they were stored; clear it again.
 * Pairs with the barrier in tc_file_unbind_finish().
 */
bool tc_alias_fence(struct tc_file *tf)
{
	smp_mb();	/* the aliases stored, then the flag loaded */
	if (!READ_ONCE(tf->dead))
		return false;
	filemap_clear_page_aliases(tf->mapping);
	return true;
}

/*
 * The policy bytes of page @index of @tf, or NULL if their chunk is absent
 * and @gfp is 0 or the allocation fails (then nothing is recorded for the
 * page: it is compared again next time, never shared wrongly).
 */
struct tc_sig_pair *tc_sigs(struct tc_file *tf, pgoff_t index, gfp_t gfp)
{
	unsigned long c = index >> TC_SIG_CHUNK_SHIFT;
	struct tc_sig_pair *chunk, *old;
	unsigned long i;

	chunk = xa_load(&tf->sigs, c);
	if (!chunk && gfp) {
		chunk = kmalloc(TC_SIG_CHUNK_BYTES,
				gfp | __GFP_ACCOUNT | __GFP_NOWARN);
		if (!chunk)
			return NULL;
		for (i = 0; i < TC_SIG_CHUNK; i++)
			chunk[i] = (struct tc_sig_pair){ 0, TC_SIG_UNKNOWN };
		old = xa_cmpxchg(&tf->sigs, c, NULL, chunk, gfp | __GFP_NOWARN);
		if (old) {	/* another reader's, or no memory */
			kfree(chunk);
			chunk = xa_is_err(old) ? NULL : old;
		} else {
			atomic_long_add(TC_SIG_CHUNK_BYTES,
					&tf->group->policy_bytes);
		}
	}
	return chunk ? chunk + (index & (TC_SIG_CHUNK - 1)) : NULL;
}

VISIBLE_IF_KUNIT void tc_sigs_free(struct tc_file *tf)
{
	struct tc_sig_pair *chunk;
	unsigned long c, n = 0;

	xa_for_each(&tf->sigs, c, chunk) {
		kfree(chunk);
		n++;
		cond_resched();
	}
	xa_destroy(&tf->sigs);
	atomic_long_sub(n * TC_SIG_CHUNK_BYTES, &tf->group->policy_bytes);
}

static void tc_file_free_work(struct work_struct *work)
{
	struct tc_file *tf = container_of(to_rcu_work(work), struct tc_file,
					  free_work);

	atomic_inc(&tf->tinode->i_writecount);	/* allow writes again */
	path_put(&tf->tpath);
	tc_sigs_free(tf);
	kobject_put(&tf->group->kobj);
	kfree(tf);
}

void tc_file_put(struct tc_file *tf)
{
	if (refcount_dec_and_test(&tf->ref)) {
		INIT_RCU_WORK(&tf->free_work, tc_file_free_work);
		queue_rcu_work(tc_wq, &tf->free_work);
	}
}

/* A new binding's identity, for its alias entries. */
VISIBLE_IF_KUNIT unsigned long tc_file_new_id(void)
{
	return atomic_long_inc_return(&tc_next_id) & TC_ID_MASK;
}

/* Under RCU: the live binding of @mapping, without a reference. */
struct tc_file *tc_file_lookup(struct address_space *mapping)
{
	return rhashtable_lookup(&tc_files, &mapping, tc_file_params);
}

struct tc_file *tc_file_get(struct address_space *mapping)
{
	struct tc_file *tf;

	rcu_read_lock();
	tf = tc_file_lookup(mapping);
	if (tf && !refcount_inc_not_zero(&tf->ref))
		tf = NULL;
	rcu_read_unlock();
	return tf;
}

/*
 * Enter @tf in the lookups, tc_files_lock held: 0, -EEXIST if @tf's
 * mapping is bound already, or -ENOMEM if the table cannot grow
 * (GFP_ATOMIC).
 */
VISIBLE_IF_KUNIT int tc_file_hash(struct tc_file *tf)
{
	lockdep_assert_held(&tc_files_lock);
	return rhashtable_lookup_insert_fast(&tc_files, &tf->node,
					     tc_file_params);
}

/*
 * Take @tf out of the lookups and its lists; tc_files_lock held, under
 * which the member inode cannot finish eviction (->release waits for the
 * lock). Aliases made by a reader that still holds @tf are cleared by that
 * reader (tc_alias_fence()).
 */
VISIBLE_IF_KUNIT void tc_file_unlink(struct tc_file *tf)
{
	lockdep_assert_held(&tc_files_lock);
	rhashtable_remove_fast(&tc_files, &tf->node, tc_file_params);
	list_del_init(&tf->list);
	list_del_init(&tf->mlist);
	WRITE_ONCE(tf->dead, true);
}

/*
 * Unbind @tf, first half, under tc_files_lock: unlink it and keep the
 * member inode for tc_file_unbind_finish() (NULL if it is being evicted:
 * its final truncation drops the aliases).
 */
static void tc_file_unbind_begin(struct tc_file *tf)
{
	tc_file_unlink(tf);
	tf->unbind_inode = igrab(tf->mapping->host);
}

/*
 * Unbind @tf, second half, without tc_files_lock: drop its aliases (a walk
 * over the whole mapping, which may sleep between batches) and the
 * binding's reference; it is freed after the last one.
 */
static void tc_file_unbind_finish(struct tc_file *tf)
{
	struct inode *inode = tf->unbind_inode;

	smp_mb();	/* the flag stored, then the aliases cleared */
	if (inode) {
		filemap_clear_page_aliases(tf->mapping);
		clear_bit(AS_PAGE_ALIASES, &tf->mapping->flags);
		iput(inode);
	}
	tc_file_put(tf);
}

/*
 * The first file of @head, a member's files (@m) or a group's, passing
 * over the cursors of stats readers (tc_pages_shared(): no mapping, on a
 * group's list only); NULL if none. tc_files_lock held.
 */
static struct tc_file *tc_first_file(struct list_head *head,
				     struct tc_member *m)
{
	struct tc_file *tf;

	lockdep_assert_held(&tc_files_lock);
	if (m)
		return list_first_entry_or_null(head, struct tc_file, mlist);
	list_for_each_entry(tf, head, list)
		if (tf->mapping)
			return tf;
	return NULL;
}

/*
 * Unbind the files of member @m, or of group @g if @m is NULL, in batches:
 * neither the spinlock nor the walk without it grows with the number of
 * files or their size (a stats reader's cursor is one entry, and a reader
 * has one at a time). Caller holds tc_groups_lock (no new bindings).
 */
void tc_unbind_files(struct tc_group *g, struct tc_member *m)
{
	struct list_head *head = m ? &m->files : &g->files;
	struct tc_file *tf, *n;
	LIST_HEAD(batch);
	unsigned int i;

	lockdep_assert_held(&tc_groups_lock);
	do {
		spin_lock(&tc_files_lock);
		for (i = 0; i < TC_UNBIND_BATCH; i++) {
			tf = tc_first_file(head, m);
			if (!tf)
				break;
			tc_file_unbind_begin(tf);
			list_add_tail(&tf->list, &batch);
		}
		spin_unlock(&tc_files_lock);
		list_for_each_entry_safe(tf, n, &batch, list) {
			list_del_init(&tf->list);
			tc_file_unbind_finish(tf);
			cond_resched();
		}
	} while (i);
}

/*
 * The root directory of the subvolume @dentry is in (referenced): the
 * first subvolume root above it. NULL if its ancestors end first (a
 * disconnected dentry).
 */
static struct dentry *tc_subvol_root(struct dentry *dentry)
{
	struct dentry *d = dget(dentry), *parent;

	while (!tc_btrfs_is_subvol_root(d_inode(d))) {
		if (IS_ROOT(d)) {
			dput(d);
			return NULL;
		}
		parent = dget_parent(d);
		dput(d);
		d = parent;
	}
	return d;
}

/* @path relative to @root (an ancestor), into @buf; NULL if too long. */
static const char *tc_relative_path(const struct path *path,
				    const struct path *root, char *buf,
				    char *rbuf)
{
	char *p = dentry_path_raw(path->dentry, buf, PATH_MAX);
	char *r = dentry_path_raw(root->dentry, rbuf, PATH_MAX);
	size_t n;

	if (IS_ERR(p) || IS_ERR(r))
		return NULL;
	n = strlen(r);
	if (n == 1)	/* the root of the file system */
		n = 0;
	if (strncmp(p, r, n) || p[n] != '/' || !p[n + 1])
		return NULL;
	return p + n + 1;
}

/*
 * @inode (a reference, consumed) as a path in the template's mount, into
 * @tp: a template file found by its extents has no path we looked up, so
 * it gets its dentry from the dcache, or a disconnected one
 * (d_obtain_alias(), as exportfs does). The path serves the private
 * mappings' backing files (tc_mmap_file()), which keep the member's path
 * for users to see.
 */
static int tc_template_path(struct tc_group *g, struct inode *inode,
			    struct path *tp)
{
	struct dentry *dentry = d_obtain_alias(inode);

	if (IS_ERR(dentry))
		return PTR_ERR(dentry);
	tp->mnt = mntget(g->template.mnt);
	tp->dentry = dentry;
	return 0;
}

/*
 * What tc_template_of() needs of a member, taken under tc_groups_lock and
 * used after it: the lookups run without the lock.
 */
struct tc_member_view {
	struct path root;	/* held; unset for an automatic member */
	u32 dev;
	bool automatic;
};

/*
 * Find the template file of @file, a member file, into @tp (a reference
 * held) and deny writes to it. Returns 0, -ENOMEM or -EBUSY if it may work
 * later, or another error if the file cannot be shared.
 *
 * First the template file at the same path: the lookup runs with the
 * credentials of the group's creator, the way overlayfs looks up its
 * layers with its mounter's: whether a member file is shared does not
 * depend on who reads it first, and a reader who may not search the
 * template's directories cannot make a file unshareable for everyone. It
 * stays on the template's mount and subvolume: no mount point, symbolic
 * link or nested subvolume is crossed. It counts if it has the member's
 * inode number and generation (a snapshot keeps both).
 *
 * Then, if there is none or it does not have the member's first data
 * extent, the template file that has (a reflink copy under another name,
 * a renamed file, one cloned over: tc_btrfs_extent_template(), bounded,
 * independent of anyone's credentials). Which file is found only decides
 * which pages are candidates: each is proven or compared before sharing.
 */
static int tc_template_of(struct file *file, struct tc_group *g,
			  const struct tc_member_view *m, struct path *tp,
			  bool *by_extents)
{
	struct inode *inode = file_inode(file), *t = NULL, *found;
	const struct cred *old;
	char *buf, *rbuf;
	const char *rel;
	int err;

	*by_extents = false;
	if (!S_ISREG(inode->i_mode))
		return -EINVAL;
	buf = kmalloc(2 * PATH_MAX, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	old = override_creds(g->cred);
	if (tc_path_dev(&file->f_path) != m->dev) {
		/* In a nested subvolume: not the member's. */
		revert_creds(old);
		kfree(buf);
		return -EXDEV;
	}
	rbuf = buf + PATH_MAX;
	if (m->automatic) {
		struct path root = { .mnt = file->f_path.mnt };

		root.dentry = tc_subvol_root(file->f_path.dentry);
		rel = root.dentry ? tc_relative_path(&file->f_path, &root, buf,
						     rbuf) : NULL;
		dput(root.dentry);
	} else {
		rel = tc_relative_path(&file->f_path, &m->root, buf, rbuf);
	}
	err = rel ? vfs_path_lookup(g->template.dentry, g->template.mnt, rel,
				    LOOKUP_NO_XDEV | LOOKUP_NO_SYMLINKS, tp) :
		    -ENAMETOOLONG;
	if (!err && tc_path_dev(tp) != g->tdev) {
		path_put(tp);
		err = -EXDEV;
	}
	revert_creds(old);
	kfree(buf);
	if (err == -ENOMEM)
		return err;
	if (!err) {
		t = d_inode(tp->dentry);
		/* A snapshot keeps inode numbers and generations; a new file not. */
		if (!S_ISREG(t->i_mode) || t->i_ino != inode->i_ino ||
		    t->i_generation != inode->i_generation || t == inode) {
			path_put(tp);
			t = NULL;
		}
	}
	found = tc_btrfs_extent_template(inode, d_inode(g->template.dentry), t);
	if (found == ERR_PTR(-ENOMEM) || (found == ERR_PTR(-EAGAIN) && !t)) {
		/* No memory, or its extents being changed: not refused. */
		if (t)
			path_put(tp);
		return found == ERR_PTR(-ENOMEM) ? -ENOMEM : -EBUSY;
	}
	if (!IS_ERR(found) && found != t) {
		if (t)
			path_put(tp);
		err = tc_template_path(g, found, tp);
		if (err)
			return err == -ENOMEM ? err : -ENOENT;
		t = found;
		*by_extents = true;
	} else if (!IS_ERR(found)) {
		iput(found);	/* @t itself: its path is held */
	}
	if (!t)
		return -ENOENT;
	if (!atomic_dec_unless_positive(&t->i_writecount)) {
		path_put(tp);
		return -ENOENT;
	}
	/*
	 * No writer now, and none can come while the binding lives. A
	 * writer that came before (through a descriptor opened before the
	 * template was made read-only: btrfs checks that at open only) may
	 * have left data in the template's page cache that is not in its
	 * extents yet; the extent proof would then license its pages for
	 * members whose extents are the old ones. Not now: at a later miss,
	 * once it is on disk (and in new extents of the template's own).
	 */
	if (mapping_tagged(t->i_mapping, PAGECACHE_TAG_DIRTY) ||
	    mapping_tagged(t->i_mapping, PAGECACHE_TAG_WRITEBACK)) {
		atomic_inc(&t->i_writecount);
		path_put(tp);
		return -EBUSY;
	}
	return 0;
}

/* What a reader found under tc_groups_lock, for tc_file_bind() to use after. */
struct tc_bind {
	struct tc_file *tf;		/* bound already */
	struct tc_group *g;		/* tc_binders_get(), if m is set */
	/*
	 * Once the lock is let go: compared, and its binders count put if
	 * an admin added it (such a member is freed after they are gone).
	 */
	struct tc_member *m;
	struct tc_member_view mv;
	bool template;			/* in no group: a template's subvolume */
};

/*
 * Find @file's member under tc_groups_lock, with the reader's hold rules
 * (totalcow-reader-hold.h): comparisons only. A file in no member
 * subvolume joins a group by lineage (tc_auto_join()) if @l, its
 * subvolume's lineage, is given; if it is needed and not given, returns
 * -EAGAIN for the caller to read it and come back.
 *
 * Return: 0 with @b set; -ENOENT in no group; -EAGAIN.
 */
static int tc_bind_find(struct file *file, struct address_space *mapping,
			const struct tc_lineage *l, struct tc_member **spare,
			struct tc_bind *b)
{
	struct inode *inode = file_inode(file);
	struct tc_group *g;
	int err = 0;

	mutex_lock(&tc_groups_lock);
	tc_reader_hold_begin();
	b->tf = tc_file_get(mapping);
	if (b->tf)
		goto unlock;
	b->m = tc_find_member(&file->f_path, &g);
	if (!b->m) {
		b->template = tc_in_template_subvol(inode);
		if (b->template) {
			err = -ENOENT;
			goto unlock;
		}
		if (!l) {
			err = tc_auto_possible(inode) ? -EAGAIN : -ENOENT;
			goto unlock;
		}
		b->m = tc_auto_join(file, l, spare, &g);
		if (!b->m) {
			err = -ENOENT;
			goto unlock;
		}
	}
	b->g = g;
	tc_binders_get(g, b->m);
	b->mv.dev = b->m->dev;
	b->mv.automatic = b->m->automatic;
	if (!b->m->automatic) {
		b->mv.root = b->m->root;
		path_get(&b->mv.root);
	}
unlock:
	tc_reader_hold_end();
	mutex_unlock(&tc_groups_lock);
	return err;
}

/*
 * Enter @tf, @file's binding, as @b's: if the file's member is still the
 * one tc_bind_find() found, in a group still listed (a member or group
 * that left meanwhile is not found), and no other reader bound the file
 * meanwhile. Consumes @tf; returns the file's binding, or NULL.
 */
static struct tc_file *tc_bind_enter(struct tc_bind *b, struct tc_file *tf,
				     struct file *file, bool by_extents)
{
	struct address_space *mapping = tf->mapping;
	struct tc_group *g = b->g, *now;
	struct tc_member *m = b->m;
	struct tc_file *old;
	int err;

	mutex_lock(&tc_groups_lock);
	tc_reader_hold_begin();
	old = tc_file_get(mapping);
	if (old || tc_find_member(&file->f_path, &now) != m || now != g)
		goto unlock;
	tf->group = g;
	tf->member = m;
	spin_lock(&tc_files_lock);
	/* No other binding of @mapping: they are entered under the lock. */
	err = tc_file_hash(tf);
	if (!err) {
		list_add_tail(&tf->list, &g->files);
		list_add_tail(&tf->mlist, &m->files);
		set_bit(AS_PAGE_ALIASES, &mapping->flags);
	}
	spin_unlock(&tc_files_lock);
	if (err)	/* no memory for a bigger table (GFP_ATOMIC) */
		goto unlock;
	kobject_get(&g->kobj);
	tc_count(g, TC_FILES_BOUND, 1);
	if (by_extents)
		tc_count(g, TC_FILES_BOUND_BY_EXTENTS, 1);
	old = tf;
	tf = NULL;
unlock:
	tc_reader_hold_end();
	mutex_unlock(&tc_groups_lock);
	if (tf) {	/* not entered: no chunks yet */
		atomic_inc(&tf->tinode->i_writecount);
		path_put(&tf->tpath);
		kfree(tf);
	}
	return old;
}

/**
 * tc_file_bind - bind a member file to its template file, at a read miss
 * @file: the file read
 * @mapping: its page cache
 *
 * In three steps, so that a reader holds tc_groups_lock, which every
 * tenant's first reads take, only to compare (totalcow-reader-hold.h):
 * find the member under the lock; look the template file up, and
 * allocate the binding, without it (charged to the reader, at whatever
 * the reader's memory cgroup makes that cost); enter the binding under
 * the lock if the member is still there. A file in no group is asked
 * about again at its next miss if memory ran out or its member left
 * meanwhile, and never again (until tc_reclassify()) otherwise.
 *
 * Return: the binding, with a reference; or NULL.
 */
struct tc_file *tc_file_bind(struct file *file, struct address_space *mapping)
{
	unsigned long gen = tc_classify_begin();
	struct tc_lineage l, *lineage = NULL;
	struct tc_member *spare = NULL;
	struct tc_bind b = { };
	struct tc_file *tf;
	bool by_extents;
	struct path tp;
	int err;

	err = tc_bind_find(file, mapping, NULL, NULL, &b);
	if (err == -EAGAIN) {
		/* Before the lock: tree searches, an allocation. */
		if (tc_btrfs_lineage(file_inode(file), &l, TC_AUTO_HOPS))
			return NULL;
		lineage = &l;
		spare = kzalloc(sizeof(*spare), GFP_KERNEL_ACCOUNT);
		if (!spare)
			return NULL;
		spare->dev = tc_path_dev(&file->f_path);
		err = tc_bind_find(file, mapping, &l, &spare, &b);
		kfree(spare);	/* unless it joined */
	}
	if (b.tf)
		return b.tf;
	if (err) {
		/*
		 * In no group: a snapshot of a subvolume in a sharing scope
		 * joins that scope (its files share extents from this read on),
		 * unless it is a group's template; any other file is never
		 * asked about again, unless memory ran out.
		 */
		if (b.template || !tc_canon_follow(file_inode(file), lineage))
			tc_classify_none(mapping, gen);
		return NULL;
	}
	tf = NULL;
	err = tc_template_of(file, b.g, &b.mv, &tp, &by_extents);
	if (err) {
		/*
		 * Out of memory, or the template file's data not on disk yet:
		 * not shared now, asked again at the next miss.
		 */
		if (err != -ENOMEM && err != -EBUSY) {
			tc_count(b.g, TC_FILES_REFUSED, 1);
			/* A scope still shares its extents (tc_read_miss()). */
			if (!tc_canon_in_scope(file_inode(file)))
				tc_classify_none(mapping, gen);
		}
		goto out;
	}
	tf = kzalloc(sizeof(*tf), GFP_KERNEL_ACCOUNT);
	if (!tf) {
		atomic_inc(&d_inode(tp.dentry)->i_writecount);
		path_put(&tp);
		goto out;
	}
	/* Chunks come as pages are read (tc_sigs()); so do their nodes. */
	xa_init_flags(&tf->sigs, XA_FLAGS_ACCOUNT);
	tf->mapping = mapping;
	tf->tpath = tp;
	tf->tinode = d_inode(tp.dentry);
	tf->nr_pages = DIV_ROUND_UP(i_size_read(tf->tinode), PAGE_SIZE);
	tf->id = tc_file_new_id();
	refcount_set(&tf->ref, 2);	/* the binding's and ours */
	tf = tc_bind_enter(&b, tf, file, by_extents);
out:
	if (!b.mv.automatic)
		path_put(&b.mv.root);
	tc_binders_put(b.g, b.mv.automatic ? NULL : b.m);
	return tf;
}

/*
 * Lock @tf's member inode against every change of its data that could race
 * a proof: buffered writes, truncate, fallocate, hole punch, reflink and
 * dedupe all hold i_rwsem exclusively in btrfs; only direct I/O writes
 * inside the file's size may hold it shared, and those are fenced by
 * i_dio_count and i_version (see tc_alias_proven()). A trylock: a reader
 * never waits for a writer here, it reads and compares instead.
 */
static bool tc_proof_lock(struct tc_file *tf, u64 *version)
{
	struct inode *inode = tf->mapping->host;

	if (!inode_trylock_shared(inode))
		return false;
	/* Every write of data in btrfs bumps i_version (update_time_for_write). */
	*version = inode_query_iversion(inode);
	if (atomic_read(&inode->i_dio_count)) {
		inode_unlock_shared(inode);
		return false;
	}
	return true;
}

/* Did anything change @tf's member since tc_proof_lock() returned @version? */
bool tc_proof_changed(struct tc_file *tf, u64 version)
{
	struct inode *inode = tf->mapping->host;

	smp_mb();	/* the aliases stored, then the checks */
	return atomic_read(&inode->i_dio_count) ||
	       !inode_eq_iversion(inode, version);
}

/*
 * Alias the empty slots of [@index, @last) of a member file that the file
 * system records as the template's own bytes (tc_btrfs_same_extents()) to
 * the template's pages, which are uptodate by now: no read of the member's
 * blocks at all. Only empty slots: a folio there may hold data that is not
 * on disk yet. The proof and the store are one step with respect to every
 * change of the member (docs/design/groups-and-proofs.md):
 *  - Under the member's i_rwsem no truncate, punch, fallocate, reflink,
 *    dedupe or buffered write passes.
 *  - A folio that leaves the page cache (written back and dropped,
 *    reclaimed, invalidated) bumps the mapping's removal count under the
 *    i_pages lock; it is read before the extents and checked under that
 *    lock by the store, which stores nothing if it moved. So each slot
 *    aliased was empty from before the extents were read until the store:
 *    whatever it held before had been written back, and what the extents
 *    say is what the file holds there. A folio that enters an empty slot
 *    meanwhile (a fault, another reader) keeps its slot.
 *  - A direct write that began before the proof bumped i_version or holds
 *    i_dio_count; one that begins after it invalidates the page cache
 *    (aliases included) before and after its I/O. If either moved
 *    meanwhile, the aliases go again.
 *
 * Return: the number of aliases installed.
 */
unsigned long tc_alias_proven(struct tc_file *tf, pgoff_t index,
			      pgoff_t last, const unsigned long *live)
{
	DECLARE_BITMAP(proven, TC_PROOF_WINDOW);
	struct address_space *mapping = tf->mapping;
	unsigned long n = 0, seq;
	u64 version;
	long ret;

	if (!tc_proof_lock(tf, &version))
		return 0;
	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	if (!tc_btrfs_same_extents(mapping->host, tf->tinode, index,
				   last - index, proven))
		goto unlock;
	/*
	 * Only where the template's page is in memory now, so that the
	 * alias resolves; all in one hold of the i_pages lock, aligned empty
	 * blocks in one slot each. Proven pages need no signature chunk:
	 * their alias carries no hash.
	 */
	bitmap_and(proven, proven, live, last - index);
	ret = filemap_add_page_aliases(mapping, index, last - index, proven,
				       tc_alias(tf, TC_SIG_HASH), seq);
	if (ret == -EAGAIN)
		tc_count(tf->group, TC_PROOFS_STALE, 1);
	n = ret > 0 ? ret : 0;
	if (n && (tc_proof_changed(tf, version) || tc_alias_fence(tf))) {
		filemap_clear_page_aliases(mapping);
		n = 0;
	}
unlock:
	filemap_invalidate_unlock_shared(mapping);
	inode_unlock_shared(mapping->host);
	tc_count(tf->group, TC_ALIASES_PROVEN, n);
	return n;
}

/*
 * Is every page of @tf's member, page cache included, the template's? The
 * whole file's extents are the template's, it has the template's size, and
 * no page in its cache is dirty or under writeback (clean pages hold what
 * is on disk). @version is then the member's i_version, to check later
 * with tc_proof_changed().
 */
bool tc_file_proven(struct tc_file *tf, u64 *version)
{
	struct address_space *mapping = tf->mapping;
	struct inode *inode = mapping->host;
	unsigned long nr;
	bool ok = false;

	if (!tc_proof_lock(tf, version))
		return false;
	nr = DIV_ROUND_UP(i_size_read(inode), PAGE_SIZE);
	if (i_size_read(inode) == i_size_read(tf->tinode) &&
	    !mapping_tagged(mapping, PAGECACHE_TAG_DIRTY) &&
	    !mapping_tagged(mapping, PAGECACHE_TAG_WRITEBACK))
		ok = tc_btrfs_same_extents(inode, tf->tinode, 0, nr, NULL) == nr;
	inode_unlock_shared(inode);
	return ok;
}

/* ->release: the member inode is being evicted. */
void tc_file_release(struct address_space *mapping)
{
	struct tc_file *tf;

	spin_lock(&tc_files_lock);
	rcu_read_lock();
	tf = tc_file_lookup(mapping);
	rcu_read_unlock();
	if (tf)
		tc_file_unlink(tf);	/* the final truncation drops the aliases */
	spin_unlock(&tc_files_lock);
	if (tf)
		tc_file_put(tf);
}

/* Let unbound files go before returning: the template's inodes with them. */
void tc_files_flush(void)
{
	rcu_barrier();
	flush_workqueue(tc_wq);
}

int __init tc_bind_init(void)
{
	tc_wq = alloc_workqueue("totalcow_share", 0, 0);
	if (!tc_wq)
		return -ENOMEM;
	return rhashtable_init(&tc_files, &tc_file_params);
}

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_BIND_KUNIT_TEST)
#include "totalcow_bind_kunit.c"
#endif
