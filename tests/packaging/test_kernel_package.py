"""The patched kernel's packages (tests/deb/
test-kernel-package): make deb-kernel's linux-image and linux-headers and
make deb's totalcowctl install with apt on a fresh Debian 12 root, QEMU
boots the kernel the linux-image package installed there, and a demo with
both layers runs in that root with its own tools: 8 snapshots of a
template read once cost about the file in memory and disk reads, 8 of an
unregistered twin eight times it. Root only (debootstrap, chroot, mounts);
about 6 minutes under TCG, most of it the boot and the demo in the debug
kernel. `make check` builds the packages (deb-kernel) but leaves this
out for CI time; `make deb-kernel-test` and `make check-lanes` run it."""

import os
import re
import subprocess

import pytest

from vmrun import BUILD, TOP

pytestmark = [pytest.mark.slow, pytest.mark.deb_root, pytest.mark.xdist_group("deb")]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: debootstrap, chroot, mounts")
def test_the_packaged_kernel_installs_boots_and_shares():
    env = dict(os.environ, TOTALCOW_BUILD_DIR=BUILD)
    make = subprocess.run(["make", "-C", TOP, "deb", "deb-kernel"], capture_output=True,
                          text=True, env=env)
    assert make.returncode == 0, make.stdout + make.stderr
    r = subprocess.run([os.path.join(TOP, "tests", "deb", "test-kernel-package"), BUILD],
                       capture_output=True, text=True, timeout=3600, env=env)
    print(r.stdout, r.stderr, sep="")
    assert r.returncode == 0, r.stdout + r.stderr
    # The script asserts the figures; check that it printed both rows.
    rows = dict(re.findall(r"installed-demo:\s+(stock btrfs|TotalCOW)\b.*?memory ([\d.]+)x",
                           r.stdout))
    assert set(rows) == {"stock btrfs", "TotalCOW"}, r.stdout
    assert float(rows["TotalCOW"]) <= 1.10 < 7.5 <= float(rows["stock btrfs"]), rows
