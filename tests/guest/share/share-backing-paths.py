#!/usr/bin/env python3
"""Substituted private mappings behave as mappings of the member file.

    share-backing-paths.py MNT

MNT holds template/ (data/file, mode 755, 1 MiB; bin/busybox; bin/python3,
a copy of the interpreter), snapshots c1.. of it in group "fleet", and
plain/, a copy of template/ with extents of its own in no group (the
control). A private mapping of an unchanged member maps the template
file through a backing file (mm-patches/0003, tc_mmap_file()); a review
of the sharing found where that showed:

  1. the NT_FILE note of a core dump named the template's path, where
     /proc/PID/maps names the member's; the ELF_HEADERS filter read the
     template's mode;
  2. PR_SET_MM_EXE_FILE succeeded in a process whose member executable
     was still mapped (EBUSY from the template or a plain copy);
  3. a truncated member's mapping kept showing the old bytes where a
     plain file gives SIGBUS.

Each of the three prints "paths: ..." or "FAIL: ..." (a failed one stops
at its first failed check); the script exits 1 if any failed. Run as
root: the dumping process and the truncating one run as uid 1000, as a
container's would; PR_SET_MM_EXE_FILE needs CAP_SYS_RESOURCE (a container
with CAP_CHECKPOINT_RESTORE in its user namespace reaches the same check
through PR_SET_MM_MAP).
"""

import errno
import hashlib
import mmap
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys

STATS = "/sys/kernel/mm/totalcow/groups/fleet/stats"
CORE_PATTERN = "/proc/sys/kernel/core_pattern"
PAGE = 4096
NT_FILE = 0x46494C45
PR_SET_MM = 35
PR_SET_MM_EXE_FILE = 13
# The interpreter copied into the template finds its library in /usr.
PYENV = dict(os.environ, PYTHONHOME="/usr", PYTHONDONTWRITEBYTECODE="1")


def stat(name):
    with open(STATS) as f:
        for line in f:
            k, v = line.split()
            if k == name:
                return int(v)
    raise KeyError(name)


class Failed(Exception):
    pass


# The container's side of each attack runs as this unprivileged user.
USER = 1000


def as_user():
    os.setgroups([])
    os.setgid(USER)
    os.setuid(USER)


def check(cond, what):
    if not cond:
        raise Failed(what)


# ---------------------------------------------------------------- 1. core

# Run by the member's interpreter: map DATA privately, touch it, set the
# core dump filter, print /proc/self/maps, abort.
DUMPER = r"""
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
m[0]
with open("/proc/self/coredump_filter", "w") as f:
    f.write(sys.argv[2])
sys.stdout.write(open("/proc/self/maps").read())
sys.stdout.flush()
os.abort()
"""


def core_dump(argv):
    """Run ARGV, which dumps core; (its stdout, the core file's path)."""
    with open(CORE_PATTERN) as f:
        old = f.read().strip()
    with open(CORE_PATTERN, "w") as f:
        f.write("/tmp/share-backing-paths.core.%p")
    try:
        inf = resource.RLIM_INFINITY
        p = subprocess.run(argv, env=PYENV, stdout=subprocess.PIPE, text=True,
                           preexec_fn=lambda: (resource.setrlimit(
                               resource.RLIMIT_CORE, (inf, inf)), as_user()))
    finally:
        with open(CORE_PATTERN, "w") as f:
            f.write(old)
    check(p.returncode == -signal.SIGABRT, f"{argv[0]} exited {p.returncode}, not SIGABRT")
    # subprocess.run() does not give the pid: find the one core file.
    cores = [c for c in os.listdir("/tmp") if c.startswith("share-backing-paths.core.")]
    check(len(cores) == 1, f"core files: {cores} (UML core dumps work?)")
    return p.stdout, "/tmp/" + cores[0]


def parse_core(core):
    """([(vaddr, filesz)] of PT_LOAD, [(start, end, offset, name)] of NT_FILE)."""
    check(core[:4] == b"\x7fELF" and core[4] == 2 and core[5] == 1,
          "core is not a little-endian ELF64 file")
    phoff, = struct.unpack_from("<Q", core, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", core, 0x36)
    loads, files = [], []
    for i in range(phnum):
        (ptype, _flags, off, vaddr, _paddr, filesz, _memsz,
         _align) = struct.unpack_from("<IIQQQQQQ", core, phoff + i * phentsize)
        if ptype == 1:
            loads.append((vaddr, filesz))
        elif ptype == 4:
            pos, end = off, off + filesz
            while pos + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", core, pos)
                desc = pos + 12 + (namesz + 3) // 4 * 4
                if ntype == NT_FILE:
                    count, pagesz = struct.unpack_from("<QQ", core, desc)
                    names = core[desc + 16 + 24 * count:desc + descsz].split(b"\0")
                    for j in range(count):
                        s, e, o = struct.unpack_from("<QQQ", core, desc + 16 + 24 * j)
                        files.append((s, e, o * pagesz, names[j].decode()))
                pos = desc + (descsz + 3) // 4 * 4
    return loads, files


def parse_maps(text):
    """{(start, end): path} of the file mappings in a /proc/PID/maps text."""
    out = {}
    for line in text.splitlines():
        f = line.split(maxsplit=5)
        if len(f) == 6 and f[5].startswith("/"):
            s, e = (int(x, 16) for x in f[0].split("-"))
            out[(s, e)] = f[5]
    return out


def check_core(mnt):
    member = f"{mnt}/c1"
    # The member's mode differs from the template's (a metadata change:
    # its data is still proven the template's, and still substituted).
    os.chmod(f"{member}/data/file", 0o644)
    shared0 = stat("mmaps_shared")
    out, path = core_dump([f"{member}/bin/python3", "-c", DUMPER,
                           f"{member}/data/file", "0x10"])
    with open(path, "rb") as f:
        core = f.read()
    check(stat("mmaps_shared") - shared0 >= 2,
          "the member's executable and data file were not both substituted")
    maps = parse_maps(out)
    loads, files = parse_core(core)
    names = {name for _, _, _, name in files}
    print(f"paths: core of {member}/bin/python3: {len(files)} NT_FILE entries", flush=True)
    check(names, "no NT_FILE note in the core")
    tnames = sorted(n for n in names if n.startswith(f"{mnt}/template/"))
    check(not tnames, f"NT_FILE names the template: {tnames}")
    check({f"{member}/bin/python3", f"{member}/data/file"} <= names,
          f"NT_FILE lacks the member's files: {sorted(names)}")
    for s, e, _, name in files:
        if (s, e) in maps:
            check(maps[(s, e)] == name,
                  f"NT_FILE names {name} at {s:x}-{e:x}, maps {maps[(s, e)]}")
    if shutil.which("readelf"):     # what gdb and systemd-coredump read
        rp = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
        rn = rp.stdout
        bad = [line.strip() for line in rn.splitlines() if f"{mnt}/template/" in line]
        # binutils 2.40's readelf may not decode this core's NT_FILE
        # ("Cannot decode 64-bit note in 32-bit build"): the parser above
        # has read it; readelf must then at least name no template file.
        if "Cannot decode" in rn:
            print("paths: readelf -n cannot decode NT_FILE here; checked with our parser",
                  flush=True)
            check(not bad, f"readelf -n names the template: {bad[:4]}")
        else:
            check(f"{member}/data/file" in rn and not bad,
                  f"readelf -n does not show the member's path alone: {bad[:4]} "
                  f"(exit {rp.returncode}: {rn[-600:]!r})")
    os.unlink(path)
    # ELF_HEADERS (filter 0x10) dumps the first page of an executable
    # file's mapping: the member's data file is not executable (0644),
    # the template's is (0755); the interpreter's first page is dumped.
    start = {name: s for s, _, o, name in files if o == 0}
    load = dict(loads)
    check(load.get(start[f"{member}/data/file"]) == 0,
          "ELF_HEADERS dumped the member's data file's first page: "
          "the template's mode was read")
    check(load.get(start[f"{member}/bin/python3"]) == PAGE,
          "ELF_HEADERS did not dump the executable's first page")
    print("paths: core dump names the member and reads its mode", flush=True)


# -------------------------------------------------------- 2. exe mapped

# Run by an interpreter: PR_SET_MM_EXE_FILE to another executable while
# this one is mapped; prints the return value and errno.
SETEXE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
fd = os.open(sys.argv[1], os.O_RDONLY)
r = libc.prctl(%d, %d, fd, 0, 0)
print(r, ctypes.get_errno())
""" % (PR_SET_MM, PR_SET_MM_EXE_FILE)


def set_exe(python, other):
    out = subprocess.run([python, "-c", SETEXE, other], env=PYENV, check=True,
                         stdout=subprocess.PIPE, text=True).stdout.split()
    return int(out[0]), int(out[1])


def check_exe(mnt):
    other = f"{mnt}/plain/bin/busybox"
    for who in ("template", "plain"):
        r = set_exe(f"{mnt}/{who}/bin/python3", other)
        check(r == (-1, errno.EBUSY), f"PR_SET_MM_EXE_FILE from the {who}: {r}, not EBUSY")
    shared0 = stat("mmaps_shared")
    r = set_exe(f"{mnt}/c2/bin/python3", other)
    check(stat("mmaps_shared") > shared0, "the member's executable was not substituted")
    check(r == (-1, errno.EBUSY),
          f"PR_SET_MM_EXE_FILE from a member with its executable mapped: {r}, not EBUSY")
    print("paths: PR_SET_MM_EXE_FILE: EBUSY from template, plain copy and member", flush=True)


# ------------------------------------------------------------ 3. truncate

def probe(m, off):
    """What a process sees at page OFF of M: a digest, or the signal."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, hashlib.sha256(m[off:off + PAGE]).digest())
        os._exit(0)
    os.close(w)
    data = os.read(r, 64)
    os.close(r)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        return signal.Signals(os.WTERMSIG(st)).name
    return data.hex()[:16]


def holder(m, off):
    """A process forked now that probes page OFF of M when told: (pid, pipe)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        m[off:off + PAGE]
        os._exit(0)
    os.close(r)
    return pid, w


def held(pid, w):
    os.write(w, b"x")
    os.close(w)
    _, st = os.waitpid(pid, 0)
    return signal.Signals(os.WTERMSIG(st)).name if os.WIFSIGNALED(st) else "read"


def truncate_run(path):
    """The outcomes, by name, of truncating PATH under a private mapping."""
    size = os.path.getsize(path)
    cut = 5 * PAGE + 100
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    for off in range(0, size, PAGE):        # every page mapped
        m[off]
    m[3 * PAGE:3 * PAGE + 8] = b"PRIVATE3"  # private copies, kept...
    m[10 * PAGE:10 * PAGE + 8] = b"PRIVATE!"  # ...and past the new end
    hpid, hw = holder(m, 6 * PAGE)
    o = {}
    os.truncate(path, cut)
    for page in (0, 3, 5, 6, 10, size // PAGE - 1):
        o[f"cut:{page}"] = probe(m, page * PAGE)
    o["cut:forked-before:6"] = held(hpid, hw)
    os.truncate(path, size)                 # extended again: zeros
    for page in (5, 6, 10):
        o[f"extend:{page}"] = probe(m, page * PAGE)
    os.truncate(path, 0)
    for page in (0, 3):
        o[f"zero:{page}"] = probe(m, page * PAGE)
    m.close()
    return o


def unprivileged(fn, *args):
    """FN(*ARGS) in a child that is USER: its return value, or Failed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            as_user()
            out = repr(fn(*args))
        except BaseException as e:      # the parent reports it
            out = repr(("error", f"{type(e).__name__}: {e}"))
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    got = eval(data.decode()) if data else ("error", "no answer")
    check(not (isinstance(got, tuple) and got and got[0] == "error"),
          f"{fn.__name__} as uid {USER}: {got}")
    return got


def check_truncate(mnt):
    want = unprivileged(truncate_run, f"{mnt}/plain/data/file")
    check(want["cut:6"] == "SIGBUS" and want["zero:0"] == "SIGBUS",
          f"a plain file's mapping does not give SIGBUS past the end: {want}")
    member = f"{mnt}/c3/data/file"
    shared0 = stat("mmaps_shared")
    got = unprivileged(truncate_run, member)
    check(stat("mmaps_shared") == shared0 + 1, "the member's mapping was not substituted")
    bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    print(f"paths: truncate under a private mapping: {len(want)} outcomes, "
          f"{len(bad)} differ from a plain file's", flush=True)
    check(not bad, f"truncated member differs from a plain file (member, plain): {bad}")


def main():
    mnt = sys.argv[1]
    failed = 0
    for part in (check_core, check_exe, check_truncate):
        try:
            part(mnt)
        except Failed as e:
            print(f"FAIL: {e}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
