# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl template add|del|list|refresh: files whose disk extents are
whitelisted on a dm-totalcow device, through the sysfs layer or, without
it, dmsetup messages (dmroute)."""

import os
import stat

from .. import dmroute, features, output, records
from ..args import HELP_TEMPLATE, json_flag, kernel_name, quiet_flag, subcommands
from ..dmsetup import totalcow_name
from ..errors import EX_FAIL, EX_NOENT, EX_OK, EX_USAGE, Fail
from ..features import TEMPLATES
from ..sysfs import STAGING_SUFFIX, deregister, register as sysfs_register, replace, templates
from ..walker import Walker, devname


def register(sub):
    tp = sub.add_parser("template", help="add, delete, list or refresh templates")
    tsub = subcommands(tp, "tcmd")
    p = tsub.add_parser("add", help="register files or directory trees as a template")
    kernel_name(p, HELP_TEMPLATE)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a file or directory tree on btrfs on the totalcow device")
    p.add_argument("--device", metavar="DEV",
                   help="the totalcow device (needed for a multi-device btrfs)")
    quiet_flag(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the ranges (sectors: start length) instead of registering")
    p.add_argument("--fiemap", action="store_true",
                   help="use FIEMAP on every file instead of reading the fs tree")
    p.set_defaults(func=cmd_add)
    p = tsub.add_parser("del", help="deregister a template")
    kernel_name(p, HELP_TEMPLATE)
    p.set_defaults(func=cmd_del)
    p = tsub.add_parser("list", help="list templates")
    json_flag(p)
    p.set_defaults(func=cmd_list)
    p = tsub.add_parser("refresh", help="re-read a template's extents (all or nothing)")
    kernel_name(p, HELP_TEMPLATE)
    quiet_flag(p)
    p.set_defaults(func=cmd_refresh)


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


def cmd_add(a):
    return add(a.name, a.paths, device=a.device, quiet=a.quiet, dry_run=a.dry_run,
               fiemap=a.fiemap)


def add(name, paths, device=None, quiet=False, dry_run=False, fiemap=False):
    """template add: whitelist the extents of paths as template name, on
    device (a block device's path; default: the file system's device), and
    record them. container template registers its rootfs with this."""
    if name.endswith(STAGING_SUFFIX):
        raise Fail(f"template names ending in '{STAGING_SUFFIX}' are reserved for "
                   "template refresh", EX_USAGE)
    # Without the sysfs layer the kernel cannot say whether a template
    # exists (a whitelist_add would merge into it): the record says.
    if not dry_run and not features.has(TEMPLATES) and records.TEMPLATES.exists(name):
        path = records.TEMPLATES.path(name)
        raise Fail(f"template {name} exists (recorded in {path}): template "
                   f"refresh {name} registers it again, template del {name} removes it")
    rdev = None
    if device:
        try:
            st = os.stat(device)
        except OSError as e:
            raise Fail(f"{device}: {e.strerror}", EX_NOENT)
        if not stat.S_ISBLK(st.st_mode):
            raise Fail(f"{device} is not a block device", EX_USAGE)
        rdev = st.st_rdev
    return walk_and_register(name, paths, rdev, quiet, dry_run, fiemap)


def walk_and_register(name, paths, rdev, quiet, dry_run=False, fiemap=False, refresh=False,
                      old_ranges=None):
    """Walk paths to their ranges on totalcow device rdev (None: the file
    system's), then print them (dry_run), or register them as template
    name (refresh: in place of its ranges, all or nothing; without the
    sysfs layer old_ranges, the recorded ones, are what it replaces) and
    record the template."""
    # Symbolic links named on the command line are followed (as find -H
    # does); those met inside a directory tree are skipped.
    real = []
    for p in paths:
        if not os.path.exists(p):
            raise Fail(f"{os.path.abspath(p)}: no such file or directory", EX_NOENT)
        real.append(os.path.realpath(p))
    w = Walker(rdev, quiet)
    w.by_tree = not fiemap
    for p in real:
        try:
            w.walk(p)
        except Fail as e:
            raise Fail(f"{p}: {e}", e.code)
    ranges = w.merged()
    if not ranges:
        raise Fail("no extents to register (only inline, empty or sparse files?)", EX_FAIL)
    if dry_run:
        for s, n in ranges:
            print(s, n)
        warning = dry_run_warning(w.rdev)
        if warning:
            output.say(warning)
        return EX_OK
    if not features.has(TEMPLATES):
        if refresh:
            dmroute.replace(name, w.rdev, old_ranges, ranges)
        else:
            dmroute.add(name, w.rdev, ranges)
    elif refresh:
        replace(name, w.rdev, ranges)
    else:
        sysfs_register(name, w.rdev, ranges)
    # The ranges are recorded too: without the sysfs layer they are all
    # there is to know what a refresh must delete.
    records.TEMPLATES.save(name, {"device": devname(w.rdev), "paths": real,
                                  "ranges": [list(r) for r in ranges]})
    sectors = sum(n for _, n in ranges)
    print(f"template {name}: {w.files} files, {len(ranges)} extents, "
          f"{output.sectors_mib(sectors)} MiB on {devname(w.rdev)}")
    for what, n in sorted(w.notes.items()):
        print(f"  {n} {what}")
    return EX_OK


def cmd_refresh(a):
    rec = records.TEMPLATES.load(a.name)
    if not features.has(TEMPLATES):
        # dm-totalcow alone: the record's device and ranges are all there
        # is to go by (dmroute.replace).
        if "ranges" not in rec:
            # Without the old ranges a failure could not be taken back
            # exactly (deleting what was sent could take ranges the
            # template had): refuse rather than risk a half refresh.
            raise Fail(f"the record of template {a.name} has no ranges (an older totalcowctl "
                       f"wrote it): template del {a.name}, then template add it again")
        return walk_and_register(a.name, rec["paths"], records.device_of(rec), a.quiet,
                                 refresh=True, old_ranges=rec["ranges"])
    current = {t["name"]: t for t in templates()}
    if a.name not in current:
        raise Fail(f"no such template: {a.name}", EX_NOENT)
    # The device the template was registered on (a multi-device file
    # system needs it), which must still be the one the kernel has.
    if rec["device"] != current[a.name]["device"]:
        raise Fail(f"template {a.name} is on {current[a.name]['device']} in the kernel "
                   f"but was registered on {rec['device']}: add it again")
    return walk_and_register(a.name, rec["paths"], records.device_of(rec), a.quiet, refresh=True)


def cmd_del(a):
    if features.has(TEMPLATES):
        deregister(a.name)
    else:
        try:
            rec = records.TEMPLATES.load(a.name)
        except Fail as e:
            raise Fail(f"{e}: without the sysfs layer only the record tells its device "
                       f"(dmsetup message DEV 0 whitelist_del {a.name} removes it by hand)",
                       e.code)
        dmroute.delete(a.name, rec)
    records.TEMPLATES.delete(a.name)
    return EX_OK


def cmd_list(a):
    if features.has(TEMPLATES):
        ts = templates()
    else:
        dmroute.say(f"the templates recorded in {records.TEMPLATES.dir()} (a table "
                    "reload or a reboot forgets them: template refresh registers one again)")
        ts = dmroute.recorded()

    def lines(ts):
        for t in ts:
            extents = "?" if t["extents"] is None else t["extents"]
            mib = "?" if t["sectors"] is None else output.sectors_mib(t["sectors"])
            yield f"{t['name']}\t{t['device']}\t{extents} extents\t{mib} MiB"
    return output.listing(a, ts, lines)
