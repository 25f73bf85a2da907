// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the canonical data cache (included at the end of
 * totalcow-canon.c): which pages of a file have a canonical address, scope
 * names, and how a reservation or an unpin drops a range of a real
 * canonical mapping, marking a page whose read is in flight stale; which
 * scope a snapshot follows its sources into; what a read by logical
 * address makes of the bytes it read.
 */

#include <crypto/hash.h>
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/swap.h>

#define MIB (1024 * 1024ULL)

static struct extent_map tc_canon_em(u64 start, u64 len, u64 disk,
				     u64 disk_len, u64 offset)
{
	struct extent_map em = {
		.start = start, .len = len, .disk_bytenr = disk,
		.disk_num_bytes = disk_len, .offset = offset,
		.ram_bytes = disk_len,
	};

	return em;
}

static void tc_canon_logical_regular(struct kunit *test)
{
	struct extent_map em = tc_canon_em(MIB, MIB, 100 * MIB, 2 * MIB, 4096);
	u64 l = 0;

	/* File offset MIB is byte 4096 of the extent. */
	KUNIT_EXPECT_TRUE(test, tc_canon_logical(&em, MIB, &l));
	KUNIT_EXPECT_EQ(test, l, 100 * MIB + 4096);
	KUNIT_EXPECT_TRUE(test, tc_canon_logical(&em, 2 * MIB - PAGE_SIZE, &l));
	KUNIT_EXPECT_EQ(test, l, 100 * MIB + 4096 + MIB - PAGE_SIZE);
	/* Outside the map, or not a page offset. */
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, MIB - PAGE_SIZE, &l));
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 2 * MIB, &l));
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, MIB + 512, &l));
}

static void tc_canon_logical_refuses(struct kunit *test)
{
	struct extent_map em;
	u64 l = 1;

	em = tc_canon_em(0, MIB, EXTENT_MAP_HOLE, 0, 0);
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 0, &l));
	em = tc_canon_em(0, PAGE_SIZE, EXTENT_MAP_INLINE, 0, 0);
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 0, &l));
	em = tc_canon_em(0, MIB, 100 * MIB, MIB, 0);
	em.flags |= EXTENT_FLAG_PREALLOC;
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 0, &l));
	/* A reflink at an offset that is not a page into the extent. */
	if (PAGE_SIZE > 4096) {
		em = tc_canon_em(0, MIB, 100 * MIB, 2 * MIB, 4096);
		KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 0, &l));
	}
	/* The map ends inside the page. */
	em = tc_canon_em(0, PAGE_SIZE / 2, 100 * MIB, MIB, 0);
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, 0, &l));
	KUNIT_EXPECT_EQ(test, l, 1ULL);
}

static void tc_canon_logical_merged_map(struct kunit *test)
{
	/* Two extents adjacent on disk, merged in the file's map cache. */
	struct extent_map em = tc_canon_em(0, 2 * MIB, 100 * MIB, 2 * MIB, 0);
	u64 l = 0;

	em.flags |= EXTENT_FLAG_MERGED;
	KUNIT_EXPECT_TRUE(test, tc_canon_logical(&em, MIB + PAGE_SIZE, &l));
	KUNIT_EXPECT_EQ(test, l, 101 * MIB + PAGE_SIZE);
}

/*
 * A compressed extent's pages: a key each, in the second mapping, that
 * names the extent, its length on disk, its compression and the page.
 */
static void tc_canon_logical_compressed(struct kunit *test)
{
	struct extent_map em = tc_canon_em(MIB, 64 * 1024, 100 * MIB,
					   16 * 1024, 32 * 1024);
	u64 key = 0, key2 = 0, other = 0;
	pgoff_t index;

	em.ram_bytes = 128 * 1024;
	em.flags |= EXTENT_FLAG_COMPRESS_ZSTD;
	/* File offset MIB is byte 32 KiB of the decompressed extent. */
	KUNIT_ASSERT_TRUE(test, tc_canon_logical(&em, MIB, &key));
	KUNIT_EXPECT_TRUE(test, tc_canon_key_compressed(key));
	index = tc_canon_key_index(key);
	KUNIT_EXPECT_EQ(test, tc_canon_zindex_bytenr(index), 100 * MIB);
	KUNIT_EXPECT_EQ(test, tc_canon_zindex_len(index), 16 * 1024U);
	KUNIT_EXPECT_EQ(test, tc_canon_zindex_type(index), (int)BTRFS_COMPRESS_ZSTD);
	KUNIT_EXPECT_EQ(test, index - tc_canon_zindex_first(index),
			(pgoff_t)(32 * 1024 / PAGE_SIZE));
	KUNIT_EXPECT_EQ(test, tc_canon_key_zpages(key), 128 * 1024 / PAGE_SIZE);
	/* The next page of the file: the next key. */
	KUNIT_ASSERT_TRUE(test, tc_canon_logical(&em, MIB + PAGE_SIZE, &key2));
	KUNIT_EXPECT_EQ(test, key2, key + PAGE_SIZE);
	KUNIT_EXPECT_FALSE(test, tc_canon_logical(&em, MIB + 64 * 1024, &key2));
	/* Another claim about the extent names other pages. */
	em.flags &= ~EXTENT_FLAG_COMPRESS_ZSTD;
	em.flags |= EXTENT_FLAG_COMPRESS_ZLIB;
	KUNIT_ASSERT_TRUE(test, tc_canon_logical(&em, MIB, &other));
	KUNIT_EXPECT_NE(test, other, key);
	em.flags &= ~EXTENT_FLAG_COMPRESS_ZLIB;
	em.flags |= EXTENT_FLAG_COMPRESS_ZSTD;
	em.disk_num_bytes = 20 * 1024;
	KUNIT_ASSERT_TRUE(test, tc_canon_logical(&em, MIB, &other));
	KUNIT_EXPECT_NE(test, other, key);
	/* A regular extent's page never has a compressed key. */
	em = tc_canon_em(MIB, MIB, 100 * MIB, 2 * MIB, 0);
	KUNIT_ASSERT_TRUE(test, tc_canon_logical(&em, MIB, &other));
	KUNIT_EXPECT_FALSE(test, tc_canon_key_compressed(other));
}

static void tc_canon_zkey_refuses(struct kunit *test)
{
	u64 key = 7;

	KUNIT_EXPECT_TRUE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_LZO, 128 * 1024, 0, &key));
	KUNIT_EXPECT_TRUE(test, tc_canon_zkey(MIB, 128 * 1024, BTRFS_COMPRESS_ZLIB, 128 * 1024,
					      128 * 1024 - PAGE_SIZE, &key));
	key = 7;
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_NONE,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_NR_COMPRESS_TYPES,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 0, BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 132 * 1024, BTRFS_COMPRESS_ZSTD,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 6000, BTRFS_COMPRESS_ZSTD,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB + 512, 4096, BTRFS_COMPRESS_ZSTD,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD, 128 * 1024,
					       128 * 1024, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD,
					       128 * 1024, 512, &key));
	/* The decompressed length: known, at most 128 KiB, past the page. */
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD, 0, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD,
					       132 * 1024, 0, &key));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD, 8192, 8192, &key));
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(MIB, 4096, BTRFS_COMPRESS_ZSTD, 8192, 4096, &key));
	KUNIT_EXPECT_EQ(test, tc_canon_key_zpages(key), DIV_ROUND_UP(8192U, PAGE_SIZE));
	KUNIT_EXPECT_FALSE(test, tc_canon_zkey(TC_CANON_Z_LIMIT, 4096, BTRFS_COMPRESS_ZSTD,
					       128 * 1024, 0, &key));
	KUNIT_EXPECT_TRUE(test, tc_canon_zkey(TC_CANON_Z_LIMIT - 4096, 4096,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	/* The largest index still has a key below 2^63. */
	KUNIT_EXPECT_LT(test, key, 1ULL << 63);
}

/*
 * A range handed out reaches the pages of every compressed extent whose
 * bytes on disk it meets: those that begin inside it, and those that
 * begin up to 128 KiB before it.
 */
static void tc_canon_zrange_covers_extents_reaching_in(struct kunit *test)
{
	u64 start = 100 * MIB, len = 8192, key;
	pgoff_t first, last;

	KUNIT_ASSERT_TRUE(test, tc_canon_zrange(start, len, &first, &last));
	/* Begins 124 KiB before, 128 KiB long: it reaches in. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(start - 124 * 1024, 128 * 1024,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	KUNIT_EXPECT_GE(test, tc_canon_key_index(key), first);
	/* Begins in the range's last sector, its last page. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(start + 4096, 128 * 1024,
					      BTRFS_COMPRESS_ZLIB, 128 * 1024,
					      128 * 1024 - PAGE_SIZE, &key));
	KUNIT_EXPECT_LE(test, tc_canon_key_index(key), last);
	/* Begins 128 KiB before: it ends where the range begins. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(start - 128 * 1024, 128 * 1024,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	KUNIT_EXPECT_LT(test, tc_canon_key_index(key), first);
	/* Begins where the range ends. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(start + len, 4096,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	KUNIT_EXPECT_GT(test, tc_canon_key_index(key), last);
	/* At the start of the address space, and past the limit. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zrange(4096, 4096, &first, &last));
	KUNIT_EXPECT_EQ(test, first, 0UL);
	KUNIT_EXPECT_FALSE(test, tc_canon_zrange(TC_CANON_Z_LIMIT, 4096, &first, &last));
	KUNIT_EXPECT_FALSE(test, tc_canon_zrange(start, 0, &first, &last));
}

static void tc_canon_scope_names(struct kunit *test)
{
	static const char longest[] = "abcdefghijklmnopqrstuvwxyz012345";
	static const char too_long[] = "abcdefghijklmnopqrstuvwxyz0123456";

	KUNIT_EXPECT_TRUE(test, tc_canon_scope_name_valid("default"));
	KUNIT_EXPECT_TRUE(test, tc_canon_scope_name_valid("tenant-a_1.2"));
	KUNIT_EXPECT_TRUE(test, tc_canon_scope_name_valid(longest));
	KUNIT_EXPECT_FALSE(test, tc_canon_scope_name_valid(""));
	KUNIT_EXPECT_FALSE(test, tc_canon_scope_name_valid(too_long));
	KUNIT_EXPECT_FALSE(test, tc_canon_scope_name_valid("a/b"));
	KUNIT_EXPECT_FALSE(test, tc_canon_scope_name_valid("a b"));
	KUNIT_EXPECT_FALSE(test, tc_canon_scope_name_valid("a\n"));
}

/* A scope of a file system that is not there: its mapping is real. */
struct tc_canon_test_scope {
	struct tc_canon_fs cfs;
	struct tc_canon_scope s;
};

static struct tc_canon_test_scope *tc_canon_test_scope(struct kunit *test)
{
	struct tc_canon_test_scope *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, t);
	INIT_LIST_HEAD(&t->cfs.scopes);
	t->s.cfs = &t->cfs;
	KUNIT_ASSERT_EQ(test, tc_canon_new_inodes(&t->s), 0);
	list_add_tail_rcu(&t->s.node, &t->cfs.scopes);
	return t;
}

static void tc_canon_test_scope_free(struct tc_canon_test_scope *t)
{
	truncate_inode_pages_final(t->s.inode->i_mapping);
	iput(t->s.inode);
	truncate_inode_pages_final(t->s.zinode->i_mapping);
	iput(t->s.zinode);
}

/* Put uptodate, unlocked pages at @first..@last of @mapping. */
static void tc_canon_fill_mapping(struct kunit *test,
				  struct address_space *mapping,
				  pgoff_t first, pgoff_t last)
{
	pgoff_t i;

	for (i = first; i <= last; i++) {
		struct folio *folio = filemap_alloc_folio(GFP_KERNEL, 0);

		KUNIT_ASSERT_NOT_NULL(test, folio);
		KUNIT_ASSERT_EQ(test, filemap_add_folio(mapping, folio, i,
							GFP_KERNEL), 0);
		folio_mark_uptodate(folio);
		folio_unlock(folio);
		folio_put(folio);
	}
	/* New folios wait in this CPU's LRU batch, with a reference. */
	lru_add_drain();
}

static void tc_canon_fill(struct kunit *test, struct tc_canon_test_scope *t,
			  pgoff_t first, pgoff_t last)
{
	tc_canon_fill_mapping(test, t->s.inode->i_mapping, first, last);
}

static bool tc_canon_has(struct tc_canon_test_scope *t, pgoff_t index)
{
	struct folio *folio = filemap_get_folio(t->s.inode->i_mapping, index);

	if (IS_ERR(folio))
		return false;
	folio_put(folio);
	return true;
}

static void tc_canon_forget_srcu(struct tc_canon_fs *cfs, u64 start, u64 len,
				 bool wait)
{
	int idx = srcu_read_lock(&tc_canon_srcu);

	tc_canon_forget(cfs, start, len, wait);
	srcu_read_unlock(&tc_canon_srcu, idx);
}

static void tc_canon_reservation_drops_its_range(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	u64 gen = tc_canon_gen(&t->s);
	pgoff_t i;

	tc_canon_fill(test, t, 10, 20);
	/* Not page aligned: every page the range touches goes. */
	tc_canon_forget_srcu(&t->cfs, ((u64)12 << PAGE_SHIFT) + 512,
			     2 * PAGE_SIZE, true);
	for (i = 10; i <= 20; i++)
		KUNIT_EXPECT_EQ_MSG(test, tc_canon_has(t, i), i < 12 || i > 14,
				    "page %lu", i);
	KUNIT_EXPECT_EQ(test, t->s.inode->i_mapping->nrpages, 8UL);
	KUNIT_EXPECT_EQ(test, atomic64_read(&t->s.invalidations), 3LL);
	KUNIT_EXPECT_FALSE(test, tc_canon_unchanged(&t->s, gen));
	KUNIT_EXPECT_TRUE(test, tc_canon_unchanged(&t->s, tc_canon_gen(&t->s)));
	tc_canon_test_scope_free(t);
}

/*
 * A handout spoils the proofs of its own regions only: of three pages
 * proven (one 5 MiB in, one 9 MiB in, one of a compressed extent), a
 * reservation 9 MiB in leaves the first, and takes the second and the
 * compressed one (guarded by the file system's generation); with no
 * handout at all every page stays. A reservation longer than the table
 * bumps each counter once and spoils every page.
 */
static void tc_canon_handout_spoils_only_its_regions(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	u64 keys[3], gens[3], gen = tc_canon_gen(&t->s);
	DECLARE_BITMAP(pages, 3);
	unsigned long i;

	keys[0] = 5 * MIB + 8192;
	keys[1] = 9 * MIB;
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(100 * MIB, 4096, BTRFS_COMPRESS_ZSTD,
					      8192, 0, &keys[2]));
	for (i = 0; i < 3; i++)
		gens[i] = tc_canon_key_gen(&t->cfs, keys[i]);
	bitmap_fill(pages, 3);
	tc_canon_keep_unchanged(&t->s, gen, keys, gens, pages, 3);
	KUNIT_EXPECT_EQ(test, bitmap_weight(pages, 3), 3U);

	tc_canon_forget_srcu(&t->cfs, 9 * MIB + 4096, 4096, true);
	tc_canon_keep_unchanged(&t->s, gen, keys, gens, pages, 3);
	KUNIT_EXPECT_TRUE(test, test_bit(0, pages));
	KUNIT_EXPECT_FALSE(test, test_bit(1, pages));
	KUNIT_EXPECT_FALSE(test, test_bit(2, pages));

	/* 5 MiB + 1024 MiB shares the first page's counter. */
	gen = tc_canon_gen(&t->s);
	gens[0] = tc_canon_key_gen(&t->cfs, keys[0]);
	bitmap_fill(pages, 1);
	tc_canon_forget_srcu(&t->cfs, 1029 * MIB, 4096, true);
	tc_canon_keep_unchanged(&t->s, gen, keys, gens, pages, 1);
	KUNIT_EXPECT_FALSE(test, test_bit(0, pages));

	gen = tc_canon_gen(&t->s);
	for (i = 0; i < 2; i++)
		gens[i] = tc_canon_key_gen(&t->cfs, keys[i]);
	bitmap_fill(pages, 2);
	tc_canon_forget_srcu(&t->cfs, 2048 * MIB, 2048 * MIB, true);
	tc_canon_keep_unchanged(&t->s, gen, keys, gens, pages, 2);
	KUNIT_EXPECT_TRUE(test, bitmap_empty(pages, 2));
	tc_canon_test_scope_free(t);
}

/* A reservation drops the compressed pages of extents it meets. */
static void tc_canon_reservation_drops_compressed_pages(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct address_space *z = t->s.zinode->i_mapping;
	pgoff_t near, far, inside;
	struct folio *folio;
	u64 key;

	/* An extent 64 KiB before 100 MiB, one at 200 KiB before, one in. */
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(100 * MIB - 64 * 1024, 128 * 1024,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	near = tc_canon_key_index(key);
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(100 * MIB - 200 * 1024, 128 * 1024,
					      BTRFS_COMPRESS_ZSTD, 128 * 1024, 0, &key));
	far = tc_canon_key_index(key);
	KUNIT_ASSERT_TRUE(test, tc_canon_zkey(100 * MIB, 4096,
					      BTRFS_COMPRESS_LZO, 128 * 1024, 0, &key));
	inside = tc_canon_key_index(key);
	tc_canon_fill_mapping(test, z, near, near + 3);
	tc_canon_fill_mapping(test, z, far, far + 3);
	tc_canon_fill_mapping(test, z, inside, inside);
	tc_canon_fill(test, t, 0, 0);
	tc_canon_forget_srcu(&t->cfs, 100 * MIB, 4096, true);
	KUNIT_EXPECT_EQ(test, z->nrpages, 4UL);		/* the far extent's */
	folio = filemap_get_folio(z, far);
	KUNIT_EXPECT_FALSE(test, IS_ERR(folio));
	if (!IS_ERR(folio))
		folio_put(folio);
	KUNIT_EXPECT_TRUE(test, IS_ERR(filemap_get_folio(z, near)));
	KUNIT_EXPECT_TRUE(test, tc_canon_has(t, 0));
	KUNIT_EXPECT_EQ(test, atomic64_read(&t->s.invalidations), 5LL);
	tc_canon_test_scope_free(t);
}

static void tc_canon_unpin_skips_reads_in_flight(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	u64 gen = tc_canon_gen(&t->s);
	struct folio *folio;

	tc_canon_fill(test, t, 0, 3);
	folio = filemap_lock_folio(t->s.inode->i_mapping, 2);
	KUNIT_ASSERT_FALSE(test, IS_ERR(folio));
	tc_canon_forget_srcu(&t->cfs, 0, 4 * PAGE_SIZE, false);
	/* An unpin is a hint: the generation stays, a locked page stays. */
	KUNIT_EXPECT_TRUE(test, tc_canon_unchanged(&t->s, gen));
	KUNIT_EXPECT_TRUE(test, tc_canon_has(t, 2));
	KUNIT_EXPECT_EQ(test, t->s.inode->i_mapping->nrpages, 1UL);
	folio_unlock(folio);
	folio_put(folio);
	tc_canon_forget_srcu(&t->cfs, 2 * PAGE_SIZE, PAGE_SIZE, false);
	KUNIT_EXPECT_FALSE(test, tc_canon_has(t, 2));
	tc_canon_test_scope_free(t);
}

struct tc_canon_forgetter {
	struct tc_canon_fs *cfs;
	struct completion done;
};

static int tc_canon_forget_thread(void *data)
{
	struct tc_canon_forgetter *f = data;

	tc_canon_forget_srcu(f->cfs, 0, 2 * PAGE_SIZE, true);
	complete(&f->done);
	return 0;
}

static void tc_canon_reservation_marks_a_read_in_flight_stale(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct tc_canon_forgetter f = { .cfs = &t->cfs };
	struct task_struct *task;
	struct folio *folio;
	bool waited;

	init_completion(&f.done);
	tc_canon_fill(test, t, 0, 1);
	/* A read in flight: the page locked, not uptodate yet. */
	folio = filemap_lock_folio(t->s.inode->i_mapping, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(folio));
	folio_clear_uptodate(folio);
	task = kthread_run(tc_canon_forget_thread, &f, "tc-canon-kunit");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	/* The reservation does not wait for the read (a throttled reader's). */
	waited = !wait_for_completion_timeout(&f.done, msecs_to_jiffies(5000));
	KUNIT_EXPECT_FALSE(test, waited);
	/* It marked the page it could not drop, and dropped the other. */
	KUNIT_EXPECT_TRUE(test, tc_canon_folio_stale(folio));
	KUNIT_EXPECT_FALSE(test, tc_canon_has(t, 1));
	/* The read ends: its page is never handed out. */
	folio_mark_uptodate(folio);
	folio_unlock(folio);
	KUNIT_EXPECT_FALSE(test, tc_canon_usable(folio));
	if (waited)
		wait_for_completion(&f.done);
	folio_put(folio);
	tc_canon_test_scope_free(t);
}

/*
 * A page whose read failed, and one a reservation marked stale, leave the
 * mapping before the next read of their addresses, which would otherwise
 * skip them; an uptodate page and one whose read is in flight stay.
 */
static void tc_canon_unusable_pages_make_way_for_a_new_read(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct address_space *mapping = t->s.inode->i_mapping;
	struct folio *folio, *failed, *reading;

	tc_canon_fill(test, t, 0, 1);			/* 0: kept, 1: stale */
	folio = filemap_get_folio(mapping, 1);
	KUNIT_ASSERT_FALSE(test, IS_ERR(folio));
	tc_canon_folio_set_stale(folio);
	folio_put(folio);
	failed = filemap_alloc_folio(GFP_KERNEL, 0);	/* 2: its read failed */
	reading = filemap_alloc_folio(GFP_KERNEL, 0);	/* 3: being read */
	KUNIT_ASSERT_NOT_NULL(test, failed);
	KUNIT_ASSERT_NOT_NULL(test, reading);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(mapping, failed, 2, GFP_KERNEL), 0);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(mapping, reading, 3, GFP_KERNEL), 0);
	folio_unlock(failed);				/* ended, not uptodate */
	folio_put(failed);
	lru_add_drain();
	tc_canon_evict_unusable(mapping, 0, 4);
	KUNIT_EXPECT_TRUE(test, tc_canon_has(t, 0));
	KUNIT_EXPECT_FALSE(test, tc_canon_has(t, 1));
	KUNIT_EXPECT_FALSE(test, tc_canon_has(t, 2));
	KUNIT_EXPECT_TRUE(test, tc_canon_has(t, 3));
	folio_unlock(reading);
	folio_put(reading);
	tc_canon_test_scope_free(t);
}

/* A burial in a thread of its own, and its end. */
struct tc_canon_test_burial {
	struct tc_canon_burial *b;
	struct completion done;
};

static int tc_canon_bury_thread(void *arg)
{
	struct tc_canon_test_burial *tb = arg;

	tc_canon_bury(tb->b);
	complete(&tb->done);
	return 0;
}

static bool tc_canon_bury_in_thread(struct kunit *test,
				    struct tc_canon_test_burial *tb,
				    struct tc_canon_burial *b)
{
	struct task_struct *task;

	tb->b = b;
	init_completion(&tb->done);
	task = kthread_run(tc_canon_bury_thread, tb, "tc-canon-bury");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	return wait_for_completion_timeout(&tb->done, msecs_to_jiffies(300));
}

/* Another scope of @t's file system, unpublished (no subvolume) into @b. */
static struct tc_canon_scope *tc_canon_dead_scope(struct kunit *test,
						  struct tc_canon_test_scope *t,
						  struct tc_canon_burial *b)
{
	struct tc_canon_scope *s = kzalloc(sizeof(*s), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, s);
	s->cfs = &t->cfs;
	KUNIT_ASSERT_EQ(test, tc_canon_new_inodes(s), 0);
	mutex_lock(&tc_canon_mutex);
	list_add_tail_rcu(&s->node, &t->cfs.scopes);
	tc_canon_put_empty(&t->cfs, s, b);
	mutex_unlock(&tc_canon_mutex);
	return s;
}

/*
 * A scope that lost its last subvolume is unpublished under
 * tc_canon_mutex and freed after its holders are gone, without the mutex:
 * while a holder (a reader throttled by io.max, say) keeps the scope,
 * enable, disable and following can take the mutex. The holder is
 * counted in the scope: it is not inside tc_canon_srcu, whose grace
 * period every burial waits for.
 */
static void tc_canon_burial_waits_without_the_mutex(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct tc_canon_test_burial tb;
	struct tc_canon_scope *s2;
	struct tc_canon_burial b = { };
	bool free;

	s2 = tc_canon_dead_scope(test, t, &b);
	KUNIT_EXPECT_TRUE(test, list_is_singular(&t->cfs.scopes));
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 1);

	atomic_inc(&s2->holders);	/* a holder, as tc_canon_hold() counts one */
	KUNIT_EXPECT_FALSE(test, tc_canon_bury_in_thread(test, &tb, &b));
	free = mutex_trylock(&tc_canon_mutex);	/* it waits, but not with it */
	KUNIT_EXPECT_TRUE(test, free);
	if (free)
		mutex_unlock(&tc_canon_mutex);
	/* Nor inside tc_canon_srcu: another grace period ends. */
	synchronize_srcu(&tc_canon_srcu);
	tc_canon_release(s2);
	wait_for_completion(&tb.done);		/* s2 freed */
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 0);
	tc_canon_test_scope_free(t);
}

/*
 * A burial waits for the holders of what it unpublished, and nothing
 * else: while a throttled holder keeps one scope, a disable that emptied
 * another scope frees it, and the unmount of a file system with no
 * canonical state returns, where both once waited for the first burial
 * (one lock held across every burial's wait, and the holder inside the
 * SRCU every burial waits for).
 */
static void tc_canon_burial_waits_for_its_own_holders_only(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct btrfs_fs_info *other = kunit_kzalloc(test, sizeof(*other), GFP_KERNEL);
	struct tc_canon_test_burial tb2, tb3;
	struct tc_canon_scope *s2;
	struct tc_canon_burial b2 = { }, b3 = { };

	KUNIT_ASSERT_NOT_NULL(test, other);
	s2 = tc_canon_dead_scope(test, t, &b2);
	tc_canon_dead_scope(test, t, &b3);
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 2);
	atomic_inc(&s2->holders);
	KUNIT_EXPECT_FALSE(test, tc_canon_bury_in_thread(test, &tb2, &b2));
	/* s3's burial ends while s2's waits. */
	KUNIT_EXPECT_TRUE(test, tc_canon_bury_in_thread(test, &tb3, &b3));
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 1);
	/* So does another file system's unmount. */
	tc_canon_hook_close(other);
	KUNIT_EXPECT_FALSE(test, completion_done(&tb2.done));
	tc_canon_release(s2);
	wait_for_completion(&tb2.done);
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 0);
	tc_canon_test_scope_free(t);
}

/*
 * The prune worker buries what it pruned in a worker of its own: it
 * returns while a holder keeps the scope, which is freed once the holder
 * goes.
 */
static void tc_canon_prune_leaves_its_burial_to_a_worker(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct tc_canon_burial b = { };
	struct tc_canon_scope *s2;
	long left;

	s2 = tc_canon_dead_scope(test, t, &b);
	atomic_inc(&s2->holders);
	tc_canon_bury_later(&b);		/* returns, s2 held */
	KUNIT_EXPECT_TRUE(test, hlist_empty(&b.scopes));
	KUNIT_EXPECT_EQ(test, atomic_read(&t->cfs.dead_scopes), 1);
	tc_canon_release(s2);
	left = wait_var_event_timeout(&t->cfs.dead_scopes,
				      !atomic_read(&t->cfs.dead_scopes), 10 * HZ);
	KUNIT_EXPECT_GT(test, left, 0);		/* the worker freed it */
	tc_canon_test_scope_free(t);
}

/*
 * What the prune worker (and a disable) drops of a subvolume found
 * deleted: an entry that followed its source (its scope counts a
 * subvolume less), one taken out, one found to follow nothing; not an
 * enabled one, which stays until disabled, whatever it was when the
 * worker found the subvolume gone.
 */
static void tc_canon_forget_subvol_drops_only_prunable(struct kunit *test)
{
	struct tc_canon_fs *cfs = kunit_kzalloc(test, sizeof(*cfs), GFP_KERNEL);
	struct tc_canon_scope *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	unsigned long id;

	KUNIT_ASSERT_NOT_NULL(test, cfs);
	KUNIT_ASSERT_NOT_NULL(test, s);
	xa_init(&cfs->subvols);
	s->nr_subvols = 2;
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&cfs->subvols, 256, s, GFP_KERNEL)), 0);
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&cfs->subvols, 257, s, GFP_KERNEL)), 0);
	xa_set_mark(&cfs->subvols, 257, TC_CANON_FOLLOWED);
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&cfs->subvols, 258, TC_CANON_OUT,
					      GFP_KERNEL)), 0);
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&cfs->subvols, 259,
					      tc_canon_none_at(3UL),
					      GFP_KERNEL)), 0);
	KUNIT_EXPECT_FALSE(test, tc_canon_prunable(cfs, 256, s));
	KUNIT_EXPECT_TRUE(test, tc_canon_prunable(cfs, 257, s));
	KUNIT_EXPECT_TRUE(test, tc_canon_prunable(cfs, 258, TC_CANON_OUT));
	KUNIT_EXPECT_TRUE(test, tc_canon_prunable(cfs, 259, tc_canon_none_at(3UL)));
	mutex_lock(&tc_canon_mutex);
	for (id = 255; id <= 260; id++)		/* 255 and 260: no entry */
		tc_canon_forget_subvol(cfs, id);
	mutex_unlock(&tc_canon_mutex);
	KUNIT_EXPECT_PTR_EQ(test, xa_load(&cfs->subvols, 256), (void *)s);
	KUNIT_EXPECT_NULL(test, xa_load(&cfs->subvols, 257));
	KUNIT_EXPECT_NULL(test, xa_load(&cfs->subvols, 258));
	KUNIT_EXPECT_NULL(test, xa_load(&cfs->subvols, 259));
	KUNIT_EXPECT_EQ(test, s->nr_subvols, 1UL);
	xa_destroy(&cfs->subvols);
}

/*
 * A snapshot follows the nearest of its sources that is in a scope; not
 * past one an admin took out; past those found to follow nothing; not
 * beyond the sources it was given (TC_CANON_FOLLOW_HOPS).
 */
static void tc_canon_follow_picks_the_nearest_scope(struct kunit *test)
{
	struct tc_canon_scope *a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	struct tc_canon_scope *b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	const u64 ids[] = { 10, 20, 30 };
	struct xarray x;

	KUNIT_ASSERT_NOT_NULL(test, a);
	KUNIT_ASSERT_NOT_NULL(test, b);
	xa_init(&x);
	KUNIT_EXPECT_NULL(test, tc_canon_follow_pick(&x, ids, 3));
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&x, 30, b, GFP_KERNEL)), 0);
	KUNIT_EXPECT_PTR_EQ(test, tc_canon_follow_pick(&x, ids, 3), b);
	KUNIT_EXPECT_NULL(test, tc_canon_follow_pick(&x, ids, 2));
	KUNIT_EXPECT_NULL(test, tc_canon_follow_pick(&x, ids, 0));
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&x, 20, a, GFP_KERNEL)), 0);
	KUNIT_EXPECT_PTR_EQ(test, tc_canon_follow_pick(&x, ids, 3), a);
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&x, 10, tc_canon_none_at(7UL),
					      GFP_KERNEL)), 0);
	KUNIT_EXPECT_PTR_EQ(test, tc_canon_follow_pick(&x, ids, 3), a);
	KUNIT_EXPECT_PTR_NE(test, tc_canon_none_at(0UL), TC_CANON_OUT);
	KUNIT_ASSERT_EQ(test, xa_err(xa_store(&x, 10, TC_CANON_OUT, GFP_KERNEL)),
			0);
	KUNIT_EXPECT_NULL(test, tc_canon_follow_pick(&x, ids, 3));
	xa_destroy(&x);
}

static void tc_canon_canonical_mapping_is_private(struct kunit *test)
{
	struct tc_canon_test_scope *t = tc_canon_test_scope(test);
	struct address_space *mapping = t->s.inode->i_mapping;

	/* Nothing reclaims into a file system from under a checksum lookup. */
	KUNIT_EXPECT_FALSE(test, mapping_gfp_mask(mapping) & __GFP_FS);
	KUNIT_EXPECT_PTR_EQ(test, mapping->a_ops, &tc_canon_aops);
	KUNIT_EXPECT_EQ(test, i_size_read(t->s.inode), (loff_t)MAX_LFS_FILESIZE);
	KUNIT_EXPECT_PTR_EQ(test, t->s.inode->i_sb, tc_canon_mnt->mnt_sb);
	tc_canon_test_scope_free(t);
}

KUNIT_DEFINE_ACTION_WRAPPER(tc_canon_test_free_shash, crypto_free_shash,
			    struct crypto_shash *);

/*
 * A read of three pages by logical address (a compressed extent's, say),
 * on a file system that is only what the read's checks use: 4 KiB sectors
 * and crc32c. Every sector is checked, in the page it lies in; a read
 * that failed or does not match, with no mirror left, fails. (Going on to
 * the next mirror needs a real file system: tests/integration.)
 */
static void tc_canon_lread_checks_every_sector(struct kunit *test)
{
	struct btrfs_fs_info *fs_info;
	struct tc_canon_lread r = { .logical = 16 * MIB, .len = 3 * PAGE_SIZE, .nr = 3 };
	struct crypto_shash *tfm;
	struct folio *folios[3];
	struct btrfs_bio *bbio;
	u32 off, nsect = r.len / SZ_4K;
	u8 *data, *last;
	int i, err;

	fs_info = kunit_kzalloc(test, sizeof(*fs_info), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fs_info);
	tfm = crypto_alloc_shash("crc32c", 0, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tfm));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, tc_canon_test_free_shash, tfm), 0);
	fs_info->csum_shash = tfm;
	fs_info->csum_size = crypto_shash_digestsize(tfm);
	fs_info->sectorsize = SZ_4K;
	fs_info->sectorsize_bits = ilog2(SZ_4K);
	r.fs_info = fs_info;
	r.csums = kunit_kzalloc(test, nsect * fs_info->csum_size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r.csums);
	for (i = 0; i < 3; i++) {
		folios[i] = folio_alloc(GFP_KERNEL, 0);
		KUNIT_ASSERT_NOT_NULL(test, folios[i]);
		memset(folio_address(folios[i]), 'a' + i, PAGE_SIZE);
	}
	r.folios = folios;
	for (off = 0, i = 0; off < r.len; off += SZ_4K, i++) {
		data = folio_address(folios[off >> PAGE_SHIFT]) + offset_in_page(off);
		err = crypto_shash_tfm_digest(tfm, data, SZ_4K,
					      r.csums + i * fs_info->csum_size);
		KUNIT_ASSERT_EQ(test, err, 0);
	}
	r.mirror = 2;
	r.num_copies = 2;

	KUNIT_EXPECT_TRUE(test, tc_canon_lread_verify(&r));
	bbio = btrfs_bio_alloc(r.nr, REQ_OP_READ, fs_info, NULL, &r);
	KUNIT_EXPECT_EQ(test, tc_canon_lread_end(&r, bbio), 0);
	/* The bytes match, but the device said the read failed. */
	bbio = btrfs_bio_alloc(r.nr, REQ_OP_READ, fs_info, NULL, &r);
	bbio->bio.bi_status = BLK_STS_IOERR;
	KUNIT_EXPECT_EQ(test, tc_canon_lread_end(&r, bbio), -EIO);
	/* One byte of the last sector of the last page. */
	last = folio_address(folios[2]) + PAGE_SIZE - 1;
	*last ^= 1;
	KUNIT_EXPECT_FALSE(test, tc_canon_lread_verify(&r));
	bbio = btrfs_bio_alloc(r.nr, REQ_OP_READ, fs_info, NULL, &r);
	KUNIT_EXPECT_EQ(test, tc_canon_lread_end(&r, bbio), -EIO);
	*last ^= 1;
	/* A checksum of the first page's. */
	r.csums[0] ^= 1;
	KUNIT_EXPECT_FALSE(test, tc_canon_lread_verify(&r));
	for (i = 0; i < 3; i++)
		folio_put(folios[i]);
}

static struct kunit_case tc_canon_cases[] = {
	KUNIT_CASE(tc_canon_logical_regular),
	KUNIT_CASE(tc_canon_logical_refuses),
	KUNIT_CASE(tc_canon_logical_merged_map),
	KUNIT_CASE(tc_canon_logical_compressed),
	KUNIT_CASE(tc_canon_zkey_refuses),
	KUNIT_CASE(tc_canon_zrange_covers_extents_reaching_in),
	KUNIT_CASE(tc_canon_scope_names),
	KUNIT_CASE(tc_canon_reservation_drops_its_range),
	KUNIT_CASE(tc_canon_handout_spoils_only_its_regions),
	KUNIT_CASE(tc_canon_reservation_drops_compressed_pages),
	KUNIT_CASE(tc_canon_unpin_skips_reads_in_flight),
	KUNIT_CASE(tc_canon_reservation_marks_a_read_in_flight_stale),
	KUNIT_CASE(tc_canon_unusable_pages_make_way_for_a_new_read),
	KUNIT_CASE(tc_canon_canonical_mapping_is_private),
	KUNIT_CASE(tc_canon_follow_picks_the_nearest_scope),
	KUNIT_CASE(tc_canon_burial_waits_without_the_mutex),
	KUNIT_CASE(tc_canon_burial_waits_for_its_own_holders_only),
	KUNIT_CASE(tc_canon_prune_leaves_its_burial_to_a_worker),
	KUNIT_CASE(tc_canon_forget_subvol_drops_only_prunable),
	KUNIT_CASE(tc_canon_lread_checks_every_sector),
	{}
};

static struct kunit_suite tc_canon_suite = {
	.name = "totalcow_canon",
	.test_cases = tc_canon_cases,
};

kunit_test_suite(tc_canon_suite);
