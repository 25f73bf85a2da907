// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow argument parsing. Numbers are decimal, without signs,
 * suffixes or surrounding space; anything else is rejected with -EINVAL.
 */

#include <linux/ctype.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "totalcow-parse.h"

/* Largest cache: 1 TiB, far beyond any RAM this runs with. */
#define TC_SIZE_MAX_MIB BIT_ULL(20)

/*
 * "<MiB>" or "<percent>%": a cache of 1 MiB .. 1 TiB, or 1..100 % of RAM.
 */
int tc_parse_size(const char *s, struct tc_size *size)
{
	char buf[24];
	size_t len = strlen(s);
	bool percent = len && s[len - 1] == '%';
	unsigned long long v;

	if (percent)
		len--;
	if (!len || len >= sizeof(buf) || !isdigit(s[0]))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (kstrtoull(buf, 10, &v) || !v)
		return -EINVAL;
	if (percent ? v > 100 : v > TC_SIZE_MAX_MIB)
		return -EINVAL;
	size->value = v;
	size->percent = percent;
	return 0;
}

/* Capacity in cache blocks (pages) for @size with @ram_pages of RAM. */
unsigned long tc_size_blocks(const struct tc_size *size,
			     unsigned long ram_pages)
{
	if (size->percent)
		return max(1UL, (unsigned long)div_u64((u64)ram_pages * size->value, 100));
	return size->value << (20 - PAGE_SHIFT);
}

static int tc_parse_sector(const char *s, sector_t *v)
{
	unsigned long long x;

	if (!isdigit(s[0]) || kstrtoull(s, 10, &x))
		return -EINVAL;
	*v = x;
	return 0;
}

/*
 * Parse @argc words "<start> <length> ..." (sectors) into @r, one range
 * per pair. Every range must be non-empty and end within @dev_sectors.
 * On error *@error says what is wrong.
 */
int tc_parse_ranges(unsigned int argc, char **argv, sector_t dev_sectors,
		    struct tc_range *r, const char **error)
{
	unsigned int i;

	if (!argc || argc % 2) {
		*error = "ranges must be <start> <length> pairs";
		return -EINVAL;
	}
	for (i = 0; i < argc / 2; i++) {
		sector_t start, len, end;

		if (tc_parse_sector(argv[2 * i], &start) ||
		    tc_parse_sector(argv[2 * i + 1], &len)) {
			*error = "range start and length must be decimal sector counts";
			return -EINVAL;
		}
		if (!len) {
			*error = "range length must not be 0";
			return -EINVAL;
		}
		if (check_add_overflow(start, len, &end) || end > dev_sectors) {
			*error = "range ends beyond the device";
			return -EINVAL;
		}
		r[i].start = start;
		r[i].end = end;
	}
	return 0;
}

/* "first" or "second", nothing else. */
int tc_parse_admit(const char *s, enum tc_admit *admit)
{
	if (!strcmp(s, "first"))
		*admit = TC_ADMIT_FIRST;
	else if (!strcmp(s, "second"))
		*admit = TC_ADMIT_SECOND;
	else
		return -EINVAL;
	return 0;
}

/*
 * A readahead window in KiB: 0 (off) or a whole number of blocks up to
 * TC_READAHEAD_MAX_KIB; *@blocks gets it in blocks.
 */
int tc_parse_readahead(const char *s, unsigned int *blocks)
{
	unsigned int kib;

	if (!isdigit(s[0]) || kstrtouint(s, 10, &kib) || kib > TC_READAHEAD_MAX_KIB ||
	    kib % (TC_BLOCK_SIZE / SZ_1K))
		return -EINVAL;
	*blocks = kib / (TC_BLOCK_SIZE / SZ_1K);
	return 0;
}

#if IS_ENABLED(CONFIG_DM_TOTALCOW_PARSE_KUNIT_TEST)
#include "totalcow_parse_kunit.c"
#endif
