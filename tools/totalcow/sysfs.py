# SPDX-License-Identifier: GPL-2.0-only
"""/sys/kernel/mm/totalcow: templates (all-or-nothing registration) and
page-cache sharing groups."""

import errno
import os

from .btrfs import fs_uuid, subvol_show
from .config import SYSFS
from .errors import EX_FAIL, EX_NOENT, EX_NOTTC, EX_PERM, Fail
from .walker import devname


SYSFS_BATCH = 3900  # bytes per add_extents write (sysfs takes one page)
TEMPLATE_NAME_MAX = 64
STAGING_SUFFIX = ":refresh"  # template refresh stages new ranges under NAME:refresh


def sysfs_write(name, text):
    path = os.path.join(SYSFS, "templates", name)
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        raise Fail(f"{SYSFS} is missing: is the kernel built with TOTALCOW_SYSFS?", EX_NOTTC)
    except PermissionError:
        raise Fail("only root may register templates", EX_PERM)
    try:
        os.write(fd, text.encode())
    except OSError as e:
        code = {errno.ENOENT: EX_NOENT, errno.EPERM: EX_PERM, errno.EACCES: EX_PERM,
                errno.ENODEV: EX_NOTTC}.get(e.errno, EX_FAIL)
        raise Fail(f"{name} '{text.strip()[:60]}': {os.strerror(e.errno)}", code)
    finally:
        os.close(fd)


def sysfs_read(*parts):
    with open(os.path.join(SYSFS, "templates", *parts)) as f:
        return f.read()


def templates():
    base = os.path.join(SYSFS, "templates")
    if not os.path.isdir(base):
        raise Fail(f"{SYSFS} is missing: is the kernel built with TOTALCOW_SYSFS?", EX_NOTTC)
    out = []
    for name in sorted(os.listdir(base)):
        if os.path.isdir(os.path.join(base, name)):
            out.append({"name": name, "device": sysfs_read(name, "device").strip(),
                        "extents": int(sysfs_read(name, "nr_extents")),
                        "sectors": int(sysfs_read(name, "sectors"))})
    return out


def register(name, rdev, ranges):
    sysfs_write("register", f"{name} {devname(rdev)}\n")
    try:
        batch = name
        for s, n in ranges:
            item = f" {s} {n}"
            if len(batch) + len(item) > SYSFS_BATCH:
                sysfs_write("add_extents", batch + "\n")
                batch = name
            batch += item
        if batch != name:
            sysfs_write("add_extents", batch + "\n")
    except Fail:
        # All or nothing: a half-registered template is removed again.
        try:
            sysfs_write("deregister", name + "\n")
        except Fail:
            pass
        raise


def extents_of(name):
    """A registered template's ranges, as the kernel holds them."""
    return [tuple(map(int, line.split())) for line in sysfs_read(name, "extents").splitlines()
            if line.strip()]


def staging_name(name):
    return name[:TEMPLATE_NAME_MAX - len(STAGING_SUFFIX)] + STAGING_SUFFIX


def replace(name, rdev, ranges):
    """Give template name the ranges, all or nothing: the new ranges are
    registered under a staging name first (a failure there changes
    nothing), then the template is registered again from them and the
    staging one removed; blocks of both stay cacheable throughout. If the
    second registration fails, the old ranges are put back."""
    tmp = staging_name(name)
    if tmp in {t["name"] for t in templates()}:
        sysfs_write("deregister", tmp + "\n")  # left by a refresh that was killed
    old = extents_of(name)
    register(tmp, rdev, ranges)
    try:
        sysfs_write("deregister", name + "\n")
        try:
            register(name, rdev, ranges)
        except Fail as e:
            try:
                register(name, rdev, old)
            except Fail as e2:
                raise Fail(f"{e}; putting the old ranges back failed too ({e2}): "
                           f"they are registered as {tmp}", e.code)
            raise
    except Fail:
        if name in {t["name"] for t in templates()}:
            sysfs_write("deregister", tmp + "\n")
        raise
    sysfs_write("deregister", tmp + "\n")


def need_sharing():
    """Fail unless the kernel has the page-cache sharing layer: every group
    command says the same when it has not."""
    base = os.path.join(SYSFS, "groups")
    if not os.path.isdir(base):
        raise Fail(f"page-cache sharing is not in this kernel ({base} is absent): groups "
                   "need the TotalCOW kernel (mm-patches/ and module/share/, see README.md); "
                   "dm-totalcow alone, as from DKMS, has none", EX_NOTTC)


def group_write(name, text):
    path = os.path.join(SYSFS, "groups", name)
    try:
        with open(path, "w") as f:
            f.write(text)
    except FileNotFoundError:
        need_sharing()
        raise Fail(f"{path} is missing: the kernel predates it", EX_NOTTC)
    except OSError as e:
        code = {errno.ENOENT: EX_NOENT, errno.EPERM: EX_PERM,
                errno.EACCES: EX_PERM}.get(e.errno, EX_FAIL)
        why = os.strerror(e.errno)
        if name == "add" and e.errno == errno.EXDEV:
            why = "not a snapshot of the template"
        raise Fail(f"groups/{name} '{text.strip()[:80]}': {why} (see dmesg)", code)


def groups():
    base = os.path.join(SYSFS, "groups")
    out = []
    if not os.path.isdir(base):
        return out
    for name in sorted(os.listdir(base)):
        d = os.path.join(base, name)
        if not os.path.isdir(d):
            continue
        with open(os.path.join(d, "template")) as f:
            template = f.read().rstrip("\n")
        with open(os.path.join(d, "members")) as f:
            members = f.read().split("\n")[:-1]
        with open(os.path.join(d, "stats")) as f:
            stats = {k: int(v) for k, v in (l.split() for l in f)}
        auto = group_auto(name)
        auto_members = [{"subvol": i, "path": p} for i, p in group_auto_members(name)]
        out.append({"name": name, "template": template, "members": members, "stats": stats,
                    "auto": auto, "auto_members": auto_members})
    return out


def group_set_auto(name, on):
    """Turn automatic membership of group `name` on or off."""
    path = os.path.join(SYSFS, "groups", name, "auto")
    try:
        with open(path, "w") as f:
            f.write("1\n" if on else "0\n")
    except FileNotFoundError:
        need_sharing()
        if not group_exists(name):
            raise Fail(f"no group '{name}'", EX_NOENT)
        raise Fail(f"{path} is missing: the kernel predates automatic membership", EX_NOTTC)
    except OSError as e:
        code = {errno.EPERM: EX_PERM, errno.EACCES: EX_PERM}.get(e.errno, EX_FAIL)
        raise Fail(f"groups/{name}/auto: {os.strerror(e.errno)}", code)


def group_exists(name):
    return os.path.isdir(os.path.join(SYSFS, "groups", name))


def group_read(name, what):
    with open(os.path.join(SYSFS, "groups", name, what)) as f:
        return f.read()


def group_members(name):
    return group_read(name, "members").split("\n")[:-1]


def group_auto(name):
    """Whether group `name` has automatic membership on (False on kernels
    that predate it)."""
    try:
        return group_read(name, "auto").strip() == "1"
    except FileNotFoundError:
        return False


def group_auto_members(name):
    """[(subvolume id, path from the file system's top level)] of the
    subvolumes that joined group `name` by themselves. Reading the list
    makes the kernel drop deleted ones first."""
    try:
        text = group_read(name, "auto_members")
    except FileNotFoundError:
        return []
    out = []
    for line in text.split("\n")[:-1]:
        subvol, _, path = line.partition(" ")
        out.append((int(subvol), path))
    return out


def group_of_member(path):
    """The group that has directory `path` as a member, or None: listed in
    its members, or, for a subvolume root, an automatic member (same
    subvolume id on the template's file system)."""
    base = os.path.join(SYSFS, "groups")
    if not os.path.isdir(base):
        return None
    names = [g for g in sorted(os.listdir(base)) if os.path.isdir(os.path.join(base, g))]
    for g in names:
        try:
            if path in group_members(g):
                return g
        except FileNotFoundError:
            continue  # deleted meanwhile
    try:
        sid, fs = subvol_show(path)["ID"], fs_uuid(path)
    except Fail:
        return None  # not a subvolume root: never an automatic member
    for g in names:
        try:
            if any(i == sid for i, _ in group_auto_members(g)) and \
                    fs_uuid(group_read(g, "template").rstrip("\n")) == fs:
                return g
        except (FileNotFoundError, Fail):
            continue
    return None


def dm_template_exists(name):
    return os.path.isdir(os.path.join(SYSFS, "templates", name))
