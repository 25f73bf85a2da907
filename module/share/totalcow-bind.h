/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Member files bound to their template files, and the proofs that a
 * member's pages are the template's (totalcow-bind.c): what the policy
 * (totalcow-share.c, totalcow-mmap.c) and the groups (totalcow-group.c)
 * use of them.
 */
#ifndef TOTALCOW_BIND_H
#define TOTALCOW_BIND_H

#include <linux/fs.h>
#include <linux/page_alias.h>
#include <linux/path.h>
#include <linux/refcount.h>
#include <linux/rhashtable-types.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "totalcow-group.h"

/* The largest window one read miss shares at once, in pages (4 MiB). */
#define TC_SHARE_WINDOW 1024
/*
 * The window a miss proves by extents: its share window widened to whole
 * block aliases (PAGE_ALIAS_BLOCK pages in one slot, a 64th of the memory
 * of an alias per page), at most a block more.
 */
#define TC_PROOF_WINDOW (TC_SHARE_WINDOW + PAGE_ALIAS_BLOCK)

/*
 * An alias entry carries the signature byte and the identity of the
 * binding that made it, so that an alias left from an old binding never
 * stands for a page of a later binding's template.
 */
#define TC_ID_BITS	(BITS_PER_LONG == 64 ? 32 : 16)
#define TC_ID_MASK	((1UL << TC_ID_BITS) - 1)

/*
 * The policy's bytes for one page of a bound member file: the member
 * page's signature (TC_SIG_PRIVATE | 7-bit hash) and the hash of the
 * template's page (TC_SIG_UNKNOWN until computed). They live in chunks of
 * TC_SIG_CHUNK pages, allocated when a page of the chunk is first looked
 * at and charged to the memory cgroup of the task that reads it, so that a
 * file costs in proportion to what is read of it, not to its size.
 */
struct tc_sig_pair {
	u8 sig;
	u8 thash;
};

#define TC_SIG_CHUNK_SHIFT	(PAGE_SHIFT - 1)
#define TC_SIG_CHUNK		BIT(TC_SIG_CHUNK_SHIFT)
#define TC_SIG_CHUNK_BYTES	(TC_SIG_CHUNK * sizeof(struct tc_sig_pair))

/* A member file bound to its template file. */
struct tc_file {
	struct rhash_head node;
	struct address_space *mapping;	/* the key */
	struct path tpath;		/* the template file */
	struct inode *tinode;		/* its inode, write-denied while bound */
	struct tc_group *group;
	struct tc_member *member;	/* valid while bound */
	struct list_head list;		/* in group->files */
	struct list_head mlist;		/* in member->files */
	struct inode *unbind_inode;	/* between unbind begin and finish */
	refcount_t ref;
	unsigned long id;		/* in its alias entries */
	bool dead;			/* unbound: make no more aliases */
	pgoff_t nr_pages;		/* of the template file, when bound */
	struct xarray sigs;		/* chunk index -> struct tc_sig_pair[] */
	struct rcu_work free_work;
};

/*
 * Binding and unbinding files; never held across an allocation that can
 * enter reclaim, because eviction (->release) takes it.
 */
extern spinlock_t tc_files_lock;

/* Files unbound (and other list entries walked) per hold of a lock. */
#define TC_UNBIND_BATCH 64

static inline void *tc_alias(struct tc_file *tf, u8 sig)
{
	BUILD_BUG_ON(TC_ID_BITS + 8 + PAGE_ALIAS_SHIFT > BITS_PER_XA_VALUE);
	return xa_mk_page_alias((tf->id << 8) | sig);
}

/* Was alias @entry made by the binding @tf? */
static inline bool tc_alias_ours(struct tc_file *tf, void *entry)
{
	return (xa_page_alias_data(entry) >> 8) == tf->id;
}

bool tc_alias_fence(struct tc_file *tf);
struct tc_sig_pair *tc_sigs(struct tc_file *tf, pgoff_t index, gfp_t gfp);

struct tc_file *tc_file_bind(struct file *file, struct address_space *mapping);
struct tc_file *tc_file_lookup(struct address_space *mapping);
struct tc_file *tc_file_get(struct address_space *mapping);
void tc_file_put(struct tc_file *tf);
void tc_file_release(struct address_space *mapping);
void tc_unbind_files(struct tc_group *g, struct tc_member *m);
void tc_files_flush(void);

bool tc_proof_changed(struct tc_file *tf, u64 version);
unsigned long tc_alias_proven(struct tc_file *tf, pgoff_t index,
			      pgoff_t last, const unsigned long *live);
bool tc_file_proven(struct tc_file *tf, u64 *version);

int tc_bind_init(void);

#if IS_ENABLED(CONFIG_KUNIT)
/*
 * Static without KUnit (VISIBLE_IF_KUNIT): totalcow_share_policy_kunit.c
 * makes a binding by hand and enters it in the lookups as
 * tc_file_bind() does.
 */
void tc_sigs_free(struct tc_file *tf);
unsigned long tc_file_new_id(void);
int tc_file_hash(struct tc_file *tf);
void tc_file_unlink(struct tc_file *tf);
#endif

#endif /* TOTALCOW_BIND_H */
