#!/usr/bin/env python3
"""Private mappings of member files in a page-cache sharing group.

    share-mmap.py MNT MEMBERS OPS

MNT holds template/ (data/file, data/small, bin/busybox) and snapshots
c1..cMEMBERS of it, all in group "fleet". Prints "mmap: ..." summary lines
and exits 1 at the first failed check.
"""

import hashlib
import mmap
import os
import random
import subprocess
import sys

from pagecache import drop_caches, page_cache

STATS = "/sys/kernel/mm/totalcow/groups/fleet/stats"
PAGE = 4096


def stat(name):
    with open(STATS) as f:
        for line in f:
            k, v = line.split()
            if k == name:
                return int(v)
    raise KeyError(name)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)


def map_private(path, write=False):
    """(fd, mapping) of all of PATH, MAP_PRIVATE."""
    fd = os.open(path, os.O_RDONLY)
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
    return fd, mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=prot)


def maps_names(path):
    with open("/proc/self/maps") as f:
        return [line.split()[-1] for line in f if line.rstrip().endswith(path)]


def pwrite_closed(path, data, off):
    """Write as an editor would: open, write, close (no writer stays)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def main():
    mnt, n, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tdata = open(f"{mnt}/template/data/file", "rb").read()
    want = hashlib.sha256(tdata).hexdigest()
    size = len(tdata)

    # 1. n members map the data file privately: one copy in the page cache.
    drop_caches()
    shared0, pc0 = stat("mmaps_shared"), page_cache()
    for i in range(1, n + 1):
        path = f"{mnt}/c{i}/data/file"
        fd, m = map_private(path)
        check(hashlib.sha256(m).hexdigest() == want, f"c{i}: private mapping reads wrong")
        check(maps_names(path) == [path], f"c{i}: /proc/self/maps shows {maps_names(path)}")
        m.close()
        os.close(fd)
    ratio = (page_cache() - pc0) / size
    print(f"mmap: {n} private mappings, page cache {ratio:.3f}x the file", flush=True)
    check(stat("mmaps_shared") - shared0 >= n, "mappings not counted as shared")
    check(ratio <= 1.05, f"page cache grew {ratio:.3f}x the file for {n} private mappings")

    # 2. A write through a private mapping stays in it.
    fd, m = map_private(f"{mnt}/c1/data/file", write=True)
    m[10 * PAGE:10 * PAGE + 8] = b"PRIVATE!"
    check(m[10 * PAGE:10 * PAGE + 8] == b"PRIVATE!", "private write not seen in its mapping")
    m.close()
    os.close(fd)
    for p in ("c1", "c2", "template"):
        with open(f"{mnt}/{p}/data/file", "rb") as f:
            f.seek(10 * PAGE)
            check(f.read(8) == tdata[10 * PAGE:10 * PAGE + 8], f"{p} sees a private write")

    # 3. A member changed since the snapshot maps pages of its own.
    priv0 = stat("mmaps_private")
    pwrite_closed(f"{mnt}/c2/data/file", b"CHANGED!", 20 * PAGE)
    fd, m = map_private(f"{mnt}/c2/data/file")
    check(m[20 * PAGE:20 * PAGE + 8] == b"CHANGED!", "changed member: mapping misses the change")
    check(m[:PAGE] == tdata[:PAGE], "changed member: mapping reads wrong")
    m.close()
    os.close(fd)
    check(stat("mmaps_private") == priv0 + 1, "changed member was not kept private")

    # 4. A member open for writing keeps its mappings coherent with writes.
    wfd = os.open(f"{mnt}/c3/data/file", os.O_RDWR)
    fd, m = map_private(f"{mnt}/c3/data/file")
    os.pwrite(wfd, b"COHERENT", 30 * PAGE)
    check(m[30 * PAGE:30 * PAGE + 8] == b"COHERENT", "open-for-write member: write not seen")
    m.close()
    os.close(fd)
    os.close(wfd)
    check(stat("mmaps_private") == priv0 + 2, "open-for-write member was not kept private")

    # 5. Linux's semantics: a later write to the file is seen by read()
    # and by the mapping, in its pages not written through it (the open
    # for writing made it map the member itself; tests/guest/share/
    # share-mmap-follows.sh has the other changes); a page it wrote stays.
    shared0 = stat("mmaps_shared")
    fd, m = map_private(f"{mnt}/c4/data/file", write=True)
    check(stat("mmaps_shared") == shared0 + 1, "c4's mapping does not map the template")
    m[41 * PAGE:41 * PAGE + 4] = b"MINE"
    pwrite_closed(f"{mnt}/c4/data/file", b"LATER!!!", 40 * PAGE)
    with open(f"{mnt}/c4/data/file", "rb") as f:
        f.seek(40 * PAGE)
        check(f.read(8) == b"LATER!!!", "read() misses a write")
    check(bytes(m[40 * PAGE:40 * PAGE + 8]) == b"LATER!!!",
          "private mapping does not show a write to its file")
    check(bytes(m[41 * PAGE:41 * PAGE + 4]) == b"MINE", "a page written through it changed")
    m.close()
    os.close(fd)

    # 6. Executables: n members run their own copy of busybox.
    drop_caches()
    shared0, pc0 = stat("mmaps_shared"), page_cache()
    exe = os.path.getsize(f"{mnt}/template/bin/busybox")
    for i in range(1, n + 1):
        path = f"{mnt}/c{i}/bin/busybox"
        out = subprocess.run([path, "cat", "/proc/self/maps"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        names = {line.split()[-1] for line in out.splitlines() if "busybox" in line}
        check(names == {path}, f"c{i}: busybox maps show {names}")
    grew = page_cache() - pc0
    print(f"mmap: {n} executables run, page cache grew {grew / exe:.3f}x the binary", flush=True)
    check(stat("mmaps_shared") - shared0 >= n, "executables not mapped shared")
    check(grew <= 1.5 * exe, f"page cache grew {grew} bytes for {n} runs of a {exe}-byte binary")

    # 7. Random private mappings, reads and writes against a model.
    rnd = random.Random(7)
    small = open(f"{mnt}/template/data/small", "rb").read()
    model = {f"{mnt}/c{i}/data/small": bytearray(small) for i in range(1, n + 1)}
    paths = sorted(model)
    mismatches = 0
    shared0, priv0 = stat("mmaps_shared"), stat("mmaps_private")
    for op in range(ops):
        p = rnd.choice(paths)
        m = model[p]
        kind = rnd.choices(["pmap", "pmap_write", "read", "write", "truncate", "drop"],
                           [50, 10, 25, 4, 1, 1])[0]
        if kind in ("pmap", "pmap_write") and len(m) >= PAGE:
            fd, mm = map_private(p, write=kind == "pmap_write")
            off = rnd.randrange(0, len(m) - 64)
            if kind == "pmap_write":
                mm[off:off + 64] = rnd.randbytes(64)    # private: the model keeps its bytes
            else:
                if mm[off:off + 64] != bytes(m[off:off + 64]):
                    mismatches += 1
                    print(f"MISMATCH private mapping {p} {off}", flush=True)
            mm.close()
            os.close(fd)
        elif kind == "read":
            off = rnd.randrange(0, len(small))
            with open(p, "rb") as f:
                f.seek(off)
                if f.read(4096) != bytes(m[off:off + 4096]):
                    mismatches += 1
                    print(f"MISMATCH read {p} {off}", flush=True)
        elif kind == "write":
            off = rnd.randrange(0, len(small))
            data = rnd.randbytes(rnd.choice([1, 100, 4096]))
            pwrite_closed(p, data, off)
            if off + len(data) > len(m):
                m.extend(bytes(off + len(data) - len(m)))
            m[off:off + len(data)] = data
        elif kind == "truncate":
            size_n = rnd.randrange(PAGE, len(small) + PAGE)
            os.truncate(p, size_n)
            del m[size_n:]
            m.extend(bytes(size_n - len(m)))
        elif kind == "drop":
            drop_caches()
        if mismatches > 10:
            break
    drop_caches()
    for p in paths:
        with open(p, "rb") as f:
            if f.read() != bytes(model[p]):
                mismatches += 1
                print(f"MISMATCH final {p}", flush=True)
    nshared = stat("mmaps_shared") - shared0
    nprivate = stat("mmaps_private") - priv0
    print(f"mmap: {op + 1} random operations ({nshared} mappings shared, "
          f"{nprivate} private), {mismatches} mismatches", flush=True)
    check(mismatches == 0, "mismatches with the model")
    check(nshared > 0 and nprivate > 0, "the random run did not map both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
