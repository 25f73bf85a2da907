#!/usr/bin/env python3
"""The backing-file route of a file bound to an identical one (btrfs).

  share-backing-file.py bind MEMBER TEMPLATE   BTRFS_IOC_SHARE_PAGE_CACHE
  share-backing-file.py unbind MEMBER
  share-backing-file.py cached FILE            pages of FILE's own cache
  share-backing-file.py follows MEMBER         a private mapping follows
  share-backing-file.py sigbus MEMBER          ... and a truncation
  share-backing-file.py pair MEMBER SOURCE      BTRFS_IOC_SHARE_SUBVOL on two
                                               subvolumes' root directories
  share-backing-file.py unpair MEMBER
  share-backing-file.py dedupe SRC DST         FIDEDUPERANGE all of SRC onto DST
  share-backing-file.py changes MEMBER OFFSET  a reader open across a write,
                                               writeback and a punch there
  share-backing-file.py sums MEMBER            sha256 by read(), by a private
                                               mapping and by sendfile()
  share-backing-file.py folios FILE            the large folios of FILE's own
                                               cache: "OFFSET BYTES" each
  share-backing-file.py clone SRC SOFF DST DOFF LEN   FICLONERANGE

`follows` maps MEMBER privately, reads it, writes one page of the mapping
(a private copy), then has a child open MEMBER for writing and change
two other pages with write(): the mapping must show the child's bytes
where it did not write, its own where it did, as a stock kernel does.
"""
import ctypes
import fcntl
import mmap
import os
import signal
import struct
import sys

BTRFS_IOC_SHARE_PAGE_CACHE = 0x40089443  # _IOW(0x94, 67, __s64)
BTRFS_IOC_SHARE_SUBVOL = 0x40089444  # _IOW(0x94, 68, __s64)
FIDEDUPERANGE = 0xC0189436
FICLONERANGE = 0x4020940D
KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL = 1 << 15, 1 << 16
SYS_CACHESTAT = 451
PAGE = os.sysconf("SC_PAGE_SIZE")

libc = ctypes.CDLL(None, use_errno=True)


def share(member, fd):
    with open(member, "rb") as f:
        fcntl.ioctl(f.fileno(), BTRFS_IOC_SHARE_PAGE_CACHE, struct.pack("q", fd))


def pair(member, fd):
    d = os.open(member, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(d, BTRFS_IOC_SHARE_SUBVOL, struct.pack("q", fd))
    finally:
        os.close(d)


def dedupe(src_path, dst_path):
    """FIDEDUPERANGE all of SRC onto DST; True if all of it was shared."""
    src = os.open(src_path, os.O_RDONLY)
    dst = os.open(dst_path, os.O_RDWR)
    size = os.fstat(src).st_size
    arg = bytearray(struct.pack("=QQHHI", 0, size, 1, 0, 0) +
                    struct.pack("=qQQiI", dst, 0, 0, 0, 0))
    fcntl.ioctl(src, FIDEDUPERANGE, arg)
    os.close(src)
    os.close(dst)
    deduped, status = struct.unpack_from("=Qi", arg, 24 + 16)
    print(f"dedupe: {deduped} bytes, status {status}")
    return status == 0 and deduped == size


def changes(member, off):
    """A reader that has MEMBER open (read by runs) sees a write at OFF
    made through another open, then the same after writeback and a
    dropped cache, then zeroes after a punch there."""
    r = os.open(member, os.O_RDONLY)
    old = os.pread(r, PAGE, off)
    w = os.open(member, os.O_WRONLY)
    new = b"WRIT" * (PAGE // 4)
    os.pwrite(w, new, off)
    dirty = os.pread(r, PAGE, off)
    os.fsync(w)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")
    clean = os.pread(r, PAGE, off)
    FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
    if libc.fallocate(w, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
                      ctypes.c_long(off), ctypes.c_long(PAGE)) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")
    punched = os.pread(r, PAGE, off)
    os.close(w)
    os.close(r)
    res = {"dirty": dirty == new, "written back": clean == new,
           "punched": punched == bytes(PAGE)}
    print("changes: " + ", ".join(f"{k} {'seen' if v else 'MISSED'}" for k, v in res.items())
          + f" (old bytes differ: {old != new})")
    return all(res.values())


def sums(member):
    """The same bytes by read(), a private mapping and sendfile()."""
    import hashlib
    size = os.path.getsize(member)
    with open(member, "rb") as f:
        by_read = hashlib.sha256(f.read()).hexdigest()
    fd = os.open(member, os.O_RDONLY)
    m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    by_map = hashlib.sha256(m[:]).hexdigest()
    m.close()
    out = os.memfd_create("sendfile")
    done = 0
    while done < size:
        n = os.sendfile(out, fd, done, size - done)
        if n <= 0:
            break
        done += n
    os.close(fd)
    os.lseek(out, 0, os.SEEK_SET)
    by_splice = hashlib.sha256(os.read(out, size + 1)).hexdigest()
    os.close(out)
    print(f"sums: read {by_read[:16]} map {by_map[:16]} sendfile {by_splice[:16]}")
    print(by_read)
    return by_read == by_map == by_splice


def cached(path):
    """nr_cache of cachestat(2) over the whole file: its own mapping."""
    rng = (ctypes.c_uint64 * 2)(0, 0)
    cs = (ctypes.c_uint64 * 5)()
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(SYS_CACHESTAT, fd, rng, cs, 0) != 0:
            raise OSError(ctypes.get_errno(), "cachestat")
    finally:
        os.close(fd)
    return cs[0]


def folios(path):
    """The large folios of PATH's own page cache, as (offset, bytes), from
    a shared read-only mapping of it (its own mapping: PATH must not be a
    bound file), /proc/self/pagemap and /proc/kpageflags (root). Only
    pages already cached are looked at (mincore), so nothing is read."""
    size = os.path.getsize(path)
    npages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    vec = (ctypes.c_ubyte * npages)()
    if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    flags = []
    with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
        for i in range(npages):
            if not vec[i] & 1:
                flags.append(0)
                continue
            ctypes.string_at(addr + i * PAGE, 1)  # map it: pagemap shows mapped pages
            pm.seek((addr // PAGE + i) * 8)
            ent = struct.unpack("Q", pm.read(8))[0]
            if not ent >> 63:
                flags.append(0)
                continue
            kf.seek((ent & ((1 << 55) - 1)) * 8)
            flags.append(struct.unpack("Q", kf.read(8))[0])
    libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
    found = []
    for i, f in enumerate(flags):
        if f & KPF_COMPOUND_HEAD:
            n = 1
            while i + n < npages and flags[i + n] & KPF_COMPOUND_TAIL:
                n += 1
            found.append((i * PAGE, n * PAGE))
    return found


def clone(src, soff, dst, doff, length):
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_WRONLY)
    try:
        fcntl.ioctl(d, FICLONERANGE, struct.pack("=qQQQ", s, soff, length, doff))
    finally:
        os.close(s)
        os.close(d)


def follows(member):
    size = os.path.getsize(member)
    fd = os.open(member, os.O_RDONLY)
    m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    before = bytes(m[0:PAGE * 3])
    maps = open("/proc/self/maps").read()
    assert member in maps, "the mapping is named by the member's path"
    m[PAGE:PAGE + 4] = b"MINE"  # a private copy of page 1
    pid = os.fork()
    if pid == 0:
        w = os.open(member, os.O_WRONLY)
        os.pwrite(w, b"NEW0" * (PAGE // 4), 0)
        os.pwrite(w, b"NEW2" * (PAGE // 4), 2 * PAGE)
        os.close(w)
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    assert st == 0, "the writer failed"
    p0, p1, p2 = bytes(m[0:4]), bytes(m[PAGE:PAGE + 4]), bytes(m[2 * PAGE:2 * PAGE + 4])
    print(f"follows: page0 {p0!r} page1 {p1!r} page2 {p2!r} (before {before[0:4]!r})")
    ok = p0 == b"NEW0" and p1 == b"MINE" and p2 == b"NEW2"
    m.close()
    return ok


def sigbus(member):
    size = os.path.getsize(member)
    fd = os.open(member, os.O_RDONLY)
    m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    os.close(fd)
    _ = m[size - 1]
    os.truncate(member, 0)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGBUS, signal.SIG_DFL)
        _ = m[size - 1]
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    got = os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGBUS
    print(f"sigbus: past the end after truncate: {'SIGBUS' if got else 'no signal'}")
    return got


def main():
    cmd = sys.argv[1]
    ioctls = {  # command: (ioctl, how the argument is opened or -1)
        "bind": (share, lambda: os.open(sys.argv[3], os.O_RDONLY)),
        "unbind": (share, lambda: -1),
        "pair": (pair, lambda: os.open(sys.argv[3], os.O_RDONLY | os.O_DIRECTORY)),
        "unpair": (pair, lambda: -1),
    }
    if cmd in ioctls:
        call, arg = ioctls[cmd]
        try:
            call(sys.argv[2], arg())
        except OSError as e:
            print(f"{cmd}: {os.strerror(e.errno)}")
            return 1
        return 0
    if cmd == "changes":
        return 0 if changes(sys.argv[2], int(sys.argv[3])) else 1
    if cmd == "sums":
        return 0 if sums(sys.argv[2]) else 1
    if cmd == "dedupe":
        return 0 if dedupe(sys.argv[2], sys.argv[3]) else 1
    if cmd == "cached":
        print(cached(sys.argv[2]))
        return 0
    if cmd == "folios":
        for off, n in folios(sys.argv[2]):
            print(off, n)
        return 0
    if cmd == "clone":
        try:
            clone(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                  int(sys.argv[6]))
        except OSError as e:
            print(f"clone: {os.strerror(e.errno)}")
            return 1
        return 0
    if cmd == "follows":
        return 0 if follows(sys.argv[2]) else 1
    if cmd == "sigbus":
        return 0 if sigbus(sys.argv[2]) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
