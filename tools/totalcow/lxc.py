# SPDX-License-Identifier: GPL-2.0-only
"""LXC: containers as templates, hooks that make clones members, and
entering the host's mount namespace from a hook."""

import argparse
import ctypes
import fcntl
import json
import os
import subprocess
import sys
from contextlib import contextmanager

from .btrfs import run_btrfs, subvol_show
from .commands import cmd_add, state_path
from .config import STATE, SYSFS
from .errors import EX_BUSY, EX_FAIL, EX_NOENT, EX_NOTTC, EX_OK, EX_PERM, EX_USAGE, Fail
from .sysfs import (dm_template_exists, group_auto, group_auto_members, group_exists, group_members,
                    group_of_member, group_read, group_set_auto, group_write, need_sharing,
                    sysfs_write)


CONTAINER_HOOKS = ("clone", "pre-start", "destroy")
HOOK_MARK = "# TotalCOW: clones join this template's page-cache sharing group (docs/lxc.md)"
CLONE_NEWNS = 0x00020000


def default_lxcpath():
    try:
        out = subprocess.run(["lxc-config", "lxc.lxcpath"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except FileNotFoundError:
        pass
    return "/var/lib/lxc"


def lxc_rootfs_spec(spec):
    """(type, path) of an lxc.rootfs.path value: btrfs:/p, dir:/p, /p, overlay:..."""
    if spec.startswith("/"):
        return "dir", spec
    typ, _, rest = spec.partition(":")
    return typ, rest


def container_config(lxcpath, name):
    conf = os.path.join(lxcpath, name, "config")
    if not os.path.isfile(conf):
        raise Fail(f"no container '{name}' in {lxcpath}", EX_NOENT)
    return conf


def container_rootfs(conf, name):
    """The btrfs subvolume that is the root file system of a container."""
    spec = None
    with open(conf) as f:
        for line in f:
            k, eq, v = line.partition("=")
            if eq and k.strip() == "lxc.rootfs.path":
                spec = v.strip()
    if not spec:
        raise Fail(f"{name}: no lxc.rootfs.path in {conf}", EX_NOENT)
    typ, path = lxc_rootfs_spec(spec)
    if typ not in ("btrfs", "dir"):
        raise Fail(f"{name}: its rootfs is '{typ}', not a btrfs subvolume "
                   "(lxc-create -B btrfs)", EX_NOTTC)
    return os.path.realpath(path)


def unprivileged(conf):
    """Whether the container maps its ids (lxc.idmap): LXC then runs its
    hooks in the container's user namespace, where the sysfs files cannot
    be written, so hooks cannot make its clones members."""
    with open(conf) as f:
        return any(ln.split("=", 1)[0].strip() == "lxc.idmap" for ln in f)


def container_state(lxcpath, name):
    out = subprocess.run(["lxc-info", "-P", lxcpath, "-n", name, "-s", "-H"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "UNKNOWN"


def record_path(name):
    return os.path.join(STATE, "containers", name + ".json")


def container_records():
    d = os.path.join(STATE, "containers")
    out = []
    if os.path.isdir(d):
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".json"):
                with open(os.path.join(d, fn)) as f:
                    out.append(json.load(f))
    return out


@contextmanager
def state_lock():
    """Serializes hooks and commands that change groups (lxc-copy and
    lxc-destroy may run in parallel)."""
    os.makedirs(STATE, exist_ok=True)
    fd = os.open(os.path.join(STATE, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def dm_register(name, rootfs):
    """Whitelist rootfs's extents as dm template `name` (template add)."""
    return cmd_add(argparse.Namespace(name=name, paths=[rootfs], device=None, quiet=True,
                                      dry_run=False, fiemap=False))


def ensure_template(rec):
    """Recreate a recorded template's group and dm registration if they
    are gone (after a reboot, or a group deleted by hand)."""
    done = []
    if not group_exists(rec["group"]):
        group_write("create", f"{rec['group']} {rec['rootfs']}\n")
        if rec.get("auto"):
            try:
                group_set_auto(rec["group"], True)
            except Fail:
                group_write("delete", rec["group"] + "\n")  # all or nothing
                raise
        print(f"totalcowctl: group {rec['group']} created again for template {rec['name']}")
        done.append("group")
    elif rec.get("auto") and not group_auto(rec["group"]):
        # an auto template whose group lost it (turned off by hand): its
        # unprivileged clones would never join again
        group_set_auto(rec["group"], True)
        done.append("automatic membership")
    if rec.get("dm") and not dm_template_exists(rec["name"]):
        dm_register(rec["name"], rec["rootfs"])
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
    base = os.path.join(SYSFS, "groups")
    if os.path.isdir(base):
        for g in sorted(os.listdir(base)):
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
    if os.path.exists(os.path.join(SYSFS, "groups", "remove")):
        group_write("remove", f"{g} {rootfs}\n")
        return f"{name} left group {g}"
    template = group_read(g, "template").rstrip("\n")
    keep = [m for m in group_members(g) if m != rootfs and not m.endswith(" (deleted)")]
    group_write("delete", g + "\n")
    group_write("create", f"{g} {template}\n")
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


def hook_lines(exe):
    return [HOOK_MARK] + [f"lxc.hook.{h} = {exe} container hook" for h in CONTAINER_HOOKS]


def need_root():
    if os.geteuid() != 0:
        raise Fail("only root may change templates and groups", EX_PERM)


def cmd_container_template(a):
    need_root()
    lxcpath = a.lxcpath or default_lxcpath()
    conf = container_config(lxcpath, a.name)
    rootfs = container_rootfs(conf, a.name)
    info = subvol_show(rootfs)
    if os.path.exists(record_path(a.name)):
        raise Fail(f"{a.name} is a template already (untemplate it first)")
    need_sharing()
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
                dm_register(a.name, rootfs)
                dm = True
                undo.append(lambda: sysfs_write("deregister", a.name + "\n"))
            except Fail as e:
                if e.code != EX_NOTTC:
                    raise
                print(f"totalcowctl: {a.name}: no dm layer ({e}); page-cache sharing only")
        group_write("create", f"{a.name} {rootfs}\n")
        undo.append(lambda: group_write("delete", a.name + "\n"))
        if auto:
            group_set_auto(a.name, True)
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
        os.makedirs(os.path.dirname(record_path(a.name)), exist_ok=True)
        with open(record_path(a.name), "w") as f:
            json.dump({"name": a.name, "lxcpath": lxcpath, "rootfs": rootfs,
                       "uuid": info["UUID"], "group": a.name, "dm": dm,
                       "hooks": hooks, "auto": auto}, f)
    except BaseException:
        for u in reversed(undo):
            try:
                u()
            except (Fail, OSError) as e:
                print(f"totalcowctl: undo failed: {e}", file=sys.stderr)
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
        sysfs_write("deregister", rec["name"] + "\n")
    conf = os.path.join(rec["lxcpath"], rec["name"], "config")
    if rec.get("hooks") and os.path.isfile(conf):
        with open(conf) as f:
            lines = f.read().splitlines()
        mark = [ln for ln in lines if ln == HOOK_MARK or
                (ln.startswith("lxc.hook.") and ln.endswith(" container hook"))]
        if mark:
            with open(conf, "w") as f:
                f.write("".join(ln + "\n" for ln in lines if ln not in mark))
    try:
        os.unlink(record_path(rec["name"]))
    except FileNotFoundError:
        pass
    try:
        os.unlink(state_path(rec["name"]))
    except FileNotFoundError:
        pass


def load_record(name):
    try:
        with open(record_path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        raise Fail(f"{name} is not a template (no {record_path(name)})", EX_NOENT)


def cmd_container_untemplate(a):
    need_root()
    rec = load_record(a.name)
    # Records are kept per name; -P names which container that must be.
    if a.lxcpath and os.path.realpath(a.lxcpath) != os.path.realpath(rec["lxcpath"]):
        raise Fail(f"{a.name} is a template in {rec['lxcpath']}, not in {a.lxcpath}",
                   EX_NOENT)
    with state_lock():
        untemplate(rec)
    print(f"container {a.name}: no longer a template (its rootfs stays read-only)")
    return EX_OK


def cmd_container_join(a, leaving=False):
    need_root()
    lxcpath = a.lxcpath or default_lxcpath()
    rootfs = container_rootfs(container_config(lxcpath, a.name), a.name)
    with state_lock():
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
            r["stats"] = {k: int(v) for k, v in
                          (ln.split() for ln in group_read(g, "stats").splitlines())}
        out.append(r)
    if a.json:
        print(json.dumps(out, indent=1))
        return EX_OK
    for r in out:
        shared = r["stats"].get("pages_shared", 0) * 4 / 1024
        print(f"{r['name']}\t{r['rootfs']}\tgroup {r['group']}"
              f"{'' if group_exists(r['group']) else ' (gone)'}"
              f"\t{len(r['members']) + len(r['auto_members'])} members"
              f"\t{shared:.1f} MiB shared\tdm {'yes' if r['dm'] else 'no'}")
    return EX_OK


def cmd_container_restore(a):
    """Recreate the groups (automatic membership included) and dm
    registrations of every recorded template: the kernel keeps them in
    memory only. For boot, where no hook runs (unprivileged fleets)."""
    need_root()
    failed = 0
    with state_lock():
        for rec in container_records():
            try:  # one template that cannot come back must not keep the others out
                done = ensure_template(rec)
            except (Fail, OSError) as e:
                print(f"totalcowctl: container {rec['name']}: not restored: {e}", file=sys.stderr)
                failed += 1
                continue
            print(f"container {rec['name']}: "
                  + (", ".join(done) + " restored" if done else "nothing to restore"))
    return EX_FAIL if failed else EX_OK


def enter_outer_mntns():
    """LXC runs the clone hook in a mount namespace of its own (it mounts
    the clone's rootfs there). A member is held by its path, mount
    included: join from the namespace lxc-copy was started in, the nearest
    ancestor in another mount namespace, so that the membership outlives
    the hook's namespace and groups/<g>/members names the real path."""
    own = os.readlink("/proc/self/ns/mnt")
    pid = os.getppid()
    while pid >= 1:
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return
        if ns != own:
            fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, CLONE_NEWNS):
                    raise Fail("setns into the mount namespace of lxc-copy's caller: "
                               + os.strerror(ctypes.get_errno()))
            finally:
                os.close(fd)
            return
        if pid == 1:
            return
        pid = ppid


def cmd_container_hook(a):
    """LXC hook entry point: argv NAME lxc TYPE [ARG...], LXC_* environment."""
    if a.section != "lxc" or a.type not in CONTAINER_HOOKS:
        print(f"totalcowctl: container hook: want 'NAME lxc {{{','.join(CONTAINER_HOOKS)}}}', "
              f"got '{a.name} {a.section} {a.type}'", file=sys.stderr)
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
        if not os.path.isdir(os.path.join(SYSFS, "groups")):
            return EX_OK  # no TotalCOW kernel: plain LXC
        if a.type == "clone":
            enter_outer_mntns()
        with state_lock():
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
            print(f"totalcowctl: {msg}")
    except (Fail, OSError) as e:
        print(f"totalcowctl: container hook {a.type} {a.name}: {e}; "
              "it runs without page-cache sharing", file=sys.stderr)
    return EX_OK
