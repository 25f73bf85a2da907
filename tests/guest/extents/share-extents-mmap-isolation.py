#!/usr/bin/env python3
"""Helper of share-extents-mmap-isolation.sh.

    share-extents-mmap-isolation.py map FILE...   map each FILE
        MAP_PRIVATE, read its first byte and unmap it, one after the
        other; prints "mapped N in S s, longest munmap M s"
"""

import mmap
import os
import sys
import time


def main():
    longest = 0.0
    t0 = time.monotonic()
    for path in sys.argv[2:]:
        fd = os.open(path, os.O_RDONLY)
        m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        os.close(fd)
        m[0]
        t = time.monotonic()
        m.close()
        longest = max(longest, time.monotonic() - t)
    print(f"mapped {len(sys.argv) - 2} in {time.monotonic() - t0:.2f} s, "
          f"longest munmap {longest:.3f} s", flush=True)


main()
