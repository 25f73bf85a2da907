// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-totalcow: a read cache keyed by disk address for the extents of
 * registered snapshot templates (see Documentation in docs/dm-totalcow.rst).
 *
 * This is the skeleton the build and test harness is wired to: the target
 * registers, parses its table strictly and passes every bio through to
 * the origin device unchanged.
 */

#include <linux/device-mapper.h>
#include <linux/module.h>

#define DM_MSG_PREFIX "totalcow"

struct totalcow_c {
	struct dm_dev *origin;
};

/*
 * Construct a totalcow mapping: <origin_dev>
 */
static int totalcow_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct totalcow_c *tc;
	int r;

	if (argc != 1) {
		ti->error = "Invalid argument count: expected <origin_dev>";
		return -EINVAL;
	}

	tc = kzalloc(sizeof(*tc), GFP_KERNEL);
	if (!tc) {
		ti->error = "Cannot allocate totalcow context";
		return -ENOMEM;
	}

	r = dm_get_device(ti, argv[0], dm_table_get_mode(ti->table),
			  &tc->origin);
	if (r) {
		ti->error = "Origin device lookup failed";
		kfree(tc);
		return r;
	}

	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->num_write_zeroes_bios = 1;
	ti->private = tc;
	return 0;
}

static void totalcow_dtr(struct dm_target *ti)
{
	struct totalcow_c *tc = ti->private;

	dm_put_device(ti, tc->origin);
	kfree(tc);
}

static int totalcow_map(struct dm_target *ti, struct bio *bio)
{
	struct totalcow_c *tc = ti->private;

	bio_set_dev(bio, tc->origin->bdev);
	if (bio_sectors(bio) || op_is_zone_mgmt(bio_op(bio)))
		bio->bi_iter.bi_sector = dm_target_offset(ti,
							  bio->bi_iter.bi_sector);
	return DM_MAPIO_REMAPPED;
}

static void totalcow_status(struct dm_target *ti, status_type_t type,
			    unsigned int status_flags, char *result,
			    unsigned int maxlen)
{
	struct totalcow_c *tc = ti->private;
	unsigned int sz = 0;

	switch (type) {
	case STATUSTYPE_INFO:
		result[0] = '\0';
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s", tc->origin->name);
		break;
	case STATUSTYPE_IMA:
		DMEMIT_TARGET_NAME_VERSION(ti->type);
		DMEMIT(",origin_name=%s;", tc->origin->name);
		break;
	}
}

static int totalcow_iterate_devices(struct dm_target *ti,
				    iterate_devices_callout_fn fn, void *data)
{
	struct totalcow_c *tc = ti->private;

	return fn(ti, tc->origin, 0, ti->len, data);
}

static struct target_type totalcow_target = {
	.name = "totalcow",
	.version = {0, 1, 0},
	.features = DM_TARGET_PASSES_INTEGRITY,
	.module = THIS_MODULE,
	.ctr = totalcow_ctr,
	.dtr = totalcow_dtr,
	.map = totalcow_map,
	.status = totalcow_status,
	.iterate_devices = totalcow_iterate_devices,
};
module_dm(totalcow);

MODULE_DESCRIPTION(DM_NAME " disk-address read cache for snapshot templates");
MODULE_AUTHOR("TotalCOW developers <totalcow@users.noreply.example>");
MODULE_LICENSE("GPL");

#if IS_ENABLED(CONFIG_DM_TOTALCOW_KUNIT_TEST)
#include "dm_totalcow_kunit.c"
#endif
