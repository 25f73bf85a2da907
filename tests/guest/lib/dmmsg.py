"""Send a device-mapper target message without running dmsetup.

`dmsetup message DEV 0 MSG` is one DM_TARGET_MSG ioctl on /dev/mapper/control.
A race test that empties the target's cache before every try pays for
dmsetup's exec each time, and on the x86-64 lane (KASAN, TCG) one exec
costs about half a second, more than the try itself: message() issues the
same ioctl from the test's own process.

The layout is struct dm_ioctl and struct dm_target_msg of
include/uapi/linux/dm-ioctl.h (interface version 4).
"""

import fcntl
import os
import struct

# struct dm_ioctl: version[3], data_size, data_start, target_count,
# open_count, flags, event_nr, padding, dev, name[128], uuid[129], data[7].
DM_IOCTL = struct.Struct("=3IIIIiIIIQ128s129s7s")
# _IOWR(DM_IOCTL, DM_TARGET_MSG_CMD, struct dm_ioctl)
DM_TARGET_MSG = (3 << 30) | (DM_IOCTL.size << 16) | (0xfd << 8) | 14


def message(name, msg, sector=0):
    """The ioctl `dmsetup message NAME SECTOR MSG` issues; raises OSError
    with the target's error (EINVAL for a message it does not know)."""
    body = struct.pack("=Q", sector) + msg.encode() + b"\0"
    size = DM_IOCTL.size + len(body)
    head = DM_IOCTL.pack(4, 0, 0, size, DM_IOCTL.size, 0, 0, 0, 0, 0, 0,
                         name.encode(), b"", b"")
    buf = bytearray(head + body)
    fd = os.open("/dev/mapper/control", os.O_RDWR)
    try:
        fcntl.ioctl(fd, DM_TARGET_MSG, buf)
    finally:
        os.close(fd)
