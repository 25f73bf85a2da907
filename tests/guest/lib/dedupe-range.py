#!/usr/bin/env python3
"""dedupe-range.py SRC DST: FIDEDUPERANGE all of SRC onto DST (the kernel
compares both files' pages first, then shares SRC's extents); prints the
bytes deduplicated, exits 1 if the ioctl fails or the files differ."""

import fcntl
import os
import struct
import sys

FIDEDUPERANGE = 0xC0189436
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_RDWR)
size = os.fstat(src).st_size
arg = bytearray(struct.pack("=QQHHI", 0, size, 1, 0, 0) + struct.pack("=qQQiI", dst, 0, 0, 0, 0))
fcntl.ioctl(src, FIDEDUPERANGE, arg)
deduped, status = struct.unpack_from("=Qi", arg, 24 + 16)
print(f"deduped {deduped} bytes, status {status}")
sys.exit(0 if status == 0 and deduped == size else 1)
