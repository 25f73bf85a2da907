# SPDX-License-Identifier: GPL-2.0-only
"""btrfs, read with ioctls: devices, the chunk tree (logical to device
offsets), file extent items of fs trees, subvolume facts and lineage."""

import ctypes
import errno
import fcntl
import os
import struct
import subprocess

from .errors import EX_FAIL, EX_NOENT, EX_NOTTC, Fail
from .ioctl import (BTRFS_ARGS_SIZE, BTRFS_FS_INFO_SIZE, BTRFS_IOC_DEV_INFO, BTRFS_IOC_FS_INFO,
                    BTRFS_IOC_GET_SUBVOL_INFO, BTRFS_IOC_INO_LOOKUP, BTRFS_IOC_TREE_SEARCH,
                    BTRFS_IOC_TREE_SEARCH_V2)


BTRFS_EXTENT_DATA_KEY = 108
BTRFS_DEVICE_PATH_NAME_MAX = 1024  # the path ends btrfs_ioctl_dev_info_args
CHUNK_ITEMS_PER_SEARCH = 4096      # more than fit: the kernel stops at the buffer's end
SEARCH_V2_BUF = 1 << 20
BG_DATA = 1 << 0
BG_RAID0, BG_RAID1, BG_DUP, BG_RAID10 = 1 << 3, 1 << 4, 1 << 5, 1 << 6
BG_RAID5, BG_RAID6, BG_RAID1C3, BG_RAID1C4 = 1 << 7, 1 << 8, 1 << 9, 1 << 10
BG_STRIPED = BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6


def fs_devices(fd):
    """devid -> (path, rdev) for every device of the file system of fd."""
    buf = bytearray(BTRFS_FS_INFO_SIZE)
    fcntl.ioctl(fd, BTRFS_IOC_FS_INFO, buf)
    max_id, num = struct.unpack_from("<QQ", buf)
    devs = {}
    for devid in range(1, max_id + 1):
        arg = bytearray(BTRFS_ARGS_SIZE)
        struct.pack_into("<Q", arg, 0, devid)
        try:
            fcntl.ioctl(fd, BTRFS_IOC_DEV_INFO, arg)
        except OSError as e:
            if e.errno == errno.ENODEV:
                continue
            raise
        path = bytes(arg[BTRFS_ARGS_SIZE - BTRFS_DEVICE_PATH_NAME_MAX:]).split(b"\0", 1)[0].decode()
        try:
            rdev = os.stat(path).st_rdev
        except OSError:
            rdev = None
        devs[devid] = (path, rdev)
    if len(devs) != num:
        raise Fail(f"btrfs reports {num} devices, found {len(devs)}")
    return devs


def chunk_map(fd):
    """Sorted [(logical, length, type, [(devid, offset), ...])] of all chunks."""
    chunks, min_offset = [], 0
    while True:
        args = bytearray(BTRFS_ARGS_SIZE)
        # tree_id, min/max objectid, min/max offset, min/max transid,
        # min/max type, nr_items
        struct.pack_into("<QQQQQQQIII", args, 0, 3, 256, 256, min_offset, 2**64 - 1,
                         0, 2**64 - 1, 228, 228, CHUNK_ITEMS_PER_SEARCH)
        fcntl.ioctl(fd, BTRFS_IOC_TREE_SEARCH, args)
        nr = struct.unpack_from("<I", args, 64)[0]
        if nr == 0:
            break
        pos = 104
        for _ in range(nr):
            _transid, _objectid, offset, typ, length = struct.unpack_from("<QQQII", args, pos)
            pos += 32
            clen, _owner, _stripe_len, ctype = struct.unpack_from("<QQQQ", args, pos)
            num_stripes = struct.unpack_from("<H", args, pos + 44)[0]
            stripes = [struct.unpack_from("<QQ", args, pos + 48 + 32 * i)
                       for i in range(num_stripes)]
            if typ == 228:
                chunks.append((offset, clen, ctype, stripes))
            pos += length
            min_offset = offset + 1
        if min_offset == 0:
            break
    chunks.sort()
    return chunks


def find_chunk(chunks, logical):
    lo, hi = 0, len(chunks)
    while lo < hi:
        mid = (lo + hi) // 2
        if chunks[mid][0] + chunks[mid][1] <= logical:
            lo = mid + 1
        else:
            hi = mid
    if lo < len(chunks) and chunks[lo][0] <= logical:
        return chunks[lo]
    return None


def subvol_id(fd):
    """The id of the subvolume (fs tree) that directory fd is in."""
    args = bytearray(BTRFS_ARGS_SIZE)
    struct.pack_into("<QQ", args, 0, 0, 256)
    fcntl.ioctl(fd, BTRFS_IOC_INO_LOOKUP, args)
    return struct.unpack_from("<Q", args, 0)[0]


def tree_file_extents(fd, tree, inodes):
    """Yield (inode, kind, logical, length) for the EXTENT_DATA items of the
    given inodes of fs tree `tree`, straight from the tree (one ioctl per
    MiB of items, no file opened). kind: "regular", "compressed",
    "inline", "prealloc"; holes are left out."""
    lo, hi = min(inodes), max(inodes)
    args = bytearray(112 + SEARCH_V2_BUF)
    # The search walks keys (objectid, type, offset) in order from the
    # minimum to the maximum key and returns every item in between, of any
    # type; continue after the last one returned.
    key = (lo, BTRFS_EXTENT_DATA_KEY, 0)
    while True:
        struct.pack_into("<QQQQQQQIIIIQQQQQ", args, 0, tree, key[0], hi, key[2], 2**64 - 1,
                         0, 2**64 - 1, key[1], BTRFS_EXTENT_DATA_KEY, 2**31, 0, 0, 0, 0, 0,
                         SEARCH_V2_BUF)
        fcntl.ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args)
        nr = struct.unpack_from("<I", args, 64)[0]
        if nr == 0:
            return
        pos = 112
        for _ in range(nr):
            _transid, objectid, offset, typ, length = struct.unpack_from("<QQQII", args, pos)
            item = pos + 32
            pos = item + length
            if offset < 2**64 - 1:
                key = (objectid, typ, offset + 1)
            else:
                key = (objectid, typ + 1, 0)
            if typ != BTRFS_EXTENT_DATA_KEY or objectid not in inodes:
                continue
            compression, ftype = args[item + 16], args[item + 20]
            if ftype == 0:
                yield objectid, "inline", 0, 0
                continue
            disk_bytenr, disk_num_bytes, eoff, num_bytes = struct.unpack_from(
                "<QQQQ", args, item + 21)
            if disk_bytenr == 0:
                continue
            if ftype == 2:
                yield objectid, "prealloc", 0, 0
            elif compression:
                yield objectid, "compressed", disk_bytenr, disk_num_bytes
            else:
                yield objectid, "regular", disk_bytenr + eoff, num_bytes
        if key[0] > hi:
            return


BTRFS_FIRST_FREE_OBJECTID = 256         # a subvolume's root directory
BTRFS_ROOT_SUBVOL_RDONLY = 1


def subvol_show(path):
    """Facts of the subvolume whose root directory is @path, from
    BTRFS_IOC_GET_SUBVOL_INFO (any user may ask; the kernel's own root
    item, not `btrfs subvolume show`'s text): {'ID', 'UUID', 'Parent UUID',
    'Received UUID', 'Flags'}, spelled as btrfs-progs prints them ("-" for
    none, "readonly"; the ID as an int)."""
    if not os.path.isdir(path):
        raise Fail(f"{path}: not a directory", EX_NOENT)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = bytearray(504)
        try:
            fcntl.ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, buf)
        except OSError as e:
            raise Fail(f"{path}: not a btrfs subvolume ({os.strerror(e.errno)})", EX_NOTTC)
        if os.fstat(fd).st_ino != BTRFS_FIRST_FREE_OBJECTID:
            raise Fail(f"{path}: not a btrfs subvolume (a directory inside one)", EX_NOTTC)
    finally:
        os.close(fd)
    (treeid,) = struct.unpack_from("=Q", buf, 0)
    (flags,) = struct.unpack_from("=Q", buf, 288)

    def spell(off):
        raw = bytes(buf[off:off + 16])
        if not any(raw):
            return "-"
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return {"ID": treeid, "UUID": spell(296), "Parent UUID": spell(312),
            "Received UUID": spell(328),
            "Flags": "readonly" if flags & BTRFS_ROOT_SUBVOL_RDONLY else "-"}


def fs_uuid(path):
    """The UUID (fsid) of the btrfs file system that holds @path: subvolume
    ids are unique only within one file system."""
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = bytearray(BTRFS_FS_INFO_SIZE)
        try:
            fcntl.ioctl(fd, BTRFS_IOC_FS_INFO, buf)
        except OSError as e:
            raise Fail(f"{path}: not on btrfs ({os.strerror(e.errno)})", EX_NOTTC)
    finally:
        os.close(fd)
    return bytes(buf[16:32]).hex()


def snapshot_of(minfo, tinfo):
    """The kernel's lineage rule for groups/add (totalcow-btrfs.c): the
    member's parent UUID is the template's UUID, or the template's received
    UUID (a template that came from btrfs receive)."""
    parent = minfo.get("Parent UUID", "-")
    if parent in ("-", ""):
        return False
    return parent in (tinfo.get("UUID"), tinfo.get("Received UUID"))


def syncfs(path):
    """Write back the one file system that holds directory @path (not every
    file system, as sync(2) would): its extents are read from the trees
    next, and delayed allocation must have placed the data first."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            raise Fail(f"{path}: syncfs: {os.strerror(ctypes.get_errno())}", EX_FAIL)
    finally:
        os.close(fd)


def run_btrfs(args):
    out = subprocess.run(["btrfs", *args], capture_output=True, text=True)
    if out.returncode:
        raise Fail(f"btrfs {' '.join(args)}: {out.stderr.strip()[:120]}")
