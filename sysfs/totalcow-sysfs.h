/* SPDX-License-Identifier: GPL-2.0-only */
/* /sys/kernel/mm/totalcow, for the other built-in TotalCOW layers. */
#ifndef TOTALCOW_SYSFS_H
#define TOTALCOW_SYSFS_H

struct kobject;

/* The /sys/kernel/mm/totalcow kobject; valid after late_initcall. */
struct kobject *totalcow_sysfs_kobj(void);

#endif /* TOTALCOW_SYSFS_H */
