// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests for the clones that private mappings of shared extents map
 * (included at the end of totalcow-extent-mmap.c): what the last user,
 * the cap and a file system's close do with them. The clones here stand
 * on inodes of tmpfs and of the anonymous-inode file system (two super
 * blocks), which an iput() frees as it would delete a btrfs clone.
 */

#include <kunit/test.h>
#include <linux/anon_inodes.h>
#include <linux/completion.h>
#include <linux/kthread.h>
#include <linux/shmem_fs.h>

/* A published clone of @inode's (referenced here), with one user. */
static struct tc_clone *tc_test_clone(struct kunit *test, struct inode *inode,
				      u64 digest)
{
	struct tc_clone *c = kzalloc(sizeof(*c), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, c);
	ihold(inode);
	c->inode = inode;
	c->sb = inode->i_sb;
	c->size = i_size_read(inode);
	c->digest = digest;
	c->scope = U64_MAX;	/* no scope's: ids count up from 1 */
	c->users = 1;
	INIT_LIST_HEAD(&c->idle);
	btrfs_canon_enable();
	atomic_inc(&tc_clones_live);
	spin_lock(&tc_clones_lock);
	hash_add(tc_clones, &c->node, digest);
	hash_add_rcu(tc_clone_inodes, &c->inode_node, (unsigned long)inode);
	spin_unlock(&tc_clones_lock);
	return c;
}

static struct file *tc_test_shmem(struct kunit *test)
{
	struct file *f = shmem_file_setup("tc-clone-kunit", PAGE_SIZE, 0);

	KUNIT_ASSERT_FALSE(test, IS_ERR(f));
	return f;
}

static unsigned int tc_test_nr_idle(void)
{
	unsigned int n;

	spin_lock(&tc_clones_lock);
	n = tc_clones_nr_idle;
	spin_unlock(&tc_clones_lock);
	return n;
}

/*
 * The last user leaves a clone idle: still a clone (its reads stay its
 * own), listed idle; a file system's close frees the idle clones of its
 * super block only, and their inodes' references with them.
 */
static void tc_clone_last_user_leaves_it_idle_until_close(struct kunit *test)
{
	struct file *a = tc_test_shmem(test);
	struct file *b = anon_inode_getfile("tc-clone-kunit", &simple_dir_operations,
					    NULL, O_RDONLY);
	unsigned int idle0 = tc_test_nr_idle();
	struct tc_clone *ca, *cb;
	int count;

	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	ca = tc_test_clone(test, file_inode(a), 1);
	cb = tc_test_clone(test, file_inode(b), 2);
	count = atomic_read(&file_inode(a)->i_count);
	tc_extent_clone_put(ca);
	tc_extent_clone_put(cb);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), idle0 + 2);
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(a)));
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(a)->i_count), count);

	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(a)));
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(b)));
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(a)->i_count), count - 1);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), idle0 + 1);

	tc_extent_clone_close(file_inode(b)->i_sb);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(b)));
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), idle0);
	fput(a);
	fput(b);
}

/* A user back takes a clone off the idle list; a close then keeps it. */
static void tc_clone_in_use_survives_close(struct kunit *test)
{
	struct file *a = tc_test_shmem(test);
	struct tc_clone *c = tc_test_clone(test, file_inode(a), 3);
	unsigned int idle0 = tc_test_nr_idle();

	tc_extent_clone_put(c);
	spin_lock(&tc_clones_lock);
	if (!c->users++) {	/* as tc_clone_get() finds it */
		list_del_init(&c->idle);
		tc_clones_nr_idle--;
	}
	spin_unlock(&tc_clones_lock);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), idle0);
	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(a)));
	tc_extent_clone_put(c);
	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(a)));
	fput(a);
}

/*
 * At most TC_CLONE_IDLE_MAX idle clones: one more dooms the oldest, which
 * the reaper frees, not the put. Many clones of one inode stand for many
 * clones here.
 */
static void tc_clone_idle_ones_are_capped_oldest_first(struct kunit *test)
{
	struct file *a = tc_test_shmem(test), *b = tc_test_shmem(test);
	struct tc_clone **cs;
	unsigned int i, idle0 = tc_test_nr_idle();
	struct tc_clone *first;
	int count_b;

	/* Room for exactly TC_CLONE_IDLE_MAX: the first is then the oldest. */
	tc_extent_clone_close(file_inode(a)->i_sb);
	idle0 = tc_test_nr_idle();
	KUNIT_ASSERT_EQ(test, idle0, 0U);
	cs = kunit_kcalloc(test, TC_CLONE_IDLE_MAX, sizeof(*cs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cs);
	count_b = atomic_read(&file_inode(b)->i_count);
	first = tc_test_clone(test, file_inode(b), 4);
	for (i = 0; i < TC_CLONE_IDLE_MAX; i++)
		cs[i] = tc_test_clone(test, file_inode(a), 5 + i);
	tc_extent_clone_put(first);
	for (i = 0; i < TC_CLONE_IDLE_MAX; i++)
		tc_extent_clone_put(cs[i]);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), (unsigned int)TC_CLONE_IDLE_MAX);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(b)));
	/* Doomed by the put, freed by the reaper (maybe on another CPU). */
	flush_delayed_work(&tc_clone_reaper);
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(b)->i_count), count_b);
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(a)));
	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), 0U);
	fput(a);
	fput(b);
}

/*
 * Two mappers made clones of the same keys at once: the second to publish
 * gets the first's clone, with a user, and its own is never published
 * (its reads would otherwise be a clone's, and nobody would free it).
 */
static void tc_clone_second_of_the_same_keys_uses_the_first(struct kunit *test)
{
	struct file *a = tc_test_shmem(test), *b = tc_test_shmem(test);
	struct tc_clone *fa = kzalloc(sizeof(*fa), GFP_KERNEL);
	struct tc_clone *fb = kzalloc(sizeof(*fb), GFP_KERNEL);
	struct tc_clone *c;

	KUNIT_ASSERT_NOT_NULL(test, fa);
	KUNIT_ASSERT_NOT_NULL(test, fb);
	fa->inode = file_inode(a);
	fb->inode = file_inode(b);
	fa->digest = 7;
	fa->scope = U64_MAX;
	fa->sb = file_inode(a)->i_sb;
	fa->size = PAGE_SIZE;
	fb->digest = fa->digest;
	fb->scope = fa->scope;
	fb->sb = fa->sb;
	fb->size = fa->size;
	ihold(fa->inode);
	btrfs_canon_enable();		/* as tc_clone_build() does */
	KUNIT_EXPECT_PTR_EQ(test, tc_clone_add(fa), fa);
	c = tc_clone_add(fb);
	KUNIT_EXPECT_PTR_EQ(test, c, fa);
	KUNIT_EXPECT_EQ(test, fa->users, 2UL);
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(a)));
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(b)));
	kfree(fb);
	tc_extent_clone_put(fa);
	tc_extent_clone_put(fa);
	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(a)));
	fput(a);
	fput(b);
}

/*
 * At most TC_CLONE_MAX clones live, in use or not: the next layout gets
 * none (its mapping is private), but a clone of keys already published is
 * still found. The buckets' walks stay bounded.
 */
static void tc_clone_live_ones_are_capped(struct kunit *test)
{
	struct file *a = tc_test_shmem(test);
	struct tc_clone *fresh = kzalloc(sizeof(*fresh), GFP_KERNEL);
	struct tc_clone **cs, *c;
	int i, n = TC_CLONE_MAX - atomic_read(&tc_clones_live);

	KUNIT_ASSERT_NOT_NULL(test, fresh);
	KUNIT_ASSERT_GT(test, n, 0);
	cs = kvcalloc(n, sizeof(*cs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cs);
	for (i = 0; i < n; i++)
		cs[i] = tc_test_clone(test, file_inode(a), 1000 + i);
	fresh->inode = file_inode(a);
	fresh->digest = 999;
	fresh->scope = U64_MAX;
	fresh->sb = file_inode(a)->i_sb;
	fresh->size = i_size_read(file_inode(a));
	KUNIT_EXPECT_TRUE(test, IS_ERR(tc_clone_add(fresh)));
	fresh->digest = 1000;
	c = tc_clone_add(fresh);
	KUNIT_EXPECT_PTR_EQ(test, c, cs[0]);
	if (!IS_ERR(c) && c != fresh)
		tc_extent_clone_put(c);
	kfree(fresh);
	for (i = 0; i < n; i++)
		tc_extent_clone_put(cs[i]);
	tc_extent_clone_close(file_inode(a)->i_sb);
	KUNIT_EXPECT_EQ(test, tc_test_nr_idle(), 0U);
	kvfree(cs);
	fput(a);
}

struct tc_test_close {
	struct super_block *sb;
	struct completion done;
};

static int tc_test_close_fn(void *data)
{
	struct tc_test_close *t = data;

	tc_extent_clone_close(t->sb);
	complete(&t->done);
	return 0;
}

/*
 * A clone the reaper (or a put) took off the idle list is freed outside
 * the lock: a close of its file system that came in between waits for
 * that iput() (which after close_ctree() would be a use after free). The
 * close runs in a thread of its own; this one sleeps while it may run.
 */
static void tc_clone_close_waits_for_its_clones_being_freed(struct kunit *test)
{
	struct file *a = tc_test_shmem(test);
	struct tc_clone *c = tc_test_clone(test, file_inode(a), 8);
	struct tc_test_close t = { .sb = file_inode(a)->i_sb };
	struct task_struct *task;
	int count;
	LIST_HEAD(dead);

	init_completion(&t.done);
	count = atomic_read(&file_inode(a)->i_count);
	tc_extent_clone_put(c);
	spin_lock(&tc_clones_lock);
	tc_clone_unlink(c, &dead);		/* as the reaper does */
	spin_unlock(&tc_clones_lock);
	task = kthread_run(tc_test_close_fn, &t, "tc-clone-close");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_EXPECT_FALSE(test, wait_for_completion_timeout(&t.done, HZ / 5));
	list_del(&c->idle);
	tc_clone_free(c);			/* the reaper's iput() */
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&t.done, 10 * HZ));
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(a)->i_count), count - 1);
	fput(a);
}

/*
 * The reaper frees a clone only inside its file system's freeze
 * protection, taken without waiting: a doomed clone of a frozen file
 * system stays doomed, and another's is freed meanwhile; after the thaw
 * the next reap frees the first. (Deleting a clone is a transaction, which
 * waits for a thaw: a reaper that waited would hold up every other file
 * system's frees, and the munmap() or unmount waiting for them.) The
 * frozen one is the anonymous-inode file system's, which nothing writes.
 */
static void tc_clone_reaper_skips_a_frozen_file_system(struct kunit *test)
{
	struct file *a = tc_test_shmem(test);
	struct file *b = anon_inode_getfile("tc-clone-kunit", &simple_dir_operations,
					    NULL, O_RDONLY);
	struct super_block *frozen;
	struct tc_clone *ca, *cb;
	int count_a, count_b;

	KUNIT_ASSERT_FALSE(test, IS_ERR(b));
	frozen = file_inode(b)->i_sb;
	ca = tc_test_clone(test, file_inode(a), 20);
	cb = tc_test_clone(test, file_inode(b), 21);
	count_a = atomic_read(&file_inode(a)->i_count);
	count_b = atomic_read(&file_inode(b)->i_count);
	tc_extent_clone_put(ca);
	tc_extent_clone_put(cb);
	KUNIT_ASSERT_EQ(test, freeze_super(frozen, FREEZE_HOLDER_KERNEL), 0);
	spin_lock(&tc_clones_lock);
	tc_clone_unlink(cb, &tc_clones_doomed);
	tc_clone_unlink(ca, &tc_clones_doomed);
	spin_unlock(&tc_clones_lock);
	tc_clone_reap(NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(a)->i_count), count_a - 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(b)->i_count), count_b);
	KUNIT_EXPECT_TRUE(test, tc_clone_dying_on(frozen));
	KUNIT_EXPECT_EQ(test, thaw_super(frozen, FREEZE_HOLDER_KERNEL), 0);
	tc_clone_reap(NULL);
	/* A reap the puts queued may hold it, on another CPU: its end. */
	flush_delayed_work(&tc_clone_reaper);
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(b)->i_count), count_b - 1);
	KUNIT_EXPECT_FALSE(test, tc_clone_dying_on(frozen));
	fput(a);
	fput(b);
}

/*
 * A file has one clone of its own at most: its clone of another layout,
 * in use, refuses a new one; unused, it is doomed (and freed by the
 * reaper). A clone of the same keys, or another file's, is left alone.
 */
static void tc_clone_a_file_has_one_clone_of_its_own(struct kunit *test)
{
	struct file *a = tc_test_shmem(test), *b = tc_test_shmem(test);
	struct tc_clone *old = tc_test_clone(test, file_inode(a), 30);
	struct tc_clone *other = tc_test_clone(test, file_inode(b), 32);
	struct tc_clone fresh = { .sb = old->sb, .digest = 31 };
	bool doomed = false;
	int count;

	old->origin_subvol = 256;
	old->origin_ino = 1000;
	other->origin_subvol = 257;
	other->origin_ino = 1000;
	fresh.origin_subvol = 256;
	fresh.origin_ino = 1000;
	count = atomic_read(&file_inode(a)->i_count);
	spin_lock(&tc_clones_lock);
	hash_add(tc_clone_origins, &old->origin_node, tc_clone_origin_hash(old));
	hash_add(tc_clone_origins, &other->origin_node,
		 tc_clone_origin_hash(other));
	spin_unlock(&tc_clones_lock);

	spin_lock(&tc_clones_lock);
	KUNIT_EXPECT_FALSE(test, tc_clone_origin_free(&fresh, &doomed));
	fresh.digest = 30;	/* the same layout: no conflict */
	KUNIT_EXPECT_TRUE(test, tc_clone_origin_free(&fresh, &doomed));
	spin_unlock(&tc_clones_lock);
	KUNIT_EXPECT_FALSE(test, doomed);

	tc_extent_clone_put(old);
	tc_extent_clone_put(other);
	fresh.digest = 31;
	spin_lock(&tc_clones_lock);
	KUNIT_EXPECT_TRUE(test, tc_clone_origin_free(&fresh, &doomed));
	spin_unlock(&tc_clones_lock);
	KUNIT_EXPECT_TRUE(test, doomed);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(a)));
	KUNIT_EXPECT_TRUE(test, tc_extent_clone_inode(file_inode(b)));
	flush_delayed_work(&tc_clone_reaper);
	KUNIT_EXPECT_EQ(test, atomic_read(&file_inode(a)->i_count), count - 1);
	tc_extent_clone_close(file_inode(b)->i_sb);
	KUNIT_EXPECT_FALSE(test, tc_extent_clone_inode(file_inode(b)));
	fput(a);
	fput(b);
}

static struct kunit_case tc_extent_mmap_cases[] = {
	KUNIT_CASE(tc_clone_last_user_leaves_it_idle_until_close),
	KUNIT_CASE(tc_clone_in_use_survives_close),
	KUNIT_CASE(tc_clone_idle_ones_are_capped_oldest_first),
	KUNIT_CASE(tc_clone_second_of_the_same_keys_uses_the_first),
	KUNIT_CASE(tc_clone_close_waits_for_its_clones_being_freed),
	KUNIT_CASE(tc_clone_reaper_skips_a_frozen_file_system),
	KUNIT_CASE(tc_clone_a_file_has_one_clone_of_its_own),
	KUNIT_CASE(tc_clone_live_ones_are_capped),
	{}
};

static struct kunit_suite tc_extent_mmap_suite = {
	.name = "totalcow_extent_mmap",
	.test_cases = tc_extent_mmap_cases,
};

kunit_test_suite(tc_extent_mmap_suite);
