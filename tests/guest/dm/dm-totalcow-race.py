#!/usr/bin/env python3
"""Hammer the race between cache fills and writes in dm-totalcow.

    dm-totalcow-race.py DEVICE SECONDS

DEVICE is a totalcow device whose first BLOCKS 4 KiB blocks are whitelisted
and initially zero. Reader threads read random whitelisted runs with
O_DIRECT, so that fills start all the time, and one reads the blocks in
order, 4 at a time, round and round (sequential misses: what starts the
target's readahead, when it is on); one writer thread writes a new
version of a random block with O_DIRECT and, as soon as the write returned,
reads it back: a fill that raced with the write and published the old
contents would show up here as a stale read. A third kind of thread drops
the cache now and then. At the end every block is compared with the
writer's model. Reader results are checked too: a block read while no
write to it was in flight must hold its latest version. On an SMP guest
the writer runs on the first CPU and the readers on the others
(vcpus.pin), so fills and writes overlap in time, not only when one of
them sleeps.
Exit status 0 when no read was wrong.
"""

import mmap
import os
import random
import sys
import threading
import time

import dmmsg
import vcpus

BLOCK = 4096
BLOCKS = 256


def block_data(blk, version):
    head = f"block {blk} version {version} ".encode()
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.version = [0] * BLOCKS      # latest completed write
        self.writing = [False] * BLOCKS  # a write is in flight

    def expect(self, blk):
        return None if self.writing[blk] else self.version[blk]


def expected(version, blk):
    return bytes(BLOCK) if version == 0 else block_data(blk, version)


def main():
    dev, seconds = sys.argv[1], float(sys.argv[2])
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    model = Model()
    stop = threading.Event()
    errors = []
    stats = {"reads": 0, "writes": 0, "drops": 0, "checked": 0}

    def reader(seed, sequential=False):
        vcpus.pin(1 + seed)
        rnd = random.Random(seed)
        buf = mmap.mmap(-1, 8 * BLOCK)
        pos = 0
        while not stop.is_set():
            if sequential:
                blk, n, pos = pos, 4, (pos + 4) % BLOCKS
            else:
                blk = rnd.randrange(BLOCKS)
                n = min(rnd.choice((1, 2, 4, 8)), BLOCKS - blk)
            with model.lock:
                before = [model.expect(b) for b in range(blk, blk + n)]
            view = memoryview(buf)[: n * BLOCK]
            got = os.preadv(fd, [view], blk * BLOCK)
            with model.lock:
                after = [model.expect(b) for b in range(blk, blk + n)]
            stats["reads"] += 1
            if got != n * BLOCK:
                errors.append(f"short read at block {blk}")
                continue
            for i in range(n):
                # Only if no write to the block started or ended meanwhile.
                if before[i] is None or before[i] != after[i]:
                    continue
                stats["checked"] += 1
                if buf[i * BLOCK:(i + 1) * BLOCK] != expected(before[i], blk + i):
                    errors.append(f"reader: block {blk + i} is not version {before[i]}")

    def writer(seed):
        vcpus.pin(0)
        rnd = random.Random(seed)
        buf = mmap.mmap(-1, BLOCK)
        back = mmap.mmap(-1, BLOCK)
        while not stop.is_set():
            blk = rnd.randrange(BLOCKS)
            with model.lock:
                version = model.version[blk] + 1
                model.writing[blk] = True
            buf[:] = block_data(blk, version)
            os.pwritev(fd, [buf], blk * BLOCK)
            with model.lock:
                model.version[blk] = version
                model.writing[blk] = False
            os.preadv(fd, [back], blk * BLOCK)
            stats["writes"] += 1
            if back[:] != buf[:]:
                errors.append(f"writer: block {blk} version {version} read back stale")

    def dropper():
        while not stop.wait(0.5):
            dmmsg.message(os.path.basename(dev), "drop_cache")
            stats["drops"] += 1

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=reader, args=(3, True)))
    threads += [threading.Thread(target=writer, args=(100,)), threading.Thread(target=dropper)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not errors:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()

    buf = mmap.mmap(-1, BLOCK)
    for blk in range(BLOCKS):
        os.preadv(fd, [buf], blk * BLOCK)
        if buf[:] != expected(model.version[blk], blk):
            errors.append(f"final: block {blk} is not version {model.version[blk]}")
    os.close(fd)
    print(f"race: {vcpus.describe()}: {stats['reads']} reads ({stats['checked']} blocks checked), "
          f"{stats['writes']} writes, {stats['drops']} cache drops, {len(errors)} errors")
    for e in errors[:20]:
        print("race:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
