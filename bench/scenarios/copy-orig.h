/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What memcpy-time.c and miss-floor.c share: the guest kernel's memcpy
 * loop and a monotonic clock. UML never applies x86's alternatives
 * (arch/um/kernel/um_arch.c), so its memcpy is always memcpy_orig of
 * arch/x86/lib/memcpy_64.S, whose loop moves 4 x 8 bytes through
 * registers; copy_orig() is that loop.
 */
#ifndef COPY_ORIG_H
#define COPY_ORIG_H

#include <stddef.h>
#include <time.h>

/* memcpy_orig's forward loop; @n is a nonzero multiple of 32. */
static inline void copy_orig(void *d, const void *s, size_t n)
{
	__asm__ __volatile__("1:\n\t"
			     "movq 0(%1), %%r8\n\t"
			     "movq 8(%1), %%r9\n\t"
			     "movq 16(%1), %%r10\n\t"
			     "movq 24(%1), %%r11\n\t"
			     "leaq 32(%1), %1\n\t"
			     "movq %%r8, 0(%0)\n\t"
			     "movq %%r9, 8(%0)\n\t"
			     "movq %%r10, 16(%0)\n\t"
			     "movq %%r11, 24(%0)\n\t"
			     "leaq 32(%0), %0\n\t"
			     "subq $32, %2\n\t"
			     "jnz 1b"
			     : "+r"(d), "+r"(s), "+r"(n)
			     :
			     : "r8", "r9", "r10", "r11", "memory", "cc");
}

static inline double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

#endif /* COPY_ORIG_H */
