/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TotalCOW one-byte page signatures (paper §2.2): bit 7 says the member's
 * page is private (copied on write in memory, never a sharing candidate),
 * bits 0-6 are a hash of the page's content. A full compare happens only
 * when the candidate is not private and the hashes match.
 */
#ifndef TOTALCOW_SIG_H
#define TOTALCOW_SIG_H

#include <linux/types.h>
#include <linux/xxhash.h>

#define TC_SIG_PRIVATE	0x80
#define TC_SIG_HASH	0x7f
/* A template page whose hash is not known yet. */
#define TC_SIG_UNKNOWN	0xff

/* The 7-bit content hash of @len bytes at @data. */
static inline u8 tc_sig_hash(const void *data, size_t len)
{
	u64 h = xxh64(data, len, 0);

	return (h ^ (h >> 7) ^ (h >> 14) ^ (h >> 21)) & TC_SIG_HASH;
}

enum tc_screen {
	TC_SCREEN_COMPARE,	/* go on to the full compare */
	TC_SCREEN_PRIVATE,	/* the member page is private */
	TC_SCREEN_HASH,		/* the hashes differ */
};

/* Screen a member page of signature @sig against a template hash @thash. */
static inline enum tc_screen tc_sig_screen(u8 sig, u8 thash)
{
	if (sig & TC_SIG_PRIVATE)
		return TC_SCREEN_PRIVATE;
	if ((sig & TC_SIG_HASH) != (thash & TC_SIG_HASH))
		return TC_SCREEN_HASH;
	return TC_SCREEN_COMPARE;
}

#endif /* TOTALCOW_SIG_H */
