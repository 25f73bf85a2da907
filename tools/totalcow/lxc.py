# SPDX-License-Identifier: GPL-2.0-only
"""LXC as totalcowctl container sees it: containers' configs and root
file systems, their state, the hooks' config lines, and entering the
host's mount namespace from a hook (the commands: commands/container.py)."""

import ctypes
import os
import subprocess

from .errors import EX_NOENT, EX_NOTTC, Fail


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


def hook_lines(exe):
    return [HOOK_MARK] + [f"lxc.hook.{h} = {exe} container hook" for h in CONTAINER_HOOKS]


def is_hook_line(line):
    """A line hook_lines() wrote (what untemplate takes out again)."""
    return line == HOOK_MARK or (line.startswith("lxc.hook.") and
                                 line.endswith(" container hook"))


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
