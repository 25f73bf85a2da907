# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl container template|untemplate|join|leave|list|restore|hook:
LXC containers as templates, and the hooks that make their clones
members (docs/lxc.md; LXC itself: lxc.py)."""

import argparse
import os
import sys

from .. import features, output, records
from ..args import HELP_LXCPATH, json_flag, subcommands
from ..btrfs import run_btrfs, subvol_show
from ..errors import EX_BUSY, EX_FAIL, EX_NOENT, EX_NOTTC, EX_OK, EX_PERM, EX_USAGE, Fail
from ..features import GROUP_REMOVE, GROUPS
from ..lxc import (CONTAINER_HOOKS, container_config, container_rootfs, container_state,
                   default_lxcpath, enter_outer_mntns, hook_lines, is_hook_line,
                   lxc_rootfs_spec, unprivileged)
from ..sysfs import (deregister, dm_template_exists, group_auto, group_auto_members,
                     group_exists, group_members, group_names, group_of_member, group_read,
                     group_set_auto, group_stats, group_write)
from . import group, template


def register(sub):
    cp = sub.add_parser("container", help="LXC containers as templates; hooks for clones")
    csub = subcommands(cp, "ccmd")
    p = csub.add_parser("template", help="make a stopped btrfs container a template")
    # The container's name is LXC's; this one becomes the template's and
    # the group's, a kernel name.
    p.add_argument("name", metavar="NAME",
                   help="the container (also the template's and group's name)")
    p.set_defaults(kernel_name=True)
    p.add_argument("-P", "--lxcpath", help=HELP_LXCPATH)
    p.add_argument("--no-dm", action="store_true", help="page-cache sharing only")
    p.add_argument("--no-hooks", action="store_true", help="do not edit its config")
    p.add_argument("--auto", action="store_true",
                   help="clones join at their first read, hooks or not (group auto)")
    p.set_defaults(func=cmd_container_template)
    p = csub.add_parser("untemplate", help="undo container template")
    p.add_argument("name", metavar="NAME", help="the template container")
    p.add_argument("-P", "--lxcpath", help="the template's LXC directory (checked against "
                   "the one recorded at container template)")
    p.set_defaults(func=cmd_container_untemplate)
    for what, fn in (("join", cmd_container_join), ("leave", cmd_container_leave)):
        p = csub.add_parser(what, help=f"{what} the group of its template by hand")
        p.add_argument("name", metavar="NAME",
                       help="a clone (lxc-copy -s) of a template container")
        p.add_argument("-P", "--lxcpath", help=HELP_LXCPATH)
        p.set_defaults(func=fn)
    p = csub.add_parser("list", help="container templates, their groups and members")
    json_flag(p)
    p.set_defaults(func=cmd_container_list)
    p = csub.add_parser("restore", help="recreate recorded templates' groups (at boot)")
    p.set_defaults(func=cmd_container_restore)
    p = csub.add_parser("hook", help="LXC hook entry point (lxc.hook.clone, pre-start, destroy)")
    p.add_argument("name", metavar="NAME", help="the container (LXC passes it)")
    p.add_argument("section", metavar="SECTION", help="the config section (LXC passes 'lxc')")
    p.add_argument("type", metavar="HOOK", help="the hook: clone, pre-start or destroy")
    p.add_argument("extra", nargs=argparse.REMAINDER, metavar="ARG",
                   help="further arguments from LXC")
    p.set_defaults(func=cmd_container_hook)


def container_records():
    return [rec for _, rec in records.CONTAINERS.items()]


def ensure_template(rec):
    """Recreate a recorded template's group and dm registration if they
    are gone (after a reboot, or a group deleted by hand)."""
    done = []
    if not group_exists(rec["group"]):
        group.create(rec["group"], rec["rootfs"], rec.get("auto"))
        output.say(f"group {rec['group']} created again for template {rec['name']}", err=False)
        done.append("group")
    elif rec.get("auto") and not group_auto(rec["group"]):
        # an auto template whose group lost it (turned off by hand): its
        # unprivileged clones would never join again
        group_set_auto(rec["group"], True)
        done.append("automatic membership")
    if rec.get("dm") and not dm_template_exists(rec["name"]):
        template.add(rec["name"], [rec["rootfs"]], quiet=True)
        done.append("dm template")
    return done


def template_for(rootfs):
    """(record or None, group) of the template that rootfs is a snapshot
    of: a recorded container template, or else any group whose template
    subvolume is the parent of rootfs. (None, None) if there is none."""
    try:
        parent = subvol_show(rootfs).get("Parent UUID", "-")
    except Fail:
        return None, None  # not a subvolume: a plain container
    if parent in ("", "-"):
        return None, None
    for rec in container_records():
        if rec.get("uuid") == parent:
            return rec, rec["group"]
    for g in group_names():
        try:
            t = group_read(g, "template").rstrip("\n")
            if subvol_show(t).get("UUID") == parent:
                return None, g
        except (OSError, Fail):
            continue
    return None, None


def join(name, rootfs):
    """Make container rootfs a member of its template's group. Returns a
    message, or None when it is no clone of a template."""
    g = group_of_member(rootfs)
    if g is not None:  # the common case at pre-start: sysfs reads only
        return f"{name} is a member of group {g}"
    rec, g = template_for(rootfs)
    if g is None:
        return None
    if rec:
        ensure_template(rec)
    group_write("add", f"{g} {rootfs}\n")
    return f"{name} joined group {g}"


def leave(name, rootfs):
    """Take container rootfs out of its group: groups/remove, or on a
    kernel without it, the group deleted and created again without it."""
    g = group_of_member(rootfs)
    if g is None:
        return None
    if features.has(GROUP_REMOVE):
        group_write("remove", f"{g} {rootfs}\n")
        return f"{name} left group {g}"
    template_dir = group_read(g, "template").rstrip("\n")
    keep = [m for m in group_members(g) if m != rootfs and not m.endswith(" (deleted)")]
    group_write("delete", g + "\n")
    group_write("create", f"{g} {template_dir}\n")
    lost = []
    for m in keep:
        try:
            group_write("add", f"{g} {m}\n")
        except Fail as e:
            lost.append(f"{m}: {e}")
    if lost:
        raise Fail(f"{name} left group {g}, but these members could not be added "
                   "again: " + "; ".join(lost))
    return f"{name} left group {g}"


def need_root():
    if os.geteuid() != 0:
        raise Fail("only root may change templates and groups", EX_PERM)


def cmd_container_template(a):
    need_root()
    lxcpath = a.lxcpath or default_lxcpath()
    conf = container_config(lxcpath, a.name)
    rootfs = container_rootfs(conf, a.name)
    info = subvol_show(rootfs)
    if records.CONTAINERS.exists(a.name):
        raise Fail(f"{a.name} is a template already (untemplate it first)")
    features.need(GROUPS)
    if group_exists(a.name):
        raise Fail(f"a group named {a.name} exists already")
    if not a.no_dm and dm_template_exists(a.name):
        raise Fail(f"a dm template named {a.name} exists already")
    other = group_of_member(rootfs)
    if other:
        raise Fail(f"{a.name} is a member of group {other}: a clone cannot be a template")
    state = container_state(lxcpath, a.name)
    if state != "STOPPED":
        raise Fail(f"{a.name} is {state.lower()}: stop it first (its rootfs becomes "
                   "read-only)", EX_BUSY)
    # An unprivileged container's hooks run without the privilege to join:
    # its clones join by lineage at their first read instead.
    unpriv = unprivileged(conf)
    auto = a.auto or unpriv
    hooks = not a.no_hooks and not unpriv

    undo = []
    try:
        if "readonly" not in info.get("Flags", ""):
            run_btrfs(["property", "set", rootfs, "ro", "true"])
            undo.append(lambda: run_btrfs(["property", "set", rootfs, "ro", "false"]))
        dm = False
        if not a.no_dm:
            try:
                template.add(a.name, [rootfs], quiet=True)
                dm = True

                def unregister():
                    deregister(a.name)
                    records.TEMPLATES.delete(a.name)
                undo.append(unregister)
            except Fail as e:
                if e.code != EX_NOTTC:
                    raise
                output.say(f"{a.name}: no dm layer ({e}); page-cache sharing only", err=False)
        group.create(a.name, rootfs, auto)
        undo.append(lambda: group_write("delete", a.name + "\n"))
        if hooks:
            with open(conf) as f:
                old = f.read()
            exe = os.path.realpath(sys.argv[0])
            add = [ln for ln in hook_lines(exe) if ln not in old.splitlines()]
            if add:
                with open(conf, "a") as f:
                    f.write(("" if old.endswith("\n") or not old else "\n")
                            + "\n".join(add) + "\n")

                def restore():
                    with open(conf, "w") as f:
                        f.write(old)
                undo.append(restore)
        records.CONTAINERS.save(a.name, {"name": a.name, "lxcpath": lxcpath, "rootfs": rootfs,
                                         "uuid": info["UUID"], "group": a.name, "dm": dm,
                                         "hooks": hooks, "auto": auto})
    except BaseException:
        for u in reversed(undo):
            try:
                u()
            except (Fail, OSError) as e:
                output.say(f"undo failed: {e}")
        raise
    print(f"container {a.name}: template {rootfs} (read-only), group {a.name}"
          + (", extents whitelisted" if dm else "")
          + (f", hooks in {conf}" if hooks else "")
          + (", clones join at their first read (auto)" if auto else "")
          + ("; unprivileged container: no hooks" if unpriv else ""))
    return EX_OK


def untemplate(rec):
    if group_exists(rec["group"]):
        group_write("delete", rec["group"] + "\n")
    if rec.get("dm") and dm_template_exists(rec["name"]):
        deregister(rec["name"])
    conf = os.path.join(rec["lxcpath"], rec["name"], "config")
    if rec.get("hooks") and os.path.isfile(conf):
        with open(conf) as f:
            lines = f.read().splitlines()
        if any(is_hook_line(ln) for ln in lines):
            with open(conf, "w") as f:
                f.write("".join(ln + "\n" for ln in lines if not is_hook_line(ln)))
    records.CONTAINERS.delete(rec["name"])
    records.TEMPLATES.delete(rec["name"])


def cmd_container_untemplate(a):
    need_root()
    rec = records.CONTAINERS.load(a.name)
    # Records are kept per name; -P names which container that must be.
    if a.lxcpath and os.path.realpath(a.lxcpath) != os.path.realpath(rec["lxcpath"]):
        raise Fail(f"{a.name} is a template in {rec['lxcpath']}, not in {a.lxcpath}",
                   EX_NOENT)
    with records.lock():
        untemplate(rec)
    print(f"container {a.name}: no longer a template (its rootfs stays read-only)")
    return EX_OK


def cmd_container_join(a, leaving=False):
    need_root()
    lxcpath = a.lxcpath or default_lxcpath()
    rootfs = container_rootfs(container_config(lxcpath, a.name), a.name)
    with records.lock():
        msg = (leave if leaving else join)(a.name, rootfs)
    if msg is None:
        raise Fail(f"{a.name} is " + ("in no group" if leaving else
                                     "not a snapshot of a registered template"), EX_NOENT)
    print(msg)
    return EX_OK


def cmd_container_leave(a):
    return cmd_container_join(a, leaving=True)


def cmd_container_list(a):
    out = []
    for rec in container_records():
        g = rec["group"]
        r = dict(rec, members=[], auto_members=[], stats={})
        if group_exists(g):
            r["members"] = group_members(g)
            r["auto_members"] = [p for _, p in group_auto_members(g)]
            r["stats"] = group_stats(g)
        out.append(r)

    def lines(out):
        for r in out:
            yield (f"{r['name']}\t{r['rootfs']}\tgroup {r['group']}"
                   f"{'' if group_exists(r['group']) else ' (gone)'}"
                   f"\t{len(r['members']) + len(r['auto_members'])} members"
                   f"\t{output.pages_mib(r['stats'].get('pages_shared', 0))} MiB shared"
                   f"\tdm {'yes' if r['dm'] else 'no'}")
    return output.listing(a, out, lines)


def cmd_container_restore(a):
    """Recreate the groups (automatic membership included) and dm
    registrations of every recorded template: the kernel keeps them in
    memory only. For boot, where no hook runs (unprivileged fleets)."""
    need_root()
    failed = 0
    with records.lock():
        for rec in container_records():
            try:  # one template that cannot come back must not keep the others out
                done = ensure_template(rec)
            except (Fail, OSError) as e:
                output.say(f"container {rec['name']}: not restored: {e}")
                failed += 1
                continue
            print(f"container {rec['name']}: "
                  + (", ".join(done) + " restored" if done else "nothing to restore"))
    return EX_FAIL if failed else EX_OK


def cmd_container_hook(a):
    """LXC hook entry point: argv NAME lxc TYPE [ARG...], LXC_* environment."""
    if a.section != "lxc" or a.type not in CONTAINER_HOOKS:
        output.say(f"container hook: want 'NAME lxc {{{','.join(CONTAINER_HOOKS)}}}', "
                   f"got '{a.name} {a.section} {a.type}'")
        return EX_USAGE
    try:
        spec = os.environ.get("LXC_ROOTFS_PATH")
        if spec:
            typ, path = lxc_rootfs_spec(spec)
            if typ not in ("btrfs", "dir"):
                return EX_OK  # overlay, lvm ...: not ours
            rootfs = os.path.realpath(path)
        else:
            lxcpath = default_lxcpath()
            conf = os.environ.get("LXC_CONFIG_FILE") or container_config(lxcpath, a.name)
            rootfs = container_rootfs(conf, a.name)
        if not features.has(GROUPS):
            return EX_OK  # no TotalCOW kernel: plain LXC
        if a.type == "clone":
            enter_outer_mntns()
        with records.lock():
            if a.type == "destroy":
                rec = next((r for r in container_records() if r["rootfs"] == rootfs), None)
                if rec:
                    untemplate(rec)
                    msg = f"template {a.name} deregistered, group {rec['group']} deleted"
                else:
                    msg = leave(a.name, rootfs)
            else:
                msg = join(a.name, rootfs)
        if msg:
            output.say(msg, err=False)
    except (Fail, OSError) as e:
        output.say(f"container hook {a.type} {a.name}: {e}; it runs without page-cache sharing")
    return EX_OK
