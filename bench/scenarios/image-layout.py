#!/usr/bin/env python3
"""What page caches can hold at least, for the files under some
directories on btrfs (guest side of bench/image-pair).

    image-layout.py DIR...

Prints one JSON object, in pages of 4 KiB:
  files           regular files
  stock_pages     every file's pages (a page cache that shares nothing)
  wholefile_pages the pages of each distinct file content once (sharing of
                  whole files proven identical by a content hash, as
                  EROFS's inode page-cache sharing does)
  floor_pages     the pages of each distinct disk location once: a page
                  whose bytes lie at a page-aligned place of a regular
                  extent counts once however many files refer to it;
                  any other page (inline data, compressed, unaligned)
                  counts per file (the least a page cache can hold, given
                  what is on disk)
  tail_pages      of floor_pages' shared pages, those that hold a file's
                  end (a partial page): TotalCOW does not share them
                  (docs/design/shared-extents.md: btrfs zeroes past EOF in a file's page)
FIEMAP gives the extents (btrfs logical addresses).
"""

import fcntl
import hashlib
import json
import os
import struct
import sys

PAGE = 4096
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
LAST, ENCODED, INLINE, UNWRITTEN, DELALLOC = 0x1, 0x8, 0x200, 0x800, 0x4
BATCH = 256


def extents(fd):
    """(logical, physical, length, flags) of each extent of the file."""
    buf, start = bytearray(32 + 56 * BATCH), 0
    while True:
        struct.pack_into("<QQIII", buf, 0, start, 2**64 - 1 - start, FIEMAP_FLAG_SYNC, 0, BATCH)
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        mapped = struct.unpack_from("<I", buf, 20)[0]
        if not mapped:
            return
        exts = [struct.unpack_from("<QQQ16xI", buf, 32 + 56 * i) for i in range(mapped)]
        yield from exts
        if exts[-1][3] & LAST:
            return
        start = exts[-1][0] + exts[-1][2]


def main():
    files = stock = 0
    contents = {}
    keys = set()
    tails = set()
    for top in sys.argv[1:]:
        for d, _, names in os.walk(top):
            for n in names:
                p = os.path.join(d, n)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                size = os.path.getsize(p)
                pages = -(-size // PAGE)
                files += 1
                stock += pages
                with open(p, "rb") as f:
                    contents[hashlib.sha256(f.read()).digest()] = pages
                    exts = list(extents(f.fileno()))
                for i in range(pages):
                    pos = i * PAGE
                    key = (p, i)
                    for logical, physical, length, flags in exts:
                        if logical <= pos < logical + length:
                            phys = physical + pos - logical
                            # Sectors are pages here: a page at an aligned
                            # place of a regular extent is one disk page.
                            if not flags & (ENCODED | INLINE | UNWRITTEN | DELALLOC) and \
                                    phys % PAGE == 0:
                                key = ("disk", phys)
                            break
                    keys.add(key)
                    if key[0] == "disk" and pos + PAGE > size:
                        tails.add(key)
    print(json.dumps({"files": files, "stock_pages": stock,
                      "wholefile_pages": sum(contents.values()),
                      "floor_pages": len(keys), "tail_pages": len(tails)}))


if __name__ == "__main__":
    main()
