# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl group create|auto|add|del|list: page-cache sharing groups
(/sys/kernel/mm/totalcow/groups/), a read-only template subvolume and
snapshots of it."""

import os

from .. import features, output
from ..args import HELP_GROUP, json_flag, kernel_name, subcommands
from ..btrfs import snapshot_of, subvol_show
from ..errors import EX_FAIL, EX_NOENT, EX_OK, Fail
from ..features import GROUPS
from ..sysfs import group_read, group_set_auto, group_write, groups


def register(sub):
    gp = sub.add_parser("group", help="page-cache sharing groups")
    gsub = subcommands(gp, "gcmd")
    p = gsub.add_parser("create", help="a group of a read-only template subvolume")
    kernel_name(p, HELP_GROUP)
    p.add_argument("template", metavar="TEMPLATE_DIR",
                   help="the template: a read-only btrfs subvolume")
    p.add_argument("--auto", action="store_true",
                   help="snapshots of the template (up to 4 deep) join at their first read")
    p.set_defaults(func=cmd_group_create)
    p = gsub.add_parser("auto", help="turn automatic membership on or off")
    kernel_name(p, HELP_GROUP)
    p.add_argument("state", choices=("on", "off"), metavar="on|off",
                   help="on: descendants of the template join by themselves; off: no more join")
    p.set_defaults(func=cmd_group_auto)
    p = gsub.add_parser("add", help="add snapshots of the template to a group")
    kernel_name(p, HELP_GROUP)
    p.add_argument("members", nargs="+", metavar="MEMBER_DIR",
                   help="a subvolume snapshotted from the template")
    p.set_defaults(func=cmd_group_add)
    p = gsub.add_parser("del", help="delete a group (its members unshare)")
    kernel_name(p, HELP_GROUP)
    p.set_defaults(func=cmd_group_del)
    p = gsub.add_parser("list", help="list groups with their sharing statistics")
    json_flag(p)
    p.set_defaults(func=cmd_group_list)


def create(name, template, auto=False):
    """groups/create of template (a read-only subvolume's path) as group
    name, with automatic membership if auto: all or nothing. container
    template and its hooks create groups with this too."""
    group_write("create", f"{name} {template}\n")
    if auto:
        try:
            group_set_auto(name, True)
        except Fail:
            group_write("delete", name + "\n")  # all or nothing
            raise


def cmd_group_create(a):
    t = os.path.realpath(a.template)
    info = subvol_show(t)
    if "readonly" not in info.get("Flags", ""):
        raise Fail(f"{t}: not a read-only subvolume "
                   f"(btrfs property set {t} ro true)", EX_FAIL)
    create(a.name, t, a.auto)
    return EX_OK


def cmd_group_auto(a):
    group_set_auto(a.name, a.state == "on")
    return EX_OK


def cmd_group_add(a):
    features.need(GROUPS)
    try:
        t = group_read(a.name, "template").rstrip("\n")
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
    def lines(gs):
        for g in gs:
            s = g["stats"]
            auto = f" + {len(g['auto_members'])} automatic" if g.get("auto_members") else ""
            yield (f"{g['name']}\t{g['template']}\t{len(g['members'])} members{auto}\t"
                   f"{output.pages_mib(s['pages_shared'])} MiB shared\t{s['files_bound']} files"
                   + ("\tauto" if g.get("auto") else ""))
    return output.listing(a, groups(), lines)
