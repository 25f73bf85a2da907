#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""NAME
    totalcowctl - register btrfs template files with dm-totalcow

SYNOPSIS
    totalcowctl template add NAME PATH... [--device DEV] [--dry-run] [--fiemap]
    totalcowctl template del NAME
    totalcowctl template list [--json]
    totalcowctl template refresh NAME
    totalcowctl group create NAME TEMPLATE_DIR [--auto]
    totalcowctl group auto NAME on|off
    totalcowctl group add NAME MEMBER_DIR...
    totalcowctl group del NAME
    totalcowctl group list [--json]
    totalcowctl extents enable [--scope SCOPE] PATH...
    totalcowctl extents disable [--scope SCOPE] PATH...
    totalcowctl extents list [--json]
    totalcowctl container template NAME [-P LXCPATH] [--auto] [--no-dm] [--no-hooks]
    totalcowctl container untemplate NAME [-P LXCPATH]
    totalcowctl container join|leave NAME [-P LXCPATH]
    totalcowctl container list [--json]
    totalcowctl container restore
    totalcowctl container hook NAME lxc clone|pre-start|destroy
    totalcowctl status [--json]

DESCRIPTION
    A template is a set of files (PATHs are files or whole directory trees)
    on a btrfs file system that sits directly on a dm-totalcow device. Their
    disk extents are whitelisted on that device, so that reads of them from
    any snapshot are served from memory after the first.

    The regular files below each PATH are found by walking the directories
    (no file is opened); after a sync, their file extent items are read
    straight from their subvolume's fs tree (BTRFS_IOC_TREE_SEARCH_V2, one
    call per MiB of items) and give btrfs logical addresses; the chunk tree
    maps those to offsets on the file system's devices. A PATH that is a
    single file, and every file with --fiemap,
    is opened and asked with FIEMAP (FIEMAP_FLAG_SYNC) instead:
    the same ranges (tests check that both agree with btrfs-map-logical),
    but seven times slower on 100k files, and compressed extents are only
    known by their logical length. Extents are then written to
    /sys/kernel/mm/totalcow/templates/ in batches of less than a page, or,
    on a kernel without that sysfs layer (a stock kernel with dm-totalcow
    from DKMS), sent to the device with dmsetup messages (WITHOUT THE
    SYSFS LAYER below).

    Extent kinds:
      inline         skipped: the data lives in metadata, cached once anyway
      compressed     whitelisted exactly from the fs tree; with --fiemap from
                     its disk address for its logical length (FIEMAP does not
                     report the compressed length; the extra blocks are
                     harmless)
      unwritten      skipped: preallocated, reads return zeroes without I/O
      delalloc       written by the sync first (with --fiemap: FIEMAP_FLAG_SYNC)
      holes          nothing to register
    Profiles: SINGLE, DUP and RAID1/RAID1C3/RAID1C4 register every copy that
    lives on the totalcow device (a read may be served from any copy); copies
    on other devices are reported and not cached. Striped profiles (RAID0,
    RAID10, RAID5, RAID6) are refused.

    add records the device, the paths and the ranges in
    $TOTALCOW_STATE_DIR/templates/NAME.json (default /var/lib/totalcow)
    so that refresh can walk the paths again: after a balance or
    defragment moves extents, the registered ranges are stale (stale
    ranges only waste cache; writes to them still invalidate, so nothing
    is ever read back wrong), and refresh replaces them with the current
    ones, on the device recorded at add (as --device would), all or
    nothing: the new ranges are staged as template NAME:refresh (names
    ending in :refresh are reserved for this), then NAME is registered
    again from them; a failure leaves NAME with its old ranges. A
    NAME:refresh left by a killed refresh is removed by the next one.
    (Without the sysfs layer, refresh works differently: see below.)

    add --dry-run prints the ranges and registers nothing; if the file
    system's device (or --device) is not a dm-totalcow device, it says on
    stderr that no totalcow device is under the file system and the ranges
    would have nowhere to go.

    status shows each totalcow device's counters (dmsetup status, root
    only: exit 5 otherwise; if dmsetup fails, its own reason) and, with
    the sysfs layer, templates and groups; without it (dm-totalcow from
    DKMS) the counters alone.

    A group (page-cache sharing, /sys/kernel/mm/totalcow/groups/) is a
    read-only template subvolume and snapshots of it: a member file's page
    that is identical to the template file's page at the same offset is
    kept once. group create refuses a template that is not a read-only
    subvolume; group add refuses a directory that is not a subvolume
    snapshotted from the template (its parent UUID is the template's UUID,
    or, for a template that came from btrfs receive, its received UUID).
    The kernel checks the same lineage itself (EXDEV) and proves or
    compares content page by page. With --auto (or group auto NAME on),
    members join by themselves: any subvolume of the template's file
    system whose parent UUID chain reaches the template within 4
    snapshots (a clone, a clone of a clone) is a member from its first
    read, with no group add, no hook and no privilege in the container;
    group list counts them, --json lists them (auto_members), and a
    deleted one leaves the group. Groups need the kernel's page-cache
    sharing layer (/sys/kernel/mm/totalcow/groups, the TotalCOW kernel
    built with mm-patches/); without it group create, auto, add and del
    say so and exit 4, and group list lists none.

    extents (shared extents, /sys/kernel/mm/totalcow/extents/) puts the
    btrfs subvolume that holds each PATH in sharing scope SCOPE (default:
    default), or takes it out: files of subvolumes in a scope keep one
    copy in memory of the data extents they share, whichever file refers
    to them (reflinked copies, deduplicated files, snapshots, writable or
    not); files in different scopes never share a page, so tenants that
    must not observe each other's reads belong in different scopes.
    Snapshots made from an enabled subvolume later (containers made from
    an image) follow it into its scope at their first read, and so do
    snapshots of those, up to 8 deep; enable puts a followed snapshot in a
    scope of its own instead, and disable keeps a subvolume, and the
    snapshots made from it afterwards, out. A subvolume is enabled in one
    scope at most, and the kernel forgets scopes when the file system is
    unmounted. enable is all or nothing: if a PATH is refused, the ones
    enabled before it are disabled again. list shows each file system's
    scopes, the subvolumes enabled and followed, and what they hold. Like
    groups, they need the TotalCOW kernel; without it extents says so and
    exits 4, as it does for a file system that cannot share extents
    (mixed block groups, zoned).

    container (LXC, docs/lxc.md) works on containers by name, in LXCPATH
    (default: lxc-config lxc.lxcpath, /var/lib/lxc). container template
    turns a stopped container whose root file system is a btrfs subvolume
    (lxc-create -B btrfs) into a template: it makes the subvolume read-only,
    whitelists its extents on the dm-totalcow device (template NAME; skipped
    with a note when btrfs is not on a totalcow device, or with --no-dm),
    creates the page-cache sharing group NAME, appends the TotalCOW hooks
    (lxc.hook.clone, lxc.hook.pre-start, lxc.hook.destroy: `totalcowctl
    container hook`) to its config unless --no-hooks, and records all of
    it in $TOTALCOW_STATE_DIR/containers/NAME.json. Either everything is
    done or, on a failure, everything done so far is undone. Clones made
    with `lxc-copy -s` copy the hooks with the config:
      clone      the clone joins the group of its template (its rootfs's
                 parent UUID is the template's UUID); the template's group
                 and dm registration are recreated from the record first if
                 they are gone (after a reboot)
      pre-start  the same, so that a container started after a reboot, or
                 cloned while TotalCOW was off, is a member again
      destroy    the clone leaves the group; destroying the template itself
                 deletes its group and dm registration
    A hook never makes LXC fail: a clone of a container that is not a
    registered template, or one that cannot join (no TotalCOW kernel), runs
    as a plain LXC container, with the reason on stderr (LXC's log).
    With --auto the template's group has automatic membership (as group
    auto): every clone joins at its first read, hooks or not. An
    unprivileged container (one with lxc.idmap in its config, whose hooks
    run in a user namespace without the privilege to join) always gets
    --auto and no hooks. restore recreates the groups and dm registrations
    of every recorded template, which the kernel keeps in memory only: run
    it at boot where no pre-start hook does (unprivileged fleets).
    join and leave do by hand what the hooks do; untemplate undoes
    template (the subvolume stays read-only). leave writes groups/remove;
    on a kernel without it, leave deletes the group and creates it again
    with the other members (their sharing starts over: pages they cache
    from then on are shared again, pages cached privately meanwhile stay
    private until reclaimed). Hooks and commands that change groups take
    $TOTALCOW_STATE_DIR/lock.

WITHOUT THE SYSFS LAYER
    On a kernel without /sys/kernel/mm/totalcow (a stock distro kernel
    with dm-totalcow from DKMS), template add, refresh, del and list talk
    to the target itself with `dmsetup message DEV 0 ...` (docs/
    dm-totalcow.rst, Messages; root only) and say so in one line on
    stderr:
      add      checks that the file system's device (or --device) is a
               dm-totalcow device and sends the ranges, 64 KiB of them a
               message: whitelist_add NAME START LENGTH...
      refresh  walks the recorded paths again, sends every current range
               (whitelist_add; the target merges those it has), then
               deletes the stale ones, recorded at the last add or refresh
               and no longer the template's (whitelist_del NAME START
               LENGTH...): a range that stays the template's is never
               missing from it. Stale ranges the target does not have (a
               table reload or a reboot forgot the template, which refresh
               registers again) are left alone, with a note.
      del      whitelist_del NAME on the recorded device
      list     the templates recorded in $TOTALCOW_STATE_DIR/templates
               (--json: "recorded": true), with their recorded extents
    Nothing is left half done: if a message fails, the ones this command
    sent are taken back (an add by deleting the ranges it added, a delete
    by adding them again) and it exits 1 with dmsetup's reason. The target
    cannot list its templates or their ranges, so the record (device,
    paths and ranges) is what these go by: add refuses a NAME that is
    recorded (refresh or del it), refresh refuses a record without ranges
    (an older totalcowctl's: del and add again), and a NAME registered by
    other means (dmsetup message by hand) is merged with, not refused.

OPTIONS
    --device DEV   the dm-totalcow device (default: the file system's device)
    --json         machine-readable output
    --dry-run      (add) print the sector ranges instead of registering
                   (and warn when no totalcow device would take them)
    --fiemap       (add) FIEMAP on every file instead of reading the fs tree
    -q, --quiet    no progress on the terminal
    -P LXCPATH     (container) the LXC container directory
    --no-dm        (container template) page-cache sharing only
    --no-hooks     (container template) leave the container's config alone
                   (hooks set elsewhere, e.g. /etc/lxc/default.conf)
    --auto         (group create, container template) automatic membership
    --scope SCOPE  (extents) the sharing scope: 1 to 32 of [A-Za-z0-9_.-]

EXIT STATUS
    0  success
    1  the operation failed (the kernel refused it, an I/O error, or
       nothing to register)
    2  bad usage
    3  no such template, path or container
    4  a path is not on btrfs, its file system is not on a totalcow device
       or has a striped data profile, or btrfs names a device that is not
       there (container: the container's rootfs is not a btrfs subvolume;
       group, extents: the kernel has no page-cache sharing layer;
       extents: the file system cannot share extents)
    5  not permitted (root only)
    6  (container template) the container is running
    container hook exits 0 whenever LXC should go on, 2 on bad usage.

LANGUAGE
    Python, standard library only: the ioctls (FIEMAP, BTRFS_IOC_TREE_SEARCH,
    BTRFS_IOC_INO_LOOKUP, BTRFS_IOC_FS_INFO, BTRFS_IOC_DEV_INFO) are reached
    with fcntl.ioctl and struct on the uapi layouts, nothing needs compiling
    on the host, and a registration costs a few large ioctls plus the
    directory walk, not per-file work in the language.
"""

import argparse

from . import output
from .args import Parser, subcommands, valid_name
from .commands import GROUPS
from .errors import EX_FAIL, EX_PERM, Fail

__all__ = ["Parser", "main", "parser", "valid_name"]


def parser():
    """The whole command line: every command group's commands."""
    ap = Parser(prog="totalcowctl", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter, add_help=True)
    sub = subcommands(ap, "cmd")
    for group in GROUPS:
        group.register(sub)
    return ap


def main(argv=None):
    ap = parser()
    a = ap.parse_args(argv)
    if a.func is None:
        parser_, choices = a.need_command
        parser_.error(f"missing command (choose from {', '.join(choices.choices)})")
    # Only names that become kernel names (templates', groups') are
    # checked here; other containers' names are LXC's.
    if getattr(a, "kernel_name", False) and not valid_name(a.name):
        ap.error(f"invalid template name '{a.name}' (1-64 of [A-Za-z0-9._:+-])")
    try:
        return a.func(a)
    except Fail as e:
        output.say(e)
        return e.code
    except PermissionError as e:
        output.say(e)
        return EX_PERM
    except OSError as e:
        output.say(e)
        return EX_FAIL
