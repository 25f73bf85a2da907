#!/usr/bin/env python3
"""A member added while its files are being classified (a window once
open, docs/design/scopes.md "Classification after a change").

    share-classify-race.py MNT TRIES MAX_DELAY_US READERS

Root's workload, on MNT (btrfs): T is a read-only template subvolume of
group g, M a snapshot of T that is not a member yet, with FILES files
M/d/f<i>; Z1 and Z2 are subvolumes in sharing scope "other", so the file
system has scopes and a file in no group looks up the subvolume its own
was snapshotted from (tc_canon_follow(): a UUID tree search per hop, no
lock held) before it is marked as having no use for the policy
(AS_NO_PAGE_ALIASES). A member added in between reclassifies (clears that
mark on every inode) before the reader sets it: before the fix the reader
set it anyway, and the file never shared until the next admin change.

Each try:
1. removes M from g (its files are unbound) and disables and enables Z2:
   every mark is cleared, and M's "follows nothing" answer is stale, so
   the next read miss of each file of M walks its lineage again;
2. releases READERS reader processes (pinned to CPUs of their own on an
   SMP guest), each looping over its share of M's files: drop the page
   (POSIX_FADV_DONTNEED), read it (pread): the first miss of each file
   classifies it;
3. after a delay (spread over 0..MAX_DELAY_US by a golden-ratio
   sequence; spun on SMP, slept on one CPU), adds M to g: groups/add
   reclassifies, and every file of M must bind at its next miss;
4. stops the readers, reads every file of M once more, and counts the
   files bound since step 1 (groups/g/stats files_bound): each of the
   FILES files must be, or it was lost to the race. Every read must give
   the file's bytes.

The lineage walk is the wide part of the window, and only the first
file of M to miss in a try walks (the answer is then cached until the
scopes change); the others' window is the few instructions from leaving
tc_groups_lock to the mark.

Prints "classify-race: N tries, L files lost, B bound, C classifications
raced, W wrong reads" (C: first reads of a file in a try that began before
the add began and ended after it) and exits 1 if L > 0, if a try bound a
file twice, or if a read was wrong.
"""

import ctypes
import mmap
import os
import sys
import time

import vcpus

GROUPS = "/sys/kernel/mm/totalcow/groups"
EXTENTS = "/sys/kernel/mm/totalcow/extents"
FILE_BYTES = 16384
GOLDEN = 0.6180339887498949


def sysfs(path, line, ok_errnos=()):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, line.encode())
    except OSError as e:
        if e.errno not in ok_errnos:
            raise
    finally:
        os.close(fd)


def stat(name):
    with open(f"{GROUPS}/g/stats") as f:
        for line in f:
            k, v = line.split()
            if k == name:
                return int(v)
    raise KeyError(name)


def want(i):
    """The bytes of f<i> (written by the shell script with the same rule)."""
    return (b"%08d" % i) * (FILE_BYTES // 8)


def now_ns():
    return time.monotonic_ns()


# Shared between the admin and the readers (an anonymous shared mapping of
# 64-bit words, one writer each): the try the readers are to run (GO, -1:
# exit), the try they are to stop (STOP), when the add began (ADD_START),
# the admin's wrong reads (WRONG); then per reader r, at 8 + 4r: the reads
# that straddled the add's start, its wrong reads, the tries it finished.
GO, STOP, ADD_START, WRONG = 0, 1, 2, 4


def reader_slots(r):
    """Reader r's words: straddling first reads, wrong reads, tries done."""
    return 8 + 4 * r, 9 + 4 * r, 10 + 4 * r


def main():
    mnt, tries, max_delay_us, readers = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), int(sys.argv[4])
    files = sorted(os.listdir(f"{mnt}/M/d"), key=lambda n: int(n[1:]))
    smp = len(vcpus.cpus()) > 1
    cpus = vcpus.describe()
    shm = mmap.mmap(-1, 4096)
    q = (ctypes.c_int64 * 512).from_buffer(shm)

    # Each reader counts in words of its own (reader_slots()).
    pids = []
    for r in range(readers):
        pid = os.fork()
        if pid == 0:
            try:
                reader(q, r, readers, mnt, files, smp)
            finally:
                os._exit(1)
        pids.append(pid)
    if smp:
        vcpus.pin(0)

    lost = bound = extra = 0
    for t in range(1, tries + 1):
        sysfs(f"{GROUPS}/remove", f"g {mnt}/M", ok_errnos=(2,))
        sysfs(f"{EXTENTS}/disable", f"other {mnt}/Z2")
        sysfs(f"{EXTENTS}/enable", f"other {mnt}/Z2")
        b0 = stat("files_bound")
        q[ADD_START] = 0
        delay_ns = int(((t * GOLDEN) % 1.0) * max_delay_us * 1000)
        q[GO] = t
        start = now_ns()
        if smp:
            while now_ns() - start < delay_ns:
                pass
        else:
            time.sleep(delay_ns / 1e9)
        q[ADD_START] = now_ns()
        sysfs(f"{GROUPS}/add", f"g {mnt}/M")
        time.sleep(0.001)
        q[STOP] = t
        while sum(q[reader_slots(r)[2]] for r in range(readers)) < t * readers:
            if not smp:
                time.sleep(0.0002)
        for n in files:
            i = int(n[1:])
            fd = os.open(f"{mnt}/M/d/{n}", os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if os.pread(fd, FILE_BYTES, 0) != want(i):
                q[WRONG] += 1
            os.close(fd)
        got = stat("files_bound") - b0
        bound += got
        if got > len(files):
            print(f"classify-race: try {t}: {got} binds of {len(files)} files", flush=True)
            extra += 1
        elif got < len(files):
            lost += len(files) - got
            print(f"classify-race: try {t}: {got} of {len(files)} files bound "
                  f"(add {delay_ns // 1000} us after the readers began)", flush=True)
    q[GO] = -1
    for pid in pids:
        os.waitpid(pid, 0)
    raced = sum(q[reader_slots(r)[0]] for r in range(readers))
    wrong = q[WRONG] + sum(q[reader_slots(r)[1]] for r in range(readers))
    print(f"classify-race: {tries} tries, {lost} files lost, {bound} bound, "
          f"{raced} classifications raced, {wrong} wrong reads "
          f"({cpus}, {readers} readers)")
    return 1 if lost or wrong or extra else 0


def reader(q, r, readers, mnt, files, smp):
    raced, wrong, done = reader_slots(r)
    if smp:
        vcpus.pin(1 + r)
    mine = [(int(n[1:]), os.open(f"{mnt}/M/d/{n}", os.O_RDONLY))
            for n in files[r::readers]]
    seen = 0
    while True:
        while q[GO] == seen:
            if not smp:
                time.sleep(0.0002)
        seen = q[GO]
        if seen < 0:
            os._exit(0)
        first = True
        while q[STOP] != seen or first:
            for i, fd in mine:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                t0 = now_ns()
                data = os.pread(fd, 4096, 0)
                t1 = now_ns()
                add = q[ADD_START]
                # A file's first read of the try classifies it; the
                # later ones skip the policy (marked) or bind.
                if first and add and t0 < add < t1:
                    q[raced] += 1
                if data != want(i)[:4096]:
                    q[wrong] += 1
            first = False
        q[done] += 1


if __name__ == "__main__":
    sys.exit(main())
