// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: groups of a template and its members, and
 * their files in sysfs (docs/design/policy.md).
 *
 * A group is a read-only template subvolume and the snapshot subvolumes
 * ("members") made from it: added by an admin, or, with the group's
 * "auto" on, joined by a descendant of the template at its first read.
 * The member files are bound to their template files (totalcow-bind.c)
 * and shared page by page (totalcow-share.c); a group counts what its
 * files did.
 *
 *   groups/create   "<name> <template dir>"
 *   groups/add      "<name> <member dir>"
 *   groups/remove   "<name> <member dir>"
 *   groups/delete   "<name>"
 *   groups/<name>/{template,members,auto_members,auto,stats}
 */

#define pr_fmt(fmt) "totalcow: " fmt

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/magic.h>
#include <linux/moduleparam.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/page_alias.h>
#include <linux/slab.h>
#include <linux/stat.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "../../sysfs/totalcow-sysfs.h"
#include "totalcow-bind.h"
#include "totalcow-btrfs.h"
#include "totalcow-canon.h"
#include "totalcow-group.h"
#include "totalcow-share.h"

static const char * const tc_stat_names[TC_NR_STATS] = {
	"files_bound", "files_refused", "aliases_installed", "aliases_proven",
	"aliases_resolved", "aliases_lost", "private_skips", "hash_rejects",
	"memcmp_mismatches", "compares", "cow_breaks", "share_ns",
	"mmaps_shared", "mmaps_private", "files_bound_by_extents",
	"share_wait_ns", "members_joined", "cow_copies", "proofs_stale",
};

/* Groups, their members and the groups/ files. */
DEFINE_MUTEX(tc_groups_lock);
static LIST_HEAD(tc_groups);
static struct kobject *groups_kobj;

u32 tc_path_dev(const struct path *path)
{
	struct kstat st;

	if (vfs_getattr(path, &st, STATX_INO, AT_STATX_DONT_SYNC))
		return 0;
	return new_encode_dev(st.dev);
}

/* The member root of a group that @path lies in, with its group. */
struct tc_member *tc_find_member(const struct path *path, struct tc_group **gp)
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
 * Is @inode in the subvolume of a group's template? Such a file is the
 * group's, whatever its subvolume descends from: it neither joins another
 * group automatically nor follows its source into a sharing scope, where
 * its pages would become aliases that the group's members cannot share.
 */
bool tc_in_template_subvol(struct inode *inode)
{
	struct tc_group *g;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry(g, &tc_groups, list) {
		struct inode *t = d_inode(g->template.dentry);

		if (inode->i_sb == t->i_sb &&
		    tc_btrfs_subvol_id(inode) == tc_btrfs_subvol_id(t))
			return true;
	}
	return false;
}

/*
 * Deleted subvolumes leave the groups and scopes they were in from a
 * worker (below; tc_canon_prune_work for scopes), every
 * totalcow.prune_interval_ms while there is something to look at: btrfs
 * tells no one of a deletion, and the sysfs files only show what is, so
 * that a monitoring agent that polls them changes nothing. A join or a
 * follow starts the worker, and each run starts the next one while
 * automatic members (or followed and looked-up subvolumes) remain.
 */
#undef MODULE_PARAM_PREFIX
#define MODULE_PARAM_PREFIX "totalcow."

#define TC_PRUNE_INTERVAL_MS_MAX (24 * 3600 * 1000)
static unsigned int tc_prune_interval_ms = 5000;
/* Set once the workers can be queued: a boot parameter comes earlier. */
static bool tc_prune_ready;
static void tc_prune_auto_all(struct work_struct *work);
static DECLARE_DEFERRABLE_WORK(tc_prune_work, tc_prune_auto_all);

/* The delay of the next prune, in jiffies. */
unsigned long tc_prune_delay(void)
{
	return msecs_to_jiffies(READ_ONCE(tc_prune_interval_ms));
}

/* A new interval: prune now, and from then on at the new interval. */
static int tc_prune_interval_set(const char *val, const struct kernel_param *kp)
{
	int err = param_set_uint_minmax(val, kp, 10, TC_PRUNE_INTERVAL_MS_MAX);

	if (!err && READ_ONCE(tc_prune_ready)) {
		mod_delayed_work(system_unbound_wq, &tc_prune_work, 0);
		tc_canon_prune_kick();
	}
	return err;
}

static const struct kernel_param_ops tc_prune_interval_ops = {
	.set = tc_prune_interval_set,
	.get = param_get_uint,
};
module_param_cb(prune_interval_ms, &tc_prune_interval_ops,
		&tc_prune_interval_ms, 0644);
MODULE_PARM_DESC(prune_interval_ms,
		 "how often deleted subvolumes are looked for (ms, 10 to 86400000)");

/*
 * Drop @g's automatic members whose subvolume is gone, with their files;
 * tc_groups_lock held. Return: whether automatic members remain.
 */
static bool tc_prune_auto(struct tc_group *g)
{
	struct tc_member *m, *n;
	bool left = false;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry_safe(m, n, &g->members, list) {
		if (!m->automatic)
			continue;
		if (tc_btrfs_subvol_exists(m->sb, m->subvol)) {
			left = true;
			continue;
		}
		tc_unbind_files(g, m);
		spin_lock(&g->members_lock);
		list_del(&m->list);
		spin_unlock(&g->members_lock);
		kfree(m);
		cond_resched();
	}
	return left;
}

/*
 * The pruning, off the reader's path and out of the shows: it looks up
 * each automatic member's subvolume, which may read the root tree, and no
 * reader may do that while holding tc_groups_lock (totalcow-reader-hold.h).
 * A member whose subvolume is gone is unbound as groups/remove unbinds
 * one. Every group's: one whose "auto" went off keeps members that
 * joined, and those go when deleted too.
 */
static void tc_prune_auto_all(struct work_struct *work)
{
	struct tc_group *g;
	bool left = false;

	mutex_lock(&tc_groups_lock);
	list_for_each_entry(g, &tc_groups, list)
		left |= tc_prune_auto(g);
	/*
	 * A join queues the work under the same lock, after this run began
	 * (its pending bit was cleared before it ran): a member the walk did
	 * not see has the next run queued by its join.
	 */
	if (left)
		queue_delayed_work(system_unbound_wq, &tc_prune_work,
				   tc_prune_delay());
	mutex_unlock(&tc_groups_lock);
}

/*
 * A reader that found member @m of @g under tc_groups_lock binds a file
 * after letting the lock go (tc_file_bind()), holding the template's path
 * and, for a member an admin added, the member's. groups/delete waits for
 * the group's such readers, groups/remove for the member's, before they
 * return: an umount may follow them. Neither can be found once unlisted,
 * so no new one comes; each binding is lookups and allocations, no data
 * read (at the rate of the reader's CPU and memory cgroups: the same work
 * the write waited for when readers did it under tc_groups_lock). An
 * automatic member holds no path, and is not waited for. The count keeps
 * @g and @m: delete puts the group's reference, remove frees the member,
 * only after their wait.
 */
void tc_binders_get(struct tc_group *g, struct tc_member *m)
{
	lockdep_assert_held(&tc_groups_lock);
	atomic_inc(&g->binders);
	if (!m->automatic)
		atomic_inc(&m->binders);
}

/*
 * After tc_binders_get(), without tc_groups_lock, with the paths put; @m
 * as it was found. A waker touches no memory of @g or @m after its
 * decrement: wake_up_var() only hashes the address.
 */
void tc_binders_put(struct tc_group *g, struct tc_member *m)
{
	if (m && atomic_dec_and_test(&m->binders))
		wake_up_var(&m->binders);
	if (atomic_dec_and_test(&g->binders))
		wake_up_var(&g->binders);
}

/*
 * Could @inode's subvolume join a group by lineage: is there a group with
 * "auto" on, on its file system, of another subvolume? Then its lineage
 * is worth reading (tc_btrfs_lineage(), before the lock).
 */
bool tc_auto_possible(struct inode *inode)
{
	struct tc_group *g;

	lockdep_assert_held(&tc_groups_lock);
	list_for_each_entry(g, &tc_groups, list) {
		/* The file system first: @inode may be on any. */
		if (g->auto_join && inode->i_sb == g->template.dentry->d_sb &&
		    tc_btrfs_subvol_id(inode) !=
		    tc_btrfs_subvol_id(d_inode(g->template.dentry)))
			return true;
	}
	return false;
}

/**
 * tc_auto_join - join @file's subvolume to the group it descends from
 * @file: a file in no member subvolume
 * @l: its subvolume's lineage (tc_btrfs_lineage(), read before the lock)
 * @spare: a zeroed member, allocated before the lock (charged to the
 *	reader: anyone may make snapshots that join); taken if it joins
 * @gp: set to the group it joins
 *
 * Does the subvolume descend from the template of a group with "auto" on,
 * within TC_AUTO_HOPS snapshots? Then it joins that group as an automatic
 * member, here, at its first read: no hook, no privilege in the
 * container. Only compares what the reader brought: no lookup, no
 * allocation under tc_groups_lock.
 *
 * Return: the member, or NULL.
 */
struct tc_member *tc_auto_join(struct file *file, const struct tc_lineage *l,
			       struct tc_member **spare, struct tc_group **gp)
{
	struct inode *inode = file_inode(file);
	struct tc_group *g, *best = NULL;
	int hops, least = TC_AUTO_HOPS + 1;
	struct tc_member *m = *spare;

	lockdep_assert_held(&tc_groups_lock);
	/* The nearest template, if templates descend from each other. */
	list_for_each_entry(g, &tc_groups, list) {
		if (!g->auto_join || inode->i_sb != g->template.dentry->d_sb ||
		    tc_btrfs_subvol_id(inode) ==
		    tc_btrfs_subvol_id(d_inode(g->template.dentry)))
			continue;
		hops = tc_lineage_hops(l, g->tuuid, g->treceived,
				       TC_AUTO_HOPS);
		if (hops > 0 && hops < least) {
			least = hops;
			best = g;
		}
	}
	if (!best || !m)
		return NULL;
	*spare = NULL;
	INIT_LIST_HEAD(&m->files);
	m->automatic = true;
	m->sb = inode->i_sb;
	m->subvol = tc_btrfs_subvol_id(inode);
	spin_lock(&best->members_lock);
	list_add_tail(&m->list, &best->members);
	spin_unlock(&best->members_lock);
	tc_count(best, TC_MEMBERS_JOINED, 1);
	/* It goes once deleted, found without holding this reader. */
	queue_delayed_work(system_unbound_wq, &tc_prune_work, tc_prune_delay());
	*gp = best;
	return m;
}

#define to_group(k) container_of(k, struct tc_group, kobj)

static ssize_t template_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	char *p = d_path(&to_group(kobj)->template, buf, PAGE_SIZE - 1);

	if (IS_ERR(p))
		return PTR_ERR(p);
	return sysfs_emit(buf, "%s\n", p);
}

/*
 * The member directories an admin added, a line each. Under members_lock
 * alone (the spinlock a change of the list takes last): a member's root
 * is held until remove_store() frees it, after it left the list.
 */
static ssize_t members_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct tc_group *g = to_group(kobj);
	char *tmp = (char *)__get_free_page(GFP_KERNEL);
	struct tc_member *m;
	int len = 0;

	if (!tmp)
		return -ENOMEM;
	spin_lock(&g->members_lock);
	list_for_each_entry(m, &g->members, list) {
		char *p;

		if (m->automatic)
			continue;	/* listed in auto_members */
		p = d_path(&m->root, tmp, PAGE_SIZE);
		if (!IS_ERR(p))
			len = tc_sysfs_emit_at(buf, len, "%s\n", p);
	}
	spin_unlock(&g->members_lock);
	free_page((unsigned long)tmp);
	return len;
}

/*
 * Pages of bound member files whose slot is an alias now: the sum of their
 * mappings' alias counts (mapping_page_aliases(), kept by mm at every store
 * and removal), so that a read of stats costs O(files), not O(pages). The
 * walk keeps its place in the group's list with a cursor entry (no
 * mapping, which tc_unbind_files() passes over) and holds tc_files_lock
 * for TC_UNBIND_BATCH files at a time; under it a listed file's inode
 * cannot finish eviction (tc_file_release() waits for the lock). Not under
 * tc_groups_lock, which a groups/delete holds while it unbinds the
 * group's files: the count is of the files bound at each step.
 */
static unsigned long tc_pages_shared(struct tc_group *g)
{
	struct tc_file cursor = { .mapping = NULL }, *tf;
	unsigned long n = 0;
	unsigned int i = 0;

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

/* The most lines auto_members can hold: "<id> ?\n" is at least 4 bytes. */
#define TC_AUTO_SHOW_MAX (PAGE_SIZE / 4)

/*
 * "<subvolume id> <path from the file system's top>" per automatic member
 * ("?" for a path that cannot be found). A subvolume deleted since it
 * joined is not listed: it leaves the group when the prune worker finds
 * it gone, not here. The ids are copied under members_lock; the paths
 * are looked up after it, on the template's file system (an automatic
 * member's), which the group holds while its kobject lives. A list that
 * does not fit in the page fails with -EFBIG rather than end short.
 */
static ssize_t auto_members_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	struct tc_group *g = to_group(kobj);
	struct super_block *sb = g->template.dentry->d_sb;
	struct tc_member *m;
	int len = 0, n = 0, i;
	u64 *ids;

	ids = kmalloc_array(TC_AUTO_SHOW_MAX, sizeof(*ids), GFP_KERNEL);
	if (!ids)
		return -ENOMEM;
	spin_lock(&g->members_lock);
	list_for_each_entry(m, &g->members, list) {
		if (!m->automatic)
			continue;
		if (n == TC_AUTO_SHOW_MAX) {
			len = -EFBIG;
			break;
		}
		ids[n++] = m->subvol;
	}
	spin_unlock(&g->members_lock);
	for (i = 0; i < n && len >= 0; i++) {
		char *name = tc_btrfs_subvol_name(sb, ids[i]);

		if (name || tc_btrfs_subvol_exists(sb, ids[i]))
			len = tc_sysfs_emit_at(buf, len, "%llu %s\n", ids[i],
					       name ?: "?");
		kfree(name);
	}
	kfree(ids);
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
	bool on, was;
	int err;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	err = kstrtobool(buf, &on);
	if (err) {
		pr_warn("groups/%s/auto: want 0 or 1\n", g->name);
		return err;
	}
	mutex_lock(&tc_groups_lock);
	was = g->auto_join;
	WRITE_ONCE(g->auto_join, on);
	/* Files read before, refused then, are asked again. */
	if (on && !was)
		tc_reclassify(g->template.dentry->d_sb);
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
	tc_fleet_reads_destroy(&g->reads);
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
 * "<name> <path>": a group name, and a path that is the rest of the line
 * (it may hold spaces) without the final newline.
 */
static int tc_parse_name_path(const char *buf, size_t count, char *name,
			      char **path)
{
	int err;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	err = tc_sysfs_name_path(buf, count, name, TC_TAG_MAX, path);
	if (!err && !tc_tag_name_valid(name)) {
		kfree(*path);
		err = -EINVAL;
	}
	return err;
}

/* A directory on btrfs; @ro: a template, a read-only subvolume's root. */
static int tc_lookup_dir(const char *name, struct path *p, bool ro)
{
	int err = kern_path(name, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, p);

	if (err)
		return err;
	if (p->dentry->d_sb->s_magic != BTRFS_SUPER_MAGIC) {
		pr_warn("groups: %s is not on btrfs\n", name);
		err = -EINVAL;
	} else if (ro && inode_permission(&nop_mnt_idmap, d_inode(p->dentry),
					  MAY_WRITE) != -EROFS) {
		pr_warn("groups: template %s is not read-only\n",
			name);
		err = -EINVAL;
	} else if (ro && !tc_btrfs_is_subvol_root(d_inode(p->dentry))) {
		pr_warn("groups: template %s is not a subvolume\n",
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
			pr_warn("groups/create: want \"<name> <template directory>\"\n");
		return err;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		kfree(dir);
		return -ENOMEM;
	}
	tc_fleet_reads_init(&g->reads);
	err = tc_lookup_dir(dir, &g->template, true);
	if (!err) {
		/* Until groups/delete, it cannot be made writable or deleted. */
		err = tc_btrfs_hold_readonly(d_inode(g->template.dentry));
		if (err) {
			pr_warn("groups/create: template %s is %s\n",
				dir, err == -EAGAIN ? "being deduplicated into" :
				"not read-only");
			path_put(&g->template);
		}
	}
	if (!err && tc_canon_in_scope(d_inode(g->template.dentry))) {
		/* Its pages would be a scope's aliases, not the members'. */
		pr_warn("groups/create: template %s is in a sharing scope: extents/disable it first\n",
			dir);
		tc_btrfs_release_readonly(d_inode(g->template.dentry));
		path_put(&g->template);
		err = -EBUSY;
	}
	if (!err) {
		u64 ino = tc_btrfs_subvol_writer(d_inode(g->template.dentry));

		/* Read-only stops new writers; these came before (docs/lxc.md). */
		if (ino) {
			pr_warn("groups/create: template %s has a file open for writing or data not written back (inode %llu): close it and sync first\n",
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
	tc_btrfs_subvol_uuids(d_inode(g->template.dentry), g->tuuid,
			      g->treceived);
	g->cred = get_current_cred();
	strscpy(g->name, name, sizeof(g->name));
	INIT_LIST_HEAD(&g->members);
	spin_lock_init(&g->members_lock);
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
static void tc_member_adopt(struct tc_group *g, struct tc_member *m,
			    struct tc_member *am)
{
	struct tc_file *tf;

	lockdep_assert_held(&tc_groups_lock);
	spin_lock(&tc_files_lock);
	list_for_each_entry(tf, &am->files, mlist)
		tf->member = m;
	list_splice_init(&am->files, &m->files);
	spin_lock(&g->members_lock);
	list_replace(&am->list, &m->list);
	spin_unlock(&g->members_lock);
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
			pr_warn("groups/add: want \"<name> <member directory>\"\n");
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
		pr_warn("groups/add %s: %s is not on the template's file system\n",
			name, dir);
		err = -EINVAL;
	} else if (is_subdir(m->root.dentry, g->template.dentry) ||
		   is_subdir(g->template.dentry, m->root.dentry)) {
		pr_warn("groups/add %s: %s overlaps the template\n",
			name, dir);
		err = -EINVAL;
	} else if (tc_btrfs_check_lineage(d_inode(m->root.dentry),
					  d_inode(g->template.dentry))) {
		/* Only a snapshot's files are the template's at the snapshot. */
		pr_warn("groups/add %s: %s is not a snapshot of the template\n",
			name, dir);
		err = -EXDEV;
	} else {
		om = tc_find_member(&m->root, &og);
		if (om && og == g && om->automatic) {
			tc_member_adopt(g, m, om);
			/* Its files resolve from the path given now. */
			tc_reclassify(m->root.dentry->d_sb);
			m = NULL;
		} else if (om) {
			pr_warn("groups/add %s: %s is in group %s already\n",
				name, dir, og->name);
			err = -EEXIST;
		} else {
			spin_lock(&g->members_lock);
			list_add_tail(&m->list, &g->members);
			spin_unlock(&g->members_lock);
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
			pr_warn("groups/remove: want \"<name> <member directory>\"\n");
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
		pr_warn("groups/remove %s: %s is not a member\n",
			name, dir);
		err = -ENOENT;
		goto unlock;
	}
	tc_unbind_files(g, found);
	spin_lock(&g->members_lock);
	list_del(&found->list);
	spin_unlock(&g->members_lock);
	/* Its files that were refused may belong to no group now. */
	tc_reclassify(p.dentry->d_sb);
unlock:
	mutex_unlock(&tc_groups_lock);
	path_put(&p);
	kfree(dir);
	if (found) {
		wait_var_event(&found->binders, !atomic_read(&found->binders));
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
	/* Files it refused belong to no group now: a scope may take them. */
	tc_reclassify(g->template.dentry->d_sb);
	page_alias_disable();
	/* The template may be made writable once delete returns. */
	tc_btrfs_release_readonly(d_inode(g->template.dentry));
	g->ro_held = false;
	mutex_unlock(&tc_groups_lock);
	wait_var_event(&g->binders, !atomic_read(&g->binders));
	kobject_del(&g->kobj);
	kobject_put(&g->kobj);
	/* Let the template's inodes go before we return: umount may follow. */
	tc_files_flush();
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

int __init tc_groups_init(void)
{
	int err;

	groups_kobj = kobject_create_and_add("groups", totalcow_sysfs_kobj());
	if (!groups_kobj)
		return -ENOMEM;
	err = sysfs_create_group(groups_kobj, &tc_groups_group);
	if (err)
		kobject_put(groups_kobj);
	else
		WRITE_ONCE(tc_prune_ready, true);
	return err;
}

#if IS_ENABLED(CONFIG_TOTALCOW_SHARE_GROUP_KUNIT_TEST)
#include "totalcow_group_kunit.c"
#endif
