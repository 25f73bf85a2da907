// SPDX-License-Identifier: GPL-2.0
/*
 * miss-floor DEVICE TOTAL_MIB CHUNK_KIB: the least a read cache that keeps
 * its own copy can add to a sequential read, measured without any cache.
 *
 * Four kinds of pass over the first TOTAL_MIB MiB of DEVICE (dm-linear
 * over the disk), CHUNK_KIB KiB per O_DIRECT pread, in the same process:
 *   direct  each chunk read into one reused buffer (what dm-linear does
 *           for fio's one buffer);
 *   land    each chunk read into its own place in a TOTAL_MIB region (the
 *           cache's memory: it keeps every block it read, so the data lands
 *           in memory the reader does not own), and nothing else;
 *   cache   as land, then each chunk copied into the reused buffer with
 *           memcpy_orig's loop (the miss's copy into the reader's pages, by
 *           the guest kernel's memcpy);
 *   copy    the copy alone: each chunk of the region, out of the CPU's
 *           caches by then, copied into the reused buffer.
 * The region is written once before timing, so no pass pays page faults;
 * it is larger than the CPU's caches, as a cache's fills are. "cache" has
 * no allocation, no index, no locking and no bio of its own: its time over
 * "direct" is a floor for any miss that reads the origin once into memory
 * of its own and copies it to the reader. The cache pass also times its
 * copies alone (the CPU's time-stamp counter around each, as a share of
 * the pass's): the copy after landing, measured, not a difference of two
 * passes. Prints "direct land cache copy landed-copy" in seconds, each
 * the best of three passes; the kinds take turns.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "copy-orig.h"

static int read_at(int fd, char *buf, size_t len, off_t off)
{
	ssize_t got = pread(fd, buf, len, off);

	if (got != (ssize_t)len) {
		perror("miss-floor: pread");
		return -1;
	}
	return 0;
}

enum { DIRECT, LAND, CACHE, COPY, KINDS };

int main(int argc, char **argv)
{
	double best[KINDS] = { 0 }, best_copy = 0;
	size_t total, chunk, off;
	char *buf, *region;
	int fd, pass, how;

	if (argc != 4 || atol(argv[2]) <= 0 || atol(argv[3]) <= 0 ||
	    (atol(argv[3]) & 3)) {
		fprintf(stderr, "usage: miss-floor DEVICE TOTAL_MIB CHUNK_KIB (a multiple of 4)\n");
		return 2;
	}
	total = (size_t)atol(argv[2]) << 20;
	chunk = (size_t)atol(argv[3]) << 10;
	if (total % chunk) {
		fprintf(stderr, "miss-floor: TOTAL_MIB is not a multiple of CHUNK_KIB\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	buf = aligned_alloc(4096, chunk);
	region = aligned_alloc(4096, total);
	if (!buf || !region)
		return 1;
	memset(buf, 0, chunk);
	memset(region, 0, total);
	for (pass = 0; pass < 3 * KINDS; pass++) {
		unsigned long long c0, c1, copying = 0;
		double t0, t;

		how = pass % KINDS;
		t0 = now();
		c0 = __rdtsc();
		for (off = 0; off < total; off += chunk) {
			unsigned long long c;

			if (how != COPY &&
			    read_at(fd, how == DIRECT ? buf : region + off, chunk, off))
				return 1;
			if (how != CACHE && how != COPY)
				continue;
			c = __rdtsc();
			copy_orig(buf, region + off, chunk);
			copying += __rdtsc() - c;
		}
		c1 = __rdtsc();
		t = now() - t0;
		if (pass < KINDS || t < best[how])
			best[how] = t;
		if (how == CACHE && (pass < KINDS ||
				     t * copying / (c1 - c0) < best_copy))
			best_copy = t * copying / (c1 - c0);
	}
	printf("%.9f %.9f %.9f %.9f %.9f\n", best[DIRECT], best[LAND], best[CACHE],
	       best[COPY], best_copy);
	/* The last pass copied the region's last chunk, as read. */
	return memcmp(buf, region + total - chunk, chunk) != 0;
}
