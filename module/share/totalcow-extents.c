// SPDX-License-Identifier: GPL-2.0-only
/*
 * /sys/kernel/mm/totalcow/extents/: an admin opts a btrfs file system in
 * to shared extents, scope by scope (docs/design/scopes.md; the cache is
 * totalcow-canon.c). Files in different scopes never share a page, so
 * tenants that must not observe each other's reads go in different scopes.
 *
 *   enable   "<scope> <path>": the files of the subvolume holding <path>
 *            share extents within <scope>, which gets a canonical
 *            mapping on that file system if it has none
 *   disable  "<scope> <path>": that subvolume leaves the scope; the
 *            scope's mapping and pages go with its last subvolume
 *   scopes   a line per file system and scope (tc_canon_show())
 *
 * Writes need CAP_SYS_ADMIN; a bad one changes nothing and says why in
 * the kernel log.
 */

#define pr_fmt(fmt) "totalcow: " fmt

#include <linux/capability.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/magic.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "../../sysfs/totalcow-sysfs.h"
#include "totalcow-canon.h"
#include "totalcow-extent-share.h"
#include "totalcow-group.h"
#include "totalcow-share.h"

/*
 * "<scope> <path>": a scope name, one space, and a path that is the rest
 * of the line (it may hold spaces) without the final newline.
 */
static int tc_extents_parse(const char *buf, size_t count, char *scope,
			    char **path)
{
	int err = tc_sysfs_name_path(buf, count, scope,
				     TC_CANON_SCOPE_NAME_MAX, path);

	if (!err && !tc_canon_scope_name_valid(scope)) {
		kfree(*path);
		err = -EINVAL;
	}
	return err;
}

static ssize_t tc_extents_store(const char *op, const char *buf, size_t count,
				int (*fn)(struct inode *inode, const char *scope))
{
	char scope[TC_CANON_SCOPE_NAME_MAX + 1], *name;
	struct path path;
	int err;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	err = tc_extents_parse(buf, count, scope, &name);
	if (err) {
		if (err == -EINVAL)
			pr_warn("extents/%s: want \"<scope> <path on btrfs>\", a scope of 1 to %d characters of [A-Za-z0-9_.-]\n",
				op, TC_CANON_SCOPE_NAME_MAX);
		return err;
	}
	err = kern_path(name, LOOKUP_FOLLOW, &path);
	if (err) {
		pr_warn("extents/%s: %s: not found\n", op, name);
		goto out;
	}
	if (path.dentry->d_sb->s_magic != BTRFS_SUPER_MAGIC) {
		pr_warn("extents/%s: %s is not on btrfs\n", op, name);
		err = -EINVAL;
	} else {
		/* The path holds a mount: the file system cannot go meanwhile. */
		err = fn(d_inode(path.dentry), scope);
		/* Files read before were classified without the scope. */
		if (!err)
			tc_reclassify(path.dentry->d_sb);
	}
	path_put(&path);
	if (err == -EOPNOTSUPP)
		pr_warn("extents/%s: %s: not on a file system with mixed block groups, zoned, without data checksums, or with sectors larger than a page\n",
			op, name);
	else if (err == -EEXIST)
		pr_warn("extents/%s: the subvolume of %s is in a scope already\n",
			op, name);
	else if (err == -ENOENT)
		pr_warn("extents/%s: the subvolume of %s is not in scope %s\n",
			op, name, scope);
	else if (err == -EBUSY)
		pr_warn("extents/%s: the subvolume of %s holds a group's template: groups/delete it first\n",
			op, name);
out:
	kfree(name);
	return err ?: count;
}

/*
 * A group's template is the group's: in a scope its pages would become
 * aliases that the group's members cannot share (groups/create refuses
 * the converse).
 */
static int tc_extents_enable(struct inode *inode, const char *scope)
{
	bool template;

	mutex_lock(&tc_groups_lock);
	template = tc_in_template_subvol(inode);
	mutex_unlock(&tc_groups_lock);
	return template ? -EBUSY : tc_canon_enable(inode, scope);
}

static ssize_t enable_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	return tc_extents_store("enable", buf, count, tc_extents_enable);
}

static ssize_t disable_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	return tc_extents_store("disable", buf, count, tc_canon_disable);
}

static ssize_t scopes_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return tc_canon_show(buf);
}

static struct kobj_attribute enable_attr = __ATTR_WO(enable);
static struct kobj_attribute disable_attr = __ATTR_WO(disable);
static struct kobj_attribute scopes_attr = __ATTR_RO_MODE(scopes, 0400);

static struct attribute *tc_extents_attrs[] = {
	&enable_attr.attr,
	&disable_attr.attr,
	&scopes_attr.attr,
	NULL,
};

static const struct attribute_group tc_extents_group = {
	.attrs = tc_extents_attrs,
};

static int __init tc_extents_init(void)
{
	struct kobject *kobj;
	int err;

	kobj = kobject_create_and_add("extents", totalcow_sysfs_kobj());
	if (!kobj)
		return -ENOMEM;
	err = sysfs_create_group(kobj, &tc_extents_group);
	if (err)
		kobject_put(kobj);
	return err;
}
late_initcall_sync(tc_extents_init);
