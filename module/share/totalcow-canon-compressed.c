// SPDX-License-Identifier: GPL-2.0-only
/*
 * The canonical data cache's compressed extents
 * (docs/design/shared-extents.md, "Compressed extents"). A page of a file in a compressed extent is
 * a page of the extent's decompressed bytes, so its canonical page is
 * named by the extent and the page's place in them (tc_canon_zkey()), in
 * a second mapping of the scope (tc_canon_scope->zinode), never by a
 * logical address of its own.
 *
 * A read reads the whole extent as it is on disk, by logical address,
 * checks every sector against the checksum tree (btrfs checksums a
 * compressed extent's bytes on disk), and decompresses it into the pages
 * asked for, as btrfs's read of a file in that extent does
 * (btrfs_canon_decompress(), mm-patches/0017). The pages' bytes are then
 * what btrfs's own read gives any file whose extent item names that
 * extent, that length and that compression.
 *
 * Why such a page always holds the current bytes of its extent: as for a
 * regular page (totalcow-canon.c), its read inserts it, then looks the
 * checksums up after a full barrier, and a reservation bumps the
 * generation and then drops, or marks stale, every page whose extent's
 * bytes on disk meet the range handed out (tc_canon_zrange(): an extent
 * that begins up to TC_CANON_Z_MAX before the range may reach into it).
 */

#include <linux/pagemap.h>
#include <linux/slab.h>

#include "ctree.h"
#include "fs.h"
#include "bio.h"
#include "canon.h"
#include "compression.h"

#include "totalcow-canon.h"
#include "totalcow-canon-internal.h"
#include "totalcow-fleet.h"

#define TC_CANON_Z_PAGES	BIT(TC_CANON_Z_PAGE_BITS)

static_assert(TC_CANON_Z_MAX == BTRFS_MAX_COMPRESSED);
static_assert(TC_CANON_Z_MAX == BTRFS_MAX_UNCOMPRESSED);
static_assert(TC_CANON_Z_MAX / PAGE_SIZE <= TC_CANON_Z_PAGES);
static_assert(BTRFS_NR_COMPRESS_TYPES <= 4);
static_assert(TC_CANON_Z_MAX <= TC_CANON_LREAD_MAX);

/**
 * tc_canon_zkey - the key of a page of a compressed extent
 * @disk_bytenr: the extent's logical address
 * @disk_len: its length on disk
 * @type: its compression (BTRFS_COMPRESS_*)
 * @ram_bytes: its decompressed length
 * @offset: the page's offset into the extent's decompressed bytes
 * @key: set to the page's key
 *
 * Return: false if the page has none: @offset is not a page into the
 * extent's decompressed bytes, or the extent is not one btrfs writes
 * (longer than TC_CANON_Z_MAX on disk or decompressed, not 4 KiB aligned,
 * an unknown compression), or lies at or past TC_CANON_Z_LIMIT.
 */
bool tc_canon_zkey(u64 disk_bytenr, u64 disk_len, int type, u64 ram_bytes,
		   u64 offset, u64 *key)
{
	u64 index;

	if (type <= BTRFS_COMPRESS_NONE || type >= BTRFS_NR_COMPRESS_TYPES ||
	    !disk_len || disk_len > TC_CANON_Z_MAX ||
	    !IS_ALIGNED(disk_len, SZ_4K) || !IS_ALIGNED(disk_bytenr, SZ_4K) ||
	    disk_bytenr >= TC_CANON_Z_LIMIT || !PAGE_ALIGNED(offset) ||
	    !ram_bytes || ram_bytes > TC_CANON_Z_MAX || offset >= ram_bytes)
		return false;
	index = disk_bytenr |
		((disk_len / SZ_4K - 1) << TC_CANON_Z_LEN_SHIFT) |
		((u64)type << TC_CANON_Z_TYPE_SHIFT) | (offset >> PAGE_SHIFT);
	*key = (index << PAGE_SHIFT) |
	       ((DIV_ROUND_UP(ram_bytes, PAGE_SIZE) - 1) << 1) | TC_CANON_KEY_Z;
	return true;
}

/**
 * tc_canon_zrange - the compressed pages a range of the disk may hold
 * @start: the range's logical address
 * @len: its length
 * @first: set to the first index of the second mapping to drop
 * @last: set to the last
 *
 * Every extent whose bytes on disk meet [@start, @start + @len) begins
 * after @start - TC_CANON_Z_MAX and before the range's end.
 *
 * Return: false if no compressed page can be in that range.
 */
bool tc_canon_zrange(u64 start, u64 len, pgoff_t *first, pgoff_t *last)
{
	u64 lo, hi;

	if (!len || start >= TC_CANON_Z_LIMIT)
		return false;
	/* Extents begin on 4 KiB: the first that may reach in, the last. */
	lo = start > TC_CANON_Z_MAX ? start - TC_CANON_Z_MAX + 1 : 0;
	hi = min(start + len - 1, TC_CANON_Z_LIMIT - 1);
	*first = round_up(lo, SZ_4K);
	*last = round_down(hi, SZ_4K) | (SZ_4K - 1);
	return true;
}

/* One extent's read, for the pages of it that a read asked for. */
struct tc_canon_zio {
	struct tc_canon_scope *s;
	int type;
	unsigned int nr_out;
	struct cgroup_subsys_state *css;	/* its tags (totalcow-fleet.c) */
	struct tc_canon_lread r;		/* the extent as it is on disk */
	struct folio *in[TC_CANON_Z_MAX / PAGE_SIZE];
	struct folio *out[TC_CANON_Z_PAGES];
	u8 csums[];
};

/* Decompress the extent into the pages asked for. */
static bool tc_canon_zdecompress(struct tc_canon_zio *io)
{
	struct btrfs_fs_info *fs_info = io->s->cfs->fs_info;
	struct btrfs_bio *dest;
	unsigned int i;
	int ret;

	dest = btrfs_bio_alloc(io->nr_out, REQ_OP_READ, fs_info, NULL, NULL);
	for (i = 0; i < io->nr_out; i++)
		bio_add_folio_nofail(&dest->bio, io->out[i], PAGE_SIZE, 0);
	ret = btrfs_canon_decompress(fs_info, io->type, io->in, io->r.nr,
				     io->r.len, dest,
				     (u64)tc_canon_zindex_first(io->out[0]->index) <<
				     PAGE_SHIFT);
	bio_put(&dest->bio);
	return !ret;
}

static void tc_canon_zfree(struct tc_canon_zio *io)
{
	unsigned int i;

	for (i = 0; i < io->r.nr; i++)
		if (io->in[i])
			folio_put(io->in[i]);
	kfree(io);
}

/* In btrfs's end-I/O worker (process context), as its own reads end. */
static void tc_canon_zend_io(struct btrfs_bio *bbio)
{
	struct tc_canon_lread *r = bbio->private;
	struct tc_canon_zio *io = container_of(r, struct tc_canon_zio, r);
	int ret = tc_canon_lread_end(r, bbio);
	bool ok = !ret;
	unsigned int i;

	if (ret == -EINPROGRESS)
		return;
	ok = ok && tc_canon_zdecompress(io);
	if (!ok)
		atomic64_inc(&io->s->read_failures);
	/* As for a regular page: a reservation during the read (stale). */
	for (i = 0; i < io->nr_out; i++)
		tc_fleet_untag_folio(io->out[i], NULL);
	if (io->css)
		css_put(io->css);
	for (i = 0; i < io->nr_out; i++)
		folio_end_read(io->out[i],
			       ok && !tc_canon_folio_stale(io->out[i]));
	tc_canon_zfree(io);
}

/*
 * Read @nr locked folios of the second mapping, all pages of one
 * extent, in ascending order.
 */
static void tc_canon_zread(struct tc_canon_scope *s, struct folio **out,
			   unsigned int nr)
{
	struct btrfs_fs_info *fs_info = s->cfs->fs_info;
	pgoff_t index = out[0]->index;
	u64 logical = tc_canon_zindex_bytenr(index);
	u32 len = tc_canon_zindex_len(index);
	struct tc_canon_zio *io;
	unsigned int i;

	atomic64_add(nr, &s->reads);
	/* A stale mark from before this read no longer applies. */
	for (i = 0; i < nr; i++)
		folio_clear_checked(out[i]);
	/* Pairs with the barrier in tc_canon_forget(). */
	smp_mb();
	if (!IS_ALIGNED(logical | len, fs_info->sectorsize))
		goto fail;
	/* Charged, as the pages read, to the reader whose miss reads them. */
	io = kzalloc(struct_size(io, csums,
				 (len >> fs_info->sectorsize_bits) * fs_info->csum_size),
		     GFP_NOFS | __GFP_ACCOUNT);
	if (!io)
		goto fail;
	io->s = s;
	io->type = tc_canon_zindex_type(index);
	io->nr_out = nr;
	memcpy(io->out, out, nr * sizeof(*out));
	io->r = (struct tc_canon_lread) {
		.fs_info = fs_info,
		.logical = logical,
		.len = len,
		.nr = DIV_ROUND_UP(len, PAGE_SIZE),
		.folios = io->in,
		.csums = io->csums,
		.end_io = tc_canon_zend_io,
	};
	if (tc_canon_lread_prepare(&io->r))
		goto free;
	for (i = 0; i < io->r.nr; i++) {
		io->in[i] = folio_alloc(GFP_NOFS | __GFP_ACCOUNT, 0);
		if (!io->in[i])
			goto free;
	}
	/* Who may wait for this read: see totalcow-fleet.c. */
	io->css = tc_fleet_tag_folio(out[0]);
	for (i = 1; i < nr; i++)
		WRITE_ONCE(out[i]->private, io->css);
	tc_canon_lread_submit(&io->r);
	return;

free:
	tc_canon_zfree(io);
fail:
	atomic64_inc(&s->read_failures);
	for (i = 0; i < nr; i++)
		folio_unlock(out[i]);
}

static int tc_canon_zread_folio(struct file *file, struct folio *folio)
{
	tc_canon_zread(folio->mapping->host->i_private, &folio, 1);
	return 0;
}

/* The folios, locked and in the mapping, an extent at a time. */
static void tc_canon_zreadahead(struct readahead_control *ractl)
{
	struct tc_canon_scope *s = ractl->mapping->host->i_private;
	struct folio *batch[TC_CANON_Z_PAGES], *folio;
	unsigned int n = 0;

	while ((folio = readahead_folio(ractl))) {
		if (n && (n == TC_CANON_Z_PAGES ||
			  tc_canon_zindex_first(folio->index) !=
			  tc_canon_zindex_first(batch[0]->index))) {
			tc_canon_zread(s, batch, n);
			n = 0;
		}
		batch[n++] = folio;
	}
	if (n)
		tc_canon_zread(s, batch, n);
}

const struct address_space_operations tc_canon_zaops = {
	.read_folio	= tc_canon_zread_folio,
	.readahead	= tc_canon_zreadahead,
	.dirty_folio	= noop_dirty_folio,
	.migrate_folio	= filemap_migrate_folio,
};
