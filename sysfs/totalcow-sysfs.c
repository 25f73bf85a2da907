// SPDX-License-Identifier: GPL-2.0-only
/*
 * /sys/kernel/mm/totalcow/: template registration (docs/ABI/testing/
 * sysfs-kernel-mm-totalcow).
 *
 * A template is a name bound to a dm-totalcow device; its extents live in
 * that device's whitelist under the template's name (the tag), and this
 * layer only keeps the name-to-device binding and shows the rest:
 *
 *   templates/register     "<name> <major>:<minor>"    create
 *   templates/add_extents  "<name> <start> <length>..."  add disk ranges
 *   templates/deregister   "<name>"                    remove (and its ranges)
 *   templates/<name>/{device,nr_extents,sectors,extents}
 *
 * Every write is one batch: parsed and checked completely, then applied
 * whole or not at all.
 */

#define pr_fmt(fmt) "totalcow: " fmt

#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/init.h>
#include <linux/kdev_t.h>
#include <linux/kobject.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "../module/dm/dm-totalcow.h"
#include "../module/dm/totalcow-parse.h"
#include "totalcow-sysfs.h"

/* The fixed width of one line of templates/<name>/extents. */
#define TC_EXTENT_LINE 42

/*
 * @op_lock serialises the changes of one template's ranges (add_extents,
 * deregister) without holding tc_templates_lock: an add waits for the
 * device's writes in flight, and a stuck write on one device must not
 * block every other template. @gone: deregistered, off the list.
 */
struct tc_template {
	struct kobject kobj;
	struct list_head list;
	struct mutex op_lock;		/* add_extents, deregister */
	bool gone;
	dev_t dev;
	char name[TC_TAG_MAX + 1];
};

static LIST_HEAD(tc_templates);
static DEFINE_MUTEX(tc_templates_lock);	/* the list and the kobjects */

/* Template @name with a reference, or NULL. */
static struct tc_template *tc_template_get(const char *name);
static struct kobject *totalcow_kobj, *templates_kobj;

#define to_template(k) container_of(k, struct tc_template, kobj)

static struct tc_template *tc_template_find(const char *name)
{
	struct tc_template *t;

	lockdep_assert_held(&tc_templates_lock);
	list_for_each_entry(t, &tc_templates, list)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

static struct tc_template *tc_template_get(const char *name)
{
	struct tc_template *t;

	mutex_lock(&tc_templates_lock);
	t = tc_template_find(name);
	if (t)
		kobject_get(&t->kobj);
	mutex_unlock(&tc_templates_lock);
	return t;
}

/* Totals of @t from its device; 0 if the device or its table went away. */
static void tc_template_totals(struct tc_template *t, unsigned int *nr,
			       sector_t *sectors)
{
	if (totalcow_whitelist_get(t->dev, t->name, 0, 0, NULL, nr, sectors) < 0) {
		*nr = 0;
		*sectors = 0;
	}
}

static ssize_t device_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct tc_template *t = to_template(kobj);

	return sysfs_emit(buf, "%u:%u\n", MAJOR(t->dev), MINOR(t->dev));
}

static ssize_t nr_extents_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	unsigned int nr;
	sector_t sectors;

	tc_template_totals(to_template(kobj), &nr, &sectors);
	return sysfs_emit(buf, "%u\n", nr);
}

static ssize_t sectors_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	unsigned int nr;
	sector_t sectors;

	tc_template_totals(to_template(kobj), &nr, &sectors);
	return sysfs_emit(buf, "%llu\n", (unsigned long long)sectors);
}

static struct kobj_attribute device_attr = __ATTR_RO_MODE(device, 0400);
static struct kobj_attribute nr_extents_attr = __ATTR_RO_MODE(nr_extents, 0400);
static struct kobj_attribute sectors_attr = __ATTR_RO_MODE(sectors, 0400);

/*
 * One "<start> <length>\n" line per extent, each TC_EXTENT_LINE bytes wide,
 * so that a read at any offset renders only the lines it returns.
 */
static ssize_t extents_read(struct file *file, struct kobject *kobj,
			    struct bin_attribute *attr, char *buf, loff_t off,
			    size_t count)
{
	struct tc_template *t = to_template(kobj);
	unsigned int first = div_u64(off, TC_EXTENT_LINE);
	unsigned int skip = off - (loff_t)first * TC_EXTENT_LINE;
	unsigned int max = DIV_ROUND_UP(count + skip, TC_EXTENT_LINE);
	char line[TC_EXTENT_LINE + 1];
	struct tc_range *r;
	unsigned int nr, i;
	sector_t sectors;
	size_t done = 0;
	int got;

	if (off < 0 || !count)
		return 0;
	r = kvmalloc_array(max, sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	got = totalcow_whitelist_get(t->dev, t->name, first, max, r, &nr,
				     &sectors);
	for (i = 0; got > 0 && i < got && done < count; i++) {
		size_t len;

		snprintf(line, sizeof(line), "%20llu %20llu\n",
			 (unsigned long long)r[i].start,
			 (unsigned long long)(r[i].end - r[i].start));
		len = min_t(size_t, TC_EXTENT_LINE - skip, count - done);
		memcpy(buf + done, line + skip, len);
		done += len;
		skip = 0;
	}
	kvfree(r);
	/* A template whose device went away lists nothing. */
	if (got < 0 && got != -ENODEV && got != -ENOENT)
		return got;
	return done;
}

static struct bin_attribute extents_attr = {
	.attr = { .name = "extents", .mode = 0400 },
	.read = extents_read,
};

static struct attribute *tc_template_attrs[] = {
	&device_attr.attr,
	&nr_extents_attr.attr,
	&sectors_attr.attr,
	NULL,
};

static struct bin_attribute *tc_template_bin_attrs[] = {
	&extents_attr,
	NULL,
};

static const struct attribute_group tc_template_group = {
	.attrs = tc_template_attrs,
	.bin_attrs = tc_template_bin_attrs,
};

static const struct attribute_group *tc_template_groups[] = {
	&tc_template_group,
	NULL,
};

static void tc_template_release(struct kobject *kobj)
{
	kfree(to_template(kobj));
}

static const struct kobj_type tc_template_ktype = {
	.release = tc_template_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = tc_template_groups,
};

/* "<major>:<minor>", decimal, nothing else. */
static int tc_parse_dev(const char *s, dev_t *dev)
{
	const char *colon = strchr(s, ':');
	char major_str[12];
	unsigned int major, minor;

	if (!colon || colon == s || colon - s >= sizeof(major_str) ||
	    !isdigit(colon[1]))
		return -EINVAL;
	memcpy(major_str, s, colon - s);
	major_str[colon - s] = '\0';
	if (!isdigit(major_str[0]) || kstrtouint(major_str, 10, &major) ||
	    kstrtouint(colon + 1, 10, &minor))
		return -EINVAL;
	*dev = MKDEV(major, minor);
	if (MAJOR(*dev) != major || MINOR(*dev) != minor)
		return -EINVAL;
	return 0;
}

/* Split a sysfs write into words; the caller frees with argv_free(). */
static char **tc_split(const char *buf, int *argc)
{
	if (!capable(CAP_SYS_ADMIN))
		return ERR_PTR(-EPERM);
	return argv_split(GFP_KERNEL, buf, argc) ?: ERR_PTR(-ENOMEM);
}

static ssize_t register_store(struct kobject *kobj, struct kobj_attribute *attr,
			      const char *buf, size_t count)
{
	struct tc_template *t;
	unsigned int nr;
	sector_t sectors;
	char **argv;
	int argc, ret;
	dev_t dev;

	argv = tc_split(buf, &argc);
	if (IS_ERR(argv))
		return PTR_ERR(argv);
	ret = -EINVAL;
	if (argc != 2 || !tc_tag_name_valid(argv[0]) || tc_parse_dev(argv[1], &dev)) {
		pr_warn("register: want \"<name> <major>:<minor>\", name of 1-%u [A-Za-z0-9._:+-]\n",
			TC_TAG_MAX);
		goto out;
	}

	/*
	 * The device must have a live totalcow target without this tag;
	 * asked before taking the list's lock, as the device may be busy.
	 */
	ret = totalcow_whitelist_get(dev, argv[0], 0, 0, NULL, &nr, &sectors);
	if (ret != -ENOENT) {
		if (!ret)
			ret = -EEXIST;
		else if (ret == -ENODEV)
			pr_warn("register %s: %u:%u is not a totalcow device\n",
				argv[0], MAJOR(dev), MINOR(dev));
		goto out;
	}
	mutex_lock(&tc_templates_lock);
	ret = -EEXIST;
	if (tc_template_find(argv[0]))
		goto unlock;
	ret = -ENOMEM;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		goto unlock;
	strscpy(t->name, argv[0], sizeof(t->name));
	mutex_init(&t->op_lock);
	t->dev = dev;
	ret = kobject_init_and_add(&t->kobj, &tc_template_ktype, templates_kobj,
				   "%s", t->name);
	if (ret) {
		kobject_put(&t->kobj);
		goto unlock;
	}
	list_add_tail(&t->list, &tc_templates);
	kobject_uevent(&t->kobj, KOBJ_ADD);
unlock:
	mutex_unlock(&tc_templates_lock);
out:
	argv_free(argv);
	return ret ? ret : count;
}

static ssize_t add_extents_store(struct kobject *kobj,
				 struct kobj_attribute *attr, const char *buf,
				 size_t count)
{
	const char *error = NULL;
	struct tc_template *t;
	struct tc_range *r = NULL;
	char **argv;
	int argc, ret;

	argv = tc_split(buf, &argc);
	if (IS_ERR(argv))
		return PTR_ERR(argv);
	ret = -EINVAL;
	if (argc < 3 || !(argc % 2)) {
		pr_warn("add_extents: want \"<name> <start> <length> [<start> <length>...]\"\n");
		goto out;
	}
	ret = -ENOMEM;
	r = kvmalloc_array(argc / 2, sizeof(*r), GFP_KERNEL);
	if (!r)
		goto out;
	ret = tc_parse_ranges(argc - 1, argv + 1, (sector_t)-1, r, &error);
	if (ret) {
		pr_warn("add_extents %s: %s\n", argv[0], error);
		goto out;
	}

	t = tc_template_get(argv[0]);
	ret = -ENOENT;
	if (t && !mutex_lock_killable(&t->op_lock)) {
		ret = t->gone ? -ENOENT :
		      totalcow_whitelist_add(t->dev, t->name, r, argc / 2);
		mutex_unlock(&t->op_lock);
	} else if (t) {
		ret = -EINTR;
	}
	if (t)
		kobject_put(&t->kobj);
	if (ret == -EINVAL)
		pr_warn("add_extents %s: a range ends beyond the device\n", argv[0]);
	else if (ret == -ENOENT)
		pr_warn("add_extents %s: no such template\n", argv[0]);
	else if (ret == -EINTR)
		pr_warn("add_extents %s: interrupted waiting for the device's writes in flight; nothing changed\n",
			argv[0]);
	else if (ret)
		pr_warn("add_extents %s: failed (%d)\n", argv[0], ret);
out:
	kvfree(r);
	argv_free(argv);
	return ret ? ret : count;
}

static ssize_t deregister_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	struct tc_template *t;
	char **argv;
	int argc, ret;

	argv = tc_split(buf, &argc);
	if (IS_ERR(argv))
		return PTR_ERR(argv);
	ret = -EINVAL;
	if (argc != 1 || !tc_tag_name_valid(argv[0]))
		goto out;

	t = tc_template_get(argv[0]);
	if (!t) {
		ret = -ENOENT;
		goto out;
	}
	if (mutex_lock_killable(&t->op_lock)) {
		ret = -EINTR;
		goto put;
	}
	ret = -ENOENT;
	if (!t->gone) {
		/* Gone already if the device or its table went away. */
		ret = totalcow_whitelist_del(t->dev, t->name, NULL, 0);
		if (ret == -ENODEV || ret == -ENOENT)
			ret = 0;
		if (!ret) {
			t->gone = true;
			mutex_lock(&tc_templates_lock);
			list_del(&t->list);
			mutex_unlock(&tc_templates_lock);
			kobject_put(&t->kobj);	/* the list's reference */
		}
	}
	mutex_unlock(&t->op_lock);
put:
	kobject_put(&t->kobj);
out:
	argv_free(argv);
	return ret ? ret : count;
}

static ssize_t nr_templates_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	struct tc_template *t;
	unsigned int n = 0;

	mutex_lock(&tc_templates_lock);
	list_for_each_entry(t, &tc_templates, list)
		n++;
	mutex_unlock(&tc_templates_lock);
	return sysfs_emit(buf, "%u\n", n);
}

static struct kobj_attribute register_attr = __ATTR_WO(register);
static struct kobj_attribute add_extents_attr = __ATTR_WO(add_extents);
static struct kobj_attribute deregister_attr = __ATTR_WO(deregister);
static struct kobj_attribute nr_templates_attr = __ATTR_RO_MODE(nr_templates, 0400);

static struct attribute *tc_templates_attrs[] = {
	&register_attr.attr,
	&add_extents_attr.attr,
	&deregister_attr.attr,
	&nr_templates_attr.attr,
	NULL,
};

static const struct attribute_group tc_templates_group = {
	.attrs = tc_templates_attrs,
};

struct kobject *totalcow_sysfs_kobj(void)
{
	return totalcow_kobj;
}

/**
 * tc_sysfs_name_path - split a line written to a sysfs file: "<name> <path>"
 * @buf: what was written
 * @count: its length
 * @name: set to the name, NUL-terminated (room for @name_max + 1 bytes)
 * @name_max: the longest name taken
 * @path: set to the path, allocated (kfree() it): the rest of the line,
 *	which may hold spaces, without the final newline
 *
 * The path must be absolute; what a name may be made of is the caller's
 * to check.
 *
 * Return: 0, -EINVAL if the line is malformed, or -ENOMEM.
 */
int tc_sysfs_name_path(const char *buf, size_t count, char *name,
		       size_t name_max, char **path)
{
	const char *sp = strnchr(buf, count, ' ');
	size_t n;

	if (!sp || sp == buf || sp - buf > name_max)
		return -EINVAL;
	memcpy(name, buf, sp - buf);
	name[sp - buf] = '\0';
	n = count - (sp + 1 - buf);
	if (n && sp[n] == '\n')
		n--;
	if (!n || sp[1] != '/')
		return -EINVAL;
	*path = kstrndup(sp + 1, n, GFP_KERNEL);
	return *path ? 0 : -ENOMEM;
}

/**
 * tc_sysfs_emit_at - sysfs_emit_at(), failing where it would cut text short
 * @buf: a sysfs page
 * @at: how much of @buf is written, or a negative error of an earlier call
 *	(returned as it is, so that a show can chain its calls and return
 *	the last one's result)
 * @fmt: what to append
 *
 * sysfs_emit_at() stops silently at the end of the page: a reader that
 * parses the file cannot tell a cut table from a whole one. A show that
 * lists a variable number of lines uses this instead and returns -EFBIG,
 * which read(2) reports, when they do not all fit.
 *
 * Return: the new length of the text in @buf, or a negative error: -EFBIG
 * if what @fmt makes does not fit whole in the rest of the page (nothing
 * of it counts), or @at if it was one.
 */
int tc_sysfs_emit_at(char *buf, int at, const char *fmt, ...)
{
	va_list args;
	int len;

	if (at < 0)
		return at;
	if (WARN_ON_ONCE(at >= PAGE_SIZE || offset_in_page(buf)))
		return -EINVAL;
	va_start(args, fmt);
	len = vsnprintf(buf + at, PAGE_SIZE - at, fmt, args);
	va_end(args);
	/* The NUL takes the page's last byte, as in sysfs_emit_at(). */
	if (len >= PAGE_SIZE - at) {
		buf[at] = '\0';
		return -EFBIG;
	}
	return at + len;
}

static int __init totalcow_sysfs_init(void)
{
	int ret;

	totalcow_kobj = kobject_create_and_add("totalcow", mm_kobj);
	if (!totalcow_kobj)
		return -ENOMEM;
	templates_kobj = kobject_create_and_add("templates", totalcow_kobj);
	if (!templates_kobj) {
		ret = -ENOMEM;
		goto put_totalcow;
	}
	ret = sysfs_create_group(templates_kobj, &tc_templates_group);
	if (ret)
		goto put_templates;
	return 0;

put_templates:
	kobject_put(templates_kobj);
put_totalcow:
	kobject_put(totalcow_kobj);
	return ret;
}
late_initcall(totalcow_sysfs_init);

#if IS_ENABLED(CONFIG_TOTALCOW_SYSFS_KUNIT_TEST)
#include "totalcow_sysfs_kunit.c"
#endif
