# SPDX-License-Identifier: GPL-2.0-only
"""dm-totalcow's own counters, from `dmsetup status` (docs/dm-totalcow.rst,
Status): what `totalcowctl status` shows, with or without the sysfs layer."""

import os
import subprocess

from .errors import EX_FAIL, EX_PERM, Fail

STATUS_FIELDS = ("hits", "misses", "bypassed", "fills", "evictions", "invalidations",
                 "cached_capacity", "whitelist_extents", "whitelist_sectors", "templates",
                 "waited", "requeued", "readahead")
# Older targets print fewer fields: 1.0 up to "templates", 1.1 up to "requeued".
STATUS_FIELD_COUNTS = (10, 12, len(STATUS_FIELDS))


def parse_status(text):
    """The totalcow devices in `dmsetup status --target totalcow` output:
    a dict of counters per device, fields an older target lacks as 0."""
    devices = []
    for line in text.splitlines():
        name, rest = line.split(":", 1) if ":" in line else ("", line)
        f = rest.split()
        if len(f) - 3 not in STATUS_FIELD_COUNTS:
            continue
        d = dict.fromkeys(STATUS_FIELDS, "0")
        d.update(zip(STATUS_FIELDS, f[3:]))
        cached, capacity = d.pop("cached_capacity").split("/")
        d = {k: int(v) for k, v in d.items()}
        d.update(name=name, cached_blocks=int(cached), capacity_blocks=int(capacity))
        devices.append(d)
    return devices


def device_status():
    """parse_status() of what dmsetup reports now (root only)."""
    try:
        out = subprocess.run(["dmsetup", "status", "--target", "totalcow"],
                             capture_output=True, text=True)
    except FileNotFoundError:
        raise Fail("dmsetup is not installed", EX_FAIL)
    if out.returncode:
        err = out.stderr.strip().splitlines()
        reason = err[-1] if err else f"exit {out.returncode}"
        code = EX_PERM if os.geteuid() else EX_FAIL
        raise Fail(f"dmsetup status: {reason}" + (" (root only)" if os.geteuid() else ""),
                   code)
    return parse_status(out.stdout)
