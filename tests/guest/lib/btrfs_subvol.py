"""Btrfs subvolume ioctls for the Python guest scripts: create, snapshot
and delete a subvolume in one call each, without forking btrfs(8), so that
a script can make hundreds in a loop (and as an unprivileged user, where
the file system allows it)."""

import fcntl
import os
import struct

BTRFS_IOC_SUBVOL_CREATE = 0x5000940E
BTRFS_IOC_SNAP_CREATE_V2 = 0x50009417
BTRFS_IOC_SNAP_DESTROY = 0x5000940F
BTRFS_SUBVOL_RDONLY = 1 << 1


def _in_dir(parent, request, arg):
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, request, arg)
    finally:
        os.close(fd)


def subvol_create(parent, name):
    """A new, empty subvolume PARENT/NAME."""
    _in_dir(parent, BTRFS_IOC_SUBVOL_CREATE,
            bytearray(struct.pack("=q", 0) + name.encode().ljust(4088, b"\0")))


def snapshot(src, parent, name, readonly=False):
    """PARENT/NAME, a snapshot of the subvolume SRC (read-only if asked)."""
    sfd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = BTRFS_SUBVOL_RDONLY if readonly else 0
        _in_dir(parent, BTRFS_IOC_SNAP_CREATE_V2,
                bytearray(struct.pack("=qQQ32x", sfd, 0, flags) +
                          name.encode().ljust(4040, b"\0")))
    finally:
        os.close(sfd)


def destroy(parent, name):
    """Delete the subvolume PARENT/NAME."""
    _in_dir(parent, BTRFS_IOC_SNAP_DESTROY,
            bytearray(struct.pack("=q", 0) + name.encode().ljust(4088, b"\0")))
