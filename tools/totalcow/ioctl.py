# SPDX-License-Identifier: GPL-2.0-only
"""ioctl numbers of the uapi layouts (linux/fs.h, linux/btrfs.h)."""


def _ioc(direction, typ, nr, size):
    typ = ord(typ) if isinstance(typ, str) else typ
    return (direction << 30) | (size << 16) | (typ << 8) | nr


_IOR, _IOWR = 2, 3
BTRFS_MAGIC = 0x94
# struct btrfs_ioctl_search_args, btrfs_ioctl_ino_lookup_args and
# btrfs_ioctl_dev_info_args are 4096 bytes and btrfs_ioctl_fs_info_args
# 1024 on every architecture (linux/btrfs.h): sizes of the uapi, not the
# page size.
BTRFS_ARGS_SIZE = 4096
BTRFS_FS_INFO_SIZE = 1024
FS_IOC_FIEMAP = _ioc(_IOWR, "f", 11, 32)
BTRFS_IOC_TREE_SEARCH = _ioc(_IOWR, BTRFS_MAGIC, 17, BTRFS_ARGS_SIZE)
BTRFS_IOC_TREE_SEARCH_V2 = _ioc(_IOWR, BTRFS_MAGIC, 17, 112)
BTRFS_IOC_INO_LOOKUP = _ioc(_IOWR, BTRFS_MAGIC, 18, BTRFS_ARGS_SIZE)
BTRFS_IOC_DEV_INFO = _ioc(_IOWR, BTRFS_MAGIC, 30, BTRFS_ARGS_SIZE)
BTRFS_IOC_FS_INFO = _ioc(_IOR, BTRFS_MAGIC, 31, BTRFS_FS_INFO_SIZE)
BTRFS_IOC_GET_SUBVOL_INFO = 0x81F8943C  # _IOR(0x94, 60, 504 bytes of args)
