#!/usr/bin/env python3
"""Private mappings of files that share extents map one clone.

    share-extents-mmap.py MNT N stock|shared

MNT holds w/ (data/file, bin/busybox), a writable subvolume, and its
writable snapshots s1..sN. "stock": before any sharing scope, N
processes each map sN's file MAP_PRIVATE and touch every page; prints
the page cache they grew by. "shared": w and the snapshots are in scope
"default"; the same, then the semantics (tc_extent_mmap_file()): a
mapping shows a later write to its file, as Linux's; a file open for
writing maps
its own pages; a truncated file's mapping gives SIGBUS past the new end
as a plain file's does; private writes stay private; an unprivileged
mapper shares; executables run. Exits 1 at the first failed check.
"""

import hashlib
import mmap
import os
import resource
import signal
import subprocess
import sys

from pagecache import drop_caches, page_cache

PAGE = 4096
SCOPES = "/sys/kernel/mm/totalcow/extents/scopes"

HOLDER = r"""
import hashlib, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
os.close(fd)
for line in iter(lambda: sys.stdin.readline(), ""):
    print(hashlib.sha256(m[:]).hexdigest(), flush=True)
"""


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)


def scope(field):
    w = open(SCOPES).read().split()
    return int(w[w.index(field) + 1])


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Holder:
    """A process that maps PATH MAP_PRIVATE and, at each ask(), hashes
    every byte of the mapping (touching every page)."""

    def __init__(self, path, user=None):
        cmd = [sys.executable, "-c", HOLDER, path]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)

    def ask(self):
        self.p.stdin.write("h\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        check(self.p.wait() == 0, "a holder failed")


def fleet(files):
    """Map FILES in a process each, touch every page; the page cache they
    grew by and the hashes they saw. Returns (holders, bytes, hashes)."""
    drop_caches()
    # The interpreter and its modules back in the page cache first.
    subprocess.run([sys.executable, "-c", "import hashlib, mmap, os, sys"], check=True)
    before = page_cache()
    hs = [Holder(f) for f in files]
    got = [h.ask() for h in hs]
    return hs, page_cache() - before, got


def main():
    mnt, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    files = [f"{mnt}/s{i}/data/file" for i in range(1, n + 1)]
    size = os.path.getsize(files[0])
    want = sha(files[0])

    if mode == "stock":
        hs, grew, got = fleet(files)
        check(got == [want] * n, "a stock mapping shows other bytes")
        for h in hs:
            h.close()
        print(f"mmap stock: {n} mappings, page cache {grew / size:.3f}x the file", flush=True)
        return

    s0, p0 = scope("mmaps_shared"), scope("mmaps_private")
    hs, grew, got = fleet(files)
    ratio = grew / size
    print(f"mmap shared: {n} mappings, page cache {ratio:.3f}x the file; "
          f"mmaps_shared +{scope('mmaps_shared') - s0}, "
          f"mmaps_private +{scope('mmaps_private') - p0}", flush=True)
    check(got == [want] * n, "a shared mapping shows other bytes")
    check(scope("mmaps_shared") - s0 == n, "not every mapping maps the clone")
    check(ratio <= 1.05, f"mapped pages not shared: {ratio:.3f}x the file")

    # 1. As Linux's: a write to s1 after its mapping is seen through it
    # (its pages not written through it are the file's: the open for
    # writing made it map s1 itself), as by read(); a new mapping of the
    # changed file shows the new bytes.
    with open(files[0], "r+b") as f:
        f.write(b"\xa5" * PAGE)
    new = sha(files[0])
    check(new != want, "the write to s1 was lost")
    check(hs[0].ask() == new, "a mapping does not show a write to its file")
    h1 = Holder(files[0])
    check(h1.ask() == new, "a new mapping of a changed file shows old bytes")
    h1.close()
    for h in hs[1:]:
        check(h.ask() == want, "a write to s1 changed another file's mapping")

    # 2. Open for writing: its own pages, its own bytes.
    p = scope("mmaps_private")
    wfd = os.open(files[1], os.O_RDWR)
    h2 = Holder(files[1])
    check(h2.ask() == want, "a mapping of a file open for writing shows other bytes")
    check(scope("mmaps_private") == p + 1, "a file open for writing mapped a clone")
    os.pwrite(wfd, b"\x5a" * 100, 5000)
    os.close(wfd)
    h2.close()

    # 3. Private writes stay private.
    fd = os.open(files[2], os.O_RDONLY)
    m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    m[0:PAGE] = b"\x11" * PAGE
    check(hs[3].ask() == want and sha(files[2]) == want,
          "a private write through a clone's mapping showed elsewhere")
    m.close()

    # 4. A truncation while mapped: SIGBUS past the new end, the file's
    # bytes within, as from a plain file's mapping.
    child = os.fork()
    if child == 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fd = os.open(files[3], os.O_RDONLY)
        m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        os.truncate(files[3], size // 2)
        with open(files[3], "rb") as f:
            if m[:size // 2] != f.read():
                os._exit(4)
        m[size - 1]        # past the end: SIGBUS
        os._exit(3)
    _, status = os.waitpid(child, 0)
    check(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGBUS,
          f"a truncated file's mapping past its end: status {status:#x}, not SIGBUS")

    # 5. An unprivileged mapper (the directory is not its to write) shares.
    s = scope("mmaps_shared")
    hu = Holder(files[4], user=65534)
    check(hu.ask() == want and scope("mmaps_shared") == s + 1,
          "an unprivileged mapping did not map the clone")
    hu.close()

    # 6. Executables of the snapshots run.
    s = scope("mmaps_shared")
    for i in range(5, n + 1):
        r = subprocess.run([f"{mnt}/s{i}/bin/busybox", "echo", "ran"], capture_output=True,
                           text=True)
        check(r.returncode == 0 and r.stdout == "ran\n", f"s{i}'s busybox did not run")
    print(f"mmap exec: {n - 4} runs, mmaps_shared +{scope('mmaps_shared') - s}", flush=True)
    check(scope("mmaps_shared") > s, "no executable mapping mapped a clone")

    for h in hs:
        h.close()
    print("mmap: all checks passed", flush=True)


main()
