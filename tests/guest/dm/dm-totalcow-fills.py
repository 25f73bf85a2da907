#!/usr/bin/env python3
"""Attacks on dm-totalcow's fills, and concurrent readers of cold blocks.

    dm-totalcow-fills.py scribble FILE CHECK_FILE TRIES
    dm-totalcow-fills.py aliased DEVICE
    dm-totalcow-fills.py concurrent DEVICE BLOCKS READERS SECONDS

scribble: FILE and CHECK_FILE are two btrfs files on a totalcow device
whose extents are one whitelisted extent (a template's file and a
snapshot's). Each try empties the target's cache, then an unprivileged
process (uid 65534) reads FILE's first 128 KiB with O_DIRECT while a second
thread of it keeps rewriting the buffer the read goes to. Then the page
cache is dropped (the target's cache stays) and CHECK_FILE is read
buffered: it must hold exactly the template's bytes, without an I/O error.
A target that copies a fill out of the reader's buffer caches the
scribbled bytes (nodatacow file: every later reader gets them; checksummed
file: every later reader gets EIO).

aliased: O_DIRECT preadv() of whitelisted blocks 0 and 1 of the raw
DEVICE into the same buffer twice (btrfs refuses such iovecs, the block
device does not). The buffer ends with block 1; block 0 must still read
back as block 0.

concurrent: READERS processes read the same cold whitelisted range of
BLOCKS blocks of the raw DEVICE at the same time (O_DIRECT, 128 KiB
reads), for SECONDS, while a writer rewrites random blocks with new
versions; the cache is emptied between rounds. Every block a reader got
while no write to it was in flight must be its latest version.

Prints one summary line; exit status 0 when every byte was right.
"""

import ctypes
import mmap
import os
import random
import subprocess
import sys
import threading
import time

import dmmsg
import vcpus

BLOCK = 4096
NOBODY = 65534


def drop_target_cache(dev):
    dmmsg.message(dev, "drop_cache")


def drop_page_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def scribbled_read(path, size):
    """In a child as uid 65534: O_DIRECT read into a buffer that a second
    thread rewrites all the time. Exit status 0 whatever the read gave."""
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        buf = mmap.mmap(-1, size)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        stop = threading.Event()

        def scribble():
            vcpus.pin(1)    # on an SMP guest, while the read runs on CPU 0
            v = 0
            while not stop.is_set():
                ctypes.memset(addr, 0x41 + v % 26, size)
                v += 1

        vcpus.pin(0)
        t = threading.Thread(target=scribble)
        t.start()
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            os.preadv(fd, [buf], 0)
        except OSError:
            pass
        os.close(fd)
        stop.set()
        t.join()
        os._exit(0)
    except BaseException as e:  # noqa: BLE001 - report, never return
        print(f"scribble child: {e!r}", file=sys.stderr)
        os._exit(3)


def scribble(path, check, tries):
    size = 128 * 1024
    dev = subprocess.run(["dmsetup", "ls", "--target", "totalcow"], check=True,
                         capture_output=True, text=True).stdout.split()[0]
    with open(check, "rb") as f:
        want = f.read(size)
    bad = eio = 0
    for _ in range(tries):
        drop_target_cache(dev)
        if scribbled_read(path, size) != 0:
            print("scribble: the unprivileged reader failed")
            return 1
        drop_page_cache()
        try:
            with open(check, "rb") as f:
                got = f.read(size)
            bad += got != want
        except OSError:
            eio += 1
    print(f"scribble: {tries} tries, {bad} wrong reads, {eio} I/O errors")
    return 1 if bad or eio else 0


def aliased(dev):
    name = os.path.basename(dev)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    ref = mmap.mmap(-1, 2 * BLOCK)
    os.preadv(fd, [ref], 0)
    b0, b1 = ref[:BLOCK], ref[BLOCK:]
    if b0 == b1:
        print("aliased: blocks 0 and 1 must differ")
        return 1
    drop_target_cache(name)
    buf = mmap.mmap(-1, BLOCK)
    os.preadv(fd, [buf, buf], 0)
    again = mmap.mmap(-1, 2 * BLOCK)
    os.preadv(fd, [again], 0)
    os.close(fd)
    ok = again[:BLOCK] == b0 and again[BLOCK:] == b1
    print(f"aliased: blocks 0 and 1 read back {'right' if ok else 'wrong'}")
    return 0 if ok else 1


def block_data(blk, version):
    head = f"block {blk} version {version} ".encode()
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


def concurrent(dev, blocks, readers, seconds):
    name = os.path.basename(dev)
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, BLOCK)
    for blk in range(blocks):
        buf[:] = block_data(blk, 0)
        os.pwritev(fd, [buf], blk * BLOCK)
    # Shared with the reader processes: version and "write in flight".
    shared = mmap.mmap(-1, 8 * blocks)
    version = memoryview(shared).cast("I")
    lock = threading.Lock()
    errors = []
    stats = {"rounds": 0, "checked": 0, "writes": 0}

    def state(blk):
        return version[2 * blk], version[2 * blk + 1]

    def reader(seed, go_r):
        vcpus.pin(1 + seed)
        rnd = random.Random(seed)
        chunk = 32
        rbuf = mmap.mmap(-1, chunk * BLOCK)
        rfd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
        bad = checked = 0
        while os.read(go_r, 1) == b"g":
            start = rnd.randrange(0, blocks, chunk) if rnd.random() < 0.2 else 0
            for off in range(start, blocks, chunk):
                n = min(chunk, blocks - off)
                before = [state(b) for b in range(off, off + n)]
                os.preadv(rfd, [memoryview(rbuf)[:n * BLOCK]], off * BLOCK)
                after = [state(b) for b in range(off, off + n)]
                for i in range(n):
                    v, busy = before[i]
                    if busy or after[i] != before[i]:
                        continue
                    checked += 1
                    if rbuf[i * BLOCK:(i + 1) * BLOCK] != block_data(off + i, v):
                        bad += 1
        os.close(rfd)
        return bad, checked

    kids = []
    for i in range(readers):
        r, w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if not pid:
            os.close(w)
            bad, checked = reader(i, r)
            os.write(res_w, f"{bad} {checked}".encode())
            os._exit(0)
        os.close(r)
        os.close(res_w)
        kids.append((pid, w, res_r))

    stop = threading.Event()

    def writer():
        vcpus.pin(0)
        # On one CPU the writer must pause for the readers to run; on an
        # SMP guest it has a CPU of its own and writes flat out.
        pause = 0.01 if len(vcpus.cpus()) == 1 else 0
        rnd = random.Random(99)
        wbuf = mmap.mmap(-1, BLOCK)
        while not stop.is_set():
            blk = rnd.randrange(blocks)
            with lock:
                v = version[2 * blk] + 1
                version[2 * blk + 1] = 1
            wbuf[:] = block_data(blk, v)
            os.pwritev(fd, [wbuf], blk * BLOCK)
            with lock:
                version[2 * blk] = v
                version[2 * blk + 1] = 0
            stats["writes"] += 1
            if pause:
                time.sleep(rnd.random() * pause)

    wt = threading.Thread(target=writer)
    wt.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        drop_target_cache(name)
        for _, w, _ in kids:
            os.write(w, b"g")
        stats["rounds"] += 1
        time.sleep(0.3)
    stop.set()
    wt.join()
    for pid, w, res_r in kids:
        os.write(w, b"q")
        os.close(w)
        os.waitpid(pid, 0)
        bad, checked = map(int, os.read(res_r, 64).split())
        os.close(res_r)
        stats["checked"] += checked
        if bad:
            errors.append(f"a reader got {bad} wrong blocks")
    for blk in range(blocks):
        os.preadv(fd, [buf], blk * BLOCK)
        if buf[:] != block_data(blk, version[2 * blk]):
            errors.append(f"final: block {blk} is not version {version[2 * blk]}")
    os.close(fd)
    print(f"concurrent: {vcpus.describe()}, {readers} readers, {stats['rounds']} rounds, "
          f"{stats['checked']} blocks checked, {stats['writes']} writes, "
          f"{len(errors)} errors")
    for e in errors[:10]:
        print("concurrent:", e)
    return 1 if errors else 0


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "scribble" and len(sys.argv) == 5:
        return scribble(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if cmd == "aliased" and len(sys.argv) == 3:
        return aliased(sys.argv[2])
    if cmd == "concurrent" and len(sys.argv) == 6:
        return concurrent(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                          float(sys.argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
