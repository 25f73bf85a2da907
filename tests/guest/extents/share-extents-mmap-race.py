#!/usr/bin/env python3
"""Private mappings of shared extents while their files change, on SMP.

    share-extents-mmap-race.py MNT FILES SECONDS

MNT/s1..sFILES are writable snapshots of MNT/w, in a sharing scope; each
holds data/file, whose page i is page(0, 0, i) (see page()). For SECONDS,
at once: mappers map a random snapshot's file MAP_PRIVATE, read-only
(most map a clone, tc_extent_mmap_file()), and check every page; writers
give file j a new version by FICLONE from MNT/w/versions/j.k (a whole
new layout, atomically) or rewrite one page in place; a churner
allocates elsewhere on the file system (moving the handout generation
the clone comparison checks); an evicter drops the files' caches.

Mappers serialise their mmap() calls (a lock file), so that each knows
from mmaps_shared whether its mapping is a clone's. Every page a mapping
shows must carry its own index i and a tag of 0 (the snapshot's bytes)
or the file's own number j: a page of another file fails. A clone's
mapping must show whole pages, page(t, k, i), and the same bytes when
read again, as long as no writer opened the file since the mapping was
made (each writer counts its opens of file j in OPENS[j], shared memory,
before it opens): an open for writing makes the mapping map the file
itself (mm-patches/0022), which then shows the file's changes as a stock
mapping does. A mapping of the file's own pages may show a page torn by a
write or a clone racing the read, as on a stock kernel, where write()
and FICLONE change a mapped MAP_PRIVATE file's pages under it. Prints "mmap race: ..." and exits 1
on any mismatch.
"""

import fcntl
import mmap
import os
import random
import struct
import sys
import time

PAGE = 4096
FICLONE = 0x40049409
SCOPES = "/sys/kernel/mm/totalcow/extents/scopes"


def page(tag, version, index):
    head = struct.pack("<III", tag, version, index)
    return (head * (PAGE // len(head) + 1))[:PAGE]


def scope(field):
    w = open(SCOPES).read().split()
    return int(w[w.index(field) + 1])


def opens_of(opens, j):
    return struct.unpack_from("<Q", opens, 8 * j)[0]


def mapper(mnt, files, pages, until, seed, opens):
    rnd = random.Random(seed)
    # An open file description of its own: flock() is per description.
    lock = os.open(f"{mnt}/mmap.lock", os.O_RDWR | os.O_CREAT, 0o600)
    bad = maps = 0
    while time.monotonic() < until and not bad:
        j = rnd.randint(1, files)
        c0 = opens_of(opens, j)
        fd = os.open(f"{mnt}/s{j}/data/file", os.O_RDONLY)
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = scope("mmaps_shared")
        try:
            m = mmap.mmap(fd, pages * PAGE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        finally:
            clone = scope("mmaps_shared") != s
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(fd)
        maps += 1
        seen = m[:]
        # Still a clone's pages only if no writer opened the file since.
        clone = clone and opens_of(opens, j) == c0
        for i in range(pages):
            got = seen[i * PAGE:(i + 1) * PAGE]
            tag, version, index = struct.unpack_from("<III", got)
            if tag not in (0, j) or index != i or (clone and got != page(tag, version, i)):
                bad += 1
                off = next((o for o in range(0, PAGE, 12)
                            if got[o:o + 12] != got[:12]), None)
                print(f"MISMATCH {'clone' if clone else 'own'} mapping of s{j} page {i}: "
                      f"tag {tag} version {version} index {index}; differs at {off}: "
                      f"{struct.unpack_from('<III', got, off) if off and off <= PAGE - 12 else ''}",
                      flush=True)
                break
        if clone and not bad:
            time.sleep(rnd.uniform(0, 0.05))
            again = m[:]
            if again != seen and opens_of(opens, j) == c0:
                bad += 1
                i = next(i for i in range(len(seen)) if seen[i] != again[i])
                print(f"MISMATCH clone mapping of s{j} changed after mmap() at byte {i}: "
                      f"{struct.unpack_from('<III', seen, i // PAGE * PAGE)} -> "
                      f"{struct.unpack_from('<III', again, i // PAGE * PAGE)} "
                      f"{struct.unpack_from('<III', again, i - i % 12)}", flush=True)
        m.close()
    return bad, maps


def writer(mnt, files, pages, until, seed, opens):
    rnd = random.Random(seed)
    versions = len(os.listdir(f"{mnt}/w/versions")) // files
    n = 0
    while time.monotonic() < until:
        j = rnd.randint(1, files)
        struct.pack_into("<Q", opens, 8 * j, opens_of(opens, j) + 1)
        fd = os.open(f"{mnt}/s{j}/data/file", os.O_RDWR)
        if rnd.random() < 0.7:
            src = os.open(f"{mnt}/w/versions/{j}.{rnd.randrange(versions)}", os.O_RDONLY)
            fcntl.ioctl(fd, FICLONE, src)
            os.close(src)
        else:
            i = rnd.randrange(pages)
            os.pwrite(fd, page(j, 1000 + rnd.randrange(1000), i), i * PAGE)
        os.close(fd)
        n += 1
        time.sleep(rnd.uniform(0.005, 0.03))
    return n


def churner(mnt, until):
    n = 0
    while time.monotonic() < until:
        with open(f"{mnt}/churn", "wb") as f:
            f.write(os.urandom(64 * 1024))
            os.fsync(f.fileno())
        n += 1
    return n


def evicter(mnt, files, until):
    n = 0
    while time.monotonic() < until:
        j = random.randint(1, files)
        fd = os.open(f"{mnt}/s{j}/data/file", os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        n += 1
        time.sleep(0.05)
    return n


def main():
    mnt, files, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    pages = os.path.getsize(f"{mnt}/s1/data/file") // PAGE
    until = time.monotonic() + seconds
    s0, p0 = scope("mmaps_shared"), scope("mmaps_private")
    opens = mmap.mmap(-1, 8 * (files + 1))  # shared with the children
    kids = []
    roles = [("mapper", k) for k in range(4)] + [("writer", k) for k in range(2)] + \
        [("churner", 0), ("evicter", 0)]
    for role, k in roles:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            if role == "mapper":
                out = mapper(mnt, files, pages, until, 100 + k, opens)
            elif role == "writer":
                out = (0, writer(mnt, files, pages, until, 200 + k, opens))
            elif role == "churner":
                out = (0, churner(mnt, until))
            else:
                out = (0, evicter(mnt, files, until))
            os.write(w, f"{out[0]} {out[1]}".encode())
            os._exit(0)
        os.close(w)
        kids.append((role, pid, r))
    bad = 0
    done = {}
    for role, pid, r in kids:
        _, status = os.waitpid(pid, 0)
        text = os.read(r, 100).decode().split()
        if status or len(text) != 2:
            print(f"FAIL: {role} exited with status {status:#x}", flush=True)
            sys.exit(1)
        bad += int(text[0])
        done[role] = done.get(role, 0) + int(text[1])
    shared, private = scope("mmaps_shared") - s0, scope("mmaps_private") - p0
    print(f"mmap race: {done['mapper']} mappings ({shared} of a clone, {private} private), "
          f"{done['writer']} writes, {done['churner']} allocations elsewhere, "
          f"{done['evicter']} evictions, {bad} mismatches, {os.cpu_count()} cpus", flush=True)
    if bad or not shared or not private:
        print("FAIL: mismatches, or a path not taken", flush=True)
        sys.exit(1)


main()
