// SPDX-License-Identifier: GPL-2.0-only
/*
 * TotalCOW page-cache sharing: private mappings of member files
 * (docs/design/mapped-files.md). A private mapping (MAP_PRIVATE:
 * executables, libraries) of a member file whose every page the file
 * system records as the template's maps the template file instead,
 * through a backing file that keeps the member's path in /proc/PID/maps
 * and holds the template write-denied while it lives. When the member is
 * truncated, its substituted mappings map the member again.
 */

#include <linux/backing-file.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/iversion.h>
#include <linux/mm.h>
#include <linux/page_alias.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "totalcow-bind.h"
#include "totalcow-canon.h"
#include "totalcow-extent-mmap.h"
#include "totalcow-group.h"
#include "totalcow-mmap.h"

/*
 * The backing files tc_mmap_file() handed out, alive: each holds a write
 * denial of its template inode, so that the template's pages, which its
 * mappings show, cannot change while any of them lives, whatever becomes
 * of the group (deleted, its template made writable). Released with the
 * file (->backing_release, from __fput()).
 *
 * Each also keeps the member file that was mapped (@user) and the
 * member's i_version its proof saw: when the member is truncated, its
 * mappings map @user from then on (tc_size_changed()), as a mapping of a
 * plain file would. @dropped: that was done or is being done. A backing
 * file of a clone (totalcow-extent-mmap.c) holds a user of @clone instead
 * of a write denial: nobody can write a clone.
 */
struct tc_alias_file {
	struct hlist_node node;		/* in tc_alias_files, by @file */
	struct hlist_node inode_node;	/* in tc_alias_inodes, by member inode */
	struct file *file;
	struct file *user;
	struct tc_clone *clone;		/* or NULL: @file is a template's */
	u64 version;
	bool dropped;
};

static DEFINE_HASHTABLE(tc_alias_files, 10);
static DEFINE_HASHTABLE(tc_alias_inodes, 10);
static DEFINE_SPINLOCK(tc_alias_files_lock);

/*
 * Keep @alias, handed out for a mapping of @user whose proof saw
 * @version; on success, the record holds the caller's user of @clone.
 */
int tc_mmap_track(struct file *alias, struct file *user, u64 version,
		  struct tc_clone *clone)
{
	struct tc_alias_file *af = kmalloc(sizeof(*af), GFP_KERNEL_ACCOUNT);

	if (!af)
		return -ENOMEM;
	af->file = alias;
	af->user = get_file(user);
	af->clone = clone;
	af->version = version;
	af->dropped = false;
	spin_lock(&tc_alias_files_lock);
	hash_add(tc_alias_files, &af->node, (unsigned long)alias);
	hash_add(tc_alias_inodes, &af->inode_node,
		 (unsigned long)file_inode(user));
	spin_unlock(&tc_alias_files_lock);
	return 0;
}

/* ->backing_release: the last reference to a backing file went. */
void tc_backing_release(struct file *file)
{
	struct tc_alias_file *af, *found = NULL;

	spin_lock(&tc_alias_files_lock);
	hash_for_each_possible(tc_alias_files, af, node, (unsigned long)file) {
		if (af->file == file) {
			hash_del(&af->node);
			hash_del(&af->inode_node);
			found = af;
			break;
		}
	}
	spin_unlock(&tc_alias_files_lock);
	if (!found)
		return;		/* overlayfs', fuse's, or one we did not keep */
	if (found->clone)
		tc_extent_clone_put(found->clone);
	else
		allow_write_access(file);
	fput(found->user);
	kfree(found);
}

/*
 * The mappings of @alias map @user from now on, and their private copies
 * past @user's end of file go (they joined @user's i_mmap after
 * truncate_pagecache() zapped those of its other mappings).
 */
static void tc_unsubstitute(struct file *alias, struct file *user)
{
	struct inode *inode = file_inode(user);

	/* Killed meanwhile: the mappings not reached keep the template's. */
	page_alias_unsubstitute(alias, user);
	unmap_mapping_range(inode->i_mapping,
			    round_up(i_size_read(inode), PAGE_SIZE), 0, 1);
}

#define TC_UNSUBSTITUTE_BATCH	8

/*
 * ->size_changed: @inode, a member, was truncated (its inode lock held);
 * ->write_opened: it is being opened for writing. Every substituted
 * mapping of it maps the member from now on: SIGBUS past its new end of
 * file, its own data within (the partial last page zeroed past the end,
 * pages that a later extension adds, every write to come in the pages
 * not written through the mapping), exactly as a mapping of the member
 * itself. A backing file being released has no mapping left.
 */
void tc_size_changed(struct inode *inode)
{
	struct file *alias[TC_UNSUBSTITUTE_BATCH], *user[TC_UNSUBSTITUTE_BATCH];
	struct tc_alias_file *af;
	struct hlist_node *tmp;
	unsigned int i, j, n;

	do {
		n = 0;
		spin_lock(&tc_alias_files_lock);
		/*
		 * A record leaves the inode table as it is taken, so that each
		 * pass meets only records no pass took: O(mappings) in all,
		 * however many backing files the member has.
		 */
		hash_for_each_possible_safe(tc_alias_inodes, af, tmp,
					    inode_node, (unsigned long)inode) {
			if (file_inode(af->user) != inode)
				continue;
			hash_del(&af->inode_node);
			af->dropped = true;
			if (!atomic_long_inc_not_zero(&af->file->f_count))
				continue;
			alias[n] = af->file;
			user[n] = get_file(af->user);
			if (++n == TC_UNSUBSTITUTE_BATCH)
				break;
		}
		spin_unlock(&tc_alias_files_lock);
		for (i = 0; i < n; i++) {
			/* One walk covers every backing file of one template. */
			for (j = 0; j < i; j++)
				if (alias[j]->f_mapping == alias[i]->f_mapping)
					break;
			if (j == i)
				tc_unsubstitute(alias[i], user[i]);
			fput(alias[i]);
			fput(user[i]);
		}
	} while (n == TC_UNSUBSTITUTE_BATCH);
}

/*
 * A mapping that tc_mmap_file() counted as shared maps @file after all
 * (do_mmap() merged it with a neighbour, or the LSM refused the backing
 * file): count it as the private mapping it is.
 */
static void tc_mmap_recount(struct file *file, bool clone)
{
	struct tc_canon_scope *s;
	struct tc_file *tf;

	if (clone) {
		s = tc_canon_hold(file_inode(file));
		if (s) {
			tc_canon_count_mmap_unshared(s);
			tc_canon_release(s);
		}
		return;
	}
	tf = tc_file_get(file->f_mapping);
	if (tf) {
		tc_count(tf->group, TC_MMAPS_SHARED, -1);
		tc_count(tf->group, TC_MMAPS_PRIVATE, 1);
		tc_file_put(tf);
	}
}

/*
 * ->mmap_done: the mapping is in place, and maps @alias if @mapped. A
 * truncate of @file that ran between the proof in tc_mmap_file() and now
 * either marked @alias dropped before its walk (which may have missed the
 * new mapping) or came after the proof and moved i_version: map @file
 * after all. So for an open for writing since the proof: its
 * ->write_opened walk either found the record (dropped) or came before
 * the record was made, and then after the raise of i_writecount that
 * this lock section orders before the check below.
 */
void tc_mmap_done(struct file *file, struct file *alias, bool mapped)
{
	struct tc_alias_file *af;
	bool stale = false;

	if (!mapped) {
		spin_lock(&tc_alias_files_lock);
		hash_for_each_possible(tc_alias_files, af, node,
				       (unsigned long)alias)
			if (af->file == alias) {
				stale = !!af->clone;
				break;
			}
		spin_unlock(&tc_alias_files_lock);
		tc_mmap_recount(file, stale);
		return;
	}
	spin_lock(&tc_alias_files_lock);
	hash_for_each_possible(tc_alias_files, af, node, (unsigned long)alias) {
		if (af->file != alias)
			continue;
		/*
		 * A clone is @file as it was at the proof: a writer since
		 * opened it (raised i_writecount, or marked the record); a
		 * truncation after the check in tc_extent_mmap_file() marked
		 * it dropped.
		 */
		stale = af->dropped ||
			inode_is_open_for_write(file_inode(file)) ||
			(!af->clone &&
			 !inode_eq_iversion(file_inode(file), af->version));
		if (stale && !af->dropped) {
			hash_del(&af->inode_node);
			af->dropped = true;
		}
		break;
	}
	spin_unlock(&tc_alias_files_lock);
	if (stale)
		tc_unsubstitute(alias, file);
}

/*
 * ->mmap_file: a private mapping of a member file whose every page the
 * file system records as the template's maps the template file, so that
 * its pages are the
 * template's own (page cache, rmap and reclaim as for any file). The
 * backing file keeps the member's path for /proc/PID/maps and audit.
 *
 * The semantics (docs/design/mapped-files.md): the mapping shows the member's data as
 * of mmap(); a later change of the member file is not seen through it,
 * which POSIX allows for MAP_PRIVATE (stock Linux would show the change
 * in pages not yet written through the mapping).
 */
struct file *tc_mmap_file(struct file *file, unsigned long prot)
{
	struct address_space *mapping = file->f_mapping;
	struct file *alias = NULL;
	struct tc_file *tf;
	u64 version;

	tf = tc_file_get(mapping);
	if (!tf && !test_bit(AS_PAGE_ALIASES, &mapping->flags))
		tf = tc_file_bind(file, mapping);
	/* Not a member: a file in a sharing scope maps a clone. */
	if (!tf)
		return tc_extent_mmap_file(file);
	/*
	 * do_mmap() checks @file itself, its mount's noexec included, before
	 * the mapping maps the template (page_alias_mmap_install()).
	 */
	if (!(file->f_mode & FMODE_READ))
		goto private;
	/* Someone may write the member while it is mapped: keep it coherent. */
	if (inode_is_open_for_write(file_inode(file)))
		goto private;
	/*
	 * Before the proof takes the member's inode lock: a truncate, which
	 * holds it exclusively, either comes first (the proof then fails on
	 * the size) or finds the flag and calls ->size_changed.
	 */
	set_bit(AS_PAGE_ALIAS_MAPPED, &mapping->flags);
	if (!tc_file_proven(tf, &version))
		goto private;
	alias = backing_file_open(file, O_RDONLY | O_LARGEFILE, &tf->tpath,
				  file->f_cred);
	if (IS_ERR(alias)) {
		alias = NULL;
		goto private;
	}
	/* Writes to the template wait for the mapping's end (see above). */
	if (deny_write_access(alias)) {
		fput(alias);
		alias = NULL;
		goto private;
	}
	if (tc_mmap_track(alias, file, version, NULL)) {
		allow_write_access(alias);
		fput(alias);
		alias = NULL;
		goto private;
	}
	/* A change that raced with the open: map the member after all. */
	if (tc_proof_changed(tf, version)) {
		fput(alias);
		alias = NULL;
		goto private;
	}
	tc_count(tf->group, TC_MMAPS_SHARED, 1);
	goto out;
private:
	tc_count(tf->group, TC_MMAPS_PRIVATE, 1);
out:
	tc_file_put(tf);
	return alias;
}
