// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the page-cache sharing policy on real page caches:
 * what tc_share_page() does with a member page (alias, hash reject, full
 * compare, private skip, pages it must leave alone), what a write does to
 * an alias (tc_broken(): the template's bytes, the private bit, the
 * count), what a read of an alias resolves to (tc_resolve(): only the
 * binding's own aliases, only live template pages), which slots a
 * member's readahead is asked to fill (tc_empty_slots()), that each
 * mapping's alias count follows every store and removal, and what a block
 * alias (one entry for an aligned run) is to each of them, resolved a
 * run of pages at a time.
 *
 * Included at the end of totalcow-share.c so that the tests reach the
 * policy's static functions. The member and the template are two inodes
 * of a throw-away anonymous superblock with folios of known bytes in their
 * page caches; the binding between them is a tc_file made by hand and
 * entered in the lookup table (tc_file_hash()) as tc_file_bind() does.
 * What needs btrfs (binding by path and extents, the extent proof) is
 * tested in UML against real btrfs (tests/integration/test_share.py).
 */

#include <kunit/test.h>
#include <linux/swap.h>

#define TC_TEST_PAGES	16

static struct file_system_type tc_test_fs_type = {
	.name		= "totalcow-kunit",
	.kill_sb	= kill_anon_super,
};

/* Dirtying a folio only sets its flag: there is nothing to write back. */
static const struct address_space_operations tc_test_aops = {
	.dirty_folio	= noop_dirty_folio,
};

struct tc_policy_test {
	struct super_block *sb;
	struct inode *member, *tmpl;
	struct tc_group group;
	struct tc_file tf;
	bool hashed;
};

static struct inode *tc_test_inode(struct super_block *sb)
{
	struct inode *inode = new_inode(sb);

	if (!inode)
		return NULL;
	inode->i_mode = S_IFREG | 0644;
	inode->i_mapping->a_ops = &tc_test_aops;
	i_size_write(inode, TC_TEST_PAGES * PAGE_SIZE);
	return inode;
}

static int tc_policy_init(struct kunit *test)
{
	struct tc_policy_test *t;
	struct tc_file *tf;
	int err;

	t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	t->sb = sget(&tc_test_fs_type, NULL, set_anon_super, 0, NULL);
	if (IS_ERR(t->sb))
		return PTR_ERR(t->sb);
	up_write(&t->sb->s_umount);
	test->priv = t;
	t->member = tc_test_inode(t->sb);
	t->tmpl = tc_test_inode(t->sb);
	if (!t->member || !t->tmpl)
		return -ENOMEM;
	tf = &t->tf;
	tf->mapping = t->member->i_mapping;
	tf->tinode = t->tmpl;
	tf->group = &t->group;
	tf->id = tc_file_new_id();
	tf->nr_pages = TC_TEST_PAGES;
	refcount_set(&tf->ref, 1);
	INIT_LIST_HEAD(&tf->list);
	INIT_LIST_HEAD(&tf->mlist);
	xa_init_flags(&tf->sigs, XA_FLAGS_ACCOUNT);
	spin_lock(&tc_files_lock);
	err = tc_file_hash(tf);
	spin_unlock(&tc_files_lock);
	if (err)
		return err;
	t->hashed = true;
	return 0;
}

static void tc_policy_exit(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;

	if (!t)
		return;
	if (t->hashed) {
		spin_lock(&tc_files_lock);
		tc_file_unlink(&t->tf);
		spin_unlock(&tc_files_lock);
		synchronize_rcu();
		tc_sigs_free(&t->tf);
	}
	/* Eviction truncates both page caches, aliases included. */
	if (t->member)
		iput(t->member);
	if (t->tmpl)
		iput(t->tmpl);
	deactivate_super(t->sb);
}

/* Share one page as tc_read_miss() does, not counting the time waited. */
static void tc_test_share_page(struct tc_file *tf, struct folio *mf,
			       struct folio *tfolio, pgoff_t index)
{
	u64 waited = 0;

	tc_share_page(tf, mf, tfolio, index, &waited);
}

/* Fill @p with a page of bytes that depend on @seed only. */
static void tc_test_fill(void *p, u32 seed)
{
	u32 *w = p;
	unsigned int i;

	for (i = 0; i < PAGE_SIZE / sizeof(*w); i++)
		w[i] = (seed + i) * 2654435761U;
}

/*
 * A clean, uptodate folio of @seed's bytes at @index of @inode, with a
 * reference for the caller and none in an LRU batch (as tc_read_miss()
 * has its folios after lru_add_drain()).
 */
static struct folio *tc_test_folio(struct kunit *test, struct inode *inode,
				   pgoff_t index, u32 seed)
{
	struct folio *folio = filemap_grab_folio(inode->i_mapping, index);
	void *p;

	KUNIT_ASSERT_FALSE(test, IS_ERR(folio));
	p = kmap_local_folio(folio, 0);
	tc_test_fill(p, seed);
	kunmap_local(p);
	folio_mark_uptodate(folio);
	folio_unlock(folio);
	lru_add_drain_all();
	return folio;
}

/* A seed other than @seed whose page has the same 7-bit hash. */
static u32 tc_test_colliding_seed(struct kunit *test, u32 seed)
{
	void *p = kunit_kmalloc(test, PAGE_SIZE, GFP_KERNEL);
	u8 want;
	u32 s;

	KUNIT_ASSERT_NOT_NULL(test, p);
	tc_test_fill(p, seed);
	want = tc_sig_hash(p, PAGE_SIZE);
	for (s = seed + 1; s < seed + 100000; s++) {
		tc_test_fill(p, s);
		if (tc_sig_hash(p, PAGE_SIZE) == want)
			return s;
	}
	KUNIT_FAIL(test, "no page with hash %#x found", want);
	return seed;
}

static long tc_test_stat(struct tc_policy_test *t, enum tc_stat s)
{
	return atomic_long_read(&t->group.stats[s]);
}

/* What a read of the one page at @index of @mapping resolves @entry to. */
static struct folio *tc_test_resolve(struct address_space *mapping,
				     pgoff_t index, void *entry)
{
	struct folio_batch fbatch;
	unsigned int n;

	folio_batch_init(&fbatch);
	rcu_read_lock();
	n = tc_resolve(mapping, index, index, entry, &fbatch);
	rcu_read_unlock();
	return n ? fbatch.folios[0] : NULL;
}

static void *tc_test_slot(struct inode *inode, pgoff_t index)
{
	return xa_load(&inode->i_mapping->i_pages, index);
}

/*
 * An identical page leaves the member's page cache: its slot holds an
 * alias of this binding with the page's hash, and the template's hash is
 * recorded for the next member page at that index.
 */
static void tc_policy_identical_page_becomes_alias(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct folio *mf = tc_test_folio(test, t->member, 3, 42);
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 3, 42);
	struct tc_sig_pair *sp;
	void *entry;
	u8 h;

	h = tc_sig_hash(folio_address(tfolio), PAGE_SIZE);
	tc_test_share_page(&t->tf, mf, tfolio, 3);
	entry = tc_test_slot(t->member, 3);
	KUNIT_EXPECT_TRUE(test, xa_is_page_alias(entry));
	KUNIT_EXPECT_TRUE(test, tc_alias_ours(&t->tf, entry));
	KUNIT_EXPECT_EQ(test, xa_page_alias_data(entry) & 0xff, (unsigned long)h);
	KUNIT_EXPECT_NULL(test, mf->mapping);	/* out of the page cache */
	KUNIT_EXPECT_EQ(test, t->member->i_mapping->nrpages, 0UL);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COMPARES), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_INSTALLED), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_MEMCMP_MISMATCHES), 0);
	sp = tc_sigs(&t->tf, 3, 0);
	KUNIT_ASSERT_NOT_NULL(test, sp);
	KUNIT_EXPECT_EQ(test, sp->sig, h);
	KUNIT_EXPECT_EQ(test, sp->thash, h);
	/* The template's page is untouched and still the template's. */
	KUNIT_EXPECT_PTR_EQ(test, tfolio->mapping, t->tmpl->i_mapping);
	folio_put(mf);
	folio_put(tfolio);
}

/*
 * Pages that differ stay the member's: by the hash without a compare, or
 * by the full compare when the hashes collide. A page whose signature is
 * marked private is not looked at again.
 */
static void tc_policy_screens_before_comparing(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	u32 twin = tc_test_colliding_seed(test, 7);
	struct folio *t0 = tc_test_folio(test, t->tmpl, 0, 7);
	struct folio *t1 = tc_test_folio(test, t->tmpl, 1, 7);
	struct folio *t2 = tc_test_folio(test, t->tmpl, 2, 9);
	struct folio *m0, *m1, *m2;
	struct tc_sig_pair *sp;
	u32 other = 8;

	/* A page of another hash than the template's. */
	while (other == twin || other == 7)
		other++;
	m0 = tc_test_folio(test, t->member, 0, other);
	if (tc_sig_hash(folio_address(m0), PAGE_SIZE) ==
	    tc_sig_hash(folio_address(t0), PAGE_SIZE))
		kunit_skip(test, "seeds 7 and %u collide", other);
	tc_test_share_page(&t->tf, m0, t0, 0);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_HASH_REJECTS), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COMPARES), 0);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 0), (void *)m0);

	/* Same hash, other bytes: compared, and kept. */
	m1 = tc_test_folio(test, t->member, 1, twin);
	tc_test_share_page(&t->tf, m1, t1, 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COMPARES), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_MEMCMP_MISMATCHES), 1);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 1), (void *)m1);

	/* Identical, but the page went private before: skipped unread. */
	m2 = tc_test_folio(test, t->member, 2, 9);
	sp = tc_sigs(&t->tf, 2, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, sp);
	sp->sig = TC_SIG_PRIVATE;
	tc_test_share_page(&t->tf, m2, t2, 2);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_PRIVATE_SKIPS), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COMPARES), 1);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 2), (void *)m2);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_INSTALLED), 0);
	KUNIT_EXPECT_EQ(test, t->member->i_mapping->nrpages, 3UL);

	folio_put(m0);
	folio_put(m1);
	folio_put(m2);
	folio_put(t0);
	folio_put(t1);
	folio_put(t2);
}

/*
 * Identical pages that someone may still use or change are left alone: a
 * dirty page (its data is not on disk), one someone else holds a reference
 * to (it could be mapped or written next), and one that left the member's
 * page cache meanwhile.
 */
static void tc_policy_leaves_busy_pages_alone(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct folio *tf[3], *mf[3];
	unsigned int i;

	for (i = 0; i < 3; i++) {
		tf[i] = tc_test_folio(test, t->tmpl, i, 100 + i);
		mf[i] = tc_test_folio(test, t->member, i, 100 + i);
	}
	folio_lock(mf[0]);
	folio_mark_dirty(mf[0]);
	folio_unlock(mf[0]);
	folio_get(mf[1]);			/* another user's reference */
	folio_lock(mf[2]);
	filemap_remove_folio(mf[2]);		/* truncated meanwhile */
	folio_unlock(mf[2]);

	for (i = 0; i < 3; i++)
		tc_test_share_page(&t->tf, mf[i], tf[i], i);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_INSTALLED), 0);
	/* Only the referenced page is worth a compare: it may be let go. */
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COMPARES), 1);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 0), (void *)mf[0]);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 1), (void *)mf[1]);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 2));

	folio_lock(mf[0]);
	folio_cancel_dirty(mf[0]);
	folio_unlock(mf[0]);
	folio_put(mf[1]);
	for (i = 0; i < 3; i++) {
		folio_put(mf[i]);
		folio_put(tf[i]);
	}
}

/*
 * A write to an aliased page gets a private folio filled from the
 * template's page, marks the page's signature private and counts a break;
 * an alias of another binding (an older one of the same file) is not
 * resolved and not counted: its private folio is read from the file.
 */
static void tc_policy_break_copies_the_template(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 5, 55);
	struct folio *mf = tc_test_folio(test, t->member, 5, 55);
	struct folio *copy, *stale;
	struct tc_file older = { .id = (t->tf.id + 1) & TC_ID_MASK };
	void *entry, *want;

	tc_test_share_page(&t->tf, mf, tfolio, 5);
	folio_put(mf);
	entry = tc_test_slot(t->member, 5);
	KUNIT_ASSERT_TRUE(test, xa_is_page_alias(entry));

	copy = folio_alloc(GFP_KERNEL, 0);
	KUNIT_ASSERT_NOT_NULL(test, copy);
	copy->index = 5;
	tc_broken(t->member->i_mapping, copy, entry, false);
	KUNIT_EXPECT_TRUE(test, folio_test_uptodate(copy));
	KUNIT_EXPECT_EQ(test, memcmp(folio_address(copy),
				     folio_address(tfolio), PAGE_SIZE), 0);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_BREAKS), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_COPIES), 1);
	KUNIT_EXPECT_TRUE(test, tc_sigs(&t->tf, 5, 0)->sig & TC_SIG_PRIVATE);
	/* The template's page is not the copy's: a write stays private. */
	KUNIT_EXPECT_PTR_NE(test, copy, tfolio);

	stale = folio_alloc(GFP_KERNEL | __GFP_ZERO, 0);
	KUNIT_ASSERT_NOT_NULL(test, stale);
	stale->index = 6;
	tc_broken(t->member->i_mapping, stale, tc_alias(&older, 0), false);
	KUNIT_EXPECT_FALSE(test, folio_test_uptodate(stale));
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_BREAKS), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_COPIES), 1);
	want = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, want);
	KUNIT_EXPECT_EQ(test, memcmp(folio_address(stale), want, PAGE_SIZE), 0);

	folio_put(copy);
	folio_put(stale);
	folio_put(tfolio);
}

/*
 * A write that overwrites the whole page (FGP_OVERWRITE) breaks the alias
 * without a copy: the folio is left not uptodate (its bytes untouched, as
 * the writer's are still to come), the page is marked private and the
 * break counted, no copy counted. A partial write of the next page copies.
 */
static void tc_policy_break_for_an_overwrite_copies_nothing(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 5, 55);
	struct folio *tnext = tc_test_folio(test, t->tmpl, 6, 66);
	struct folio *mf = tc_test_folio(test, t->member, 5, 55);
	struct folio *mnext = tc_test_folio(test, t->member, 6, 66);
	struct folio *whole, *part;
	void *entry, *next, *zero;

	tc_test_share_page(&t->tf, mf, tfolio, 5);
	tc_test_share_page(&t->tf, mnext, tnext, 6);
	folio_put(mf);
	folio_put(mnext);
	entry = tc_test_slot(t->member, 5);
	next = tc_test_slot(t->member, 6);
	KUNIT_ASSERT_TRUE(test, xa_is_page_alias(entry));
	KUNIT_ASSERT_TRUE(test, xa_is_page_alias(next));

	whole = folio_alloc(GFP_KERNEL | __GFP_ZERO, 0);
	KUNIT_ASSERT_NOT_NULL(test, whole);
	whole->index = 5;
	tc_broken(t->member->i_mapping, whole, entry, true);
	KUNIT_EXPECT_FALSE(test, folio_test_uptodate(whole));
	zero = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, zero);
	KUNIT_EXPECT_EQ(test, memcmp(folio_address(whole), zero, PAGE_SIZE), 0);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_BREAKS), 1);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_COPIES), 0);
	KUNIT_EXPECT_TRUE(test, tc_sigs(&t->tf, 5, 0)->sig & TC_SIG_PRIVATE);

	part = folio_alloc(GFP_KERNEL, 0);
	KUNIT_ASSERT_NOT_NULL(test, part);
	part->index = 6;
	tc_broken(t->member->i_mapping, part, next, false);
	KUNIT_EXPECT_TRUE(test, folio_test_uptodate(part));
	KUNIT_EXPECT_EQ(test, memcmp(folio_address(part), folio_address(tnext),
				     PAGE_SIZE), 0);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_BREAKS), 2);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_COW_COPIES), 1);

	folio_put(whole);
	folio_put(part);
	folio_put(tfolio);
	folio_put(tnext);
}

/*
 * An alias resolves to the template's uptodate page at its index, only
 * for the binding that made it; once the template's page is gone
 * (reclaimed) it resolves to nothing and the member reads again.
 */
static void tc_policy_resolve_own_live_pages_only(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 4, 44);
	struct tc_file older = { .id = (t->tf.id + 1) & TC_ID_MASK };
	void *mine = tc_alias(&t->tf, 0);
	struct folio *got;

	got = tc_test_resolve(t->member->i_mapping, 4, mine);
	KUNIT_EXPECT_PTR_EQ(test, got, tfolio);
	if (got)
		folio_put(got);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_RESOLVED), 1);

	got = tc_test_resolve(t->member->i_mapping, 4, tc_alias(&older, 0));
	KUNIT_EXPECT_NULL(test, got);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_RESOLVED), 1);

	/* A template page not read yet, then one reclaimed. */
	got = tc_test_resolve(t->member->i_mapping, 9, mine);
	KUNIT_EXPECT_NULL(test, got);
	truncate_inode_pages_range(t->tmpl->i_mapping, 4 * PAGE_SIZE,
				   5 * PAGE_SIZE - 1);
	got = tc_test_resolve(t->member->i_mapping, 4, mine);
	KUNIT_EXPECT_NULL(test, got);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_LOST), 2);
	folio_put(tfolio);

	/* A mapping that is no member resolves nothing. */
	got = tc_test_resolve(t->tmpl->i_mapping, 4, mine);
	KUNIT_EXPECT_NULL(test, got);
}

/*
 * Readahead is asked for the slots with neither a folio nor an alias;
 * aliases to canonical pages are told apart (tc_empty_slots()).
 */
static void tc_policy_marks_only_empty_slots(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	void *canon_alias = xa_mk_page_alias(TC_EXTENT_ALIAS_DATA);
	DECLARE_BITMAP(fresh, TC_TEST_PAGES);
	DECLARE_BITMAP(canon, TC_TEST_PAGES);
	struct folio *f1 = tc_test_folio(test, t->member, 1, 1);
	struct folio *f6 = tc_test_folio(test, t->member, 6, 6);
	unsigned long seq;
	unsigned int i;

	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 2,
						     tc_alias(&t->tf, 0), seq), 0);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 4, canon_alias,
						     seq), 0);
	/* Not over a folio, not over an alias. */
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 1,
						     tc_alias(&t->tf, 0), seq),
			-EEXIST);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 2,
						     tc_alias(&t->tf, 0), seq),
			-EEXIST);
	filemap_invalidate_unlock_shared(mapping);

	tc_empty_slots(mapping, 0, 8, fresh, canon);
	for (i = 0; i < 8; i++) {
		KUNIT_EXPECT_EQ_MSG(test, (bool)test_bit(i, fresh),
				    i != 1 && i != 2 && i != 4 && i != 6,
				    "slot %u", i);
		/* Only the alias to a canonical page is one. */
		KUNIT_EXPECT_EQ_MSG(test, (bool)test_bit(i, canon), i == 4,
				    "slot %u", i);
	}
	/* A window that starts inside: bits count from its start. */
	tc_empty_slots(mapping, 2, 5, fresh, NULL);
	KUNIT_EXPECT_FALSE(test, test_bit(0, fresh));
	KUNIT_EXPECT_TRUE(test, test_bit(1, fresh));
	KUNIT_EXPECT_FALSE(test, test_bit(2, fresh));
	KUNIT_EXPECT_FALSE(test, test_bit(4, fresh));

	/* Clearing the aliases empties their slots, folios stay. */
	filemap_clear_page_aliases(mapping);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 2));
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 1), (void *)f1);
	folio_put(f1);
	folio_put(f6);
}

/* Aliased pages of @mapping, counted the slow way: a block for its pages. */
static unsigned long tc_test_walk_aliases(struct address_space *mapping)
{
	XA_STATE(xas, &mapping->i_pages, 0);
	unsigned long n = 0;
	void *entry;

	rcu_read_lock();
	xas_for_each(&xas, entry, ULONG_MAX) {
		if (xas_retry(&xas, entry))
			continue;
		if (xa_is_page_alias(entry))
			n += 1UL << xas_get_order(&xas);
	}
	rcu_read_unlock();
	return n;
}

/* The count mm keeps for @mapping and the walk agree on @nr, after @what. */
static void tc_expect_aliases(struct kunit *test,
			      struct address_space *mapping, unsigned long nr,
			      const char *what)
{
	KUNIT_EXPECT_EQ_MSG(test, tc_test_walk_aliases(mapping), nr, "after %s", what);
	KUNIT_EXPECT_EQ_MSG(test, mapping_page_aliases(mapping), nr, "after %s", what);
}

/*
 * The mapping's alias count (what stats' pages_shared adds up) follows
 * every store and removal: the policy's two stores, a folio added over
 * an alias (a write or a fault), truncation, invalidation (drop_caches,
 * direct I/O) and the policy's clear. A workingset shadow is no alias.
 */
static void tc_policy_counts_every_alias(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 10, 10);
	struct folio *mf = tc_test_folio(test, t->member, 10, 10);
	unsigned long seq;
	struct folio *f;
	pgoff_t i;

	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	for (i = 0; i < 8; i++)
		KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, i,
							     tc_alias(&t->tf, 0), seq), 0);
	/* A refused store counts nothing. */
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 7,
						     tc_alias(&t->tf, 0), seq), -EEXIST);
	filemap_invalidate_unlock_shared(mapping);
	tc_expect_aliases(test, mapping, 8, "8 stores");

	tc_test_share_page(&t->tf, mf, tfolio, 10);
	folio_put(mf);
	tc_expect_aliases(test, mapping, 9, "a replaced folio");

	f = filemap_grab_folio(mapping, 0);	/* a write's folio */
	KUNIT_ASSERT_FALSE(test, IS_ERR(f));
	folio_unlock(f);
	folio_put(f);
	tc_expect_aliases(test, mapping, 8, "a folio added over one");

	truncate_inode_pages_range(mapping, PAGE_SIZE, 3 * PAGE_SIZE - 1);
	tc_expect_aliases(test, mapping, 6, "truncation");

	invalidate_mapping_pages(mapping, 3, 4);
	tc_expect_aliases(test, mapping, 4, "invalidation");

	filemap_clear_page_aliases(mapping);
	tc_expect_aliases(test, mapping, 0, "the clear");
	/* The folio at 0 stays; eviction then checks the count is zero. */
	KUNIT_EXPECT_EQ(test, mapping->nrpages, 1UL);
	folio_put(tfolio);
}

/*
 * A proven run is aliased in one call: the empty slots the bitmap selects
 * get the entry, a folio or an alias already there is left alone, the
 * count follows; tc_template_live() finds the slots whose template page
 * is uptodate in memory, and says whether all of a window's are.
 */
static void tc_policy_aliases_a_proven_run(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	struct folio *f3 = tc_test_folio(test, t->member, 3, 3);
	struct folio *t1 = tc_test_folio(test, t->tmpl, 1, 1);
	struct folio *t2 = tc_test_folio(test, t->tmpl, 2, 2);
	struct folio *t4 = filemap_grab_folio(t->tmpl->i_mapping, 4);
	DECLARE_BITMAP(slots, TC_TEST_PAGES);
	void *entry = tc_alias(&t->tf, TC_SIG_HASH);
	unsigned long i, seq;

	KUNIT_ASSERT_FALSE(test, IS_ERR(t4));
	folio_unlock(t4);	/* being read: not uptodate */
	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 5, entry, seq), 0);
	bitmap_zero(slots, TC_TEST_PAGES);
	for (i = 0; i < 10; i++)
		if (i != 4 && i != 6 && i != 8)
			__set_bit(i, slots);
	KUNIT_EXPECT_EQ(test, filemap_add_page_aliases(mapping, 0, 10, slots,
						       entry, seq), 5L);
	filemap_invalidate_unlock_shared(mapping);
	for (i = 0; i < 10; i++) {
		void *slot = tc_test_slot(t->member, i);

		if (i == 3)
			KUNIT_EXPECT_PTR_EQ(test, slot, (void *)f3);
		else if (i == 4 || i == 6 || i == 8)
			KUNIT_EXPECT_NULL_MSG(test, slot, "slot %lu", i);
		else
			KUNIT_EXPECT_PTR_EQ_MSG(test, slot, entry, "slot %lu", i);
	}
	tc_expect_aliases(test, mapping, 6, "a run of 5 and one alone");

	KUNIT_EXPECT_FALSE(test, tc_template_live(&t->tf, 0, 8, slots));
	for (i = 0; i < 8; i++)
		KUNIT_EXPECT_EQ_MSG(test, (bool)test_bit(i, slots), i == 1 || i == 2,
				    "slot %lu", i);
	/* A window of uptodate pages only: all live. */
	KUNIT_EXPECT_TRUE(test, tc_template_live(&t->tf, 1, 3, slots));
	folio_put(f3);
	folio_put(t1);
	folio_put(t2);
	folio_put(t4);
}

#define TC_B PAGE_ALIAS_BLOCK

/*
 * An aligned block of selected, empty slots gets one block alias (one
 * multi-index entry above the leaves); a block that holds a folio, or is
 * not wholly selected, is aliased slot by slot. To the rest of mm a block
 * alias is every page's alias: tc_empty_slots() leaves all its pages to it,
 * tc_resolve() finds the template's pages at any of them, a run at
 * once (up to a page not in memory, or a full batch), a folio added
 * inside splits it and takes only its own slot, a punch or a direct
 * write's invalidation of one of its pages drops it whole (those pages
 * are then read again), and every count is in pages.
 */
static void tc_policy_block_aliases(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	const unsigned long nr = 5 * TC_B;
	void *entry = tc_alias(&t->tf, TC_SIG_HASH);
	struct folio *busy, *tfolio, *t10, *t11, *f, *got;
	unsigned long *slots, *fresh, seq;
	struct folio_batch fbatch;
	unsigned int n;
	long lost;

	slots = kunit_kcalloc(test, BITS_TO_LONGS(nr), sizeof(long), GFP_KERNEL);
	fresh = kunit_kcalloc(test, BITS_TO_LONGS(nr), sizeof(long), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, slots);
	KUNIT_ASSERT_NOT_NULL(test, fresh);
	/* Block 2 holds a folio; one slot of block 3 is not selected. */
	busy = tc_test_folio(test, t->member, 2 * TC_B + 5, 5);
	tfolio = tc_test_folio(test, t->tmpl, 4 * TC_B + 9, 9);
	bitmap_fill(slots, nr);
	__clear_bit(3 * TC_B + 1, slots);
	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	KUNIT_EXPECT_EQ(test, filemap_add_page_aliases(mapping, 0, nr, slots,
						       entry, seq),
			(long)nr - 2);
	filemap_invalidate_unlock_shared(mapping);
	KUNIT_EXPECT_EQ(test, xa_get_order(&mapping->i_pages, 0),
			PAGE_ALIAS_BLOCK_ORDER);
	KUNIT_EXPECT_EQ(test, xa_get_order(&mapping->i_pages, TC_B + 7),
			PAGE_ALIAS_BLOCK_ORDER);
	KUNIT_EXPECT_EQ(test, xa_get_order(&mapping->i_pages, 2 * TC_B), 0);
	KUNIT_EXPECT_EQ(test, xa_get_order(&mapping->i_pages, 3 * TC_B), 0);
	KUNIT_EXPECT_EQ(test, xa_get_order(&mapping->i_pages, 4 * TC_B),
			PAGE_ALIAS_BLOCK_ORDER);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, TC_B - 1), entry);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 2 * TC_B + 5),
			    (void *)busy);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 3 * TC_B + 1));
	tc_expect_aliases(test, mapping, nr - 2, "three blocks, two runs");

	/* Only the unselected slot is left to readahead, in any window. */
	tc_empty_slots(mapping, 5, 4 * TC_B + 3, fresh, NULL);
	KUNIT_EXPECT_EQ(test, bitmap_weight(fresh, 4 * TC_B + 3), 1U);
	KUNIT_EXPECT_TRUE(test, test_bit(3 * TC_B + 1 - 5, fresh));

	got = tc_test_resolve(mapping, 4 * TC_B + 9,
			      tc_test_slot(t->member, 4 * TC_B + 9));
	KUNIT_EXPECT_PTR_EQ(test, got, tfolio);
	if (got)
		folio_put(got);

	/* A run of a block's pages resolves at once, up to a missing page. */
	t10 = tc_test_folio(test, t->tmpl, 4 * TC_B + 10, 10);
	t11 = tc_test_folio(test, t->tmpl, 4 * TC_B + 11, 11);
	folio_batch_init(&fbatch);
	lost = tc_test_stat(t, TC_ALIASES_LOST);
	rcu_read_lock();
	n = tc_resolve(mapping, 4 * TC_B + 9, 4 * TC_B + 20, entry, &fbatch);
	rcu_read_unlock();
	KUNIT_EXPECT_EQ(test, n, 3U);
	KUNIT_EXPECT_EQ(test, folio_batch_count(&fbatch), 3U);
	KUNIT_EXPECT_PTR_EQ(test, fbatch.folios[0], tfolio);
	KUNIT_EXPECT_PTR_EQ(test, fbatch.folios[2], t11);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_LOST), lost + 1);
	folio_batch_release(&fbatch);
	/* ... or up to a full batch, which loses nothing. */
	folio_batch_init(&fbatch);
	while (folio_batch_space(&fbatch) > 1)
		folio_batch_add(&fbatch, tfolio);
	rcu_read_lock();
	n = tc_resolve(mapping, 4 * TC_B + 9, 4 * TC_B + 11, entry, &fbatch);
	rcu_read_unlock();
	KUNIT_EXPECT_EQ(test, n, 1U);
	KUNIT_EXPECT_EQ(test, folio_batch_space(&fbatch), 0U);
	KUNIT_EXPECT_EQ(test, tc_test_stat(t, TC_ALIASES_LOST), lost + 1);
	folio_put(fbatch.folios[folio_batch_count(&fbatch) - 1]);
	folio_put(t10);
	folio_put(t11);

	/* A write's folio inside block 0 takes its slot only. */
	f = filemap_grab_folio(mapping, 3);
	KUNIT_ASSERT_FALSE(test, IS_ERR(f));
	folio_unlock(f);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 2), entry);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 3), (void *)f);
	KUNIT_EXPECT_PTR_EQ(test, tc_test_slot(t->member, 4), entry);
	tc_expect_aliases(test, mapping, nr - 3, "a folio added in a block");

	/* A punch of one page of block 1 drops the block. */
	truncate_inode_pages_range(mapping, (TC_B + 10) * PAGE_SIZE,
				   (TC_B + 11) * PAGE_SIZE - 1);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, TC_B));
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 2 * TC_B - 1));
	tc_expect_aliases(test, mapping, nr - 3 - TC_B, "a punch in a block");

	/* So does a direct write's invalidation of one page of block 4. */
	invalidate_inode_pages2_range(mapping, 4 * TC_B + 40, 4 * TC_B + 40);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 4 * TC_B + 9));
	tc_expect_aliases(test, mapping, nr - 3 - 2 * TC_B,
			  "an invalidation in a block");

	filemap_clear_page_aliases(mapping);
	tc_expect_aliases(test, mapping, 0, "the clear");
	KUNIT_EXPECT_EQ(test, mapping->nrpages, 2UL);
	folio_put(f);
	folio_put(busy);
	folio_put(tfolio);
}

/*
 * A proof's store fails once a folio has left the mapping since the proof
 * began: a dirty page written back and dropped between the extent read and
 * the store leaves an empty slot whose extents the proof never saw.
 * Reclaim, invalidation and truncation count; a folio that an alias
 * replaces does not (its data was proven the alias's); a store with a
 * count read after the removal goes through.
 */
static void tc_policy_store_fails_after_a_removal(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	struct folio *tfolio = tc_test_folio(test, t->tmpl, 7, 7);
	struct folio *mf = tc_test_folio(test, t->member, 7, 7);
	struct folio *f3 = tc_test_folio(test, t->member, 3, 3);
	void *entry = tc_alias(&t->tf, TC_SIG_HASH);
	DECLARE_BITMAP(slots, TC_TEST_PAGES);
	unsigned long seq;

	bitmap_zero(slots, TC_TEST_PAGES);
	bitmap_set(slots, 0, 6);
	filemap_invalidate_lock_shared(mapping);
	seq = filemap_page_alias_seq(mapping);
	/* An alias taking a folio's place moves nothing. */
	tc_test_share_page(&t->tf, mf, tfolio, 7);
	KUNIT_EXPECT_TRUE(test, xa_is_page_alias(tc_test_slot(t->member, 7)));
	KUNIT_EXPECT_EQ(test, filemap_page_alias_seq(mapping), seq);
	/* The folio at 3 is dropped (written back, say): slot 3 is empty. */
	folio_put(f3);
	KUNIT_EXPECT_EQ(test, invalidate_mapping_pages(mapping, 3, 3), 1UL);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 3));
	KUNIT_EXPECT_EQ(test, filemap_add_page_aliases(mapping, 0, 6, slots,
						       entry, seq), -EAGAIN);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 3, entry, seq),
			-EAGAIN);
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 3));
	KUNIT_EXPECT_NULL(test, tc_test_slot(t->member, 0));
	tc_expect_aliases(test, mapping, 1, "stale stores");
	/* A proof that begins after the removal stores. */
	seq = filemap_page_alias_seq(mapping);
	KUNIT_EXPECT_EQ(test, filemap_add_page_aliases(mapping, 0, 6, slots,
						       entry, seq), 6L);
	/* Truncation counts too, for any slot of the mapping. */
	f3 = tc_test_folio(test, t->member, 9, 9);
	folio_put(f3);
	truncate_inode_pages_range(mapping, 9 * PAGE_SIZE, 10 * PAGE_SIZE - 1);
	KUNIT_EXPECT_EQ(test, filemap_add_page_alias(mapping, 8, entry, seq),
			-EAGAIN);
	filemap_invalidate_unlock_shared(mapping);
	tc_expect_aliases(test, mapping, 7, "fresh stores");
	filemap_clear_page_aliases(mapping);
	folio_put(mf);
	folio_put(tfolio);
}

/*
 * A file classified as having no use for the policy is marked so
 * (AS_NO_PAGE_ALIASES) after the answer; a reclassification (a member
 * added, a scope enabled) that clears the mark in between must not be
 * undone by it, or the file misses that change until the next one. The
 * interleaving, one step at a time: the mark yields to a reclassification
 * that began after the classification did, and only to such. This checks
 * the generation's logic; the barriers' pairing is argued at
 * tc_classify_none() and raced for real by share-classify-race.sh.
 */
static void tc_policy_unshared_mark_yields_to_a_reclassification(struct kunit *test)
{
	struct tc_policy_test *t = test->priv;
	struct address_space *mapping = t->member->i_mapping;
	unsigned long *flags = &mapping->flags;
	unsigned long gen;

	gen = tc_classify_begin();
	tc_classify_none(mapping, gen);
	KUNIT_EXPECT_TRUE(test, test_bit(AS_NO_PAGE_ALIASES, flags));
	tc_reclassify(t->member->i_sb);
	KUNIT_EXPECT_FALSE_MSG(test, test_bit(AS_NO_PAGE_ALIASES, flags),
			       "a reclassification clears the mark");

	/* Classified, then the admin's change and its clear, then the mark. */
	gen = tc_classify_begin();
	tc_reclassify(t->member->i_sb);
	tc_classify_none(mapping, gen);
	KUNIT_EXPECT_FALSE_MSG(test, test_bit(AS_NO_PAGE_ALIASES, flags),
			       "a mark set after a reclassification it did not see");

	/* The next classification begins after it: its mark stays. */
	gen = tc_classify_begin();
	tc_classify_none(mapping, gen);
	KUNIT_EXPECT_TRUE(test, test_bit(AS_NO_PAGE_ALIASES, flags));
	clear_bit(AS_NO_PAGE_ALIASES, flags);
}

static struct kunit_case tc_policy_cases[] = {
	KUNIT_CASE(tc_policy_identical_page_becomes_alias),
	KUNIT_CASE(tc_policy_screens_before_comparing),
	KUNIT_CASE(tc_policy_leaves_busy_pages_alone),
	KUNIT_CASE(tc_policy_break_copies_the_template),
	KUNIT_CASE(tc_policy_break_for_an_overwrite_copies_nothing),
	KUNIT_CASE(tc_policy_resolve_own_live_pages_only),
	KUNIT_CASE(tc_policy_marks_only_empty_slots),
	KUNIT_CASE(tc_policy_counts_every_alias),
	KUNIT_CASE(tc_policy_aliases_a_proven_run),
	KUNIT_CASE(tc_policy_block_aliases),
	KUNIT_CASE(tc_policy_store_fails_after_a_removal),
	KUNIT_CASE(tc_policy_unshared_mark_yields_to_a_reclassification),
	{}
};

static struct kunit_suite tc_policy_suite = {
	.name = "totalcow_share_policy",
	.init = tc_policy_init,
	.exit = tc_policy_exit,
	.test_cases = tc_policy_cases,
};

kunit_test_suite(tc_policy_suite);
