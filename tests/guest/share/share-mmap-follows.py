#!/usr/bin/env python3
"""A private mapping of a file shows what Linux shows, substituted or not
(tests/guest/share/share-mmap-follows.sh): pages the process did not write
through the mapping follow the file's later changes (write(), a hole
punch, a zero range, a reflink into it), pages it wrote stay its own.

share-mmap-follows.py FILE COUNTER REFLINK_SRC: FILE is 16 pages;
COUNTER the count of mappings that map another file, checked to move by
one at the mmap, so that the mapping is a substituted one: "group:NAME"
(groups/NAME/stats) or "scope:NAME" (extents/scopes), "-" for a plain
file; REFLINK_SRC a file of 16 pages on the same file system, other
bytes. Prints one line per check and exits non-zero on the
first that fails.
"""
import ctypes
import fcntl
import mmap
import os
import sys

PAGE = 4096
path, which, src = sys.argv[1:4]
FICLONERANGE = 0x4020940D
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 0x10
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def counter():
    kind, _, name = which.partition(":")
    if kind == "group":
        stats = f"/sys/kernel/mm/totalcow/groups/{name}/stats"
        return int(dict(line.split() for line in open(stats))["mmaps_shared"])
    if kind == "scope":
        for line in open("/sys/kernel/mm/totalcow/extents/scopes"):
            w = line.split()
            if w[1] == name:
                return int(w[w.index("mmaps_shared") + 1])
    return 0


def check(what, ok):
    print(f"follows: {what}: {'yes' if ok else 'NO'}")
    if not ok:
        sys.exit(1)


before = counter()
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, 16 * PAGE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
if which != "-":
    check("the mapping maps another file's pages", counter() == before + 1)
orig = m[:]
m[0:5] = b"mine!"                          # page 0: a private copy
w = os.open(path, os.O_WRONLY)             # the owner opens it for writing
os.pwrite(w, b"W" * PAGE, 2 * PAGE)        # page 2: write()
if libc.fallocate(w, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4 * PAGE, PAGE):
    sys.exit(f"punch: {os.strerror(ctypes.get_errno())}")
if libc.fallocate(w, FALLOC_FL_ZERO_RANGE, 6 * PAGE, PAGE):
    sys.exit(f"zero range: {os.strerror(ctypes.get_errno())}")
s = os.open(src, os.O_RDONLY)
arg = (ctypes.c_int64 * 4)(s, 8 * PAGE, 2 * PAGE, 8 * PAGE)  # src_fd, src_off, len, dst_off
fcntl.ioctl(w, FICLONERANGE, bytes(arg))
srcdata = os.pread(s, 2 * PAGE, 8 * PAGE)
os.close(w)
check("its own written page stays", m[0:5] == b"mine!" and m[5:PAGE] == orig[5:PAGE])
check("write() shows", m[2 * PAGE:3 * PAGE] == b"W" * PAGE)
check("a hole punch shows (zeros)", m[4 * PAGE:5 * PAGE] == bytes(PAGE))
check("a zero range shows (zeros)", m[6 * PAGE:7 * PAGE] == bytes(PAGE))
check("a reflink into it shows", m[8 * PAGE:10 * PAGE] == srcdata)
check("pages nobody changed are the file's",
      m[PAGE:2 * PAGE] == orig[PAGE:2 * PAGE] and m[12 * PAGE:] == orig[12 * PAGE:])
check("read() agrees on every page nobody wrote through the mapping",
      all(m[i * PAGE:(i + 1) * PAGE] == os.pread(fd, PAGE, i * PAGE) for i in range(1, 16)))
