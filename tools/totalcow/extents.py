# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl extents: subvolumes in sharing scopes
(/sys/kernel/mm/totalcow/extents/; docs/design.md, "Shared extents,
declared or not")."""

import errno
import json
import os

from .config import SYSFS
from .errors import EX_FAIL, EX_NOENT, EX_NOTTC, EX_OK, EX_PERM, Fail

SCOPE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
SCOPE_MAX = 32


def scope_name(s):
    """argparse type: a scope name as the kernel takes it."""
    if not 1 <= len(s) <= SCOPE_MAX or not set(s) <= SCOPE_CHARS:
        raise ValueError(s)
    return s


scope_name.__name__ = "scope name (1 to 32 of A-Z a-z 0-9 _ . -)"


def need_extents():
    base = os.path.join(SYSFS, "extents")
    if not os.path.isdir(base):
        raise Fail(f"shared extents are not in this kernel ({base} is absent): they need "
                   "the TotalCOW kernel (mm-patches/ 0015 and 0016, module/share/, see "
                   "README.md); dm-totalcow alone, as from DKMS, has none", EX_NOTTC)


def extents_write(name, scope, path):
    need_extents()
    try:
        with open(os.path.join(SYSFS, "extents", name), "w") as f:
            f.write(f"{scope} {path}\n")
    except OSError as e:
        code = {errno.ENOENT: EX_NOENT, errno.EPERM: EX_PERM, errno.EACCES: EX_PERM,
                errno.EOPNOTSUPP: EX_NOTTC}.get(e.errno, EX_FAIL)
        why = {errno.EEXIST: "its subvolume is in a scope already",
               errno.EBUSY: "its subvolume holds a group's template, whose pages are the "
                            "group's (group del first)",
               errno.EOPNOTSUPP: "its file system cannot share extents (mixed block "
                                 "groups, zoned, or sectors larger than a page)"}.get(
            e.errno, os.strerror(e.errno))
        if name == "disable" and e.errno == errno.ENOENT:
            why = f"its subvolume is not in scope {scope}"
        raise Fail(f"extents {name} {scope} {path}: {why} (see dmesg)", code)


def scopes():
    """The kernel's scopes: [{"fsid", "scope", "subvolumes": [...],
    "followed": [...], counters...}]: the subvolumes enabled, and those
    that followed the subvolume they were snapshotted from in."""
    need_extents()
    out = []
    with open(os.path.join(SYSFS, "extents", "scopes")) as f:
        for line in f:
            w = line.split()
            if len(w) < 2:
                continue
            rec = {"fsid": w[0], "scope": w[1], "subvolumes": [], "followed": []}
            rest = w[2:]
            for key in ("followed", "subvolumes"):
                if key in rest:
                    i = rest.index(key)
                    rec[key] = [int(v) for v in rest[i + 1:]]
                    rest = rest[:i]
            rec.update({k: int(v) for k, v in zip(rest[::2], rest[1::2])})
            out.append(rec)
    return out


def _paths(a):
    paths = []
    for p in a.paths:
        if not os.path.exists(p):
            raise Fail(f"{p}: no such file or directory", EX_NOENT)
        paths.append(os.path.realpath(p))
    return paths


def cmd_extents_enable(a):
    """Each PATH's subvolume into the scope, all or nothing."""
    done = []
    try:
        for p in _paths(a):
            extents_write("enable", a.scope, p)
            done.append(p)
    except Fail:
        for p in reversed(done):
            try:
                extents_write("disable", a.scope, p)
            except Fail:
                pass
        raise
    return EX_OK


def cmd_extents_disable(a):
    for p in _paths(a):
        extents_write("disable", a.scope, p)
    return EX_OK


def cmd_extents_list(a):
    ss = scopes()
    if a.json:
        print(json.dumps(ss, indent=1))
        return EX_OK
    for s in ss:
        subvols = ",".join(str(v) for v in s["subvolumes"])
        followed = ",".join(str(v) for v in s["followed"]) or "-"
        print(f"{s['fsid']}\t{s['scope']}\tsubvolumes {subvols}\tfollowed {followed}\t"
              f"{s.get('pages', 0) * 4 / 1024:.1f} MiB cached\t"
              f"{s.get('aliased', 0)} pages aliased\t{s.get('read_failures', 0)} failed reads")
    return EX_OK
