#!/usr/bin/env python3
"""mmap() and fork() racing the unbinding of a bound file (route A).

  share-backing-file-race.py TEMPLATE MEMBER ROUNDS

Each round makes MEMBER a reflink copy of TEMPLATE (the same extents),
binds it, and starts mappers: processes that map MEMBER privately and
read it, again and again, some of them forking children that keep the
mapping. Then a writer opens MEMBER for writing (which unbinds it) and
writes a marker over its first page. Once the write has returned, every
mapping in every mapper, made before the write, during it, or after, must
show the marker: a VMA that the unbinding missed keeps the template's
page. Prints "race: R rounds, M mappings checked, 0 stale" and exits 1
on a stale mapping.
"""
import fcntl
import mmap
import os
import select
import struct
import sys
import time

BTRFS_IOC_SHARE_PAGE_CACHE = 0x40089443
FICLONE = 0x40049409
PAGE = os.sysconf("SC_PAGE_SIZE")
MAPPERS = 4


def reflink(src, dst):
    with open(src, "rb") as s, open(dst, "wb") as d:
        fcntl.ioctl(d.fileno(), FICLONE, s.fileno())


def bind(member, template):
    t = os.open(template, os.O_RDONLY)
    with open(member, "rb") as m:
        fcntl.ioctl(m.fileno(), BTRFS_IOC_SHARE_PAGE_CACHE, struct.pack("q", t))
    os.close(t)


def mapper(member, marker, go_r, done_w, forks):
    """Map and read until told the write returned, then check every
    mapping still held (and one made now). Report the count and stale."""
    maps = []
    kids = []
    os.set_blocking(go_r, False)
    written = False
    while not written:
        fd = os.open(member, os.O_RDONLY)
        m = mmap.mmap(fd, PAGE * 4, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        os.close(fd)
        _ = m[0:8]
        maps.append(m)
        if forks and len(kids) < 4:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                # The child keeps its copies of the parent's mappings and
                # checks them once the write returned.
                os.close(r)
                select.select([go_r], [], [])
                stale = sum(1 for x in maps if bytes(x[0:8]) != marker)
                os.write(w, struct.pack("ii", len(maps), stale))
                os._exit(0)
            os.close(w)
            kids.append((pid, r))
        if len(maps) > 64:
            maps.pop(0).close()
        try:
            written = os.read(go_r, 1) == b"w"
        except BlockingIOError:
            pass
    fd = os.open(member, os.O_RDONLY)
    maps.append(mmap.mmap(fd, PAGE * 4, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ))
    os.close(fd)
    n = len(maps)
    stale = sum(1 for x in maps if bytes(x[0:8]) != marker)
    for pid, r in kids:
        kn, ks = struct.unpack("ii", os.read(r, 8))
        n += kn
        stale += ks
        os.waitpid(pid, 0)
    os.write(done_w, struct.pack("ii", n, stale))
    os._exit(0)


def round_(template, member, rnd):
    if os.path.exists(member):
        os.unlink(member)
    reflink(template, member)
    bind(member, template)
    marker = b"R%07d" % rnd
    pipes, pids = [], []
    go = []
    for i in range(MAPPERS):
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.close(done_r)
            mapper(member, marker, go_r, done_w, forks=i % 2 == 1)
        os.close(go_r)
        os.close(done_w)
        pipes.append(done_r)
        go.append(go_w)
        pids.append(pid)
    time.sleep(0.02 * (rnd % 5))
    w = os.open(member, os.O_WRONLY)
    os.pwrite(w, marker * (PAGE // len(marker)), 0)
    os.close(w)
    # The write returned: everyone checks now (a mapper's children read
    # the same pipe: one byte each, the parent's is the "w").
    for g in go:
        os.write(g, b"w" * 8)
        os.close(g)
    n = stale = 0
    for p in pipes:
        a, b = struct.unpack("ii", os.read(p, 8))
        n += a
        stale += b
        os.close(p)
    for pid in pids:
        os.waitpid(pid, 0)
    return n, stale


def main():
    template, member, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    total = stale = 0
    for rnd in range(rounds):
        n, s = round_(template, member, rnd)
        total += n
        stale += s
        if s:
            print(f"race: round {rnd}: {s} of {n} mappings stale")
    print(f"race: {rounds} rounds, {total} mappings checked, {stale} stale")
    os.sync()
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
