# SPDX-License-Identifier: GPL-2.0-only
"""The template, group and status commands."""

import json
import os
import stat
import sys

from . import dmroute
from .btrfs import snapshot_of, subvol_show
from .config import STATE, SYSFS
from .dmsetup import device_status, totalcow_name
from .errors import EX_FAIL, EX_NOENT, EX_OK, EX_USAGE, Fail
from .sysfs import (STAGING_SUFFIX, group_set_auto, group_write, groups, need_sharing, register,
                    replace, sysfs_write, templates)
from .walker import Walker, devname


def state_path(name):
    return os.path.join(STATE, "templates", name + ".json")


def read_record(name):
    try:
        with open(state_path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        raise Fail(f"no record of template {name} in {STATE}", EX_NOENT)


def dry_run_warning(rdev):
    """What --dry-run says when the ranges would have nowhere to go."""
    try:
        _, why = totalcow_name(rdev)
    except Fail as e:
        return f"warning: cannot tell whether {devname(rdev)} is a dm-totalcow device ({e})"
    if why:
        return (f"warning: no totalcow device under this file system ({why}): these "
                "ranges would have nowhere to go")
    return None


def cmd_add(a, refresh=False):
    rdev = getattr(a, "rdev", None)
    if not refresh and a.name.endswith(STAGING_SUFFIX):
        raise Fail(f"template names ending in '{STAGING_SUFFIX}' are reserved for "
                   "template refresh", EX_USAGE)
    # Without the sysfs layer the kernel cannot say whether a template
    # exists (a whitelist_add would merge into it): the record says.
    dm_only = not a.dry_run and not dmroute.layer()
    if dm_only and not refresh and os.path.exists(state_path(a.name)):
        raise Fail(f"template {a.name} exists (recorded in {state_path(a.name)}): template "
                   f"refresh {a.name} registers it again, template del {a.name} removes it")
    if a.device:
        try:
            st = os.stat(a.device)
        except OSError as e:
            raise Fail(f"{a.device}: {e.strerror}", EX_NOENT)
        if not stat.S_ISBLK(st.st_mode):
            raise Fail(f"{a.device} is not a block device", EX_USAGE)
        rdev = st.st_rdev
    # Symbolic links named on the command line are followed (as find -H
    # does); those met inside a directory tree are skipped.
    paths = []
    for p in a.paths:
        if not os.path.exists(p):
            raise Fail(f"{os.path.abspath(p)}: no such file or directory", EX_NOENT)
        paths.append(os.path.realpath(p))
    w = Walker(rdev, a.quiet)
    w.by_tree = not a.fiemap
    for p in paths:
        try:
            w.walk(p)
        except Fail as e:
            raise Fail(f"{p}: {e}", e.code)
    ranges = w.merged()
    if not ranges:
        raise Fail("no extents to register (only inline, empty or sparse files?)", EX_FAIL)
    if a.dry_run:
        for s, n in ranges:
            print(s, n)
        warning = dry_run_warning(w.rdev)
        if warning:
            print(f"totalcowctl: {warning}", file=sys.stderr)
        return EX_OK
    if dm_only and refresh:
        dmroute.replace(a.name, w.rdev, a.old_ranges, ranges)
    elif dm_only:
        dmroute.add(a.name, w.rdev, ranges)
    elif refresh:
        replace(a.name, w.rdev, ranges)
    else:
        register(a.name, w.rdev, ranges)
    # The ranges are recorded too: without the sysfs layer they are all
    # there is to know what a refresh must delete.
    os.makedirs(os.path.dirname(state_path(a.name)), exist_ok=True)
    with open(state_path(a.name), "w") as f:
        json.dump({"device": devname(w.rdev), "paths": paths,
                   "ranges": [list(r) for r in ranges]}, f)
    sectors = sum(n for _, n in ranges)
    print(f"template {a.name}: {w.files} files, {len(ranges)} extents, "
          f"{sectors * 512 / 2**20:.1f} MiB on {devname(w.rdev)}")
    for what, n in sorted(w.notes.items()):
        print(f"  {n} {what}")
    return EX_OK


def cmd_refresh(a):
    st = read_record(a.name)
    if not dmroute.layer():
        # dm-totalcow alone: the record's device and ranges are all there
        # is to go by (dmroute.replace).
        if "ranges" not in st:
            # Without the old ranges a failure could not be taken back
            # exactly (deleting what was sent could take ranges the
            # template had): refuse rather than risk a half refresh.
            raise Fail(f"the record of template {a.name} has no ranges (an older totalcowctl "
                       f"wrote it): template del {a.name}, then template add it again")
        a.paths, a.device, a.old_ranges = st["paths"], None, st["ranges"]
        a.rdev = os.makedev(*map(int, st["device"].split(":")))
        return cmd_add(a, refresh=True)
    current = {t["name"]: t for t in templates()}
    if a.name not in current:
        raise Fail(f"no such template: {a.name}", EX_NOENT)
    # The device the template was registered on (a multi-device file
    # system needs it), which must still be the one the kernel has.
    if st["device"] != current[a.name]["device"]:
        raise Fail(f"template {a.name} is on {current[a.name]['device']} in the kernel "
                   f"but was registered on {st['device']}: add it again")
    a.paths, a.device = st["paths"], None
    a.rdev = os.makedev(*map(int, st["device"].split(":")))
    return cmd_add(a, refresh=True)


def cmd_del(a):
    if dmroute.layer():
        sysfs_write("deregister", a.name + "\n")
    else:
        try:
            rec = read_record(a.name)
        except Fail as e:
            raise Fail(f"{e}: without the sysfs layer only the record tells its device "
                       f"(dmsetup message DEV 0 whitelist_del {a.name} removes it by hand)",
                       e.code)
        dmroute.delete(a.name, rec)
    try:
        os.unlink(state_path(a.name))
    except FileNotFoundError:
        pass
    return EX_OK


def cmd_group_create(a):
    t = os.path.realpath(a.template)
    info = subvol_show(t)
    if "readonly" not in info.get("Flags", ""):
        raise Fail(f"{t}: not a read-only subvolume "
                   f"(btrfs property set {t} ro true)", EX_FAIL)
    group_write("create", f"{a.name} {t}\n")
    if a.auto:
        try:
            group_set_auto(a.name, True)
        except Fail:
            group_write("delete", a.name + "\n")  # all or nothing
            raise
    return EX_OK


def cmd_group_auto(a):
    group_set_auto(a.name, a.state == "on")
    return EX_OK


def cmd_group_add(a):
    need_sharing()
    base = os.path.join(SYSFS, "groups", a.name, "template")
    try:
        with open(base) as f:
            t = f.read().rstrip("\n")
    except FileNotFoundError:
        raise Fail(f"no group '{a.name}'", EX_NOENT)
    tinfo = subvol_show(t)
    for m in a.members:
        m = os.path.realpath(m)
        if not snapshot_of(subvol_show(m), tinfo):
            raise Fail(f"{m}: not a snapshot of the template {t}", EX_FAIL)
        group_write("add", f"{a.name} {m}\n")
    return EX_OK


def cmd_group_del(a):
    group_write("delete", a.name + "\n")
    return EX_OK


def cmd_group_list(a):
    gs = groups()
    if a.json:
        print(json.dumps(gs, indent=1))
        return EX_OK
    for g in gs:
        s = g["stats"]
        auto = f" + {len(g['auto_members'])} automatic" if g.get("auto_members") else ""
        print(f"{g['name']}\t{g['template']}\t{len(g['members'])} members{auto}\t"
              f"{s['pages_shared'] * 4 / 1024:.1f} MiB shared\t{s['files_bound']} files"
              + ("\tauto" if g.get("auto") else ""))
    return EX_OK


def cmd_list(a):
    if dmroute.layer():
        ts = templates()
    else:
        dmroute.say(f"the templates recorded in {os.path.join(STATE, 'templates')} (a table "
                    "reload or a reboot forgets them: template refresh registers one again)")
        ts = dmroute.recorded()
    if a.json:
        print(json.dumps(ts, indent=1))
    else:
        for t in ts:
            extents = "?" if t["extents"] is None else t["extents"]
            mib = "?" if t["sectors"] is None else f"{t['sectors'] * 512 / 2**20:.1f}"
            print(f"{t['name']}\t{t['device']}\t{extents} extents\t{mib} MiB")
    return EX_OK


def cmd_status(a):
    devices = device_status()
    # Without the sysfs layer (the DKMS deployment) there are only the
    # target's counters: templates are the device's whitelist tags.
    layer = os.path.isdir(os.path.join(SYSFS, "templates"))
    status = {"devices": devices, "templates": templates() if layer else [],
              "groups": groups(), "sysfs": layer}
    if a.json:
        print(json.dumps(status, indent=1))
        return EX_OK
    if not devices:
        print("no totalcow devices")
    for d in devices:
        look = d["hits"] + d["misses"]
        print(f"{d['name']}: {d['cached_blocks'] * 4 / 1024:.1f}/"
              f"{d['capacity_blocks'] * 4 / 1024:.1f} MiB cached, hit rate "
              f"{(100 * d['hits'] / look) if look else 0:.1f}% ({d['hits']} hits, "
              f"{d['misses']} misses, {d['waited']} waited for a fill), "
              f"{d['bypassed']} bypassed, "
              f"{d['invalidations']} invalidations, {d['templates']} templates")
    for t in status["templates"]:
        print(f"  template {t['name']} on {t['device']}: {t['extents']} extents, "
              f"{t['sectors'] * 512 / 2**20:.1f} MiB")
    if not layer:
        print(f"({SYSFS} is absent: dm-totalcow without the sysfs layer, as with DKMS; "
              "the template commands send dmsetup messages, template list shows what "
              "they recorded)")
    return EX_OK
