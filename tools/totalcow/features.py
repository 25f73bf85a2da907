# SPDX-License-Identifier: GPL-2.0-only
"""What the running kernel offers: each of TotalCOW's layers is a directory
(or file) of /sys/kernel/mm/totalcow, and this is the one place that asks
whether it is there and says what it takes when it is not; and the page
size, which the kernel's counters of pages and the size of a sysfs write
go by."""

import os

from . import config
from .errors import EX_NOTTC, Fail


TEMPLATES = "templates"         # the sysfs layer (CONFIG_TOTALCOW_SYSFS); without it,
                                # the template commands send dmsetup messages
GROUPS = "groups"               # page-cache sharing (mm-patches/, module/share/)
GROUP_REMOVE = "groups/remove"  # one member out of a group (older kernels: none)
EXTENTS = "extents"             # shared extents, in sharing scopes


def path(feature):
    return os.path.join(config.SYSFS, feature)


def has(feature):
    """Whether this kernel has feature (one of the names above)."""
    return os.path.exists(path(feature))


def absent(feature):
    """What a command that needs feature says on a kernel without it."""
    if feature == TEMPLATES:
        return f"{config.SYSFS} is missing: is the kernel built with TOTALCOW_SYSFS?"
    if feature == GROUPS:
        return (f"page-cache sharing is not in this kernel ({path(GROUPS)} is absent): groups "
                "need the TotalCOW kernel (mm-patches/ and module/share/, see README.md); "
                "dm-totalcow alone, as from DKMS, has none")
    if feature == EXTENTS:
        return (f"shared extents are not in this kernel ({path(EXTENTS)} is absent): they "
                "need the TotalCOW kernel (mm-patches/ 0015 and 0016, module/share/, see "
                "README.md); dm-totalcow alone, as from DKMS, has none")
    return f"{path(feature)} is missing: the kernel predates it"


def need(feature):
    """Fail (exit 4) unless this kernel has feature."""
    if not has(feature):
        raise Fail(absent(feature), EX_NOTTC)


def page_size():
    """The kernel's page size in bytes: the unit of the page counters of
    groups, scopes and dm-totalcow's blocks (TC_BLOCK_SIZE is PAGE_SIZE),
    and the most a sysfs file takes in one write."""
    return os.sysconf("SC_PAGE_SIZE")
