// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing among the snapshots of a template (paper
 * §2.2, docs/design.md): the policy behind the page-cache alias entries of
 * mm-patches/0002.
 *
 * A group is a read-only template subvolume and the snapshot subvolumes
 * ("members") made from it. A member file is bound to the template file at
 * the same relative path if that file has the same inode number and
 * generation (a snapshot keeps both; a renamed or replaced file does not),
 * lies in the member's own subvolume (not a nested one) and can be denied
 * writes (like a running executable: ETXTBSY) for as long as the binding
 * lives. A read miss in a bound file reads the template's pages and the
 * member's (layer 1 serves the second read from memory), screens each pair
 * with the one-byte signature and compares it in full; an identical member
 * page leaves the page cache and an alias entry takes its place. Reads of
 * the alias copy from the template's page. A write or a fault replaces the
 * alias with a private copy, made in memory, and marks the page private.
 * Where the file system records a member range as the very bytes of the
 * template's (the same on-disk extents, totalcow-btrfs.c), its empty slots
 * become aliases without reading at all. A private mapping (MAP_PRIVATE:
 * executables, libraries) of a member file whose every page is proven so
 * maps the template file instead, through a backing file that keeps the
 * member's path in /proc/PID/maps. Content is always proven (extents) or
 * verified (compare), and a member must be a snapshot of the template (its
 * parent UUID), so a wrongly configured group is refused or wastes work but
 * never returns a wrong byte.
 *
 *   groups/create   "<name> <template dir>"
 *   groups/add      "<name> <member dir>"
 *   groups/remove   "<name> <member dir>"
 *   groups/delete   "<name>"
 *   groups/<name>/{template,members,stats}
 */

#include <linux/backing-file.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/highmem.h>
#include <linux/iversion.h>
#include <linux/kobject.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/page_alias.h>
#include <linux/pagemap.h>
#include <linux/rhashtable.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/stat.h>
#include <linux/string.h>
#include <linux/swap.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "../../sysfs/totalcow-sysfs.h"
#include "totalcow-btrfs.h"
#include "totalcow-canon.h"
#include "totalcow-extent-share.h"
#include "totalcow-sig.h"
#include "../dm/totalcow-whitelist.h"

/* The largest window one read miss shares at once, in pages (4 MiB). */
#define TC_SHARE_WINDOW 1024
/*
 * The window a miss proves by extents: its share window widened to whole
 * block aliases (PAGE_ALIAS_BLOCK pages in one slot, a 64th of the memory
 * of an alias per page), at most a block more.
 */
#define TC_PROOF_WINDOW (TC_SHARE_WINDOW + PAGE_ALIAS_BLOCK)

/*
 * An alias entry carries the signature byte and the identity of the
 * binding that made it, so that an alias left from an old binding never
 * stands for a page of a later binding's template.
 */
#define TC_ID_BITS	(BITS_PER_LONG == 64 ? 32 : 16)
#define TC_ID_MASK	((1UL << TC_ID_BITS) - 1)

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

static const char * const tc_stat_names[TC_NR_STATS] = {
	"files_bound", "files_refused", "aliases_installed", "aliases_proven",
	"aliases_resolved", "aliases_lost", "private_skips", "hash_rejects",
	"memcmp_mismatches", "compares", "cow_breaks", "share_ns",
	"mmaps_shared", "mmaps_private", "files_bound_by_extents",
	"share_wait_ns", "members_joined", "cow_copies", "proofs_stale",
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
};

/* How many snapshots deep an automatic member may descend from the template. */
#define TC_AUTO_HOPS 4

struct tc_group {
	struct kobject kobj;
	struct list_head list;
	char name[TC_TAG_MAX + 1];
	struct path template;
	u32 tdev;			/* st_dev of the template subvolume */
	const struct cred *cred;	/* its creator's: bindings look up with it */
	bool ro_held;			/* tc_btrfs_hold_readonly() on the template */
	bool auto_join;			/* descendants join at their first read */
	struct list_head members;	/* tc_member, under tc_groups_lock */
	struct list_head files;		/* tc_file, under tc_files_lock */
	atomic_long_t stats[TC_NR_STATS];
	atomic_long_t policy_bytes;	/* of its files' signature chunks */
};

/*
 * The policy's bytes for one page of a bound member file: the member
 * page's signature (TC_SIG_PRIVATE | 7-bit hash) and the hash of the
 * template's page (TC_SIG_UNKNOWN until computed). They live in chunks of
 * TC_SIG_CHUNK pages, allocated when a page of the chunk is first looked
 * at and charged to the memory cgroup of the task that reads it, so that a
 * file costs in proportion to what is read of it, not to its size.
 */
struct tc_sig_pair {
	u8 sig;
	u8 thash;
};

#define TC_SIG_CHUNK_SHIFT	(PAGE_SHIFT - 1)
#define TC_SIG_CHUNK		BIT(TC_SIG_CHUNK_SHIFT)
#define TC_SIG_CHUNK_BYTES	(TC_SIG_CHUNK * sizeof(struct tc_sig_pair))

/* A member file bound to its template file. */
struct tc_file {
	struct rhash_head node;
	struct address_space *mapping;	/* the key */
	struct path tpath;		/* the template file */
	struct inode *tinode;		/* its inode, write-denied while bound */
	struct tc_group *group;
	struct tc_member *member;	/* valid while bound */
	struct list_head list;		/* in group->files */
	struct list_head mlist;		/* in member->files */
	struct inode *unbind_inode;	/* between unbind begin and finish */
	refcount_t ref;
	unsigned long id;		/* in its alias entries */
	bool dead;			/* unbound: make no more aliases */
	pgoff_t nr_pages;		/* of the template file, when bound */
	struct xarray sigs;		/* chunk index -> struct tc_sig_pair[] */
	struct rcu_work free_work;
};

static const struct rhashtable_params tc_file_params = {
	.key_len = sizeof(struct address_space *),
	.key_offset = offsetof(struct tc_file, mapping),
	.head_offset = offsetof(struct tc_file, node),
	.automatic_shrinking = true,
};

static struct rhashtable tc_files;
/* Binding and unbinding files; never held across an allocation that can
 * enter reclaim, because eviction (->release) takes it.
 */
static DEFINE_SPINLOCK(tc_files_lock);
static DEFINE_MUTEX(tc_groups_lock);	/* groups, members, sysfs */
static LIST_HEAD(tc_groups);
static struct kobject *groups_kobj;
static struct workqueue_struct *tc_wq;	/* frees unbound files */
static atomic_long_t tc_next_id;	/* binding identities */

static void tc_count(struct tc_group *g, enum tc_stat s, long n)
{
	atomic_long_add(n, &g->stats[s]);
}

static void *tc_alias(struct tc_file *tf, u8 sig)
{
	BUILD_BUG_ON(TC_ID_BITS + 8 + PAGE_ALIAS_SHIFT > BITS_PER_XA_VALUE);
	return xa_mk_page_alias((tf->id << 8) | sig);
}

/* Was alias @entry made by the binding @tf? */
static bool tc_alias_ours(struct tc_file *tf, void *entry)
{
	return (xa_page_alias_data(entry) >> 8) == tf->id;
}

/*
 * After storing aliases for @tf: if it was unbound meanwhile, its unbind
 * may have cleared the mapping before they were stored; clear it again.
 * Pairs with the barrier in tc_file_unbind_finish().
 */
static bool tc_alias_fence(struct tc_file *tf)
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
static struct tc_sig_pair *tc_sigs(struct tc_file *tf, pgoff_t index,
				   gfp_t gfp)
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

static void tc_sigs_free(struct tc_file *tf)
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

static void tc_file_put(struct tc_file *tf)
{
	if (refcount_dec_and_test(&tf->ref)) {
		INIT_RCU_WORK(&tf->free_work, tc_file_free_work);
		queue_rcu_work(tc_wq, &tf->free_work);
	}
}

/* Under RCU: the live binding of @mapping, without a reference. */
static struct tc_file *tc_file_lookup(struct address_space *mapping)
{
	return rhashtable_lookup(&tc_files, &mapping, tc_file_params);
}

static struct tc_file *tc_file_get(struct address_space *mapping)
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
 * Take @tf out of the lookups and its lists; tc_files_lock held, under
 * which the member inode cannot finish eviction (->release waits for the
 * lock). Aliases made by a reader that still holds @tf are cleared by that
 * reader (tc_alias_fence()).
 */
static void tc_file_unlink(struct tc_file *tf)
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

/* Files unbound per hold of tc_files_lock. */
#define TC_UNBIND_BATCH 64

/*
 * Unbind the files of member @m, or of group @g if @m is NULL, in batches:
 * neither the spinlock nor the walk without it grows with the number of
 * files or their size. Caller holds tc_groups_lock (no new bindings).
 */
static void tc_unbind_files(struct tc_group *g, struct tc_member *m)
{
	struct list_head *head = m ? &m->files : &g->files;
	struct tc_file *tf, *n;
	LIST_HEAD(batch);
	unsigned int i;

	lockdep_assert_held(&tc_groups_lock);
	do {
		spin_lock(&tc_files_lock);
		for (i = 0; i < TC_UNBIND_BATCH && !list_empty(head); i++) {
			tf = m ? list_first_entry(head, struct tc_file, mlist) :
				 list_first_entry(head, struct tc_file, list);
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

static u32 tc_path_dev(const struct path *path)
{
	struct kstat st;

	if (vfs_getattr(path, &st, STATX_INO, AT_STATX_DONT_SYNC))
		return 0;
	return new_encode_dev(st.dev);
}

/* The member root of a group that @path lies in, with its group. */
static struct tc_member *tc_find_member(const struct path *path,
					struct tc_group **gp)
{
	struct tc_member *m;
	struct tc_group *g;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry(g, &tc_groups, list) {
		list_for_each_entry(m, &g->members, list) {
			if (m->automatic ?
			    (path->mnt->mnt_sb == m->sb &&
			     tc_btrfs_subvol_id(d_inode(path->dentry)) == m->subvol) :
			    (path->mnt->mnt_sb == m->root.dentry->d_sb &&
			     is_subdir(path->dentry, m->root.dentry))) {
				*gp = g;
				return m;
			}
		}
	}
	return NULL;
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

/* Drop @g's automatic members whose subvolume is gone, with their files. */
static void tc_prune_auto(struct tc_group *g)
{
	struct tc_member *m, *n;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry_safe(m, n, &g->members, list) {
		if (!m->automatic || tc_btrfs_subvol_exists(m->sb, m->subvol))
			continue;
		tc_unbind_files(g, m);
		list_del(&m->list);
		kfree(m);
	}
}

/*
 * @file is in no member subvolume: does its subvolume descend from the
 * template of a group with "auto" on, within TC_AUTO_HOPS snapshots? Then
 * it joins that group as an automatic member, here, at its first read:
 * no hook, no privilege in the container. Returns the member, with its
 * group in *@gp, or NULL.
 */
static struct tc_member *tc_auto_join(struct file *file, struct tc_group **gp)
{
	struct inode *inode = file_inode(file);
	struct tc_group *g, *best = NULL;
	int hops, least = TC_AUTO_HOPS + 1;
	struct tc_member *m;

	lockdep_assert_held(&tc_groups_lock);
	/* The nearest template, if templates descend from each other. */
	list_for_each_entry(g, &tc_groups, list) {
		if (!g->auto_join || inode->i_sb != g->template.dentry->d_sb)
			continue;
		hops = tc_btrfs_lineage_hops(inode, d_inode(g->template.dentry),
					     TC_AUTO_HOPS);
		if (hops > 0 && hops < least) {
			least = hops;
			best = g;
		}
	}
	if (!best)
		return NULL;
	/* Charged to the reader: anyone may make snapshots that join. */
	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return NULL;
	INIT_LIST_HEAD(&m->files);
	m->automatic = true;
	m->sb = inode->i_sb;
	m->subvol = tc_btrfs_subvol_id(inode);
	m->dev = tc_path_dev(&file->f_path);
	tc_prune_auto(best);
	list_add_tail(&m->list, &best->members);
	tc_count(best, TC_MEMBERS_JOINED, 1);
	*gp = best;
	return m;
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
 * Find the template file of @file, a member file, into @tp (a reference
 * held) and deny writes to it. Returns 0, -ENOMEM if it may work later,
 * or another error if the file cannot be shared.
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
			  struct tc_member *m, struct path *tp, bool *by_extents)
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
	if (found == ERR_PTR(-ENOMEM)) {
		if (t)
			path_put(tp);
		return -ENOMEM;
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

static struct tc_file *tc_file_bind(struct file *file,
				    struct address_space *mapping)
{
	struct tc_file *tf, *old;
	struct tc_member *m;
	struct tc_group *g;
	bool by_extents;
	struct path tp;
	pgoff_t nr;
	int err;

	mutex_lock(&tc_groups_lock);
	tf = tc_file_get(mapping);
	if (tf)
		goto unlock;
	m = tc_find_member(&file->f_path, &g);
	if (!m)
		m = tc_auto_join(file, &g);
	if (!m) {
		set_bit(AS_NO_PAGE_ALIASES, &mapping->flags);
		goto unlock;
	}
	err = tc_template_of(file, g, m, &tp, &by_extents);
	if (err) {
		/*
		 * Out of memory, or the template file's data not on disk yet:
		 * not shared now, asked again at the next miss.
		 */
		if (err != -ENOMEM && err != -EBUSY) {
			tc_count(g, TC_FILES_REFUSED, 1);
			set_bit(AS_NO_PAGE_ALIASES, &mapping->flags);
		}
		goto unlock;
	}
	nr = DIV_ROUND_UP(i_size_read(d_inode(tp.dentry)), PAGE_SIZE);
	tf = kzalloc(sizeof(*tf), GFP_KERNEL_ACCOUNT);
	if (!tf)
		goto nomem;
	/* Chunks come as pages are read (tc_sigs()); so do their nodes. */
	xa_init_flags(&tf->sigs, XA_FLAGS_ACCOUNT);
	tf->mapping = mapping;
	tf->tpath = tp;
	tf->tinode = d_inode(tp.dentry);
	tf->group = g;
	tf->member = m;
	tf->nr_pages = nr;
	tf->id = atomic_long_inc_return(&tc_next_id) & TC_ID_MASK;
	refcount_set(&tf->ref, 2);	/* the binding's and ours */
	kobject_get(&g->kobj);

	spin_lock(&tc_files_lock);
	old = rhashtable_lookup_get_insert_fast(&tc_files, &tf->node,
						tc_file_params);
	if (!old) {
		list_add_tail(&tf->list, &g->files);
		list_add_tail(&tf->mlist, &m->files);
		set_bit(AS_PAGE_ALIASES, &mapping->flags);
	}
	spin_unlock(&tc_files_lock);
	if (old) {	/* cannot be: we hold tc_groups_lock */
		kobject_put(&g->kobj);
		goto nomem;
	}
	tc_count(g, TC_FILES_BOUND, 1);
	if (by_extents)
		tc_count(g, TC_FILES_BOUND_BY_EXTENTS, 1);
	goto unlock;

nomem:
	kfree(tf);	/* no chunks yet */
	tf = NULL;
	atomic_inc(&d_inode(tp.dentry)->i_writecount);
	path_put(&tp);
unlock:
	mutex_unlock(&tc_groups_lock);
	return tf;
}

/*
 * Share member page @mf (a reference held) at @index with the template's
 * page @tfolio (uptodate, a reference held) if they are identical. Time
 * spent waiting for @mf's read is added to *@waited.
 */
static void __tc_share_page(struct tc_file *tf, struct folio *mf,
			    struct folio *tfolio, pgoff_t index, u64 *waited)
{
	struct tc_group *g = tf->group;
	struct tc_sig_pair *sp;
	bool same = false;
	void *m, *t;
	u8 h, th;

	sp = tc_sigs(tf, index, GFP_KERNEL);
	if (!sp)
		return;		/* no memory: the page stays the member's */
	if (READ_ONCE(sp->sig) & TC_SIG_PRIVATE) {
		tc_count(g, TC_PRIVATE_SKIPS, 1);
		return;
	}
	*waited -= local_clock();
	folio_lock(mf);
	*waited += local_clock();
	if (mf->mapping != tf->mapping || !folio_test_uptodate(mf) ||
	    folio_test_large(mf) || folio_test_dirty(mf) || folio_mapped(mf))
		goto unlock;
	m = kmap_local_folio(mf, 0);
	t = kmap_local_folio(tfolio, 0);
	h = tc_sig_hash(m, PAGE_SIZE);
	th = READ_ONCE(sp->thash);
	if (th == TC_SIG_UNKNOWN) {
		th = tc_sig_hash(t, PAGE_SIZE);
		WRITE_ONCE(sp->thash, th);
	}
	WRITE_ONCE(sp->sig, h);
	switch (tc_sig_screen(h, th)) {
	case TC_SCREEN_HASH:
		tc_count(g, TC_HASH_REJECTS, 1);
		break;
	case TC_SCREEN_PRIVATE:
		break;
	case TC_SCREEN_COMPARE:
		tc_count(g, TC_COMPARES, 1);
		same = !memcmp(m, t, PAGE_SIZE);
		if (!same)
			tc_count(g, TC_MEMCMP_MISMATCHES, 1);
		break;
	}
	kunmap_local(t);
	kunmap_local(m);
	if (same && filemap_replace_folio_alias(tf->mapping, mf, tc_alias(tf, h)) &&
	    !tc_alias_fence(tf))
		tc_count(g, TC_ALIASES_INSTALLED, 1);
unlock:
	folio_unlock(mf);
}

static void tc_share_page(struct tc_file *tf, struct folio *mf,
			  struct folio *tfolio, pgoff_t index)
{
	u64 waited = 0;

	__tc_share_page(tf, mf, tfolio, index, &waited);
}

/*
 * Add to @fbatch, referenced, the template's uptodate order-0 folios of
 * [@index, @last], stopping at the first page that has none or when the
 * batch is full: one walk along the template's slots, as the read path
 * walks a file's own. Under RCU. Returns how many were added.
 */
static unsigned int tc_template_folios(struct tc_file *tf, pgoff_t index,
				       pgoff_t last, struct folio_batch *fbatch)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, index);
	struct folio *folio;
	unsigned int n = 0;

	for (folio = xas_load(&xas); folio; folio = xas_next(&xas)) {
		if (xas_retry(&xas, folio))
			continue;
		if (xas.xa_index > last || xa_is_value(folio) ||
		    xa_is_sibling(folio))
			break;
		if (!folio_try_get(folio))
			goto retry;
		if (unlikely(folio != xas_reload(&xas)))
			goto put;
		if (!folio_test_uptodate(folio) || folio_test_large(folio)) {
			folio_put(folio);
			break;
		}
		n++;
		if (!folio_batch_add(fbatch, folio))
			break;
		continue;
put:
		folio_put(folio);
retry:
		xas_reset(&xas);
	}
	return n;
}

/*
 * Set the bits of @live (slots [@index, @last)) whose template page is an
 * uptodate order-0 folio in memory now, and say whether all are. One walk
 * under RCU and no references: a page that goes meanwhile makes an alias
 * that resolves to nothing (aliases_lost) and is read again, as after
 * reclaim. For the members after the first, which find the template's
 * window read already, it stands in for a readahead call that looks up
 * every slot from the root and a wait that references every folio.
 */
static bool tc_template_live(struct tc_file *tf, pgoff_t index, pgoff_t last,
			     unsigned long *live)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, index);
	struct folio *folio;
	unsigned long n = 0;

	bitmap_zero(live, last - index);
	rcu_read_lock();
	xas_for_each(&xas, folio, last - 1) {
		if (xas_retry(&xas, folio) || xa_is_value(folio))
			continue;
		if (folio_test_uptodate(folio) && !folio_test_large(folio)) {
			__set_bit(xas.xa_index - index, live);
			n++;
		}
	}
	rcu_read_unlock();
	return n == last - index;
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
static bool tc_proof_changed(struct tc_file *tf, u64 version)
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
 * change of the member (docs/design.md, "A proof and its store"):
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
static unsigned long tc_alias_proven(struct tc_file *tf, pgoff_t index,
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
static bool tc_file_proven(struct tc_file *tf, u64 *version)
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

/*
 * Set the bits of the slots of [@index, @last) that hold no folio and no
 * alias: those that the member's readahead will fill. A block alias is
 * met once, at whichever of its pages the walk enters it by, and clears
 * the bits of all its pages in the window.
 */
static void tc_mark_empty(struct address_space *mapping, pgoff_t index,
			  pgoff_t last, unsigned long *fresh)
{
	XA_STATE(xas, &mapping->i_pages, index);
	pgoff_t first, end;
	void *entry;

	bitmap_fill(fresh, last - index);
	rcu_read_lock();
	xas_for_each(&xas, entry, last - 1) {
		if (xas_retry(&xas, entry))
			continue;
		if (xa_is_value(entry) && !xa_is_page_alias(entry))
			continue;
		end = 1UL << xas_get_order(&xas);
		first = max(round_down(xas.xa_index, end), index);
		end = min(round_down(xas.xa_index, end) + end, last);
		bitmap_clear(fresh, first - index, end - first);
	}
	rcu_read_unlock();
}

/*
 * Wait until the template's folios of [@index, @last) that this miss
 * added (bit i of @ours for @index + i) or that its reader asked for
 * ([@index, @need)) are read. Any other folio there was added by another
 * reader, whose read may be throttled in its own I/O cgroup (io.max): a
 * reader of one shared file, as of an overlayfs lower file, waits only
 * for the pages it reads, and so does a member's miss.
 */
static void tc_wait_template(struct address_space *tmapping, pgoff_t index,
			     pgoff_t last, pgoff_t need,
			     const unsigned long *ours)
{
	struct folio_batch fbatch;
	pgoff_t next = index;
	unsigned int i;

	folio_batch_init(&fbatch);
	while (next < last &&
	       filemap_get_folios(tmapping, &next, last - 1, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			struct folio *folio = fbatch.folios[i];
			pgoff_t at = max(folio->index, index);

			if (at < need || test_bit(at - index, ours))
				folio_wait_locked(folio);
		}
		folio_batch_release(&fbatch);
	}
}

/*
 * Read the template's pages of [@index, @last) that are not in memory and
 * wait for those reads and for [@index, @need) (tc_wait_template()). Time
 * spent waiting is added to *@waited. Out of line: its readahead state
 * stays off tc_read_miss()'s stack, which holds the window's bitmaps.
 */
static noinline_for_stack void
tc_read_template(struct address_space *tmapping, pgoff_t index, pgoff_t last,
		 pgoff_t need, unsigned long *ours, u64 *waited)
{
	struct file_ra_state ra = { };
	DEFINE_READAHEAD(tractl, NULL, &ra, tmapping, index);

	page_alias_readahead(&tractl, last - index, ours);
	*waited -= local_clock();
	tc_wait_template(tmapping, index, last, need, ours);
	*waited += local_clock();
}

/*
 * Clear the bits of @fresh (slots [@index, @last)) from @need on whose
 * template page is being read by someone else: a folio there, not
 * uptodate. The member does not read those pages of its own now; they
 * stay empty, and the miss that reads them later finds the template's
 * page read (an alias, no read) or waits for it as any reader of it
 * would, so that readers of a fleet that start at once share what they
 * read without waiting for each other's readahead.
 */
static void tc_skip_busy(struct tc_file *tf, pgoff_t index, pgoff_t need,
			 pgoff_t last, unsigned long *fresh)
{
	XA_STATE(xas, &tf->tinode->i_mapping->i_pages, need);
	struct folio *folio;

	rcu_read_lock();
	xas_for_each(&xas, folio, last - 1) {
		if (xas_retry(&xas, folio) || xa_is_value(folio))
			continue;
		if (!folio_test_uptodate(folio))
			__clear_bit(xas.xa_index - index, fresh);
	}
	rcu_read_unlock();
}

/*
 * The pages the member's own readahead would read for a read of @req
 * pages at @index (mm/readahead.c's on-demand window, without its
 * asynchronous part), with f_ra set as if it had: the request alone for a
 * random read (or a file advised POSIX_FADV_RANDOM); for a read at the
 * file's start or right after the last one, a first window of up to four
 * times the request; for the read the last window predicted, the window
 * grown fourfold, then twofold, up to ra_pages. The miss replaces the
 * member's synchronous readahead, so it keeps its state. Never more than
 * TC_SHARE_WINDOW pages.
 */
static unsigned long tc_ra_window(struct file *file, pgoff_t index,
				  unsigned long req)
{
	struct file_ra_state *ra = &file->f_ra;
	unsigned long most = max(ra->ra_pages, 1U), size, cur = ra->size;
	pgoff_t prev = (unsigned long long)ra->prev_pos >> PAGE_SHIFT;

	req = clamp(req, 1UL, (unsigned long)TC_SHARE_WINDOW);
	if (file->f_mode & FMODE_RANDOM) {
		/* POSIX_FADV_RANDOM: no readahead */
		size = req;
	} else if (cur && index == ra->start + cur) {
		/* get_next_ra_size() */
		if (cur < most / 16)
			size = 4 * cur;
		else if (cur <= most / 2)
			size = 2 * cur;
		else
			size = most;
	} else if (!index || req > most || index - prev <= 1UL) {
		/* get_init_ra_size() */
		size = roundup_pow_of_two(req);
		if (size <= most / 32)
			size *= 4;
		else if (size <= most / 4)
			size *= 2;
		else
			size = most;
	} else {
		size = req;
	}
	size = clamp(size, req, (unsigned long)TC_SHARE_WINDOW);
	ra->start = index;
	ra->size = size;
	ra->async_size = 0;
	return size;
}

/*
 * ->read_miss: read the template's and the member's pages, then share.
 *
 * The template's pages read are those of the member's own window, the
 * pages its readahead would read (issue 32, hole 4): never more for one
 * miss. The miss waits for the template reads it started and for the
 * template pages its reader asked for, not for other readers' readahead
 * (whose I/O may be throttled in their cgroups); the proof, over whole
 * blocks around the window, aliases only what is in memory by then, and
 * the member reads no page of its own whose template page someone else is
 * still reading (tc_skip_busy()).
 */
static bool tc_read_miss(struct file *file, struct address_space *mapping,
			 pgoff_t index, pgoff_t end)
{
	DECLARE_BITMAP(fresh, TC_SHARE_WINDOW);
	DECLARE_BITMAP(live, TC_PROOF_WINDOW);
	unsigned long *ours = fresh;	/* used up before fresh is set */
	struct file_ra_state ra = { };
	struct address_space *tmapping;
	pgoff_t last, first, plast, need, run, i;
	struct tc_file *tf;
	u64 start, waited = 0;

	tf = tc_file_get(mapping);
	/* A file in a sharing scope shares its extents, not as a member. */
	if (!tf && tc_canon_in_scope(mapping->host))
		return tc_extent_read_miss(file, mapping, index, end);
	if (!tf && !test_bit(AS_PAGE_ALIASES, &mapping->flags))
		tf = tc_file_bind(file, mapping);
	if (!tf)
		return false;
	/* Up to the template's end, in windows of the member's readahead. */
	last = index + tc_ra_window(file, index, end - index);
	plast = min3(tf->nr_pages,
		     (pgoff_t)DIV_ROUND_UP(i_size_read(mapping->host), PAGE_SIZE),
		     ULONG_MAX - PAGE_ALIAS_BLOCK);
	last = min(last, plast);
	if (index >= last) {
		tc_file_put(tf);
		return false;
	}
	need = clamp(end, index + 1, last);	/* what the reader asked for */
	/*
	 * The extents are proven over whole blocks around the window, so that
	 * aligned runs of template pages in memory become block aliases; the
	 * template's and the member's reads stay within [@index, @last).
	 */
	first = round_down(index, PAGE_ALIAS_BLOCK);
	plast = min3(round_up(last, PAGE_ALIAS_BLOCK), plast,
		     first + TC_PROOF_WINDOW);	/* the bitmaps' size */
	start = local_clock();
	tmapping = tf->tinode->i_mapping;
	{
		/*
		 * The member's blocks are the template's: read them once the
		 * template's reads are done, so that layer 1 serves them from
		 * memory instead of missing on fills still in flight.
		 */
		if (!tc_template_live(tf, index, last, live))
			tc_read_template(tmapping, index, last, need, ours,
					 &waited);
		tc_template_live(tf, first, plast, live);
		/* What the extents prove needs no read; the rest is compared. */
		tc_alias_proven(tf, first, plast, live);
		tc_mark_empty(mapping, index, last, fresh);
		tc_skip_busy(tf, index, need, last, fresh);
		if (bitmap_empty(fresh, last - index))
			goto out;
		/* The member's own pages, run by run of the slots left to read. */
		for (i = find_first_bit(fresh, last - index); i < last - index;
		     i = find_next_bit(fresh, last - index, run)) {
			DEFINE_READAHEAD(mractl, file, &ra, mapping, index + i);

			run = find_next_zero_bit(fresh, last - index, i);
			page_cache_ra_unbounded(&mractl, run - i, 0);
		}
	}
	/* New folios wait in this CPU's LRU batch, with a reference. */
	lru_add_drain();
	for (i = index; i < last; i++) {
		struct folio *mf, *tfolio;

		if (!test_bit(i - index, fresh))
			continue;	/* cached before: compared then */
		mf = filemap_get_folio(mapping, i);
		if (IS_ERR(mf))
			continue;	/* an alias, or nothing */
		/* Read by now, or by someone this miss does not wait for. */
		tfolio = filemap_get_folio(tmapping, i);
		if (!IS_ERR(tfolio) && !folio_test_uptodate(tfolio)) {
			folio_put(tfolio);
			tfolio = ERR_PTR(-EAGAIN);
		}
		if (!IS_ERR(tfolio)) {
			if (!folio_test_large(tfolio))
				__tc_share_page(tf, mf, tfolio, i, &waited);
			folio_put(tfolio);
		}
		folio_put(mf);
		if (fatal_signal_pending(current))
			break;
	}
out:
	/* CPU: the hook's time less its waits for either file's reads. */
	start = local_clock() - start;
	tc_count(tf->group, TC_SHARE_NS, start - min(waited, start));
	tc_count(tf->group, TC_SHARE_WAIT_NS, min(waited, start));
	tc_file_put(tf);
	return true;
}

/* ->resolve, under RCU: the template's pages of [@index, @last], at once. */
static unsigned int tc_resolve(struct address_space *mapping, pgoff_t index,
			       pgoff_t last, void *entry,
			       struct folio_batch *fbatch)
{
	struct tc_file *tf;
	unsigned int n;

	if (tc_extent_alias(entry))
		return tc_extent_resolve(mapping, index, last, fbatch);
	tf = tc_file_lookup(mapping);
	if (!tf || !tc_alias_ours(tf, entry))
		return 0;
	n = tc_template_folios(tf, index, last, fbatch);
	if (n)
		tc_count(tf->group, TC_ALIASES_RESOLVED, n);
	/* Short, and not for want of room: that page is read again. */
	if (n < last - index + 1 && folio_batch_space(fbatch))
		tc_count(tf->group, TC_ALIASES_LOST, 1);
	return n;
}

/*
 * ->broken: a write or a fault gets a private copy, made in memory; a
 * write that overwrites the whole page (@overwrite) gets a page of its
 * own and no copy, which it would overwrite. A folio left not uptodate is
 * safe whoever reads it: the member's own data at @folio's offset, which
 * the file system reads, is what the template's page holds.
 */
static void tc_broken(struct address_space *mapping, struct folio *folio,
		      void *entry, bool overwrite)
{
	struct folio *tfolio = NULL;
	struct tc_file *tf;

	if (tc_extent_alias(entry)) {
		tc_extent_broken(mapping, folio, overwrite);
		return;
	}
	rcu_read_lock();
	tf = tc_file_lookup(mapping);
	if (tf && tc_alias_ours(tf, entry)) {
		struct tc_sig_pair *sp = NULL;

		/* Under RCU: no sleeping; without memory the mark is skipped. */
		if (folio->index < tf->nr_pages)
			sp = tc_sigs(tf, folio->index, GFP_NOWAIT);
		if (sp)
			WRITE_ONCE(sp->sig, READ_ONCE(sp->sig) | TC_SIG_PRIVATE);
		tc_count(tf->group, TC_COW_BREAKS, 1);
		if (!overwrite && !folio_test_large(folio)) {
			struct folio_batch fbatch;

			folio_batch_init(&fbatch);
			if (tc_template_folios(tf, folio->index, folio->index,
					       &fbatch)) {
				tfolio = fbatch.folios[0];
				tc_count(tf->group, TC_COW_COPIES, 1);
			}
		}
	}
	rcu_read_unlock();
	if (tfolio) {
		folio_copy(folio, tfolio);
		folio_mark_uptodate(folio);
		folio_put(tfolio);
	}
}

/* ->release: the member inode is being evicted. */
static void tc_release(struct address_space *mapping)
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

/*
 * The backing files tc_mmap_file() handed out, alive: each holds a write
 * denial of its template inode, so that the template's pages, which its
 * mappings show, cannot change while any of them lives, whatever becomes
 * of the group (deleted, its template made writable). Released with the
 * file (->backing_release, from __fput()).
 *
 * Each also keeps the member file that was mapped (@user) and the
 * member's i_version its proof saw: when the member is truncated, its
 * mappings map @user from then on (tc_size_changed()), as a mapping of a
 * plain file would. @dropped: that was done or is being done.
 */
struct tc_alias_file {
	struct hlist_node node;		/* in tc_alias_files, by @file */
	struct hlist_node inode_node;	/* in tc_alias_inodes, by member inode */
	struct file *file;
	struct file *user;
	u64 version;
	bool dropped;
};

static DEFINE_HASHTABLE(tc_alias_files, 10);
static DEFINE_HASHTABLE(tc_alias_inodes, 10);
static DEFINE_SPINLOCK(tc_alias_files_lock);

static int tc_alias_file_add(struct file *alias, struct file *user,
			     u64 version)
{
	struct tc_alias_file *af = kmalloc(sizeof(*af), GFP_KERNEL_ACCOUNT);

	if (!af)
		return -ENOMEM;
	af->file = alias;
	af->user = get_file(user);
	af->version = version;
	af->dropped = false;
	spin_lock(&tc_alias_files_lock);
	hash_add(tc_alias_files, &af->node, (unsigned long)alias);
	hash_add(tc_alias_inodes, &af->inode_node,
		 (unsigned long)file_inode(user));
	spin_unlock(&tc_alias_files_lock);
	return 0;
}

/* ->backing_release: the last reference to a backing file went. */
static void tc_backing_release(struct file *file)
{
	struct tc_alias_file *af, *found = NULL;

	spin_lock(&tc_alias_files_lock);
	hash_for_each_possible(tc_alias_files, af, node, (unsigned long)file) {
		if (af->file == file) {
			hash_del(&af->node);
			hash_del(&af->inode_node);
			found = af;
			break;
		}
	}
	spin_unlock(&tc_alias_files_lock);
	if (!found)
		return;		/* overlayfs', fuse's, or one we did not keep */
	allow_write_access(file);
	fput(found->user);
	kfree(found);
}

/*
 * The mappings of @alias map @user from now on, and their private copies
 * past @user's end of file go (they joined @user's i_mmap after
 * truncate_pagecache() zapped those of its other mappings).
 */
static void tc_unsubstitute(struct file *alias, struct file *user)
{
	struct inode *inode = file_inode(user);

	/* Killed meanwhile: the mappings not reached keep the template's. */
	page_alias_unsubstitute(alias, user);
	unmap_mapping_range(inode->i_mapping,
			    round_up(i_size_read(inode), PAGE_SIZE), 0, 1);
}

#define TC_UNSUBSTITUTE_BATCH	8

/*
 * ->size_changed: @inode, a member, was truncated (its inode lock held).
 * Every substituted mapping of it maps the member from now on: SIGBUS
 * past its new end of file, its own data within (the partial last page
 * zeroed past the end, pages that a later extension adds), exactly as a
 * mapping of the member itself. A backing file being released has no
 * mapping left.
 */
static void tc_size_changed(struct inode *inode)
{
	struct file *alias[TC_UNSUBSTITUTE_BATCH], *user[TC_UNSUBSTITUTE_BATCH];
	struct tc_alias_file *af;
	struct hlist_node *tmp;
	unsigned int i, j, n;

	do {
		n = 0;
		spin_lock(&tc_alias_files_lock);
		/*
		 * A record leaves the inode table as it is taken, so that each
		 * pass meets only records no pass took: O(mappings) in all,
		 * however many backing files the member has.
		 */
		hash_for_each_possible_safe(tc_alias_inodes, af, tmp,
					    inode_node, (unsigned long)inode) {
			if (file_inode(af->user) != inode)
				continue;
			hash_del(&af->inode_node);
			af->dropped = true;
			if (!atomic_long_inc_not_zero(&af->file->f_count))
				continue;
			alias[n] = af->file;
			user[n] = get_file(af->user);
			if (++n == TC_UNSUBSTITUTE_BATCH)
				break;
		}
		spin_unlock(&tc_alias_files_lock);
		for (i = 0; i < n; i++) {
			/* One walk covers every backing file of one template. */
			for (j = 0; j < i; j++)
				if (alias[j]->f_mapping == alias[i]->f_mapping)
					break;
			if (j == i)
				tc_unsubstitute(alias[i], user[i]);
			fput(alias[i]);
			fput(user[i]);
		}
	} while (n == TC_UNSUBSTITUTE_BATCH);
}

/*
 * ->mmap_done: @alias is mapped. A truncate of @file that ran between the
 * proof in tc_mmap_file() and now either marked @alias dropped before its
 * walk (which may have missed the new mapping) or came after the proof
 * and moved i_version: map @file after all.
 */
static void tc_mmap_done(struct file *file, struct file *alias)
{
	struct tc_alias_file *af;
	bool stale = false;

	spin_lock(&tc_alias_files_lock);
	hash_for_each_possible(tc_alias_files, af, node, (unsigned long)alias) {
		if (af->file != alias)
			continue;
		stale = af->dropped ||
			!inode_eq_iversion(file_inode(file), af->version);
		if (stale && !af->dropped) {
			hash_del(&af->inode_node);
			af->dropped = true;
		}
		break;
	}
	spin_unlock(&tc_alias_files_lock);
	if (stale)
		tc_unsubstitute(alias, file);
}

/*
 * ->mmap_file: a private mapping of a member file whose every page the
 * file system records as the template's maps the template file, so that
 * its pages are the
 * template's own (page cache, rmap and reclaim as for any file). The
 * backing file keeps the member's path for /proc/PID/maps and audit.
 *
 * The semantics (docs/design.md): the mapping shows the member's data as
 * of mmap(); a later change of the member file is not seen through it,
 * which POSIX allows for MAP_PRIVATE (stock Linux would show the change
 * in pages not yet written through the mapping).
 */
static struct file *tc_mmap_file(struct file *file, unsigned long prot)
{
	struct address_space *mapping = file->f_mapping;
	struct file *alias = NULL;
	struct tc_file *tf;
	u64 version;

	tf = tc_file_get(mapping);
	if (!tf && !test_bit(AS_PAGE_ALIASES, &mapping->flags))
		tf = tc_file_bind(file, mapping);
	if (!tf)
		return NULL;
	/* do_mmap() checks noexec on the file it maps: keep the answer. */
	if (!(file->f_mode & FMODE_READ) ||
	    path_noexec(&file->f_path) != path_noexec(&tf->tpath))
		goto private;
	/* Someone may write the member while it is mapped: keep it coherent. */
	if (inode_is_open_for_write(file_inode(file)))
		goto private;
	/*
	 * Before the proof takes the member's inode lock: a truncate, which
	 * holds it exclusively, either comes first (the proof then fails on
	 * the size) or finds the flag and calls ->size_changed.
	 */
	set_bit(AS_PAGE_ALIAS_MAPPED, &mapping->flags);
	if (!tc_file_proven(tf, &version))
		goto private;
	alias = backing_file_open(file, O_RDONLY | O_LARGEFILE, &tf->tpath,
				  file->f_cred);
	if (IS_ERR(alias)) {
		alias = NULL;
		goto private;
	}
	/* Writes to the template wait for the mapping's end (see above). */
	if (deny_write_access(alias)) {
		fput(alias);
		alias = NULL;
		goto private;
	}
	if (tc_alias_file_add(alias, file, version)) {
		allow_write_access(alias);
		fput(alias);
		alias = NULL;
		goto private;
	}
	/* A change that raced with the open: map the member after all. */
	if (tc_proof_changed(tf, version)) {
		fput(alias);
		alias = NULL;
		goto private;
	}
	tc_count(tf->group, TC_MMAPS_SHARED, 1);
	goto out;
private:
	tc_count(tf->group, TC_MMAPS_PRIVATE, 1);
out:
	tc_file_put(tf);
	return alias;
}

static const struct page_alias_ops tc_alias_ops = {
	.resolve = tc_resolve,
	.read_miss = tc_read_miss,
	.broken = tc_broken,
	.release = tc_release,
	.mmap_file = tc_mmap_file,
	.backing_release = tc_backing_release,
	.mmap_done = tc_mmap_done,
	.size_changed = tc_size_changed,
};

/*
 * Let every inode of @sb be classified again at its next read miss. The
 * list lock is dropped every TC_UNBIND_BATCH inodes when a reschedule is
 * due, holding a reference to the inode the walk stands on (as
 * drop_pagecache_sb() does).
 */
void tc_reclassify(struct super_block *sb)
{
	struct inode *inode, *toput = NULL;
	unsigned int n = 0;

	spin_lock(&sb->s_inode_list_lock);
	list_for_each_entry(inode, &sb->s_inodes, i_sb_list) {
		clear_bit(AS_NO_PAGE_ALIASES, &inode->i_mapping->flags);
		if (++n % TC_UNBIND_BATCH || !need_resched())
			continue;
		spin_lock(&inode->i_lock);
		if (inode->i_state & (I_FREEING | I_WILL_FREE | I_NEW)) {
			spin_unlock(&inode->i_lock);
			continue;
		}
		__iget(inode);
		spin_unlock(&inode->i_lock);
		spin_unlock(&sb->s_inode_list_lock);
		iput(toput);
		toput = inode;
		cond_resched();
		spin_lock(&sb->s_inode_list_lock);
	}
	spin_unlock(&sb->s_inode_list_lock);
	iput(toput);
}

/* sysfs */

#define to_group(k) container_of(k, struct tc_group, kobj)

static ssize_t template_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	char *p = d_path(&to_group(kobj)->template, buf, PAGE_SIZE - 1);

	if (IS_ERR(p))
		return PTR_ERR(p);
	return sysfs_emit(buf, "%s\n", p);
}

static ssize_t members_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct tc_group *g = to_group(kobj);
	char *tmp = (char *)__get_free_page(GFP_KERNEL);
	struct tc_member *m;
	int len = 0;

	if (!tmp)
		return -ENOMEM;
	mutex_lock(&tc_groups_lock);
	list_for_each_entry(m, &g->members, list) {
		char *p;

		if (m->automatic)
			continue;	/* listed in auto_members */
		p = d_path(&m->root, tmp, PAGE_SIZE);
		if (!IS_ERR(p))
			len += sysfs_emit_at(buf, len, "%s\n", p);
	}
	mutex_unlock(&tc_groups_lock);
	free_page((unsigned long)tmp);
	return len;
}

/*
 * Pages of bound member files whose slot is an alias now: the sum of their
 * mappings' alias counts (mapping_page_aliases(), kept by mm at every store
 * and removal), so that a read of stats costs O(files), not O(pages). The
 * walk keeps its place in the group's list with a cursor entry (no
 * mapping) and holds tc_files_lock for TC_UNBIND_BATCH files at a time;
 * under it a listed file's inode cannot finish eviction (tc_release()
 * waits for the lock). tc_groups_lock keeps the unbinding walks, which
 * take the list's first entries, away meanwhile.
 */
static unsigned long tc_pages_shared(struct tc_group *g)
{
	struct tc_file cursor = { .mapping = NULL }, *tf;
	unsigned long n = 0;
	unsigned int i = 0;

	mutex_lock(&tc_groups_lock);
	spin_lock(&tc_files_lock);
	list_add(&cursor.list, &g->files);
	while (!list_is_last(&cursor.list, &g->files)) {
		tf = list_next_entry(&cursor, list);
		list_move(&cursor.list, &tf->list);
		if (tf->mapping)
			n += mapping_page_aliases(tf->mapping);
		if (++i % TC_UNBIND_BATCH)
			continue;
		spin_unlock(&tc_files_lock);
		cond_resched();
		spin_lock(&tc_files_lock);
	}
	list_del(&cursor.list);
	spin_unlock(&tc_files_lock);
	mutex_unlock(&tc_groups_lock);
	return n;
}

/*
 * One "<name> <value>" line per counter; pages_shared is the number of
 * alias entries now, the rest count events since the group was created.
 */
static ssize_t stats_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct tc_group *g = to_group(kobj);
	int i, len;

	len = sysfs_emit(buf, "pages_shared %lu\n", tc_pages_shared(g));
	len += sysfs_emit_at(buf, len, "policy_bytes %ld\n",
			     atomic_long_read(&g->policy_bytes));
	for (i = 0; i < TC_NR_STATS; i++)
		len += sysfs_emit_at(buf, len, "%s %ld\n", tc_stat_names[i],
				     atomic_long_read(&g->stats[i]));
	return len;
}

/*
 * "<subvolume id> <path from the file system's top>" per automatic member;
 * those whose subvolume was deleted leave the group first.
 */
static ssize_t auto_members_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	struct tc_group *g = to_group(kobj);
	struct tc_member *m;
	int len = 0;

	mutex_lock(&tc_groups_lock);
	tc_prune_auto(g);
	list_for_each_entry(m, &g->members, list) {
		char *name;

		if (!m->automatic)
			continue;
		name = tc_btrfs_subvol_name(m->sb, m->subvol);
		len += sysfs_emit_at(buf, len, "%llu %s\n", m->subvol,
				     name ?: "?");
		kfree(name);
	}
	mutex_unlock(&tc_groups_lock);
	return len;
}

static ssize_t auto_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(to_group(kobj)->auto_join));
}

/*
 * "1": every subvolume of the template's file system that descends from
 * the template (parent UUIDs, at most TC_AUTO_HOPS snapshots deep) joins
 * the group at its first read. "0": no more join; those that did stay.
 */
static ssize_t auto_store(struct kobject *kobj, struct kobj_attribute *attr,
			  const char *buf, size_t count)
{
	struct tc_group *g = to_group(kobj);
	bool on;
	int err;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	err = kstrtobool(buf, &on);
	if (err) {
		pr_warn("totalcow: groups/%s/auto: want 0 or 1\n", g->name);
		return err;
	}
	mutex_lock(&tc_groups_lock);
	/* Files read before, refused then, are asked again. */
	if (on && !g->auto_join)
		tc_reclassify(g->template.dentry->d_sb);
	WRITE_ONCE(g->auto_join, on);
	mutex_unlock(&tc_groups_lock);
	return count;
}

static struct kobj_attribute template_attr = __ATTR_RO_MODE(template, 0400);
static struct kobj_attribute auto_members_attr = __ATTR_RO_MODE(auto_members, 0400);
static struct kobj_attribute members_attr = __ATTR_RO_MODE(members, 0400);
static struct kobj_attribute stats_attr = __ATTR_RO_MODE(stats, 0400);

/* "auto" is a macro in the kernel (__auto_type): the name is spelled out. */
static struct kobj_attribute auto_attr = {
	.attr = { .name = "auto", .mode = 0600 },
	.show = auto_show,
	.store = auto_store,
};

static struct attribute *tc_group_attrs[] = {
	&template_attr.attr,
	&members_attr.attr,
	&auto_members_attr.attr,
	&auto_attr.attr,
	&stats_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(tc_group);

static void tc_group_release(struct kobject *kobj)
{
	struct tc_group *g = to_group(kobj);
	struct tc_member *m, *n;

	list_for_each_entry_safe(m, n, &g->members, list) {
		if (!m->automatic)
			path_put(&m->root);
		kfree(m);
	}
	if (g->ro_held)
		tc_btrfs_release_readonly(d_inode(g->template.dentry));
	path_put(&g->template);
	put_cred(g->cred);
	kfree(g);
}

static const struct kobj_type tc_group_ktype = {
	.release = tc_group_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = tc_group_groups,
};

static struct tc_group *tc_group_find(const char *name)
{
	struct tc_group *g;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry(g, &tc_groups, list)
		if (!strcmp(g->name, name))
			return g;
	return NULL;
}

/*
 * "<name> <path>": the name, and a path that is the rest of the line
 * (it may hold spaces) without the final newline.
 */
static int tc_parse_name_path(const char *buf, size_t count, char *name,
			      char **path)
{
	const char *sp = strchr(buf, ' ');
	size_t n;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (!sp || sp - buf > TC_TAG_MAX)
		return -EINVAL;
	memcpy(name, buf, sp - buf);
	name[sp - buf] = '\0';
	if (!tc_tag_name_valid(name))
		return -EINVAL;
	n = count - (sp + 1 - buf);
	if (n && sp[n] == '\n')
		n--;
	if (!n || sp[1] != '/')
		return -EINVAL;
	*path = kstrndup(sp + 1, n, GFP_KERNEL);
	return *path ? 0 : -ENOMEM;
}

/* A directory on btrfs; @ro: a template, a read-only subvolume's root. */
static int tc_lookup_dir(const char *name, struct path *p, bool ro)
{
	int err = kern_path(name, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, p);

	if (err)
		return err;
	if (p->dentry->d_sb->s_magic != BTRFS_SUPER_MAGIC) {
		pr_warn("totalcow: groups: %s is not on btrfs\n", name);
		err = -EINVAL;
	} else if (ro && inode_permission(&nop_mnt_idmap, d_inode(p->dentry),
					  MAY_WRITE) != -EROFS) {
		pr_warn("totalcow: groups: template %s is not read-only\n",
			name);
		err = -EINVAL;
	} else if (ro && !tc_btrfs_is_subvol_root(d_inode(p->dentry))) {
		pr_warn("totalcow: groups: template %s is not a subvolume\n",
			name);
		err = -EINVAL;
	}
	if (err)
		path_put(p);
	return err;
}

static ssize_t create_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	char name[TC_TAG_MAX + 1], *dir = NULL;
	struct tc_group *g;
	int err, i;

	err = tc_parse_name_path(buf, count, name, &dir);
	if (err) {
		if (err == -EINVAL)
			pr_warn("totalcow: groups/create: want \"<name> <template directory>\"\n");
		return err;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		kfree(dir);
		return -ENOMEM;
	}
	err = tc_lookup_dir(dir, &g->template, true);
	if (!err) {
		/* Until groups/delete, it cannot be made writable or deleted. */
		err = tc_btrfs_hold_readonly(d_inode(g->template.dentry));
		if (err) {
			pr_warn("totalcow: groups/create: template %s is %s\n",
				dir, err == -EAGAIN ? "being deduplicated into" :
				"not read-only");
			path_put(&g->template);
		}
	}
	if (!err) {
		u64 ino = tc_btrfs_subvol_writer(d_inode(g->template.dentry));

		/* Read-only stops new writers; these came before (docs/lxc.md). */
		if (ino) {
			pr_warn("totalcow: groups/create: template %s has a file open for writing or data not written back (inode %llu): close it and sync first\n",
				dir, ino);
			tc_btrfs_release_readonly(d_inode(g->template.dentry));
			path_put(&g->template);
			err = -EBUSY;
		}
	}
	kfree(dir);
	if (err) {
		kfree(g);
		return err;
	}
	g->ro_held = true;
	g->tdev = tc_path_dev(&g->template);
	g->cred = get_current_cred();
	strscpy(g->name, name, sizeof(g->name));
	INIT_LIST_HEAD(&g->members);
	INIT_LIST_HEAD(&g->files);
	for (i = 0; i < TC_NR_STATS; i++)
		atomic_long_set(&g->stats[i], 0);

	mutex_lock(&tc_groups_lock);
	if (tc_group_find(name)) {
		err = -EEXIST;
	} else {
		err = kobject_init_and_add(&g->kobj, &tc_group_ktype,
					   groups_kobj, "%s", g->name);
		if (!err) {
			list_add_tail(&g->list, &tc_groups);
			page_alias_enable();
		} else {
			/* tc_group_release() frees it and lets the template go. */
			kobject_put(&g->kobj);
		}
		g = NULL;
	}
	mutex_unlock(&tc_groups_lock);
	if (err && g) {
		tc_btrfs_release_readonly(d_inode(g->template.dentry));
		path_put(&g->template);
		put_cred(g->cred);
		kfree(g);
	}
	return err ?: count;
}

/*
 * @m, added by an admin, takes the place of @am, the same subvolume's
 * automatic member of the same group, with its bound files: an LXC hook
 * or `totalcowctl group add` for a clone that joined by itself succeeds.
 */
static void tc_member_adopt(struct tc_member *m, struct tc_member *am)
{
	struct tc_file *tf;

	lockdep_assert_held(&tc_groups_lock);
	spin_lock(&tc_files_lock);
	list_for_each_entry(tf, &am->files, mlist)
		tf->member = m;
	list_splice_init(&am->files, &m->files);
	list_replace(&am->list, &m->list);
	spin_unlock(&tc_files_lock);
	kfree(am);
}

static ssize_t add_store(struct kobject *kobj, struct kobj_attribute *attr,
			 const char *buf, size_t count)
{
	char name[TC_TAG_MAX + 1], *dir = NULL;
	struct tc_member *m, *om;
	struct tc_group *g, *og;
	int err;

	err = tc_parse_name_path(buf, count, name, &dir);
	if (err) {
		if (err == -EINVAL)
			pr_warn("totalcow: groups/add: want \"<name> <member directory>\"\n");
		return err;
	}
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		kfree(dir);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&m->files);
	err = tc_lookup_dir(dir, &m->root, false);
	if (err) {
		kfree(dir);
		kfree(m);
		return err;
	}
	m->dev = tc_path_dev(&m->root);

	mutex_lock(&tc_groups_lock);
	g = tc_group_find(name);
	if (!g) {
		err = -ENOENT;
	} else if (m->root.dentry->d_sb != g->template.dentry->d_sb) {
		pr_warn("totalcow: groups/add %s: %s is not on the template's file system\n",
			name, dir);
		err = -EINVAL;
	} else if (is_subdir(m->root.dentry, g->template.dentry) ||
		   is_subdir(g->template.dentry, m->root.dentry)) {
		pr_warn("totalcow: groups/add %s: %s overlaps the template\n",
			name, dir);
		err = -EINVAL;
	} else if (tc_btrfs_check_lineage(d_inode(m->root.dentry),
					  d_inode(g->template.dentry))) {
		/* Only a snapshot's files are the template's at the snapshot. */
		pr_warn("totalcow: groups/add %s: %s is not a snapshot of the template\n",
			name, dir);
		err = -EXDEV;
	} else {
		om = tc_find_member(&m->root, &og);
		if (om && og == g && om->automatic) {
			tc_member_adopt(m, om);
			m = NULL;
		} else if (om) {
			pr_warn("totalcow: groups/add %s: %s is in group %s already\n",
				name, dir, og->name);
			err = -EEXIST;
		} else {
			list_add_tail(&m->list, &g->members);
			tc_reclassify(m->root.dentry->d_sb);
			m = NULL;
		}
	}
	mutex_unlock(&tc_groups_lock);
	kfree(dir);
	if (m) {
		path_put(&m->root);
		kfree(m);
	}
	return err ?: count;
}

/*
 * "<name> <member dir>": the member leaves the group. Its bound files are
 * unbound (their aliases dropped: their next reads go to the file system);
 * the other members keep what they share.
 */
static ssize_t remove_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	char name[TC_TAG_MAX + 1], *dir = NULL;
	struct tc_member *m, *found = NULL;
	struct tc_group *g;
	struct path p;
	int err;

	err = tc_parse_name_path(buf, count, name, &dir);
	if (err) {
		if (err == -EINVAL)
			pr_warn("totalcow: groups/remove: want \"<name> <member directory>\"\n");
		return err;
	}
	err = kern_path(dir, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, &p);
	if (err) {
		kfree(dir);
		return err;
	}
	mutex_lock(&tc_groups_lock);
	g = tc_group_find(name);
	if (!g) {
		err = -ENOENT;
		goto unlock;
	}
	list_for_each_entry(m, &g->members, list) {
		if (m->automatic ? p.dentry->d_sb == m->sb &&
		    tc_btrfs_is_subvol_root(d_inode(p.dentry)) &&
		    tc_btrfs_subvol_id(d_inode(p.dentry)) == m->subvol :
		    path_equal(&m->root, &p)) {
			found = m;
			break;
		}
	}
	if (!found) {
		pr_warn("totalcow: groups/remove %s: %s is not a member\n",
			name, dir);
		err = -ENOENT;
		goto unlock;
	}
	tc_unbind_files(g, found);
	list_del(&found->list);
	/* Its files that were refused may belong to no group now. */
	tc_reclassify(p.dentry->d_sb);
unlock:
	mutex_unlock(&tc_groups_lock);
	path_put(&p);
	kfree(dir);
	if (found) {
		if (!found->automatic)
			path_put(&found->root);
		kfree(found);
	}
	return err ?: count;
}

static ssize_t delete_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	char name[TC_TAG_MAX + 2];
	struct tc_group *g;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (strscpy(name, buf, sizeof(name)) < 0)
		return -EINVAL;
	strim(name);
	if (!tc_tag_name_valid(name))
		return -EINVAL;
	mutex_lock(&tc_groups_lock);
	g = tc_group_find(name);
	if (!g) {
		mutex_unlock(&tc_groups_lock);
		return -ENOENT;
	}
	list_del(&g->list);
	tc_unbind_files(g, NULL);
	page_alias_disable();
	/* The template may be made writable once delete returns. */
	tc_btrfs_release_readonly(d_inode(g->template.dentry));
	g->ro_held = false;
	mutex_unlock(&tc_groups_lock);
	kobject_del(&g->kobj);
	kobject_put(&g->kobj);
	/* Let the template's inodes go before we return: umount may follow. */
	rcu_barrier();
	flush_workqueue(tc_wq);
	return count;
}

static struct kobj_attribute create_attr = __ATTR_WO(create);
static struct kobj_attribute add_attr = __ATTR_WO(add);
static struct kobj_attribute remove_attr = __ATTR_WO(remove);
static struct kobj_attribute delete_attr = __ATTR_WO(delete);

static struct attribute *tc_groups_attrs[] = {
	&create_attr.attr,
	&add_attr.attr,
	&remove_attr.attr,
	&delete_attr.attr,
	NULL,
};

static const struct attribute_group tc_groups_group = {
	.attrs = tc_groups_attrs,
};

static int __init totalcow_share_init(void)
{
	struct kobject *mm_totalcow;
	int err;

	tc_wq = alloc_workqueue("totalcow_share", 0, 0);
	if (!tc_wq)
		return -ENOMEM;
	err = rhashtable_init(&tc_files, &tc_file_params);
	if (err)
		return err;
	mm_totalcow = totalcow_sysfs_kobj();
	groups_kobj = kobject_create_and_add("groups", mm_totalcow);
	if (!groups_kobj)
		return -ENOMEM;
	err = sysfs_create_group(groups_kobj, &tc_groups_group);
	if (err) {
		kobject_put(groups_kobj);
		return err;
	}
	return page_alias_register(&tc_alias_ops);
}
late_initcall_sync(totalcow_share_init);

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_KUNIT_TEST)
#include "totalcow_share_kunit.c"
#include "totalcow_share_policy_kunit.c"
#endif
