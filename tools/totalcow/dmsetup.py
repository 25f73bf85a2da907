# SPDX-License-Identifier: GPL-2.0-only
"""dm-totalcow through dmsetup: its counters (`dmsetup status`, docs/
dm-totalcow.rst, Status), what `totalcowctl status` shows with or without
the sysfs layer, and its messages (whitelist_add, whitelist_del), which
the template commands send when the sysfs layer is absent."""

import os
import subprocess

from .errors import EX_FAIL, EX_NOTTC, EX_PERM, Fail
from .walker import devname

STATUS_FIELDS = ("hits", "misses", "bypassed", "fills", "evictions", "invalidations",
                 "cached_capacity", "whitelist_extents", "whitelist_sectors", "templates",
                 "waited", "requeued", "readahead", "fleet_cgroup", "fleet_mode")
# Older targets print fewer fields: 1.0 up to "templates", 1.1 up to
# "requeued", 1.2 up to "readahead". 1.3 adds the id of the I/O cgroup fills
# are charged to (0: none yet) and "auto" or "pinned".
STATUS_FIELD_COUNTS = (10, 12, 13, len(STATUS_FIELDS))
# The fields that are not numbers.
STATUS_WORDS = {"fleet_mode": "auto"}

SYS_DEV_BLOCK = "/sys/dev/block"  # <major>:<minor>/dm/name of device-mapper devices
# Bytes of "<start> <length>" pairs per dmsetup message: far below the
# kernel's argument limits (ARG_MAX, 128 KiB per word), few messages for a
# large template (each whitelist_add waits for the device's writes in flight).
MESSAGE_BATCH = 65536


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
        d.update(STATUS_WORDS)
        d.update(zip(STATUS_FIELDS, f[3:]))
        cached, capacity = d.pop("cached_capacity").split("/")
        d = {k: v if k in STATUS_WORDS else int(v) for k, v in d.items()}
        d.update(name=name, cached_blocks=int(cached), capacity_blocks=int(capacity))
        devices.append(d)
    return devices


def reason(out):
    """dmsetup's own words for a failure: every line it printed on stderr
    but its closing "Command failed." (which says nothing), on one line."""
    lines = [line.strip() for line in out.stderr.splitlines()]
    lines = [line.rstrip(".") for line in lines if line and line != "Command failed."]
    return "; ".join(lines) or f"exit {out.returncode}"


def dmsetup(args):
    try:
        return subprocess.run(["dmsetup", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise Fail("dmsetup is not installed", EX_FAIL)


def device_status():
    """parse_status() of what dmsetup reports now (root only)."""
    out = dmsetup(["status", "--target", "totalcow"])
    if out.returncode:
        root = not os.geteuid()
        raise Fail(f"dmsetup status: {reason(out)}" + ("" if root else " (root only)"),
                   EX_FAIL if root else EX_PERM)
    return parse_status(out.stdout)


def dm_name(rdev):
    """The device-mapper name of block device rdev, or None if it is not a
    device-mapper device."""
    try:
        with open(os.path.join(SYS_DEV_BLOCK, devname(rdev), "dm", "name")) as f:
            return f.read().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def totalcow_name(rdev):
    """(dm name, None) if rdev is a live dm-totalcow device; otherwise
    (name or None, why not) -- why not says what rdev is instead."""
    name = dm_name(rdev)
    if name is None:
        return None, f"{devname(rdev)} is not a device-mapper device"
    if name not in {d["name"] for d in device_status()}:
        return name, f"{name} ({devname(rdev)}) has no totalcow target"
    return name, None


def totalcow_device(rdev):
    """The dm name of rdev, which must be a live dm-totalcow device."""
    name, why = totalcow_name(rdev)
    if why:
        raise Fail(f"{why}: btrfs must sit directly on a dm-totalcow device", EX_NOTTC)
    return name


class MessageFailed(Fail):
    """A dmsetup message the target refused (nothing of it applied)."""

    def __init__(self, msg, enoent):
        super().__init__(msg, EX_FAIL)
        self.enoent = enoent


def message(dev, *words):
    """`dmsetup message dev 0 words...`; MessageFailed with dmsetup's
    reason if the target refuses it (a refused message changes nothing)."""
    out = dmsetup(["message", dev, "0", *words])
    if out.returncode:
        what = " ".join(words[:2]) + (f" ({(len(words) - 2) // 2} ranges)"
                                      if len(words) > 2 else "")
        raise MessageFailed(f"dmsetup message {dev} 0 {what}: {reason(out)}",
                            "No such file or directory" in out.stderr)


def batches(ranges):
    """ranges cut into lists of at most MESSAGE_BATCH bytes of message text."""
    size = MESSAGE_BATCH
    out, cur, n = [], [], 0
    for s, length in ranges:
        item = len(f" {s} {length}")
        if cur and n + item > size:
            out.append(cur)
            cur, n = [], 0
        cur.append((s, length))
        n += item
    if cur:
        out.append(cur)
    return out


def words(ranges):
    return [str(x) for r in ranges for x in r]


def subtract(a, b):
    """The sectors of sorted, merged ranges a that are not in b (ranges
    as (start, length); the result sorted and merged)."""
    out, j = [], 0
    for s, n in a:
        end = s + n
        while j < len(b) and b[j][0] + b[j][1] <= s:
            j += 1
        k = j
        while s < end:
            if k >= len(b) or b[k][0] >= end:
                out.append((s, end - s))
                break
            bs, be = b[k][0], b[k][0] + b[k][1]
            if bs > s:
                out.append((s, bs - s))
            s = max(s, be)
            k += 1
    return out
