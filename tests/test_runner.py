"""The VM runner itself: exit statuses, timeouts, disks and splat detection."""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import tempfile

from vmrun import BUILD, RUNNER, TOP, run_vm


def load_runner():
    loader = importlib.machinery.SourceFileLoader("vm_run", RUNNER)
    spec = importlib.util.spec_from_loader("vm_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_splat_patterns_match_kernel_lines_only():
    run = load_runner()
    console = "\n".join([
        "[    1.000000] btrfs: device fsid 1234 devid 1",
        "WARNING: this line was printed by a guest script, not the kernel",
        "[    2.000000] ------------[ cut here ]------------",
        "[    2.000001] WARNING: CPU: 0 PID: 1 at fs/btrfs/x.c:1 f+0x1/0x2",
        "[    3.000000] BUG: KASAN: slab-use-after-free in foo+0x10/0x20",
        "[    4.000000] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
        "[    5.000000] WARNING: possible circular locking dependency detected",
        "TOTALCOW-KMEMLEAK: 1 suspected leaks",
    ])
    hits = run.find_splats(console)
    assert len(hits) == 6, hits
    assert not any("guest script" in h for h in hits)
    assert run.find_splats("[    1.0] all good\nBUG: printed by a script") == []


def test_script_exit_status_is_returned():
    r = run_vm("tests/guest/exit-with.sh", "3", debug=False, disks=(), timeout=120)
    assert r.status == 3, r.explain()
    r = run_vm("tests/guest/exit-with.sh", "0", debug=False, disks=(), timeout=120)
    assert r.status == 0, r.explain()


def test_timeout_kills_the_vm():
    r = run_vm("tests/guest/sleep-forever.sh", debug=False, disks=(), timeout=8)
    assert r.status == 124, r.explain()
    assert "timeout" in r.stderr


def test_disks_and_output_directory():
    r = run_vm("tests/guest/write-disk.sh", debug=False, disks=("64M", "1G"), timeout=120)
    assert r.status == 0, r.explain()
    with open(r.path("disk-sizes")) as f:
        assert f.read().split() == [str(64 << 20), str(1 << 30)]
    with open(r.path("from-guest.txt")) as f:
        assert f.read() == "guest was here\n"
    assert os.path.getsize(r.path("dmesg.txt")) > 0


def test_checkout_and_output_under_paths_the_guest_mounts_over():
    """The guest mounts tmpfs over /root, /tmp, /mnt ...: a checkout in
    /root/src and an output directory in /tmp still reach the guest (the
    guest mounts them from the host again). Before, the runner refused
    such an output directory and the guest could not see such a checkout."""
    kernel = os.path.join(BUILD, "uml-base", "linux")
    with tempfile.TemporaryDirectory(dir="/root") as top, \
            tempfile.TemporaryDirectory(dir="/tmp") as out:
        for rel in ("tests/vm/run", "tests/vm/guest-init", "tests/guest/exit-with.sh"):
            os.makedirs(os.path.join(top, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(TOP, rel), os.path.join(top, rel))
        p = subprocess.run([os.path.join(top, "tests/vm/run"), "-q", "-k", kernel, "-o", out,
                            os.path.join(top, "tests/guest/exit-with.sh"), "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120, env={**os.environ, "TOTALCOW_BUILD_DIR": BUILD})
        assert p.returncode == 5, p.stderr
        with open(os.path.join(out, "exit-status")) as f:
            assert f.read().strip() == "5"


def test_kernel_warning_fails_a_successful_script():
    r = run_vm("tests/guest/provoke-warning.sh", debug=True, disks=(), timeout=300)
    assert r.status == 125, r.explain()
    assert "splat" in r.stderr
