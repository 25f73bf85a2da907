/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-totalcow kernel API, for the sysfs registration layer: whitelist
 * changes on the live totalcow target of a device-mapper device.
 */
#ifndef DM_TOTALCOW_H
#define DM_TOTALCOW_H

#include <linux/types.h>

#include "totalcow-whitelist.h"

/*
 * @dev is the dm device (e.g. MKDEV(254, 0)); ranges are sectors relative
 * to the target. The calls sleep; @r is normalised in place. They return
 * -ENODEV if @dev has no live totalcow target, -EINVAL for a bad tag or
 * range, -ENOENT when deleting what is not registered, -ENOMEM, and change
 * nothing when they fail.
 */
int totalcow_whitelist_add(dev_t dev, const char *tag, struct tc_range *r,
			   unsigned int n);
int totalcow_whitelist_del(dev_t dev, const char *tag, struct tc_range *r,
			   unsigned int n);
int totalcow_whitelist_clear(dev_t dev);
int totalcow_whitelist_get(dev_t dev, const char *tag, unsigned int first,
			   unsigned int max, struct tc_range *out,
			   unsigned int *nr, sector_t *sectors);

#endif /* DM_TOTALCOW_H */
