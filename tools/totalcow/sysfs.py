# SPDX-License-Identifier: GPL-2.0-only
"""/sys/kernel/mm/totalcow: the one writer (and the one map from the
errno a store returns to the tool's exit code), templates (all-or-nothing
registration), page-cache sharing groups and sharing scopes."""

import errno
import os

from . import config, features
from .btrfs import fs_uuid, subvol_show
from .errors import EX_FAIL, EX_NOENT, EX_NOTTC, EX_PERM, Fail
from .features import EXTENTS, GROUPS, TEMPLATES
from .walker import devname


TEMPLATE_NAME_MAX = 64
STAGING_SUFFIX = ":refresh"  # template refresh stages new ranges under NAME:refresh

# The exit code of a write the kernel refused, by its errno (EXIT STATUS in
# the manual): no such template, group, member or path; not permitted; not
# a totalcow device (ENODEV, templates/register) or a file system that
# cannot share extents (EOPNOTSUPP, extents/enable). Any other: 1.
EXIT_CODES = {errno.ENOENT: EX_NOENT, errno.EPERM: EX_PERM, errno.EACCES: EX_PERM,
              errno.ENODEV: EX_NOTTC, errno.EOPNOTSUPP: EX_NOTTC}


def exit_code(err):
    return EXIT_CODES.get(err, EX_FAIL)


def write(rel, text, refused, missing=None, denied=None):
    """Write text to the sysfs file rel (relative to SYSFS) in one write(2),
    as a store takes it; the file is opened as it is, never created (in
    sysfs that would be EACCES) or truncated. If the kernel refuses (or the
    file cannot be opened), raise Fail(refused(errno)) with exit_code(errno):
    the errno decides the exit code, the caller the words. missing, if
    given, is called (and raises) when the file is absent; denied, if given,
    is what an open that is not permitted says."""
    path = os.path.join(config.SYSFS, rel)
    data = text.encode()
    try:
        f = open(path, "wb", buffering=0, opener=_open_as_is)
    except OSError as e:
        if missing and e.errno == errno.ENOENT:
            missing()
        if denied and isinstance(e, PermissionError):
            raise Fail(denied, EX_PERM)
        raise Fail(refused(e.errno), exit_code(e.errno))
    with f:
        try:
            n = f.write(data)
        except OSError as e:
            raise Fail(refused(e.errno), exit_code(e.errno))
    if n != len(data):  # sysfs takes a page at most: the rest would be lost
        raise Fail(refused(errno.E2BIG) + f" ({n} of {len(data)} bytes taken)", EX_FAIL)


def _open_as_is(path, flags):
    return os.open(path, os.O_WRONLY | os.O_CLOEXEC)


def _missing(feature, rel):
    """write()'s missing: the feature is absent, or else this one file of it."""
    def missing():
        features.need(feature)
        raise Fail(f"{os.path.join(config.SYSFS, rel)} is missing: the kernel predates it",
                   EX_NOTTC)
    return missing


def batch_size():
    """The most bytes of one add_extents write, its newline included: less
    than a page, the most that sysfs passes to a store."""
    return features.page_size() - 1


# Templates: templates/{register,add_extents,deregister}, templates/NAME/.

def template_write(name, text):
    """Write text to templates/name (register, add_extents, deregister)."""
    write(f"{TEMPLATES}/{name}", text,
          refused=lambda err: f"{name} '{text.strip()[:60]}': {os.strerror(err)}",
          missing=_missing(TEMPLATES, f"{TEMPLATES}/{name}"),
          denied="only root may register templates")


def deregister(name):
    template_write("deregister", name + "\n")


def sysfs_read(*parts):
    with open(os.path.join(config.SYSFS, TEMPLATES, *parts)) as f:
        return f.read()


def templates():
    features.need(TEMPLATES)
    base = features.path(TEMPLATES)
    out = []
    for name in sorted(os.listdir(base)):
        if os.path.isdir(os.path.join(base, name)):
            out.append({"name": name, "device": sysfs_read(name, "device").strip(),
                        "extents": int(sysfs_read(name, "nr_extents")),
                        "sectors": int(sysfs_read(name, "sectors"))})
    return out


def register(name, rdev, ranges):
    template_write("register", f"{name} {devname(rdev)}\n")
    try:
        limit = batch_size() - 1  # the newline
        batch = name
        for s, n in ranges:
            item = f" {s} {n}"
            if len(batch) + len(item) > limit:
                template_write("add_extents", batch + "\n")
                batch = name
            batch += item
        if batch != name:
            template_write("add_extents", batch + "\n")
    except Fail:
        # All or nothing: a half-registered template is removed again.
        try:
            deregister(name)
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
        deregister(tmp)  # left by a refresh that was killed
    old = extents_of(name)
    register(tmp, rdev, ranges)
    try:
        deregister(name)
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
            deregister(tmp)
        raise
    deregister(tmp)


def dm_template_exists(name):
    return os.path.isdir(os.path.join(config.SYSFS, TEMPLATES, name))


# Groups: groups/{create,add,remove,delete}, groups/NAME/.

def group_write(name, text):
    """Write text to groups/name (create, add, remove, delete)."""
    def refused(err):
        why = os.strerror(err)
        if name == "add" and err == errno.EXDEV:
            why = "not a snapshot of the template"
        return f"groups/{name} '{text.strip()[:80]}': {why} (see dmesg)"
    write(f"{GROUPS}/{name}", text, refused, missing=_missing(GROUPS, f"{GROUPS}/{name}"))


def group_set_auto(name, on):
    """Turn automatic membership of group `name` on or off."""
    def missing():
        features.need(GROUPS)
        if not group_exists(name):
            raise Fail(f"no group '{name}'", EX_NOENT)
        raise Fail(f"{features.path(GROUPS)}/{name}/auto is missing: the kernel predates "
                   "automatic membership", EX_NOTTC)
    write(f"{GROUPS}/{name}/auto", "1\n" if on else "0\n",
          refused=lambda err: f"groups/{name}/auto: {os.strerror(err)}", missing=missing)


def groups():
    base = features.path(GROUPS)
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
        stats = group_stats(name)
        auto = group_auto(name)
        auto_members = [{"subvol": i, "path": p} for i, p in group_auto_members(name)]
        out.append({"name": name, "template": template, "members": members, "stats": stats,
                    "auto": auto, "auto_members": auto_members})
    return out


def group_names():
    base = features.path(GROUPS)
    if not os.path.isdir(base):
        return []
    return [g for g in sorted(os.listdir(base)) if os.path.isdir(os.path.join(base, g))]


def group_exists(name):
    return os.path.isdir(os.path.join(config.SYSFS, GROUPS, name))


def group_read(name, what):
    with open(os.path.join(config.SYSFS, GROUPS, name, what)) as f:
        return f.read()


def group_members(name):
    return group_read(name, "members").split("\n")[:-1]


def group_stats(name):
    """{counter: value} of groups/NAME/stats ("<name> <value>" lines)."""
    return {k: int(v) for k, v in (line.split() for line in group_read(name, "stats")
                                   .splitlines())}


def group_auto(name):
    """Whether group `name` has automatic membership on (False on kernels
    that predate it)."""
    try:
        return group_read(name, "auto").strip() == "1"
    except FileNotFoundError:
        return False


def group_auto_members(name):
    """[(subvolume id, path from the file system's top level)] of the
    subvolumes that joined group `name` by themselves. Deleted ones are
    not listed; the kernel drops them on its own (prune_interval_ms)."""
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
    names = group_names()
    if not names:
        return None
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


# Sharing scopes: extents/{enable,disable,scopes}.

def extents_write(name, scope, path):
    """extents/enable or extents/disable of the subvolume that holds path."""
    features.need(EXTENTS)

    def refused(err):
        why = {errno.EEXIST: "its subvolume is in a scope already",
               errno.EBUSY: "its subvolume holds a group's template, whose pages are the "
                            "group's (group del first)",
               errno.EOPNOTSUPP: "its file system cannot share extents (mixed block "
                                 "groups, zoned, or sectors larger than a page)"}.get(
            err, os.strerror(err))
        if name == "disable" and err == errno.ENOENT:
            why = f"its subvolume is not in scope {scope}"
        return f"extents {name} {scope} {path}: {why} (see dmesg)"
    write(f"{EXTENTS}/{name}", f"{scope} {path}\n", refused)


def scopes():
    """The kernel's scopes: [{"fsid", "scope", "subvolumes": [...],
    "followed": [...], counters...}]: the subvolumes enabled, and those
    that followed the subvolume they were snapshotted from in."""
    features.need(EXTENTS)
    out = []
    with open(os.path.join(features.path(EXTENTS), "scopes")) as f:
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
