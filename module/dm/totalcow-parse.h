/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow argument parsing: cache sizes and whitelist ranges, strict.
 */
#ifndef TOTALCOW_PARSE_H
#define TOTALCOW_PARSE_H

#include <linux/types.h>

#include "totalcow-cache.h"
#include "totalcow-whitelist.h"

/* A cache size as the admin wrote it: MiB, or percent of RAM. */
struct tc_size {
	unsigned long long value;
	bool percent;
};

int tc_parse_size(const char *s, struct tc_size *size);
unsigned long tc_size_blocks(const struct tc_size *size,
			     unsigned long ram_pages);
int tc_parse_admit(const char *s, enum tc_admit *admit);

/* The largest readahead window: 4 MiB, 16 fills of TC_FILL_MAX blocks. */
#define TC_READAHEAD_MAX_KIB 4096
int tc_parse_readahead(const char *s, unsigned int *blocks);
int tc_parse_ranges(unsigned int argc, char **argv, sector_t dev_sectors,
		    struct tc_range *r, const char **error);

#endif /* TOTALCOW_PARSE_H */
