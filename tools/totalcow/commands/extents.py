# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl extents enable|disable|list: subvolumes in sharing scopes
(/sys/kernel/mm/totalcow/extents/; docs/design/shared-extents.md)."""

import os

from .. import output
from ..args import json_flag, subcommands
from ..errors import EX_NOENT, EX_OK, Fail
from ..sysfs import extents_write, scopes

SCOPE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
SCOPE_MAX = 32


def scope_name(s):
    """argparse type: a scope name as the kernel takes it."""
    if not 1 <= len(s) <= SCOPE_MAX or not set(s) <= SCOPE_CHARS:
        raise ValueError(s)
    return s


scope_name.__name__ = "scope name (1 to 32 of A-Z a-z 0-9 _ . -)"


def register(sub):
    ep = sub.add_parser("extents", help="subvolumes whose files share data extents in memory")
    esub = subcommands(ep, "ecmd")
    for what, func, hlp in (("enable", cmd_extents_enable,
                             "put the subvolumes of PATHs in a sharing scope"),
                            ("disable", cmd_extents_disable,
                             "take the subvolumes of PATHs out of their scope")):
        p = esub.add_parser(what, help=hlp)
        p.add_argument("--scope", type=scope_name, default="default", metavar="SCOPE",
                       help="the sharing scope (default: default)")
        p.add_argument("paths", nargs="+", metavar="PATH",
                       help="a path in the subvolume, on btrfs")
        p.set_defaults(func=func)
    p = esub.add_parser("list", help="list sharing scopes with their subvolumes")
    json_flag(p)
    p.set_defaults(func=cmd_extents_list)


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
    def lines(ss):
        for s in ss:
            subvols = ",".join(str(v) for v in s["subvolumes"])
            followed = ",".join(str(v) for v in s["followed"]) or "-"
            yield (f"{s['fsid']}\t{s['scope']}\tsubvolumes {subvols}\tfollowed {followed}\t"
                   f"{output.pages_mib(s.get('pages', 0))} MiB cached\t"
                   f"{s.get('aliased', 0)} pages aliased\t{s.get('read_failures', 0)} failed reads")
    return output.listing(a, scopes(), lines)
