#!/usr/bin/env python3
"""Identity of a member page is never proven from timestamps.

    share-proof.py MNT same-tick|dio-race TRIES COLLISIONS

Each try, in one process so that it fits in one clock tick (10 ms in UML):
write a file in a new subvolume S, snapshot S read-only as template T,
snapshot T as member M, and overwrite M's file with other bytes of the same
size: buffered (same-tick) or with O_DIRECT while another thread keeps
reading M's file from an empty page cache, so that proofs race the write
(dio-race; the reader's proofs must have aliased pages, or nothing raced).
When the write lands in the tick of S's write, M's file keeps
T's ctime and mtime: on a kernel that takes equal timestamps and size as
proof, M then reads T's bytes. The debug kernel is too slow to take two
snapshots within one tick, so just before the write the wall clock is set
back to S's file's ctime (as a clock step back would): the coarse clock
then reads that tick until the next timer tick. Such a try is a collision; in a group (T, M)
with caches dropped, M must read its own bytes, before and after T's file
is read. Stops after COLLISIONS collisions or TRIES tries; fewer than one
collision fails (the test would have tested nothing). Prints
"proof MODE: N tries, C collisions, W wrong reads, P pages proven".
"""

import ctypes
import mmap
import os
import sys
import threading
import time

import vcpus
from btrfs_subvol import snapshot, subvol_create

from pagecache import drop_caches

POSIX_FADV_DONTNEED = 4
SIZE = 256 << 10
GROUPS = "/sys/kernel/mm/totalcow/groups"


def pattern(seed):
    return (seed.to_bytes(4, "little") * (SIZE // 4))[:SIZE]


def times(path):
    st = os.stat(path)
    return st.st_ctime_ns, st.st_mtime_ns, st.st_size


def sysfs(name, text):
    with open(f"{GROUPS}/{name}", "w") as f:
        f.write(text)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one_try(mnt, mode, i):
    """Returns (collided, wrong reads, pages proven without a read)."""
    s, t, m = f"s{i}", f"t{i}", f"m{i}"
    old, new = pattern(2 * i + 1), pattern(2 * i + 2)
    subvol_create(mnt, s)
    buf = mmap.mmap(-1, SIZE)       # page-aligned, for O_DIRECT
    buf[:] = new
    reader, stop, started = None, threading.Event(), threading.Event()
    with open(f"{mnt}/{s}/f", "wb") as f:
        f.write(old)
    snapshot(f"{mnt}/{s}", mnt, t, True)
    if mode == "dio-race":
        # Join the group before M exists: its files bind at the first read.
        sysfs("create", f"g{i} {mnt}/{t}\n")
    snapshot(f"{mnt}/{t}", mnt, m, False)
    then = os.stat(f"{mnt}/{t}/f").st_ctime_ns
    if mode == "dio-race":
        sysfs("add", f"g{i} {mnt}/{m}\n")
        fd = os.open(f"{mnt}/{m}/f", os.O_RDWR | os.O_DIRECT)

        def race():
            vcpus.pin(1)    # SMP: proofs run while the write runs on CPU 0
            while not stop.is_set():
                evict(f"{mnt}/{m}/f")
                read_all(f"{mnt}/{m}/f")
                started.set()
        vcpus.pin(0)
        reader = threading.Thread(target=race)
        reader.start()
        started.wait()      # M is bound and its pages are proven by now
        time.clock_settime_ns(time.CLOCK_REALTIME, then)
        os.pwrite(fd, buf, 0)
        os.close(fd)
    else:
        fd = os.open(f"{mnt}/{m}/f", os.O_WRONLY)
        time.clock_settime_ns(time.CLOCK_REALTIME, then)
        os.pwrite(fd, new, 0)
        os.close(fd)
    collided = times(f"{mnt}/{m}/f") == times(f"{mnt}/{t}/f")
    wrong = 0
    if reader:
        got = read_all(f"{mnt}/{m}/f")     # the race still runs
        stop.set()
        reader.join()
        if got != new:
            wrong += 1
            print(f"try {i}: M read {'T' if got == old else 'other'} bytes "
                  "after its direct write returned", flush=True)
    if not collided and mode == "same-tick":
        return False, wrong, 0
    if mode == "same-tick":
        sysfs("create", f"g{i} {mnt}/{t}\n")
        sysfs("add", f"g{i} {mnt}/{m}\n")
    for order in ("template first", "member alone"):
        drop_caches()
        if order == "template first" and read_all(f"{mnt}/{t}/f") != old:
            print(f"try {i}: the template changed", flush=True)
            wrong += 1
        got = read_all(f"{mnt}/{m}/f")
        if got != new:
            wrong += 1
            print(f"try {i} ({order}): M read {'T' if got == old else 'other'} "
                  f"bytes; collided {collided}", flush=True)
    with open(f"{GROUPS}/g{i}/stats") as f:
        stats = dict(line.split() for line in f)
    print(f"try {i}: collided {collided}, aliases_proven {stats['aliases_proven']}, "
          f"compares {stats['compares']}, memcmp_mismatches {stats['memcmp_mismatches']}",
          flush=True)
    sysfs("delete", f"g{i}\n")
    return collided, wrong, int(stats["aliases_proven"])


def main():
    mnt, mode, tries, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    assert mode in ("same-tick", "dio-race"), mode
    collisions = wrong = n = proven = 0
    while n < tries and collisions < want:
        collided, w, p = one_try(mnt, mode, n)
        n += 1
        collisions += collided
        wrong += w
        proven += p
    print(f"proof {mode}: {n} tries, {collisions} collisions, {wrong} wrong reads, "
          f"{proven} pages proven", flush=True)
    # dio-race: the reader proved pages while the write ran, or it raced nothing.
    raced = mode != "dio-race" or proven > 0
    return 0 if collisions and not wrong and raced else 1


if __name__ == "__main__":
    sys.exit(main())
