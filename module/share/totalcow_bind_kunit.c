// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the bindings of member files (included at the end of
 * totalcow-bind.c): the one-byte signature and its screen, the alias
 * entry encoding, binding identity included, and the signature chunks.
 */

#include <kunit/test.h>

static void tc_sig_hash_is_seven_bits_and_content_bound(struct kunit *test)
{
	u8 *a = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	u8 *b = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	unsigned int seen[128] = { }, i, distinct = 0;

	KUNIT_ASSERT_NOT_NULL(test, a);
	KUNIT_ASSERT_NOT_NULL(test, b);
	KUNIT_EXPECT_EQ(test, tc_sig_hash(a, PAGE_SIZE), tc_sig_hash(b, PAGE_SIZE));
	for (i = 0; i < 1024; i++) {
		u8 h;

		memset(a, 0, PAGE_SIZE);
		*(u32 *)(a + (i * 37) % (PAGE_SIZE - 4)) = i + 1;
		h = tc_sig_hash(a, PAGE_SIZE);
		KUNIT_ASSERT_EQ(test, h & TC_SIG_PRIVATE, 0);
		if (!seen[h]++)
			distinct++;
	}
	/* 1024 different pages spread over (nearly) all 128 values. */
	KUNIT_EXPECT_GE(test, distinct, 120U);
	for (i = 0; i < 128; i++)
		KUNIT_EXPECT_LT(test, seen[i], 32U);
}

static void tc_sig_screen_orders_private_hash_compare(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, tc_sig_screen(0x12, 0x12), TC_SCREEN_COMPARE);
	KUNIT_EXPECT_EQ(test, tc_sig_screen(0x12, 0x13), TC_SCREEN_HASH);
	KUNIT_EXPECT_EQ(test, tc_sig_screen(0x12 | TC_SIG_PRIVATE, 0x12),
			TC_SCREEN_PRIVATE);
	KUNIT_EXPECT_EQ(test, tc_sig_screen(TC_SIG_PRIVATE, 0x55),
			TC_SCREEN_PRIVATE);
	/* Only 7 bits of the template's hash count. */
	KUNIT_EXPECT_EQ(test, tc_sig_screen(0x7f, 0xff), TC_SCREEN_COMPARE);
}

static void tc_alias_entry_roundtrip_and_shadow_apart(struct kunit *test)
{
	unsigned int v;

	for (v = 0; v < 256; v++) {
		void *e = xa_mk_page_alias(v);

		KUNIT_EXPECT_TRUE(test, xa_is_value(e));
		KUNIT_EXPECT_TRUE(test, xa_is_page_alias(e));
		KUNIT_EXPECT_EQ(test, xa_page_alias_data(e), v);
	}
	/* Workingset shadows keep bit 0 clear; pointers are no values. */
	KUNIT_EXPECT_FALSE(test, xa_is_page_alias(xa_mk_value(0)));
	KUNIT_EXPECT_FALSE(test, xa_is_page_alias(xa_mk_value(0x1234 << 1)));
	KUNIT_EXPECT_FALSE(test, xa_is_page_alias(test));
	KUNIT_EXPECT_FALSE(test, xa_is_page_alias(NULL));
}

static void tc_alias_carries_the_binding(struct kunit *test)
{
	struct tc_file a = { .id = TC_ID_MASK }, b = { .id = 1 };
	void *e = tc_alias(&a, 0x55);

	KUNIT_EXPECT_TRUE(test, xa_is_page_alias(e));
	KUNIT_EXPECT_EQ(test, xa_page_alias_data(e) & 0xff, 0x55UL);
	KUNIT_EXPECT_TRUE(test, tc_alias_ours(&a, e));
	KUNIT_EXPECT_FALSE(test, tc_alias_ours(&b, e));
	KUNIT_EXPECT_TRUE(test, tc_alias_ours(&b, tc_alias(&b, 0)));
	KUNIT_EXPECT_FALSE(test, tc_alias_ours(&a, tc_alias(&b, 0x55)));
}

/*
 * Policy bytes come in chunks, allocated on first use and counted in the
 * group: a sparse file costs what is looked at of it, not its size.
 */
static void tc_sigs_are_allocated_as_pages_are_read(struct kunit *test)
{
	struct tc_group *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	struct tc_file *tf = kunit_kzalloc(test, sizeof(*tf), GFP_KERNEL);
	const pgoff_t far = (1UL << 28) - 1;	/* the last page of 1 TiB */
	struct tc_sig_pair *sp, *sp2;

	KUNIT_ASSERT_NOT_NULL(test, g);
	KUNIT_ASSERT_NOT_NULL(test, tf);
	tf->group = g;
	tf->nr_pages = far + 1;
	xa_init_flags(&tf->sigs, XA_FLAGS_ACCOUNT);

	/* Looking without allocating finds nothing and costs nothing. */
	KUNIT_EXPECT_NULL(test, tc_sigs(tf, 5, 0));
	KUNIT_EXPECT_EQ(test, atomic_long_read(&g->policy_bytes), 0);

	sp = tc_sigs(tf, 5, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, sp);
	KUNIT_EXPECT_EQ(test, sp->sig, 0);
	KUNIT_EXPECT_EQ(test, sp->thash, TC_SIG_UNKNOWN);
	sp->sig = TC_SIG_PRIVATE | 0x11;
	/* The same chunk: no second allocation, the same bytes. */
	KUNIT_EXPECT_PTR_EQ(test, tc_sigs(tf, 5, 0), sp);
	sp2 = tc_sigs(tf, TC_SIG_CHUNK - 1, GFP_KERNEL);
	KUNIT_EXPECT_PTR_EQ(test, sp2, sp + (TC_SIG_CHUNK - 1 - 5));
	KUNIT_EXPECT_EQ(test, atomic_long_read(&g->policy_bytes),
			(long)TC_SIG_CHUNK_BYTES);
	/* The next chunk, and one at the end of a 1 TiB file. */
	KUNIT_ASSERT_NOT_NULL(test, tc_sigs(tf, TC_SIG_CHUNK, GFP_KERNEL));
	sp2 = tc_sigs(tf, far, GFP_NOWAIT);
	KUNIT_ASSERT_NOT_NULL(test, sp2);
	KUNIT_EXPECT_EQ(test, sp2->thash, TC_SIG_UNKNOWN);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&g->policy_bytes),
			(long)(3 * TC_SIG_CHUNK_BYTES));
	KUNIT_EXPECT_EQ(test, tc_sigs(tf, 5, 0)->sig, TC_SIG_PRIVATE | 0x11);

	tc_sigs_free(tf);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&g->policy_bytes), 0);
	KUNIT_EXPECT_TRUE(test, xa_empty(&tf->sigs));
}

/*
 * The unbinding walk of a group's files passes over the cursors that stats
 * readers leave in the list (no mapping), wherever they are, and stops
 * when only cursors are left: a groups/delete while stats is read neither
 * unbinds a cursor nor spins on one.
 */
static void tc_unbind_walk_passes_over_cursors(struct kunit *test)
{
	/* Cursors c1, c2 (no mapping) around files f1, f2. */
	struct tc_file *tf = kunit_kcalloc(test, 4, sizeof(*tf), GFP_KERNEL);
	struct tc_file *c1 = &tf[0], *f1 = &tf[1], *c2 = &tf[2], *f2 = &tf[3];
	struct tc_member *m = kunit_kzalloc(test, sizeof(*m), GFP_KERNEL);
	LIST_HEAD(files);

	KUNIT_ASSERT_NOT_NULL(test, tf);
	KUNIT_ASSERT_NOT_NULL(test, m);
	f1->mapping = (void *)c1;	/* any non-NULL: never dereferenced */
	f2->mapping = (void *)c2;
	INIT_LIST_HEAD(&m->files);
	list_add_tail(&c1->list, &files);
	list_add_tail(&f1->list, &files);
	list_add_tail(&c2->list, &files);
	list_add_tail(&f2->list, &files);
	spin_lock(&tc_files_lock);
	KUNIT_EXPECT_PTR_EQ(test, tc_first_file(&files, NULL), f1);
	list_del(&f1->list);
	KUNIT_EXPECT_PTR_EQ(test, tc_first_file(&files, NULL), f2);
	list_del(&f2->list);
	KUNIT_EXPECT_NULL(test, tc_first_file(&files, NULL));
	/* A member's list holds files only (cursors walk the group's). */
	KUNIT_EXPECT_NULL(test, tc_first_file(&m->files, m));
	list_add_tail(&f1->mlist, &m->files);
	KUNIT_EXPECT_PTR_EQ(test, tc_first_file(&m->files, m), f1);
	spin_unlock(&tc_files_lock);
}

static struct kunit_case tc_bind_cases[] = {
	KUNIT_CASE(tc_sig_hash_is_seven_bits_and_content_bound),
	KUNIT_CASE(tc_sig_screen_orders_private_hash_compare),
	KUNIT_CASE(tc_alias_entry_roundtrip_and_shadow_apart),
	KUNIT_CASE(tc_alias_carries_the_binding),
	KUNIT_CASE(tc_sigs_are_allocated_as_pages_are_read),
	KUNIT_CASE(tc_unbind_walk_passes_over_cursors),
	{}
};

static struct kunit_suite tc_bind_suite = {
	.name = "totalcow_bind",
	.test_cases = tc_bind_cases,
};

kunit_test_suite(tc_bind_suite);
