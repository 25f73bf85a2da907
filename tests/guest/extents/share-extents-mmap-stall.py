#!/usr/bin/env python3
"""Helpers of share-extents-mmap-stall.sh.

    share-extents-mmap-stall.py read FILE [MIB]
                                            O_DIRECT read of FILE's first
                                            MIB MiB (1); "read done" after
    share-extents-mmap-stall.py map FILE    map FILE MAP_PRIVATE, touch
                                            every page; prints the seconds
                                            mmap() took and the bytes'
                                            SHA-256 (must be FILE's)
"""

import hashlib
import mmap
import os
import sys
import time

MIB = 1 << 20


def main():
    what, path = sys.argv[1], sys.argv[2]
    if what == "read":
        size = int(sys.argv[3] if len(sys.argv) > 3 else 1) * MIB
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, size)
        # Present pages: btrfs reads O_DIRECT with page faults disabled.
        buf.write(b"\0" * size)
        print("reading", flush=True)
        got = os.preadv(fd, [buf], 0)
        print("read done" if got == size else f"read {got} bytes", flush=True)
        sys.exit(0 if got == size else 1)
    with open(path, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    fd = os.open(path, os.O_RDONLY)
    t = time.monotonic()
    m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    took = time.monotonic() - t
    os.close(fd)
    got = hashlib.sha256(m[:]).hexdigest()
    print(f"{took:.2f} s", flush=True)
    sys.exit(0 if got == want else 2)


main()
