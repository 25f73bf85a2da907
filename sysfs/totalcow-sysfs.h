/* SPDX-License-Identifier: GPL-2.0-only */
/* /sys/kernel/mm/totalcow, for the other built-in TotalCOW layers. */
#ifndef TOTALCOW_SYSFS_H
#define TOTALCOW_SYSFS_H

#include <linux/compiler_attributes.h>
#include <linux/types.h>

struct kobject;

/* The /sys/kernel/mm/totalcow kobject; valid after late_initcall. */
struct kobject *totalcow_sysfs_kobj(void);
int tc_sysfs_name_path(const char *buf, size_t count, char *name,
		       size_t name_max, char **path);
__printf(3, 4) int tc_sysfs_emit_at(char *buf, int at, const char *fmt, ...);

#endif /* TOTALCOW_SYSFS_H */
