"""Host checks of the guest scripts' Python helpers (tests/guest/lib)."""

import subprocess

import pytest

import dmmsg

DM_LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include <linux/ioctl.h>
#include <linux/dm-ioctl.h>
int main(void)
{
	printf("%zu %lu %zu %zu %zu\n", sizeof(struct dm_ioctl),
	       (unsigned long)DM_TARGET_MSG, offsetof(struct dm_ioctl, name),
	       offsetof(struct dm_ioctl, data_size),
	       offsetof(struct dm_target_msg, message));
	return 0;
}
"""


def test_dm_message_layout_is_the_kernels(tmp_path):
    """dmmsg packs struct dm_ioctl and its ioctl number as the uapi header
    (linux-libc-dev) defines them: a wrong layout would make every
    drop_cache of a race test fail or name another device."""
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text(DM_LAYOUT_C)
    try:
        cc = subprocess.run(["cc", "-o", str(exe), str(src)], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.fail("no C compiler: tests/vm/install-deps installs build-essential")
    assert cc.returncode == 0, cc.stderr
    size, cmd, name_off, data_size_off, msg_off = map(
        int, subprocess.run([str(exe)], check=True, capture_output=True,
                            text=True).stdout.split())
    assert (dmmsg.DM_IOCTL.size, dmmsg.DM_TARGET_MSG) == (size, cmd)
    head = dmmsg.DM_IOCTL.pack(4, 0, 0, 1000, size, 0, 0, 0, 0, 0, 0, b"tc", b"", b"")
    assert head[name_off:name_off + 3] == b"tc\0"
    assert int.from_bytes(head[data_size_off:data_size_off + 4], "little") == 1000
    assert msg_off == 8    # the message follows the u64 sector
