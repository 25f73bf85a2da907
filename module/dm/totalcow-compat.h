/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow: every difference between the kernels the module builds
 * against, in this one header, the way out-of-tree modules that ship for
 * many kernels keep them. The module is written for the kernel it is
 * grafted into (6.12); where another kernel differs, the code calls a tc_
 * wrapper from here, defined once per range of kernels, keyed on
 * LINUX_VERSION_CODE, with the upstream change that made the difference.
 * No other file tests the kernel version.
 *
 * make modules builds the module W=1-clean against Debian's 6.1, 6.12
 * (Debian 12's and 13's) and the newest of trixie-backports (7.3), and
 * make check-stock runs the dm tests on those kernels; see
 * docs/dm-totalcow.rst and docs/test-harness.md.
 */
#ifndef TOTALCOW_COMPAT_H
#define TOTALCOW_COMPAT_H

#include <linux/container_of.h>
#include <linux/gfp.h>
#include <linux/printk.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/version.h>
#include <linux/workqueue.h>

/*
 * 6.0 gave shrinkers a name (commit e33c267ab70d "mm: shrinkers: provide
 * shrinkers with names"), which the shrinker wrappers below pass on; no
 * older kernel is supported.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "dm-totalcow needs Linux 6.1 or later"
#endif

/*
 * Allocate up to @nr order-0 pages into the NULL slots of @pages; returns
 * how many slots are filled, from the first. 6.14 dropped the list variant
 * of the bulk allocator and renamed alloc_pages_bulk_array() to
 * alloc_pages_bulk(), the old name going with it (commits c8b979530f27
 * "mm: alloc_pages_bulk_noprof: drop page_list argument" and 6bf9b5b40af3
 * "mm: alloc_pages_bulk: rename API").
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 14, 0)
#define tc_alloc_pages_bulk(gfp, nr, pages) alloc_pages_bulk(gfp, nr, pages)
#else
#define tc_alloc_pages_bulk(gfp, nr, pages) alloc_pages_bulk_array(gfp, nr, pages)
#endif

/*
 * The flag that asks alloc_workqueue() for a per-CPU workqueue, which is
 * what no flag has always meant. Commit 930c2ea566af ("workqueue: Add new
 * WQ_PERCPU flag", 6.17) began moving the default to unbound, and commit
 * 21c05ca88a54 ("workqueue: Add warnings and ensure one among WQ_PERCPU or
 * WQ_UNBOUND is present") WARNs about a workqueue that names neither
 * (Debian's 7.3: the stock lane's runs failed on it). Stable 6.12 has the
 * flag too (Debian's 6.12.107 and later; 6.1.192 does not): older kernels
 * get 0, the same per-CPU workqueue.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0) || \
	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 107) && \
	 LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0))
#define TC_WQ_PERCPU WQ_PERCPU
#else
#define TC_WQ_PERCPU 0
#endif

/*
 * A shrinker whose callbacks find their object with tc_shrinker_private().
 * 6.7 made shrinkers objects of their own: shrinker_alloc(),
 * shrinker_register(), shrinker_free() and shrinker->private_data (commit
 * c42d50aefd17 "mm: shrinker: add infrastructure for dynamically allocating
 * shrinker"), and removed register_shrinker() and unregister_shrinker()
 * ("mm: shrinker: remove old APIs", same release). Before 6.7 the shrinker
 * is embedded in a struct tc_shrinker beside the private pointer, and it
 * is registered by tc_shrinker_alloc() already, because registering is
 * what allocates (and may fail) there; tc_shrinker_register() is then
 * empty. So the callbacks may run as soon as tc_shrinker_alloc() returns:
 * what they use must be ready before it is called. tc_shrinker_free()
 * unregisters the shrinker if it is registered, waits for callbacks in
 * progress and frees it.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
static inline __printf(4, 5) struct shrinker *
tc_shrinker_alloc(unsigned long (*count)(struct shrinker *, struct shrink_control *),
		  unsigned long (*scan)(struct shrinker *, struct shrink_control *),
		  void *private, const char *fmt, ...)
{
	struct va_format vaf;
	struct shrinker *s;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	s = shrinker_alloc(0, "%pV", &vaf);
	va_end(args);
	if (!s)
		return NULL;
	s->count_objects = count;
	s->scan_objects = scan;
	s->private_data = private;
	return s;
}

static inline void *tc_shrinker_private(struct shrinker *s)
{
	return s->private_data;
}

static inline void tc_shrinker_register(struct shrinker *s)
{
	shrinker_register(s);
}

static inline void tc_shrinker_free(struct shrinker *s)
{
	shrinker_free(s);
}
#else
struct tc_shrinker {
	struct shrinker shrinker;
	void *private_data;
};

static inline __printf(4, 5) struct shrinker *
tc_shrinker_alloc(unsigned long (*count)(struct shrinker *, struct shrink_control *),
		  unsigned long (*scan)(struct shrinker *, struct shrink_control *),
		  void *private, const char *fmt, ...)
{
	struct tc_shrinker *ts = kzalloc(sizeof(*ts), GFP_KERNEL);
	struct va_format vaf;
	va_list args;
	int r;

	if (!ts)
		return NULL;
	ts->shrinker.count_objects = count;
	ts->shrinker.scan_objects = scan;
	/* What shrinker_alloc() sets; 0 would mean objects free to rebuild. */
	ts->shrinker.seeks = DEFAULT_SEEKS;
	ts->private_data = private;
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	r = register_shrinker(&ts->shrinker, "%pV", &vaf);
	va_end(args);
	if (r) {
		kfree(ts);
		return NULL;
	}
	return &ts->shrinker;
}

static inline void *tc_shrinker_private(struct shrinker *s)
{
	return container_of(s, struct tc_shrinker, shrinker)->private_data;
}

/* Registered by tc_shrinker_alloc(). */
static inline void tc_shrinker_register(struct shrinker *s)
{
}

static inline void tc_shrinker_free(struct shrinker *s)
{
	unregister_shrinker(s);
	kfree(container_of(s, struct tc_shrinker, shrinker));
}
#endif

#endif /* TOTALCOW_COMPAT_H */
