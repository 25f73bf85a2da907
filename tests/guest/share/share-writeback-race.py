#!/usr/bin/env python3
"""Writeback and a page drop racing the read-miss proof.

    share-writeback-race.py template FILE MIB LAYOUT
    share-writeback-race.py race MNT TRIES MAX_DELAY_US STATS_FD AUTO_FD

template (root): write FILE, MIB MiB of pseudo-random pages. LAYOUT frag:
the even pages first, fsync, then the odd ones, fsync: every page is an
extent of its own (the proof then walks one extent map per page, which
takes a while); plain: in one go (a few large extents).

race (the unprivileged user that owns MNT/home/C1, a snapshot of the
template subvolume MNT/T of an --auto group; the file is d/f in both):
each try

1. snapshots C1 as MNT/home/s<i>, a fresh subvolume two hops from the
   template, which joins the group at its first read (checked in
   auto_members and members_joined, through descriptors root opened for
   us: both files are 0400);
2. overwrites page P of its file (buffered, a whole page: no read, so the
   page is a dirty folio whose extent map is still the template's);
3. races: thread A (SCHED_IDLE) reads from page P+1 to the end of the
   file, empty slots, so the read goes through the read-miss proof, which
   walks the window's extent maps from P on (the window is what the
   member's readahead would read, here the whole file, rounded to blocks
   of 64 pages) and then stores aliases into whichever slots are empty;
   the main thread (B, normal priority) sleeps a delay and then writes P
   back (sync_file_range WAIT_BEFORE|WRITE|WAIT_AFTER) and drops it
   (POSIX_FADV_DONTNEED). UML runs one CPU: B must sleep, not spin, so
   that A runs meanwhile; B's timer then preempts A wherever the kernel
   lets it (anywhere with CONFIG_PREEMPT; with preemption off only where A
   sleeps or yields). On an SMP guest (the x86-64 lane) A and B are pinned
   to CPUs of their own and B spins through its delay instead: both run at
   once, no preemption needed. The delays spread evenly (golden-ratio sequence)
   over 0..SPAN, SPAN = max(MAX_DELAY_US, the median time of A's read
   measured in three calibration tries without B);
4. checks: a buffered read of P must give the user's bytes (else a wrong
   read; an O_DIRECT read of P says what is on disk); then a 1-byte write
   into P, fsync, and an O_DIRECT read must give the user's bytes plus that
   byte (else a lost write: the write copied the template's page);
5. deletes the snapshot (BTRFS_IOC_SNAP_DESTROY; the file system is
   mounted with user_subvol_rm_allowed).

Counts the tries whose proof aliased pages (aliases_proven moved) and
whose writeback started while A was inside its read. Prints
"writeback-race: N tries, W wrong reads, L lost writes, P pages proven"
and fails if W or L > 0, if P == 0 (no proof ran: nothing raced), if a
snapshot did not join, or if B never started inside A's read.
"""

import ctypes
import mmap
import os
import random
import statistics
import sys
import threading
import time

import vcpus
from btrfs_subvol import destroy, snapshot

PAGE = 4096
SYNC_FILE_RANGE_ALL = 1 | 2 | 4     # WAIT_BEFORE | WRITE | WAIT_AFTER
P = 0                   # the page written back and dropped; A reads P + 1
ONE_BYTE_AT = 1234      # where in P the follow-up 1-byte write goes
CALIBRATE = 3

libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                 ctypes.c_uint]


def sync_file_range(fd, off, n):
    if libc.sync_file_range(fd, off, n, SYNC_FILE_RANGE_ALL):
        e = ctypes.get_errno()
        raise OSError(e, f"sync_file_range: {os.strerror(e)}")


def make_template(path, mib, layout):
    rng = random.Random(f"writeback-race {mib}")
    pages = [rng.randbytes(PAGE) for _ in range(mib << 8)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if layout == "plain":
            os.pwrite(fd, b"".join(pages), 0)
        else:
            for parity in (0, 1):
                for i in range(parity, len(pages), 2):
                    os.pwrite(fd, pages[i], i * PAGE)
                os.fsync(fd)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_fd(fd):
    """A sysfs file root opened for us; reading at offset 0 shows it anew."""
    return os.pread(fd, 1 << 16, 0).decode()


def stat_of(fd, key):
    for line in read_fd(fd).splitlines():
        k, v = line.split()
        if k == key:
            return int(v)
    raise KeyError(key)


def direct_read(path, off):
    buf = mmap.mmap(-1, PAGE)       # page-aligned, for O_DIRECT
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.preadv(fd, [buf], off)
    finally:
        os.close(fd)
    return bytes(buf[:n])


def name_of(got, mine, tmpl):
    return "the user's" if got == mine else "the template's" if got == tmpl else "other"


class Try:
    """One try's threads: A reads P + 1 to the end at SCHED_IDLE, B (the caller)
    writes P back and drops it DELAY seconds after both pass the barrier."""

    def __init__(self, path, size):
        self.path, self.size = path, size
        self.barrier = threading.Barrier(2)
        # On an SMP guest A and B run on CPUs of their own (vcpus.pin).
        self.smp = len(vcpus.cpus()) > 1
        self.a0 = self.a1 = 0.0
        self.got_next = None
        self.error = None

    def reader(self, fd):
        try:
            vcpus.pin(1)
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            self.barrier.wait()
            self.a0 = time.perf_counter()
            self.got_next = os.pread(fd, self.size - (P + 1) * PAGE, (P + 1) * PAGE)
            self.a1 = time.perf_counter()
        except Exception as e:      # reported by the main thread
            self.error = e

    def run(self, wfd, delay):
        """Returns (when B passed the barrier, when it began writeback)."""
        vcpus.pin(0)
        rfd = os.open(self.path, os.O_RDONLY)
        a = threading.Thread(target=self.reader, args=(rfd,))
        a.start()
        try:
            self.barrier.wait()
            t0 = time.perf_counter()
            if delay > 0 and self.smp:
                # A runs on a CPU of its own: B waits on its own CPU
                # without giving it up, and starts writeback at the delay.
                while time.perf_counter() - t0 < delay:
                    pass
            elif delay > 0:
                time.sleep(delay)
            b1 = time.perf_counter()
            if delay >= 0:
                sync_file_range(wfd, P * PAGE, PAGE)
                os.posix_fadvise(wfd, P * PAGE, PAGE, os.POSIX_FADV_DONTNEED)
            a.join()
        finally:
            os.close(rfd)
        if self.error:
            raise self.error
        if delay < 0:       # calibration: write back and drop after the read
            sync_file_range(wfd, P * PAGE, PAGE)
            os.posix_fadvise(wfd, P * PAGE, PAGE, os.POSIX_FADV_DONTNEED)
        return t0, b1


def race(mnt, tries, max_delay_us, stats_fd, auto_fd):
    home, clone, rel = f"{mnt}/home", f"{mnt}/home/C1", "d/f"
    with open(f"{mnt}/T/{rel}", "rb") as f:     # the template itself, not a member
        tmpl = f.read()
    tpage = tmpl[P * PAGE:(P + 1) * PAGE]
    want_next = tmpl[(P + 1) * PAGE:]
    counts = dict(tries=0, wrong=0, lost=0, proven=0, proving=0, joined=0,
                  overlapped=0, hits_overlapped=0, calib_proven=0)
    bad_delays = []
    read_times = []
    span = max_delay_us / 1e6
    phases = dict(snapshot=0.0, race=0.0, check=0.0, fsync=0.0, stats=0.0, destroy=0.0)
    clock = [time.perf_counter()]

    def phase(name):
        now = time.perf_counter()
        phases[name] += now - clock[0]
        clock[0] = now

    for i in range(-CALIBRATE, tries):
        calib = i < 0
        name = f"s{i + CALIBRATE}"
        phase("check")
        snapshot(clone, home, name)
        phase("snapshot")
        path = f"{home}/{name}/{rel}"
        mine = random.Random(f"user page {i}").randbytes(PAGE)
        assert mine != tpage
        proven0 = stat_of(stats_fd, "aliases_proven")
        joined0 = stat_of(stats_fd, "members_joined")
        wfd = os.open(path, os.O_RDWR)
        try:
            os.pwrite(wfd, mine, P * PAGE)
            if calib:
                delay = -1.0
            else:
                delay = span * ((i * 0.6180339887498949) % 1.0)
            t = Try(path, len(tmpl))
            t0, b1 = t.run(wfd, delay)
            phase("race")
            read_time = t.a1 - t.a0
            inside = t.a0 < b1 < t.a1
            if calib:
                read_times.append(read_time)
            wrong = lost = 0
            if t.got_next != want_next:
                wrong += 1
                print(f"try {i}: pages P+1.. read {name_of(t.got_next, mine, want_next)} bytes",
                      flush=True)
            got = os.pread(wfd, PAGE, P * PAGE)
            disk = direct_read(path, P * PAGE)
            if got != mine:
                wrong += 1
                print(f"try {i}: read() of page P gave {name_of(got, mine, tpage)} bytes, "
                      f"O_DIRECT {name_of(disk, mine, tpage)} bytes; delay "
                      f"{delay * 1e6:.0f} us, B began {(b1 - t0) * 1e6:.0f} us after "
                      f"the barrier, A read {(t.a0 - t0) * 1e6:.0f}..{(t.a1 - t0) * 1e6:.0f} us",
                      flush=True)
            os.pwrite(wfd, b"!", P * PAGE + ONE_BYTE_AT)
            phase("check")
            os.fsync(wfd)
            phase("fsync")
        finally:
            os.close(wfd)
        want = mine[:ONE_BYTE_AT] + b"!" + mine[ONE_BYTE_AT + 1:]
        disk = direct_read(path, P * PAGE)
        if disk != want:
            lost += 1
            tplus = tpage[:ONE_BYTE_AT] + b"!" + tpage[ONE_BYTE_AT + 1:]
            what = "the template's bytes + the byte" if disk == tplus else \
                "the user's bytes without the byte" if disk == mine else "other bytes"
            print(f"try {i}: after a 1-byte write and fsync, page P on disk holds {what}",
                  flush=True)
        with open(path, "rb") as f:
            f.seek(P * PAGE)
            if f.read(PAGE) != disk:
                wrong += 1
                print(f"try {i}: read() of page P after fsync differs from the disk", flush=True)
        phase("check")
        auto = read_fd(auto_fd)
        # "<subvolume id> <path from the file system's top>" per line
        listed = f"/home/{name}" in (line.split(maxsplit=1)[-1] for line in auto.splitlines())
        proven = stat_of(stats_fd, "aliases_proven") - proven0
        joined = stat_of(stats_fd, "members_joined") - joined0
        phase("stats")
        destroy(home, name)
        phase("destroy")
        if not listed or joined < 1:
            print(f"try {i}: {name} did not join (auto_members {auto.split()}, "
                  f"members_joined +{joined})", flush=True)
        if calib:
            counts["calib_proven"] += proven
            if wrong or lost:
                print(f"calibration try {i}: {wrong} wrong reads, {lost} lost writes",
                      flush=True)
                counts["wrong"] += wrong
                counts["lost"] += lost
            if i == -1:
                med = statistics.median(read_times)
                span = max(max_delay_us / 1e6, med)
                print(f"writeback-race: A's read from page P+1 on takes "
                      f"{', '.join(f'{r * 1e6:.0f}' for r in read_times)} us without B; "
                      f"delays spread over 0..{span * 1e6:.0f} us", flush=True)
            continue
        counts["tries"] += 1
        counts["wrong"] += wrong
        counts["lost"] += lost
        counts["proven"] += proven
        counts["proving"] += proven > 0
        counts["joined"] += listed and joined >= 1
        counts["overlapped"] += inside
        if wrong or lost:
            bad_delays.append(round(delay * 1e6))
            counts["hits_overlapped"] += inside
        if (i + 1) % 40 == 0:
            print(f"writeback-race: {i + 1} tries, {counts['wrong']} wrong reads, "
                  f"{counts['lost']} lost writes so far", flush=True)

    c = counts
    print("writeback-race: seconds spent: " +
          ", ".join(f"{k} {v:.1f}" for k, v in phases.items()), flush=True)
    bad = (f"{len(bad_delays)}, delays {min(bad_delays)}..{max(bad_delays)} us "
           f"(median {statistics.median(bad_delays):.0f}), {c['hits_overlapped']} of them "
           f"inside A's read" if bad_delays else "none")
    print(f"writeback-race: {c['proving']} of {c['tries']} tries aliased pages "
          f"(and the calibration {c['calib_proven']} pages), "
          f"{c['joined']} snapshots joined, B started writeback inside A's read in "
          f"{c['overlapped']} tries; bad tries: {bad}", flush=True)
    print(f"writeback-race: {c['tries']} tries, {c['wrong']} wrong reads, "
          f"{c['lost']} lost writes, {c['proven']} pages proven", flush=True)
    ok = (not c["wrong"] and not c["lost"] and c["proven"] > 0 and
          c["joined"] == c["tries"] and c["overlapped"] > 0)
    return 0 if ok else 1


def main():
    if sys.argv[1] == "template":
        make_template(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    assert sys.argv[1] == "race", sys.argv
    tries, max_delay_us, stats_fd, auto_fd = map(int, sys.argv[3:7])
    assert os.getuid() != 0, "the race runs unprivileged"
    return race(sys.argv[2], tries, max_delay_us, stats_fd, auto_fd)


if __name__ == "__main__":
    sys.exit(main())
