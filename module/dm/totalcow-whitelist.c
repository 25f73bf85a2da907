// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow whitelist: which disk ranges may be cached.
 *
 * Every template (tag) keeps its own sorted, merged array of ranges, so
 * that removing one template removes only what it registered. Readers do
 * not look at the tags: they binary-search a merged view of all tags that
 * is rebuilt on every change and published with RCU. Updates are rare
 * (registration, deregistration); lookups happen for every bio.
 */

#include <linux/ctype.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "totalcow-whitelist.h"

static int tc_range_cmp(const void *a, const void *b)
{
	const struct tc_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

/*
 * Sort @r and merge overlapping and adjacent ranges in place. Empty ranges
 * are dropped. Returns the new number of ranges.
 */
unsigned int tc_ranges_normalize(struct tc_range *r, unsigned int n)
{
	unsigned int i, out = 0;

	sort(r, n, sizeof(*r), tc_range_cmp, NULL);
	for (i = 0; i < n; i++) {
		if (r[i].start >= r[i].end)
			continue;
		if (out && r[i].start <= r[out - 1].end)
			r[out - 1].end = max(r[out - 1].end, r[i].end);
		else
			r[out++] = r[i];
	}
	return out;
}

/* Append [s, e) to @out (which may be NULL to count), merging if adjacent. */
static void tc_emit(struct tc_range *out, unsigned int *n, sector_t s,
		    sector_t e, sector_t *last_end)
{
	if (s >= e)
		return;
	if (*n && s <= *last_end) {
		*last_end = max(*last_end, e);
		if (out)
			out[*n - 1].end = *last_end;
		return;
	}
	if (out) {
		out[*n].start = s;
		out[*n].end = e;
	}
	*last_end = e;
	(*n)++;
}

/*
 * @a and @b are normalised. Write their union, normalised, to @out (room
 * for na + nb ranges) or, if @out is NULL, only count it.
 */
unsigned int tc_ranges_union(const struct tc_range *a, unsigned int na,
			     const struct tc_range *b, unsigned int nb,
			     struct tc_range *out)
{
	unsigned int i = 0, j = 0, n = 0;
	sector_t last_end = 0;

	while (i < na || j < nb) {
		const struct tc_range *next;

		if (j >= nb || (i < na && a[i].start <= b[j].start))
			next = &a[i++];
		else
			next = &b[j++];
		tc_emit(out, &n, next->start, next->end, &last_end);
	}
	return n;
}

/*
 * @a and @b are normalised. Write @a minus @b to @out (room for na + nb
 * ranges) or, if @out is NULL, only count it.
 */
unsigned int tc_ranges_subtract(const struct tc_range *a, unsigned int na,
				const struct tc_range *b, unsigned int nb,
				struct tc_range *out)
{
	unsigned int i, j = 0, n = 0;
	sector_t last_end = 0;

	for (i = 0; i < na; i++) {
		sector_t s = a[i].start;

		while (j < nb && b[j].end <= s)
			j++;
		while (j < nb && b[j].start < a[i].end) {
			tc_emit(out, &n, s, min(b[j].start, a[i].end), &last_end);
			s = max(s, b[j].end);
			if (b[j].end > a[i].end)
				break;
			j++;
		}
		tc_emit(out, &n, s, a[i].end, &last_end);
	}
	return n;
}

/* Does normalised @a cover every range of normalised @b? */
bool tc_ranges_contain(const struct tc_range *a, unsigned int na,
		       const struct tc_range *b, unsigned int nb)
{
	unsigned int i = 0, j;

	for (j = 0; j < nb; j++) {
		while (i < na && a[i].end <= b[j].start)
			i++;
		/* Ranges in @a are not adjacent: @b[j] must fit in one. */
		if (i >= na || a[i].start > b[j].start || a[i].end < b[j].end)
			return false;
	}
	return true;
}

/* Index of the first range of @v that ends after @s (v->nr if none). */
static unsigned int tc_view_search(const struct tc_wl_view *v, sector_t s)
{
	unsigned int lo = 0, hi = v->nr;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (v->r[mid].end <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Is sector @s whitelisted? *@next is set to the first sector after @s at
 * which the answer changes ((sector_t)-1 if it never does).
 */
bool tc_view_lookup(const struct tc_wl_view *v, sector_t s, sector_t *next)
{
	unsigned int i;

	if (!v) {
		*next = (sector_t)-1;
		return false;
	}
	i = tc_view_search(v, s);
	if (i == v->nr) {
		*next = (sector_t)-1;
		return false;
	}
	if (v->r[i].start <= s) {
		*next = v->r[i].end;
		return true;
	}
	*next = v->r[i].start;
	return false;
}

/* Does [@s, @e) overlap any whitelisted range? */
bool tc_view_overlaps(const struct tc_wl_view *v, sector_t s, sector_t e)
{
	unsigned int i;

	if (!v || s >= e)
		return false;
	i = tc_view_search(v, s);
	return i < v->nr && v->r[i].start < e;
}

/* Tags name templates: 1-64 characters of [A-Za-z0-9._:+-], not "." or "..". */
bool tc_tag_name_valid(const char *name)
{
	size_t len = strnlen(name, TC_TAG_MAX + 1);
	size_t i;

	if (!len || len > TC_TAG_MAX)
		return false;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!isalnum(c) && !strchr("._:+-", c))
			return false;
	}
	return true;
}

static struct tc_wl_view *tc_view_alloc(unsigned int nr)
{
	struct tc_wl_view *v;

	v = kvmalloc(struct_size(v, r, nr), GFP_KERNEL);
	if (v)
		v->nr = nr;
	return v;
}

static sector_t tc_ranges_sectors(const struct tc_range *r, unsigned int n)
{
	sector_t sum = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		sum += r[i].end - r[i].start;
	return sum;
}

static void tc_view_sum(struct tc_wl_view *v)
{
	v->sectors = tc_ranges_sectors(v->r, v->nr);
}

static struct tc_wl_tag *tc_wl_find(struct tc_whitelist *wl, const char *name)
{
	struct tc_wl_tag *t;

	list_for_each_entry(t, &wl->tags, list)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

void tc_wl_init(struct tc_whitelist *wl)
{
	mutex_init(&wl->lock);
	spin_lock_init(&wl->tags_lock);
	INIT_LIST_HEAD(&wl->tags);
	wl->nr_tags = 0;
	RCU_INIT_POINTER(wl->all, NULL);
	RCU_INIT_POINTER(wl->active, NULL);
}

static void tc_tag_free(struct tc_wl_tag *t)
{
	kvfree(t->r);
	kfree(t);
}

/* No readers are left (the target is being destroyed). */
void tc_wl_destroy(struct tc_whitelist *wl)
{
	struct tc_wl_tag *t, *tmp;
	struct tc_wl_view *all = rcu_dereference_protected(wl->all, true);
	struct tc_wl_view *active = rcu_dereference_protected(wl->active, true);

	list_for_each_entry_safe(t, tmp, &wl->tags, list) {
		list_del(&t->list);
		tc_tag_free(t);
	}
	if (active != all)
		kvfree(active);
	kvfree(all);
	RCU_INIT_POINTER(wl->all, NULL);
	RCU_INIT_POINTER(wl->active, NULL);
	mutex_destroy(&wl->lock);
}

static struct tc_wl_view *tc_wl_all(struct tc_whitelist *wl)
{
	return rcu_dereference_protected(wl->all, lockdep_is_held(&wl->lock));
}

static struct tc_wl_view *tc_wl_active(struct tc_whitelist *wl)
{
	return rcu_dereference_protected(wl->active, lockdep_is_held(&wl->lock));
}

/*
 * Add the @n ranges at @r (normalised in place) to template @tag and
 * publish them in @all; tc_wl_activate_locked() later makes them cacheable.
 * Everything is allocated before anything changes: on error nothing did.
 * With @undo, what the add replaced is kept there until the caller either
 * commits (tc_wl_add_commit_locked(), which activates) or takes the add
 * back (tc_wl_add_abort_locked()), without unlocking in between.
 */
int tc_wl_add_locked(struct tc_whitelist *wl, const char *tag,
		     struct tc_range *r, unsigned int n, struct tc_wl_undo *undo)
{
	struct tc_wl_view *all = tc_wl_all(wl), *nall;
	struct tc_wl_tag *t = tc_wl_find(wl, tag), *nt = NULL;
	struct tc_range *tr, *old;
	unsigned int tnr, anr;

	lockdep_assert_held(&wl->lock);
	if (!tc_tag_name_valid(tag) || !n)
		return -EINVAL;
	n = tc_ranges_normalize(r, n);
	if (!n)
		return -EINVAL;

	tnr = tc_ranges_union(t ? t->r : NULL, t ? t->nr : 0, r, n, NULL);
	anr = tc_ranges_union(all ? all->r : NULL, all ? all->nr : 0, r, n, NULL);
	if (anr > TC_WL_MAX_RANGES || tnr > TC_WL_MAX_RANGES)
		return -ENOSPC;

	if (!t) {
		nt = kzalloc(sizeof(*nt), GFP_KERNEL);
		if (!nt)
			return -ENOMEM;
		strscpy(nt->name, tag, sizeof(nt->name));
	}
	tr = kvmalloc_array(tnr, sizeof(*tr), GFP_KERNEL);
	nall = tc_view_alloc(anr);
	if (!tr || !nall) {
		kvfree(tr);
		kvfree(nall);
		kfree(nt);
		return -ENOMEM;
	}

	if (nt)
		t = nt;
	tc_ranges_union(t->r, t->nr, r, n, tr);
	if (undo) {
		undo->tag = t;
		undo->new_tag = nt;
		undo->r = t->r;
		undo->nr = t->nr;
		undo->sectors = t->sectors;
		undo->all = all;
	}
	old = t->r;
	spin_lock(&wl->tags_lock);
	if (nt) {
		list_add_tail(&t->list, &wl->tags);
		wl->nr_tags++;
	}
	t->r = tr;
	t->nr = tnr;
	t->sectors = tc_ranges_sectors(tr, tnr);
	spin_unlock(&wl->tags_lock);
	if (!undo)
		kvfree(old);

	tc_ranges_union(all ? all->r : NULL, all ? all->nr : 0, r, n, nall->r);
	tc_view_sum(nall);
	rcu_assign_pointer(wl->all, nall);
	/* @all was shared with @active, which still points to it. */
	if (all && all != tc_wl_active(wl))
		kvfree_rcu(all, rcu);
	return 0;
}

/* Make everything in @all cacheable. */
void tc_wl_activate_locked(struct tc_whitelist *wl)
{
	struct tc_wl_view *all = tc_wl_all(wl), *old = tc_wl_active(wl);

	lockdep_assert_held(&wl->lock);
	if (old == all)
		return;
	rcu_assign_pointer(wl->active, all);
	if (old)
		kvfree_rcu(old, rcu);
}

/* Keep an add made with @undo: make it cacheable, free what it replaced. */
void tc_wl_add_commit_locked(struct tc_whitelist *wl, struct tc_wl_undo *undo)
{
	tc_wl_activate_locked(wl);
	kvfree(undo->r);
	undo->r = NULL;
}

/*
 * Take back an add made with @undo: the template's ranges and @all are
 * what they were before it. Writes may still be looking at the view the
 * add published (RCU), so it is freed after a grace period.
 */
void tc_wl_add_abort_locked(struct tc_whitelist *wl, struct tc_wl_undo *undo)
{
	struct tc_wl_view *nall = tc_wl_all(wl);
	struct tc_wl_tag *t = undo->tag;

	struct tc_range *r = t->r;

	lockdep_assert_held(&wl->lock);
	spin_lock(&wl->tags_lock);
	if (undo->new_tag) {
		list_del(&t->list);
		wl->nr_tags--;
	} else {
		t->r = undo->r;
		t->nr = undo->nr;
		t->sectors = undo->sectors;
	}
	spin_unlock(&wl->tags_lock);
	kvfree(r);
	if (undo->new_tag)
		kfree(t);
	undo->r = NULL;
	rcu_assign_pointer(wl->all, undo->all);
	if (nall != tc_wl_active(wl))
		kvfree_rcu(nall, rcu);
}

/* Rebuild the merged view of all tags, with @skip's ranges replaced. */
static struct tc_wl_view *tc_wl_merge(struct tc_whitelist *wl,
				      struct tc_wl_tag *skip,
				      const struct tc_range *sr, unsigned int snr)
{
	struct tc_range *acc = NULL, *next;
	unsigned int nacc = 0, nnext;
	struct tc_wl_view *v;
	struct tc_wl_tag *t;

	list_for_each_entry(t, &wl->tags, list) {
		const struct tc_range *tr = t == skip ? sr : t->r;
		unsigned int tn = t == skip ? snr : t->nr;

		nnext = tc_ranges_union(acc, nacc, tr, tn, NULL);
		next = kvmalloc_array(max(nnext, 1U), sizeof(*next), GFP_KERNEL);
		if (!next) {
			kvfree(acc);
			return ERR_PTR(-ENOMEM);
		}
		tc_ranges_union(acc, nacc, tr, tn, next);
		kvfree(acc);
		acc = next;
		nacc = nnext;
	}
	v = tc_view_alloc(nacc);
	if (!v) {
		kvfree(acc);
		return ERR_PTR(-ENOMEM);
	}
	if (nacc)
		memcpy(v->r, acc, nacc * sizeof(*acc));
	kvfree(acc);
	tc_view_sum(v);
	return v;
}

/*
 * Remove the @n ranges at @r (normalised in place) from template @tag, or
 * the whole template if @n is 0. Every range must be registered for @tag
 * (-ENOENT otherwise, and nothing changes). On success *@removed is what
 * is no longer whitelisted at all (another tag may still cover part of
 * what @tag dropped): the caller drops those cached blocks and frees it
 * (it was never published). Removing ranges can split one in two, so
 * this can fail with -ENOSPC at the limit.
 */
int tc_wl_del_locked(struct tc_whitelist *wl, const char *tag,
		     struct tc_range *r, unsigned int n,
		     struct tc_wl_view **removed)
{
	struct tc_wl_view *all = tc_wl_all(wl), *nall, *gone;
	struct tc_wl_tag *t;
	struct tc_range *tr = NULL, *old;
	unsigned int tnr = 0, gnr;

	lockdep_assert_held(&wl->lock);
	if (!tc_tag_name_valid(tag))
		return -EINVAL;
	t = tc_wl_find(wl, tag);
	if (!t)
		return -ENOENT;
	if (n) {
		n = tc_ranges_normalize(r, n);
		if (!n)
			return -EINVAL;
		if (!tc_ranges_contain(t->r, t->nr, r, n))
			return -ENOENT;
		tnr = tc_ranges_subtract(t->r, t->nr, r, n, NULL);
		if (tnr) {
			tr = kvmalloc_array(tnr, sizeof(*tr), GFP_KERNEL);
			if (!tr)
				return -ENOMEM;
			tc_ranges_subtract(t->r, t->nr, r, n, tr);
		}
	}

	if (tnr > TC_WL_MAX_RANGES) {
		kvfree(tr);
		return -ENOSPC;
	}
	nall = tc_wl_merge(wl, t, tr, tnr);
	if (IS_ERR(nall)) {
		kvfree(tr);
		return PTR_ERR(nall);
	}
	if (nall->nr > TC_WL_MAX_RANGES) {
		kvfree(nall);
		kvfree(tr);
		return -ENOSPC;
	}
	gnr = tc_ranges_subtract(all->r, all->nr, nall->r, nall->nr, NULL);
	gone = tc_view_alloc(gnr);
	if (!gone) {
		kvfree(nall);
		kvfree(tr);
		return -ENOMEM;
	}
	tc_ranges_subtract(all->r, all->nr, nall->r, nall->nr, gone->r);
	tc_view_sum(gone);

	old = t->r;
	spin_lock(&wl->tags_lock);
	if (tnr) {
		t->r = tr;
		t->nr = tnr;
		t->sectors = tc_ranges_sectors(tr, tnr);
	} else {
		list_del(&t->list);
		wl->nr_tags--;
	}
	spin_unlock(&wl->tags_lock);
	kvfree(old);
	if (!tnr)
		kfree(t);
	if (!nall->nr) {
		kvfree(nall);
		nall = NULL;
	}
	rcu_assign_pointer(wl->all, nall);
	/* Frees the old view, which @active shared with @all. */
	tc_wl_activate_locked(wl);
	*removed = gone;
	return 0;
}

/*
 * Copy ranges of @tag; see totalcow_whitelist_get(). Under tags_lock, not
 * @lock: an add that waits for writes in flight holds that, and its
 * ranges already count here (they go again if it is interrupted). The
 * copy is at most @max ranges, which the caller sizes by what it shows (a
 * page of sysfs text).
 */
int tc_wl_get(struct tc_whitelist *wl, const char *tag, unsigned int first,
	      unsigned int max, struct tc_range *out, unsigned int *nr,
	      sector_t *sectors)
{
	struct tc_wl_tag *t;
	unsigned int n = 0;

	spin_lock(&wl->tags_lock);
	t = tc_wl_find(wl, tag);
	if (t) {
		*nr = t->nr;
		*sectors = t->sectors;
		n = first < t->nr ? min(max, t->nr - first) : 0;
		if (n)
			memcpy(out, t->r + first, n * sizeof(*out));
	}
	spin_unlock(&wl->tags_lock);
	return t ? n : -ENOENT;
}

/*
 * Remove every template. Returns what was whitelisted (NULL if nothing),
 * for the caller to drop from the cache and free with kvfree_rcu().
 */
struct tc_wl_view *tc_wl_clear_locked(struct tc_whitelist *wl)
{
	struct tc_wl_view *all = tc_wl_all(wl), *active = tc_wl_active(wl);
	struct tc_wl_tag *t, *tmp;
	LIST_HEAD(gone);

	lockdep_assert_held(&wl->lock);
	spin_lock(&wl->tags_lock);
	list_splice_init(&wl->tags, &gone);
	wl->nr_tags = 0;
	spin_unlock(&wl->tags_lock);
	list_for_each_entry_safe(t, tmp, &gone, list) {
		list_del(&t->list);
		tc_tag_free(t);
	}
	RCU_INIT_POINTER(wl->all, NULL);
	RCU_INIT_POINTER(wl->active, NULL);
	if (active && active != all)
		kvfree_rcu(active, rcu);
	return all;
}

#if IS_ENABLED(CONFIG_DM_TOTALCOW_WHITELIST_KUNIT_TEST)
#include "totalcow_whitelist_kunit.c"
#endif
