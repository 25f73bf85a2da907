"""make deb's packages on a fresh Debian 12, in a throwaway root
(tests/deb/test-packages): DKMS is safe on Debian 12: with
dm-totalcow-dkms installed, installing or upgrading the headers of a
kernel (Debian 12's 6.1, then 6.12) makes apt exit 0 and DKMS install the
module for it; totalcowctl installs and runs; a purge removes the module
from every kernel. Root only (debootstrap, chroot, mounts); about 6
minutes with the root and apt's downloads cached under the build
directory, a few more the first time. tests/packaging/test_package_contents.py
checks the packages' contents on the host."""

import os
import subprocess

import pytest

from vmrun import BUILD, TOP

# About 6 minutes, most of it apt and dpkg: `make deb-test` and `make
# check-lanes` run it, `make check` leaves it out for CI time (pytest.ini).
pytestmark = [pytest.mark.slow, pytest.mark.deb_root, pytest.mark.xdist_group("deb")]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: debootstrap, chroot, mounts")
def test_the_packages_install_on_debian_12_and_dkms_builds_for_each_kernel():
    env = dict(os.environ, TOTALCOW_BUILD_DIR=BUILD)
    make = subprocess.run(["make", "-C", TOP, "deb"], capture_output=True, text=True, env=env)
    assert make.returncode == 0, make.stdout + make.stderr
    # What it measured: pytest -rP prints it for a test that passed.
    r = subprocess.run([os.path.join(TOP, "tests", "deb", "test-packages"), BUILD],
                       capture_output=True, text=True, timeout=3600)
    print(r.stdout, r.stderr, sep="")
    assert r.returncode == 0, r.stdout + r.stderr
