// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the dm-totalcow whitelist (included at the end of
 * totalcow-whitelist.c).
 */

#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/prandom.h>

#define R(s, e) ((struct tc_range){ .start = (s), .end = (e) })

static void tc_expect_ranges(struct kunit *test, const struct tc_range *got,
			     unsigned int ngot, const struct tc_range *want,
			     unsigned int nwant)
{
	unsigned int i;

	KUNIT_ASSERT_EQ(test, ngot, nwant);
	for (i = 0; i < nwant; i++) {
		KUNIT_EXPECT_EQ_MSG(test, got[i].start, want[i].start, "range %u", i);
		KUNIT_EXPECT_EQ_MSG(test, got[i].end, want[i].end, "range %u", i);
	}
}

static void tc_wl_normalize_sorts_and_merges(struct kunit *test)
{
	struct tc_range r[] = {
		R(100, 108), R(0, 8), R(8, 16),		/* adjacent: merged */
		R(40, 48), R(44, 60),			/* overlapping */
		R(70, 70),				/* empty: dropped */
		R(200, 208), R(200, 208),		/* duplicate */
		R(30, 35),
	};
	const struct tc_range want[] = {
		R(0, 16), R(30, 35), R(40, 60), R(100, 108), R(200, 208),
	};
	unsigned int n = tc_ranges_normalize(r, ARRAY_SIZE(r));

	tc_expect_ranges(test, r, n, want, ARRAY_SIZE(want));
	KUNIT_EXPECT_EQ(test, tc_ranges_normalize(r, 0), 0);
}

static void tc_wl_union_merges_overlap_and_adjacency(struct kunit *test)
{
	const struct tc_range a[] = { R(0, 10), R(20, 30), R(50, 60) };
	const struct tc_range b[] = { R(10, 15), R(25, 40), R(70, 80) };
	const struct tc_range want[] = { R(0, 15), R(20, 40), R(50, 60), R(70, 80) };
	struct tc_range out[6];
	unsigned int n;

	n = tc_ranges_union(a, 3, b, 3, out);
	tc_expect_ranges(test, out, n, want, ARRAY_SIZE(want));
	KUNIT_EXPECT_EQ(test, tc_ranges_union(a, 3, b, 3, NULL), n);
	KUNIT_EXPECT_EQ(test, tc_ranges_union(NULL, 0, b, 3, out), 3);
	KUNIT_EXPECT_EQ(test, tc_ranges_union(a, 3, NULL, 0, out), 3);
	KUNIT_EXPECT_EQ(test, tc_ranges_union(NULL, 0, NULL, 0, out), 0);
}

static void tc_wl_subtract_splits_and_trims(struct kunit *test)
{
	const struct tc_range a[] = { R(0, 100), R(200, 300), R(400, 500) };
	const struct tc_range b[] = {
		R(10, 20), R(30, 40),		/* two holes in the first */
		R(90, 210),			/* tail of first, head of second */
		R(290, 300),			/* exact tail */
		R(600, 700),			/* beyond everything */
	};
	const struct tc_range want[] = {
		R(0, 10), R(20, 30), R(40, 90), R(210, 290), R(400, 500),
	};
	struct tc_range out[8];
	unsigned int n;

	n = tc_ranges_subtract(a, 3, b, 5, out);
	tc_expect_ranges(test, out, n, want, ARRAY_SIZE(want));
	KUNIT_EXPECT_EQ(test, tc_ranges_subtract(a, 3, b, 5, NULL), n);
	KUNIT_EXPECT_EQ(test, tc_ranges_subtract(a, 3, a, 3, out), 0);
	KUNIT_EXPECT_EQ(test, tc_ranges_subtract(a, 3, NULL, 0, out), 3);
}

static void tc_wl_contain_requires_full_cover(struct kunit *test)
{
	const struct tc_range a[] = { R(0, 100), R(200, 300) };
	const struct tc_range inside[] = { R(0, 10), R(50, 100), R(250, 260) };
	const struct tc_range across[] = { R(90, 210) };
	const struct tc_range outside[] = { R(100, 101) };
	const struct tc_range sticking_out[] = { R(290, 301) };

	KUNIT_EXPECT_TRUE(test, tc_ranges_contain(a, 2, inside, 3));
	KUNIT_EXPECT_TRUE(test, tc_ranges_contain(a, 2, a, 2));
	KUNIT_EXPECT_FALSE(test, tc_ranges_contain(a, 2, across, 1));
	KUNIT_EXPECT_FALSE(test, tc_ranges_contain(a, 2, outside, 1));
	KUNIT_EXPECT_FALSE(test, tc_ranges_contain(a, 2, sticking_out, 1));
	KUNIT_EXPECT_FALSE(test, tc_ranges_contain(NULL, 0, inside, 1));
}

static struct tc_wl_view *tc_test_view(struct kunit *test,
				       const struct tc_range *r, unsigned int n)
{
	struct tc_wl_view *v = kunit_kzalloc(test, struct_size(v, r, n), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, v);
	v->nr = n;
	memcpy(v->r, r, n * sizeof(*r));
	tc_view_sum(v);
	return v;
}

static void tc_wl_lookup_is_half_open(struct kunit *test)
{
	const struct tc_range r[] = { R(8, 16), R(32, 64), R(100, 101) };
	struct tc_wl_view *v = tc_test_view(test, r, 3);
	sector_t next;

	KUNIT_EXPECT_EQ(test, v->sectors, 8 + 32 + 1);
	KUNIT_EXPECT_FALSE(test, tc_view_lookup(v, 0, &next));
	KUNIT_EXPECT_EQ(test, next, 8);
	KUNIT_EXPECT_TRUE(test, tc_view_lookup(v, 8, &next));
	KUNIT_EXPECT_EQ(test, next, 16);
	KUNIT_EXPECT_TRUE(test, tc_view_lookup(v, 15, &next));
	KUNIT_EXPECT_EQ(test, next, 16);
	KUNIT_EXPECT_FALSE(test, tc_view_lookup(v, 16, &next));
	KUNIT_EXPECT_EQ(test, next, 32);
	KUNIT_EXPECT_TRUE(test, tc_view_lookup(v, 100, &next));
	KUNIT_EXPECT_EQ(test, next, 101);
	KUNIT_EXPECT_FALSE(test, tc_view_lookup(v, 101, &next));
	KUNIT_EXPECT_EQ(test, next, (sector_t)-1);
	KUNIT_EXPECT_FALSE(test, tc_view_lookup(NULL, 5, &next));
	KUNIT_EXPECT_EQ(test, next, (sector_t)-1);

	KUNIT_EXPECT_TRUE(test, tc_view_overlaps(v, 0, 9));
	KUNIT_EXPECT_FALSE(test, tc_view_overlaps(v, 0, 8));
	KUNIT_EXPECT_FALSE(test, tc_view_overlaps(v, 16, 32));
	KUNIT_EXPECT_TRUE(test, tc_view_overlaps(v, 63, 1000));
	KUNIT_EXPECT_FALSE(test, tc_view_overlaps(v, 101, 1000));
	KUNIT_EXPECT_FALSE(test, tc_view_overlaps(v, 10, 10));
	KUNIT_EXPECT_FALSE(test, tc_view_overlaps(NULL, 0, 1000));
}

static void tc_wl_tag_names(struct kunit *test)
{
	char long_name[TC_TAG_MAX + 2];

	KUNIT_EXPECT_TRUE(test, tc_tag_name_valid("debian-12"));
	KUNIT_EXPECT_TRUE(test, tc_tag_name_valid("lxc:base_1.0+x"));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid(""));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid("."));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid(".."));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid("a/b"));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid("a b"));
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid("a\n"));
	memset(long_name, 'x', sizeof(long_name));
	long_name[TC_TAG_MAX] = '\0';
	KUNIT_EXPECT_TRUE(test, tc_tag_name_valid(long_name));
	long_name[TC_TAG_MAX] = 'x';
	long_name[TC_TAG_MAX + 1] = '\0';
	KUNIT_EXPECT_FALSE(test, tc_tag_name_valid(long_name));
}

static struct tc_wl_view *tc_test_all(struct tc_whitelist *wl)
{
	return rcu_dereference_protected(wl->all, true);
}

static void tc_test_wl_exit(void *data)
{
	tc_wl_destroy(data);
}

/*
 * An add made with an undo record and taken back (a killed wait for the
 * writes in flight) leaves the templates and both views as they were; a
 * committed one makes its ranges cacheable.
 */
static void tc_wl_add_abort_and_commit(struct kunit *test)
{
	struct tc_whitelist *wl = kunit_kzalloc(test, sizeof(*wl), GFP_KERNEL);
	struct tc_range a[] = { R(0, 8) }, more[] = { R(8, 16), R(32, 40) };
	struct tc_range fresh[] = { R(100, 108) }, got[4];
	const struct tc_range a_only[] = { R(0, 8) }, merged[] = { R(0, 16), R(32, 40) };
	struct tc_wl_view *all, *active;
	struct tc_wl_undo undo;
	unsigned int nr;
	sector_t sectors;

	KUNIT_ASSERT_NOT_NULL(test, wl);
	tc_wl_init(wl);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, tc_test_wl_exit, wl), 0);
	mutex_lock(&wl->lock);
	KUNIT_ASSERT_EQ(test, tc_wl_add_locked(wl, "a", a, 1, NULL), 0);
	tc_wl_activate_locked(wl);
	all = tc_test_all(wl);
	active = rcu_dereference_protected(wl->active, true);
	KUNIT_EXPECT_PTR_EQ(test, all, active);

	/* More ranges for an existing template, taken back. */
	KUNIT_ASSERT_EQ(test, tc_wl_add_locked(wl, "a", more, 2, &undo), 0);
	KUNIT_EXPECT_EQ(test, tc_test_all(wl)->nr, 2);
	KUNIT_EXPECT_PTR_EQ(test, rcu_dereference_protected(wl->active, true), active);
	tc_wl_add_abort_locked(wl, &undo);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_all(wl), all);
	KUNIT_EXPECT_EQ(test, tc_wl_get(wl, "a", 0, 4, got, &nr, &sectors), 1);
	tc_expect_ranges(test, got, nr, a_only, 1);
	KUNIT_EXPECT_EQ(test, sectors, 8);

	/* A new template, taken back: it is gone. */
	KUNIT_ASSERT_EQ(test, tc_wl_add_locked(wl, "new", fresh, 1, &undo), 0);
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 2);
	tc_wl_add_abort_locked(wl, &undo);
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 1);
	KUNIT_EXPECT_EQ(test, tc_wl_get(wl, "new", 0, 4, got, &nr, &sectors), -ENOENT);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_all(wl), all);

	/* Committed: cacheable. */
	KUNIT_ASSERT_EQ(test, tc_wl_add_locked(wl, "a", more, 2, &undo), 0);
	tc_wl_add_commit_locked(wl, &undo);
	active = rcu_dereference_protected(wl->active, true);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_all(wl), active);
	tc_expect_ranges(test, active->r, active->nr, merged, 2);
	mutex_unlock(&wl->lock);
}

/* Templates are tracked apart: removing one keeps what another covers. */
static void tc_wl_tags_add_del_clear(struct kunit *test)
{
	struct tc_whitelist *wl = kunit_kzalloc(test, sizeof(*wl), GFP_KERNEL);
	struct tc_range a[] = { R(0, 8), R(16, 24) };
	struct tc_range b[] = { R(8, 16), R(20, 40) };
	struct tc_range bad[] = { R(100, 108) };
	struct tc_range part[] = { R(0, 4) };
	const struct tc_range merged[] = { R(0, 40) };
	const struct tc_range only_b[] = { R(8, 16), R(20, 40) };
	const struct tc_range gone_a[] = { R(4, 8), R(16, 20) };
	struct tc_wl_view *gone, *all;

	KUNIT_ASSERT_NOT_NULL(test, wl);
	tc_wl_init(wl);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, tc_test_wl_exit, wl), 0);
	mutex_lock(&wl->lock);

	KUNIT_EXPECT_EQ(test, tc_wl_add_locked(wl, "a", a, 2, NULL), 0);
	/* Until activated, new ranges are seen by writes, not reads. */
	KUNIT_EXPECT_NULL(test, rcu_dereference_protected(wl->active, true));
	tc_wl_activate_locked(wl);
	KUNIT_EXPECT_EQ(test, tc_wl_add_locked(wl, "b", b, 2, NULL), 0);
	tc_wl_activate_locked(wl);
	all = tc_test_all(wl);
	tc_expect_ranges(test, all->r, all->nr, merged, 1);
	KUNIT_EXPECT_EQ(test, all->sectors, 40);
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 2);

	/* Listing a template: totals and a window of its ranges. */
	{
		struct tc_range got[2];
		unsigned int nr;
		sector_t sectors;

		KUNIT_EXPECT_EQ(test, tc_wl_get(wl, "b", 1, 2, got, &nr, &sectors), 1);
		KUNIT_EXPECT_EQ(test, nr, 2);
		KUNIT_EXPECT_EQ(test, sectors, 8 + 20);
		KUNIT_EXPECT_EQ(test, got[0].start, 20);
		KUNIT_EXPECT_EQ(test, got[0].end, 40);
		KUNIT_EXPECT_EQ(test, tc_wl_get(wl, "b", 5, 2, got, &nr, &sectors), 0);
		KUNIT_EXPECT_EQ(test, tc_wl_get(wl, "zz", 0, 2, got, &nr, &sectors),
				-ENOENT);
	}

	/* Rejected changes change nothing. */
	KUNIT_EXPECT_EQ(test, tc_wl_add_locked(wl, "bad/tag", bad, 1, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, tc_wl_del_locked(wl, "a", bad, 1, &gone), -ENOENT);
	KUNIT_EXPECT_EQ(test, tc_wl_del_locked(wl, "nope", NULL, 0, &gone), -ENOENT);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_all(wl), all);
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 2);

	/* Part of a: still covered by nothing else, so it is gone. */
	KUNIT_EXPECT_EQ(test, tc_wl_del_locked(wl, "a", part, 1, &gone), 0);
	KUNIT_EXPECT_EQ(test, gone->nr, 1);
	KUNIT_EXPECT_EQ(test, gone->r[0].start, 0);
	KUNIT_EXPECT_EQ(test, gone->r[0].end, 4);
	kvfree(gone);

	/* The rest of a: only what b does not cover leaves the whitelist. */
	all = tc_test_all(wl);
	tc_expect_ranges(test, all->r, all->nr, (const struct tc_range[]){ R(4, 40) }, 1);
	KUNIT_EXPECT_EQ(test, tc_wl_del_locked(wl, "a", NULL, 0, &gone), 0);
	tc_expect_ranges(test, gone->r, gone->nr, gone_a, ARRAY_SIZE(gone_a));
	kvfree(gone);
	all = tc_test_all(wl);
	tc_expect_ranges(test, all->r, all->nr, only_b, 2);
	KUNIT_EXPECT_PTR_EQ(test, rcu_dereference_protected(wl->active, true), all);
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 1);

	gone = tc_wl_clear_locked(wl);
	KUNIT_ASSERT_NOT_NULL(test, gone);
	tc_expect_ranges(test, gone->r, gone->nr, only_b, 2);
	kvfree(gone);
	KUNIT_EXPECT_NULL(test, tc_test_all(wl));
	KUNIT_EXPECT_EQ(test, wl->nr_tags, 0);
	KUNIT_EXPECT_NULL(test, tc_wl_clear_locked(wl));
	mutex_unlock(&wl->lock);
}

/* Union and subtraction agree with a bitmap model on random input. */
#define TC_MODEL_BITS 512

static unsigned int tc_random_ranges(struct rnd_state *rnd, struct tc_range *r,
				     unsigned long *bits)
{
	unsigned int i, n = prandom_u32_state(rnd) % 12;

	for (i = 0; i < n; i++) {
		unsigned int s = prandom_u32_state(rnd) % TC_MODEL_BITS;
		unsigned int len = 1 + prandom_u32_state(rnd) % 40;

		r[i] = R(s, min(s + len, TC_MODEL_BITS));
		bitmap_set(bits, r[i].start, r[i].end - r[i].start);
	}
	return tc_ranges_normalize(r, n);
}

static void tc_expect_model(struct kunit *test, const struct tc_range *r,
			    unsigned int n, const unsigned long *bits)
{
	DECLARE_BITMAP(got, TC_MODEL_BITS);
	unsigned int i;

	bitmap_zero(got, TC_MODEL_BITS);
	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_LT(test, r[i].start, r[i].end);
		if (i)	/* sorted, disjoint and not adjacent */
			KUNIT_EXPECT_GT(test, r[i].start, r[i - 1].end);
		bitmap_set(got, r[i].start, r[i].end - r[i].start);
	}
	KUNIT_EXPECT_TRUE(test, bitmap_equal(got, bits, TC_MODEL_BITS));
}

/*
 * The model's working set: on the test's stack it made a 1.5 KiB frame
 * under KASAN (over the debug kernel's FRAME_WARN of 1024).
 */
struct tc_model_work {
	DECLARE_BITMAP(ba, TC_MODEL_BITS);
	DECLARE_BITMAP(bb, TC_MODEL_BITS);
	DECLARE_BITMAP(want, TC_MODEL_BITS);
	struct tc_range a[12], b[12], out[24];
};

static void tc_wl_ranges_match_bitmap_model(struct kunit *test)
{
	struct tc_model_work *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct rnd_state rnd;
	unsigned int iter, na, nb, n;

	KUNIT_ASSERT_NOT_NULL(test, w);
	prandom_seed_state(&rnd, 20151227);
	for (iter = 0; iter < 2000; iter++) {
		bitmap_zero(w->ba, TC_MODEL_BITS);
		bitmap_zero(w->bb, TC_MODEL_BITS);
		na = tc_random_ranges(&rnd, w->a, w->ba);
		nb = tc_random_ranges(&rnd, w->b, w->bb);
		tc_expect_model(test, w->a, na, w->ba);

		n = tc_ranges_union(w->a, na, w->b, nb, w->out);
		bitmap_or(w->want, w->ba, w->bb, TC_MODEL_BITS);
		tc_expect_model(test, w->out, n, w->want);

		n = tc_ranges_subtract(w->a, na, w->b, nb, w->out);
		bitmap_andnot(w->want, w->ba, w->bb, TC_MODEL_BITS);
		tc_expect_model(test, w->out, n, w->want);

		bitmap_andnot(w->want, w->bb, w->ba, TC_MODEL_BITS);
		KUNIT_EXPECT_EQ(test, tc_ranges_contain(w->a, na, w->b, nb),
				bitmap_empty(w->want, TC_MODEL_BITS));
		if (test->status == KUNIT_FAILURE)
			break;
	}
}

static struct kunit_case tc_whitelist_test_cases[] = {
	KUNIT_CASE(tc_wl_normalize_sorts_and_merges),
	KUNIT_CASE(tc_wl_union_merges_overlap_and_adjacency),
	KUNIT_CASE(tc_wl_subtract_splits_and_trims),
	KUNIT_CASE(tc_wl_contain_requires_full_cover),
	KUNIT_CASE(tc_wl_lookup_is_half_open),
	KUNIT_CASE(tc_wl_tag_names),
	KUNIT_CASE(tc_wl_tags_add_del_clear),
	KUNIT_CASE(tc_wl_add_abort_and_commit),
	KUNIT_CASE(tc_wl_ranges_match_bitmap_model),
	{}
};

static struct kunit_suite tc_whitelist_test_suite = {
	.name = "dm_totalcow_whitelist",
	.test_cases = tc_whitelist_test_cases,
};

kunit_test_suite(tc_whitelist_test_suite);
