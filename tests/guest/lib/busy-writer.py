#!/usr/bin/env python3
"""busy-writer.py FILE: rewrite FILE's first 4 KiB with O_DIRECT, again
and again, until killed; each write is a new data extent (copy-on-write),
so the file system hands out data space about as often as it can write.
Prints the writes done per second when it gets SIGTERM."""

import mmap
import os
import signal
import sys
import time

fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 4096)
buf.write(os.urandom(4096))
n, t0 = 0, time.monotonic()


def stop(*_):
    print(f"busy writer: {n / (time.monotonic() - t0):.0f} writes/s", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
while True:
    os.pwrite(fd, buf, 0)
    n += 1
