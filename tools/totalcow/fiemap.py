# SPDX-License-Identifier: GPL-2.0-only
"""FIEMAP: a file's extents as the kernel reports them (the fallback path)."""

import fcntl
import struct

from .ioctl import FS_IOC_FIEMAP


FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNKNOWN = 0x2
FIEMAP_EXTENT_DELALLOC = 0x4
FIEMAP_EXTENT_ENCODED = 0x8
FIEMAP_EXTENT_DATA_INLINE = 0x200
FIEMAP_EXTENT_UNWRITTEN = 0x800
FIEMAP_BATCH = 256
_FIEMAP_BUF = bytearray(32 + 56 * FIEMAP_BATCH)


def file_extents(fd):
    """Yield (physical, length, flags) of the file's extents (bytes)."""
    buf, start = _FIEMAP_BUF, 0
    while True:
        struct.pack_into("<QQIII", buf, 0, start, 2**64 - 1 - start, FIEMAP_FLAG_SYNC, 0,
                         FIEMAP_BATCH)
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        mapped = struct.unpack_from("<I", buf, 20)[0]
        if mapped == 0:
            return
        extents = [struct.unpack_from("<QQQ16xI", buf, 32 + 56 * i) for i in range(mapped)]
        for logical, physical, length, flags in extents:
            yield physical, length, flags
            start = logical + length
        if extents[-1][3] & FIEMAP_EXTENT_LAST:
            return
