#!/usr/bin/env python3
"""Randomized torture of page-cache sharing, checked against a model.

    share-torture.py MNT MEMBERS OPS SEED [WORKERS [extents]]

MNT holds a read-only subvolume "template" with the file data/file and
snapshots m1..mMEMBERS in one group; each member has data/file and
data/copy, a reflink copy of it under another name (bound to the
template's file by its extents). Random reads, writes, mmap reads and
writes, truncates, hole punches, fsyncs and drop_caches hit the members,
and same-size rewrites in one clock tick with the cache dropped
in between, O_DIRECT writes, reflinks (FICLONERANGE) into a member from
the template or another member, and evictions of one file's cache
(POSIX_FADV_DONTNEED) that make the next read prove or compare again; a
bytearray per file models what a stock kernel must return. Any difference
is a failure. Prints "torture: N operations, 0 mismatches" at the end.

With "extents" there is no group: MNT's "template" is a
writable subvolume in a sharing scope, the members are its writable
snapshots, in the scope too, and the template's file and copy are
written like the members' (by worker 0), so writes, mmap writes,
O_DIRECT, truncates, punches, reflinks and dedupes (FIDEDUPERANGE, which
shares a range when the bytes are the same) hit both sides of the shared
extents.

With TORTURE_COMPRESSIBLE=1 in the environment, every byte written is
compressible (base64 of a seeded stream), so that a file system that
compresses writes keeps making compressed extents.

WORKERS (default 1) processes run at once, each pinned to its own CPU
(vcpus.pin) and owning members w+1, w+1+WORKERS, ... with their own model,
seed SEED+w and OPS/WORKERS operations: their files are their own, but the
template's pages, extents and cache, the group and drop_caches are shared,
so on an SMP guest aliasing, COW breaks, proofs and evictions of one
member race those of another for real.
"""

import base64
import ctypes
import fcntl
import mmap
import os
import random
import json
import struct
import sys
import time
import traceback

import vcpus

FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
FICLONERANGE = 0x4020940D
FIDEDUPERANGE = 0xC0189436
POSIX_FADV_DONTNEED = 4
BLOCK = 4096
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


COMPRESSIBLE = os.environ.get("TORTURE_COMPRESSIBLE") == "1"


def payload(rnd, n):
    """n random bytes from rnd; compressible ones with TORTURE_COMPRESSIBLE."""
    if not COMPRESSIBLE:
        return rnd.randbytes(n)
    return base64.b64encode(rnd.randbytes(n * 3 // 4 + 3))[:n]


PROGRESS = 10000     # a progress line every so many operations of a worker


def torture(mnt, members, ops, seed, name="torture", extents=False, own_source=False,
            deadline=None):
    """OPS random operations on the files of MEMBERS (member numbers), or
    fewer if time.monotonic() passes DEADLINE first (then the final checks
    run as after the last operation); returns (operations done,
    mismatches, counts per kind, seconds per kind). Prints NAME's
    progress every PROGRESS operations (a long run stopped early still
    says how far it got). With EXTENTS (shared extents, no group: the
    template is a writable subvolume and the members its writable
    snapshots), dedupes (FIDEDUPERANGE) join the operations, and with
    OWN_SOURCE the template's file and its copy are this worker's files
    too, written like the members' (both sides of every shared extent);
    a worker that does not own them never reads from them."""
    rnd = random.Random(seed)
    tpath = f"{mnt}/template/data/file"
    with open(tpath, "rb") as f:
        template = f.read()
    size0 = len(template)
    paths = [f"{mnt}/m{i}/data/{name}" for i in members for name in ("file", "copy")]
    if own_source:
        paths += [tpath, f"{mnt}/template/data/copy"]
    model = {p: bytearray(template) for p in paths}
    fds = {p: os.open(p, os.O_RDWR) for p in paths}
    dfds = {p: os.open(p, os.O_RDWR | os.O_DIRECT) for p in paths}
    tfd = fds[tpath] if own_source else os.open(tpath, os.O_RDONLY)
    counts = {}
    seconds = {}    # time spent per kind: where a long run's hours go
    mismatches = 0

    def check(p, off, n, what):
        nonlocal mismatches
        got = os.pread(fds[p], n, off)
        want = bytes(model[p][off:off + n])
        if got != want:
            mismatches += 1
            bad = next(i for i in range(min(len(got), len(want)) + 1)
                       if i >= len(got) or i >= len(want) or got[i] != want[i])
            print(f"MISMATCH after {what}: {p} offset {off + bad} "
                  f"(read {len(got)} of {n} bytes)", flush=True)

    done = 0
    for op in range(ops):
        if deadline is not None and time.monotonic() >= deadline:
            break
        done = op + 1
        if op and op % PROGRESS == 0:
            print(f"{name}: {op} operations, {mismatches} mismatches so far", flush=True)
        p = rnd.choice(paths)
        m = model[p]
        size = len(m)
        kind = rnd.choices(
            ["read", "write", "mmap_read", "mmap_write", "truncate", "punch",
             "fsync", "drop", "template", "rewrite", "dio", "reflink", "evict", "dedupe"],
            [40, 20, 8, 6, 3, 4, 4, 1, 4, 4, 4, 3, 5, 4 if extents else 0])[0]
        counts[kind] = counts.get(kind, 0) + 1
        t0 = time.monotonic()
        if kind == "read":
            off = rnd.randrange(0, size0 + 8192)
            check(p, off, rnd.choice([1, 100, 4096, 8192, 65536]), "read")
        elif kind == "write":
            off = rnd.randrange(0, size0)
            data = payload(rnd, rnd.choice([1, 512, 4096, 10000]))
            os.pwrite(fds[p], data, off)
            end = off + len(data)
            if end > len(m):
                m.extend(bytes(end - len(m)))
            m[off:end] = data
            check(p, off, len(data), "write")
        elif kind in ("mmap_read", "mmap_write") and size >= 4096:
            with mmap.mmap(fds[p], size) as mm:
                off = rnd.randrange(0, size - 64)
                if kind == "mmap_write":
                    data = payload(rnd, 64)
                    mm[off:off + 64] = data
                    m[off:off + 64] = data
                elif mm[off:off + 64] != bytes(m[off:off + 64]):
                    mismatches += 1
                    print(f"MISMATCH mmap read {p} {off}", flush=True)
        elif kind == "truncate":
            n = rnd.randrange(0, size0 + 65536)
            os.ftruncate(fds[p], n)
            if n < len(m):
                del m[n:]
            else:
                m.extend(bytes(n - len(m)))
        elif kind == "punch" and size > 0:
            off = rnd.randrange(0, size)
            n = rnd.choice([4096, 65536, 100000])
            if libc.fallocate(fds[p], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n):
                raise OSError(ctypes.get_errno(), "fallocate")
            end = min(off + n, len(m))
            m[off:end] = bytes(end - off)
        elif kind == "fsync":
            os.fsync(fds[p])
        elif kind == "drop":
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
        elif kind == "rewrite":
            # Same offset, same size, new bytes, in one clock tick (the
            # timestamps do not move), with the file's cache dropped between.
            off = rnd.randrange(0, size0 // BLOCK) * BLOCK
            n = rnd.choice([BLOCK, 4 * BLOCK, 32 * BLOCK])
            for _ in range(2):
                data = payload(rnd, n)
                os.pwrite(fds[p], data, off)
                if off + n > len(m):
                    m.extend(bytes(off + n - len(m)))
                m[off:off + n] = data
                os.fdatasync(fds[p])
                os.posix_fadvise(fds[p], 0, 0, POSIX_FADV_DONTNEED)
            check(p, off, n, "same-tick rewrite")
        elif kind == "dio":
            off = rnd.randrange(0, size0 // BLOCK) * BLOCK
            n = rnd.choice([1, 4, 16]) * BLOCK
            buf = mmap.mmap(-1, n)
            data = payload(rnd, n)
            buf[:] = data
            if os.pwrite(dfds[p], buf, off) != n:
                raise OSError("short O_DIRECT write")
            buf.close()
            if off + n > len(m):
                m.extend(bytes(off + n - len(m)))
            m[off:off + n] = data
            check(p, off, n, "O_DIRECT write")
        elif kind == "dedupe" and size >= BLOCK:
            # Another file's range onto this one's at the same offset, as
            # duperemove does: shared if the bytes are the same (the model
            # does not change either way), refused as different if not.
            src = rnd.choice([q for q in paths if q != p])
            blocks = min(len(model[src]), size) // BLOCK
            if blocks:
                n = rnd.randint(1, min(blocks, 64)) * BLOCK
                off = rnd.randrange(0, blocks * BLOCK - n + 1, BLOCK)
                arg = bytearray(struct.pack("QQHHI", off, n, 1, 0, 0) +
                                struct.pack("qQQiI", fds[p], off, 0, 0, 0))
                fcntl.ioctl(fds[src], FIDEDUPERANGE, arg)
                status = struct.unpack_from("i", arg, 48)[0]
                same = model[src][off:off + n] == m[off:off + n]
                if status < 0 or (status == 0) != same:
                    mismatches += 1
                    print(f"MISMATCH dedupe {src} -> {p} at {off}+{n}: status {status}, "
                          f"model says {'same' if same else 'different'}", flush=True)
                check(p, off, n, "dedupe")
        elif kind == "reflink":
            # From the template at the same offset (the member's extents are
            # the template's again there) or from another member anywhere.
            others = [q for q in paths if q != p]
            src = rnd.choice(others if extents else [None] + others)
            sbytes = template if src is None else model[src]
            sfd = tfd if src is None else fds[src]
            # Whole blocks inside both files: no extension, no partial block.
            blocks = min(len(sbytes), len(m)) // BLOCK
            if blocks:
                n = rnd.randint(1, min(blocks, 64)) * BLOCK
                soff = rnd.randrange(0, blocks * BLOCK - n + 1, BLOCK)
                doff = soff if src is None else rnd.randrange(0, blocks * BLOCK - n + 1, BLOCK)
                if src is not None:
                    os.fsync(fds[src])
                arg = struct.pack("=qQQQ", sfd, soff, n, doff)
                fcntl.ioctl(fds[p], FICLONERANGE, arg)
                m[doff:doff + n] = bytes(sbytes[soff:soff + n])
                check(p, doff, n, "reflink")
        elif kind == "evict":
            os.posix_fadvise(fds[p], 0, 0, POSIX_FADV_DONTNEED)
        elif kind == "template" and extents:
            if own_source:
                check(tpath, rnd.randrange(0, size0), 4096, "a read of the source")
        elif kind == "template":
            with open(f"{mnt}/template/data/file", "rb") as f:
                off = rnd.randrange(0, size0)
                f.seek(off)
                if f.read(4096) != template[off:off + 4096]:
                    mismatches += 1
                    print("MISMATCH template changed", flush=True)
        seconds[kind] = seconds.get(kind, 0.0) + time.monotonic() - t0
        if mismatches > 10:
            break
    if not own_source:
        os.close(tfd)
    for p in paths:
        os.fsync(fds[p])
        check(p, 0, len(model[p]) + 1, "the final full read")
        os.close(fds[p])
        os.close(dfds[p])
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    for p in paths:
        with open(p, "rb") as f:
            if f.read() != bytes(model[p]):
                mismatches += 1
                print(f"MISMATCH {p} after drop_caches", flush=True)
    return done, mismatches, counts, seconds


def main():
    mnt, members, ops, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    extents = len(sys.argv) > 6 and sys.argv[6] == "extents"
    if workers < 1 or (workers > 1 and members < 2 * workers):
        sys.exit(f"share-torture: {workers} workers need 2 members each ({members} given)")
    # TORTURE_SECONDS: a time budget; the workers stop at it even if
    # they have not done OPS, and the closing line says how many they did.
    budget = float(os.environ.get("TORTURE_SECONDS") or 0)
    deadline = time.monotonic() + budget if budget > 0 else None
    if workers == 1:
        done, mismatches, counts, seconds = torture(mnt, range(1, members + 1), ops, seed,
                                                    extents=extents, own_source=extents,
                                                    deadline=deadline)
    else:
        kids = []
        for w in range(workers):
            r, wr = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                status = 3
                try:
                    vcpus.pin(w)
                    # The source's files are worker 0's: one model per file.
                    res = torture(mnt, range(w + 1, members + 1, workers),
                                  ops // workers + (w < ops % workers), seed + w,
                                  f"torture worker {w}", extents=extents,
                                  own_source=extents and w == 0, deadline=deadline)
                    os.write(wr, json.dumps(res).encode())
                    status = 0
                except BaseException:  # noqa: BLE001 - report, never return
                    traceback.print_exc()
                finally:
                    os._exit(status)
            os.close(wr)
            kids.append((pid, r))
        done = mismatches = 0
        counts, seconds = {}, {}
        for pid, r in kids:
            with os.fdopen(r, "rb") as f:
                out = f.read()
            _, st = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(st) != 0 or not out:
                print(f"torture: worker {pid} failed (status {st})", flush=True)
                mismatches += 1
                continue
            d, m, c, t = json.loads(out)
            done, mismatches = done + d, mismatches + m
            for k, v in c.items():
                counts[k] = counts.get(k, 0) + v
            for k, v in t.items():
                seconds[k] = seconds.get(k, 0.0) + v
    print(f"torture: {workers} worker(s) on {vcpus.describe()}")
    print("ops:", " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    # Seconds per kind, summed over the workers (so more than the run's).
    print("seconds:", " ".join(f"{k}={v:.0f}" for k, v in
                               sorted(seconds.items(), key=lambda kv: -kv[1])))
    if deadline is not None and done < ops:
        print(f"torture: stopped at its time budget of {budget:.0f} s", flush=True)
    print(f"torture: {done} operations, {mismatches} mismatches", flush=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
