// SPDX-License-Identifier: GPL-2.0
/*
 * memcpy-time kernel|libc TOTAL_MIB CHUNK_KIB: the time of one memcpy of
 * TOTAL_MIB MiB, copied CHUNK_KIB KiB at a time from a source buffer that
 * was just written into one reused destination buffer, the way a
 * dm-totalcow miss copies a fill's pages (just written by the origin's
 * read) into the reader's buffer (fio's one buffer, reused). Both buffers
 * stay hot in the CPU's caches: the reference is the fastest copy of
 * those bytes, so a miss measured against it is charged for everything
 * but the copy. Prints the seconds, best of three passes.
 *
 * "kernel" copies with the guest kernel's memcpy: UML never applies
 * x86's alternatives (arch/um/kernel/um_arch.c), so its memcpy is always
 * memcpy_orig of arch/x86/lib/memcpy_64.S, whose loop moves 4 x 8 bytes
 * through registers; copy_orig() is that loop. "libc" is the C
 * library's memcpy (vector registers), which no kernel code uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy-orig.h"

int main(int argc, char **argv)
{
	size_t total, chunk, off;
	double best = 0;
	char *src, *dst;
	int pass, orig;

	if (argc != 4 || (strcmp(argv[1], "kernel") && strcmp(argv[1], "libc")) ||
	    atol(argv[2]) <= 0 || atol(argv[3]) <= 0) {
		fprintf(stderr, "usage: memcpy-time kernel|libc TOTAL_MIB CHUNK_KIB\n");
		return 2;
	}
	orig = !strcmp(argv[1], "kernel");
	total = (size_t)atol(argv[2]) << 20;
	chunk = (size_t)atol(argv[3]) << 10;
	src = aligned_alloc(4096, chunk);
	dst = aligned_alloc(4096, chunk);
	if (!src || !dst)
		return 1;
	memset(src, 0x5a, chunk);
	memset(dst, 0, chunk);
	for (pass = 0; pass < 3; pass++) {
		double t0 = now(), t;

		for (off = 0; off < total; off += chunk) {
			if (orig)
				copy_orig(dst, src, chunk);
			else
				memcpy(dst, src, chunk);
			/* Each copy happens: the compiler may not merge them. */
			__asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");
		}
		t = now() - t0;
		if (!pass || t < best)
			best = t;
	}
	printf("%.9f\n", best);
	return dst[chunk - 1] != 0x5a;
}
