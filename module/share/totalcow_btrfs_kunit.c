// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for what page-cache sharing asks btrfs (included at the end
 * of totalcow-btrfs.c): when two extent maps put a byte in the same place
 * on disk.
 */

#include <kunit/test.h>

#define MIB (1024 * 1024ULL)

/* A regular extent: file [start, start + len) at disk + offset. */
static struct extent_map tc_em(u64 start, u64 len, u64 disk, u64 disk_len,
			       u64 offset)
{
	struct extent_map em = {
		.start = start, .len = len, .disk_bytenr = disk,
		.disk_num_bytes = disk_len, .offset = offset,
		.ram_bytes = disk_len,
	};

	return em;
}

static void tc_same_bytes_regular_extents(struct kunit *test)
{
	struct extent_map m = tc_em(0, MIB, 100 * MIB, MIB, 0);
	struct extent_map t = m;

	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t, 0));
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t, MIB - 4096));
	/* Another extent, or the same one at another offset: not the same. */
	t.disk_bytenr += MIB;
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	t = tc_em(0, MIB, 100 * MIB, 2 * MIB, 4096);
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 8192));
	/* A reflink of the extent's second half to offset 0 of the member. */
	m = tc_em(0, MIB, 100 * MIB, 2 * MIB, MIB);
	t = tc_em(0, 2 * MIB, 100 * MIB, 2 * MIB, 0);
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	t = tc_em(MIB, MIB, 100 * MIB, 2 * MIB, MIB);
	m = tc_em(0, 2 * MIB, 100 * MIB, 2 * MIB, 0);
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t, MIB + 4096));
}

static void tc_same_bytes_merged_maps(struct kunit *test)
{
	/*
	 * Two extents adjacent on disk, merged in the member's map cache
	 * only: the bounds differ, every byte is in the same place.
	 */
	struct extent_map m = tc_em(0, 2 * MIB, 100 * MIB, 2 * MIB, 0);
	struct extent_map t1 = tc_em(0, MIB, 100 * MIB, MIB, 0);
	struct extent_map t2 = tc_em(MIB, MIB, 101 * MIB, MIB, 0);

	m.flags |= EXTENT_FLAG_MERGED;
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t1, 4096));
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t2, MIB));
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t2, 2 * MIB - 4096));
}

static void tc_same_bytes_proves_nothing_from_holes(struct kunit *test)
{
	struct extent_map m = tc_em(0, MIB, EXTENT_MAP_HOLE, 0, 0);
	struct extent_map t = m;

	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	m.disk_bytenr = EXTENT_MAP_INLINE;
	t.disk_bytenr = EXTENT_MAP_INLINE;
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	m = tc_em(0, MIB, 100 * MIB, MIB, 0);
	t = m;
	m.flags |= EXTENT_FLAG_PREALLOC;
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&t, &m, 0));
}

static void tc_same_bytes_compressed_extents(struct kunit *test)
{
	struct extent_map m = tc_em(0, 128 * 1024, 100 * MIB, 16384, 0);
	struct extent_map t;

	m.ram_bytes = 128 * 1024;
	extent_map_set_compression(&m, BTRFS_COMPRESS_ZSTD);
	t = m;
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t, 65536));
	/* The same compressed extent, another offset into its data. */
	t.offset = 4096;
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 65536));
	t = m;
	t.start = 4096;
	t.offset = 4096;
	KUNIT_EXPECT_TRUE(test, tc_same_bytes(&m, &t, 65536));
	/* Another algorithm, or uncompressed at the same address. */
	t = m;
	extent_map_set_compression(&t, BTRFS_COMPRESS_ZLIB);
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
	t = tc_em(0, 128 * 1024, 100 * MIB, 128 * 1024, 0);
	KUNIT_EXPECT_FALSE(test, tc_same_bytes(&m, &t, 0));
}

#define TC_TROOT	300ULL	/* the template subvolume's root id */

static void tc_ref_note_picks_the_templates_own_reference(struct kunit *test)
{
	struct tc_ref_cands c = { };

	/* Another offset (a partial clone elsewhere) is no candidate. */
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, TC_TROOT, 257, 4096, 0,
					     TC_TROOT));
	KUNIT_EXPECT_EQ(test, c.nr, 0U);
	/* Neither are objectids that are not inode numbers. */
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, TC_TROOT, 5, 0, 0, TC_TROOT));
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, TC_TROOT, -255ULL, 0, 0,
					     TC_TROOT));
	KUNIT_EXPECT_EQ(test, c.nr, 0U);
	/* Other subvolumes' references: kept, in order, without duplicates. */
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, 301, 260, 0, 0, TC_TROOT));
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, 302, 260, 0, 0, TC_TROOT));
	KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, 256, 257, 0, 0, TC_TROOT));
	KUNIT_EXPECT_EQ(test, c.nr, 2U);
	KUNIT_EXPECT_EQ(test, c.ino[0], 260ULL);
	KUNIT_EXPECT_EQ(test, c.ino[1], 257ULL);
	/* The template's own reference is the answer, alone. */
	KUNIT_EXPECT_TRUE(test, tc_ref_note(&c, TC_TROOT, 258, 0, 0, TC_TROOT));
	KUNIT_EXPECT_EQ(test, c.nr, 1U);
	KUNIT_EXPECT_EQ(test, c.ino[0], 258ULL);
}

static void tc_ref_note_is_bounded(struct kunit *test)
{
	struct tc_ref_cands c = { };
	u64 ino;

	/* A thousand members' copies: TC_BIND_TRIES candidates, no more. */
	for (ino = 257; ino < 1257; ino++)
		KUNIT_EXPECT_FALSE(test, tc_ref_note(&c, 1000 + ino, ino,
						     -4096ULL, -4096ULL,
						     TC_TROOT));
	KUNIT_EXPECT_EQ(test, c.nr, (unsigned int)TC_BIND_TRIES);
	KUNIT_EXPECT_EQ(test, c.ino[TC_BIND_TRIES - 1],
			257ULL + TC_BIND_TRIES - 1);
}

/* A lineage of @n parents, parent i's UUID all bytes i + 1. */
static void tc_lineage_fill(struct tc_lineage *l, int n)
{
	int i;

	l->n = n;
	l->ids = 0;
	for (i = 0; i < n; i++)
		memset(l->parent[i], i + 1, BTRFS_UUID_SIZE);
}

/*
 * tc_lineage_hops() compares under tc_groups_lock what the reader read
 * before it: the hop of the first parent that is the template's UUID or,
 * if the template was received, its received UUID; nothing past n, and
 * nothing past the hops its caller looks (a group's TC_AUTO_HOPS in a
 * lineage read as far as a scope's snapshots follow).
 */
static void tc_lineage_hops_counts_snapshots_back(struct kunit *test)
{
	u8 uuid[BTRFS_UUID_SIZE], received[BTRFS_UUID_SIZE] = { };
	struct tc_lineage l;

	tc_lineage_fill(&l, 3);
	memset(uuid, 1, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), 1);
	memset(uuid, 3, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), 3);
	/* Past the lineage's end: what the reader did not read. */
	memset(uuid, 4, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), -EXDEV);
	l.n = 2;
	memset(uuid, 3, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), -EXDEV);
	/* Received from the subvolume a parent is: that hop. */
	memset(uuid, 9, sizeof(uuid));
	memset(received, 2, sizeof(received));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), 2);
	/* Not received: an empty UUID matches no parent, not even an empty one. */
	memset(received, 0, sizeof(received));
	memset(l.parent[0], 0, BTRFS_UUID_SIZE);
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), -EXDEV);
	/* Five back: found within 8 hops, not within 4. */
	tc_lineage_fill(&l, TC_LINEAGE_HOPS);
	memset(uuid, 5, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), -EXDEV);
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received,
					      TC_LINEAGE_HOPS), 5);
	/* No parents: a subvolume that is no snapshot. */
	tc_lineage_fill(&l, 0);
	memset(uuid, 1, sizeof(uuid));
	KUNIT_EXPECT_EQ(test, tc_lineage_hops(&l, uuid, received, 4), -EXDEV);
}

static struct kunit_case tc_btrfs_cases[] = {
	KUNIT_CASE(tc_ref_note_picks_the_templates_own_reference),
	KUNIT_CASE(tc_ref_note_is_bounded),
	KUNIT_CASE(tc_same_bytes_regular_extents),
	KUNIT_CASE(tc_same_bytes_merged_maps),
	KUNIT_CASE(tc_same_bytes_proves_nothing_from_holes),
	KUNIT_CASE(tc_same_bytes_compressed_extents),
	KUNIT_CASE(tc_lineage_hops_counts_snapshots_back),
	{}
};

static struct kunit_suite tc_btrfs_suite = {
	.name = "totalcow_btrfs",
	.test_cases = tc_btrfs_cases,
};

kunit_test_suite(tc_btrfs_suite);
