"""The VM runner itself: exit statuses, timeouts, disks and splat detection."""

import importlib.machinery
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from vmrun import (BUILD, LANES, RUNNER, STOCK_CHECK, STOCK_MARKS, TOP, X86_LANE_GROUP,
                   X86_MARKS, lanes, run_vm)


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
    # A stall ends the run early (the guest may never get further).
    assert run.FATAL.search(b"[ 43.3] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
    assert run.find_splats("[ 43.3] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
    assert run.find_splats("[ 9.1] BUG: KCSAN: data-race in tc_cache_lookup / tc_cache_wait")


def test_script_exit_status_is_returned():
    r = run_vm("tests/guest/lib/exit-with.sh", "3", debug=False, disks=(), timeout=120)
    assert r.status == 3, r.explain()
    r = run_vm("tests/guest/lib/exit-with.sh", "0", debug=False, disks=(), timeout=120)
    assert r.status == 0, r.explain()


def test_timeout_kills_the_vm():
    r = run_vm("tests/guest/lib/sleep-forever.sh", debug=False, disks=(), timeout=8)
    assert r.status == 124, r.explain()
    assert "timeout" in r.stderr


def test_disks_and_output_directory():
    r = run_vm("tests/guest/lib/write-disk.sh", debug=False, disks=("64M", "1G"), timeout=120)
    assert r.status == 0, r.explain()
    with open(r.path("disk-sizes")) as f:
        assert f.read().split() == [str(64 << 20), str(1 << 30)]
    with open(r.path("from-guest.txt")) as f:
        assert f.read() == "guest was here\n"
    assert os.path.getsize(r.path("dmesg.txt")) > 0


def test_disks_in_a_disk_directory_are_removed_afterwards():
    """--disk-dir (bench/fig5-8 puts its images on /dev/shm): the guest sees
    the disks as without it, the runner deletes the images when it exits,
    whatever the script's status, and no image is left in the run directory."""
    with tempfile.TemporaryDirectory() as disks:
        r = run_vm("tests/guest/lib/write-disk.sh", debug=False, disks=("64M", "1G"),
                   timeout=120, disk_dir=disks)
        assert r.status == 0, r.explain()
        with open(r.path("disk-sizes")) as f:
            assert f.read().split() == [str(64 << 20), str(1 << 30)]
        assert os.listdir(disks) == []
        assert not [n for n in os.listdir(r.outdir) if n.endswith(".img")]
        r = run_vm("tests/guest/lib/exit-with.sh", "7", debug=False, disks=("64M",),
                   timeout=120, disk_dir=disks)
        assert r.status == 7, r.explain()
        assert os.listdir(disks) == []
        # Stopped from outside (a bench driver killed): the images go too.
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.Popen([RUNNER, "-q", "-o", out, "-d", "64M", "--disk-dir", disks,
                                  os.path.join(TOP, "tests/guest/lib/sleep-forever.sh")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(out, "console.log")) and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(os.listdir(disks)) == 1
            p.terminate()
            assert p.wait(timeout=60) == 128 + signal.SIGTERM
        assert os.listdir(disks) == []
    r = run_vm("tests/guest/lib/exit-with.sh", "0", debug=False, disks=("64M",), timeout=120,
               disk_dir=os.path.join(TOP, "no-such-directory"))
    assert r.status == 2 and "no such directory" in r.stderr, r.explain()


# The runner's options on each lane a checkout in /root runs on, and the
# files of the checkout (beside the runner, guest-init and the script)
# that lane's guest needs.
ROOT_CHECKOUT_LANES = {
    "uml": (["-k", os.path.join(BUILD, "uml-base", "linux")], ()),
    # 1 GiB and no kmemleak scans: a cheap x86-64 debug guest.
    "x86": (["--x86", "--debug", "-m", "1G", "--no-kmemleak"], ()),
    "stock": (["--stock", STOCK_CHECK, "-m", "1G"],
              ("tests/vm/stock-init", "tests/vm/stock-initramfs", "tests/vm/stock-modprobe")),
}


@pytest.mark.parametrize("lane", [
    pytest.param("uml", id="uml"),
    pytest.param("x86", id="x86", marks=X86_MARKS + [pytest.mark.x86_check]),
    pytest.param("stock", id=f"stock-{STOCK_CHECK}",
                 marks=STOCK_MARKS + [pytest.mark.stock_check]),
])
def test_checkout_and_output_under_paths_the_guest_mounts_over(lane):
    """The guest mounts tmpfs over /root, /tmp, /mnt ...: a checkout in
    /root/src and an output directory in /tmp still reach the guest (it
    shows the checkout again, the output directory has its own mount), on
    every lane. Before, the runner refused such an output directory and the
    guest could not see such a checkout; then the QEMU lanes, whose root is
    a 9p share that cannot be mounted twice, still could not."""
    opts, files = ROOT_CHECKOUT_LANES[lane]
    with tempfile.TemporaryDirectory(dir="/root") as top, \
            tempfile.TemporaryDirectory(dir="/tmp") as out:
        for rel in ("tests/vm/run", "tests/vm/guest-init", "tests/guest/lib/exit-with.sh") + files:
            os.makedirs(os.path.join(top, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(TOP, rel), os.path.join(top, rel))
        p = subprocess.run([os.path.join(top, "tests/vm/run"), "-q", "-t", "300", "-o", out,
                            *opts, os.path.join(top, "tests/guest/lib/exit-with.sh"), "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=400, env={**os.environ, "TOTALCOW_BUILD_DIR": BUILD})
        log = os.path.join(out, "console.log")
        if p.returncode != 5 and os.path.exists(log):
            with open(log, errors="replace") as f:
                pytest.fail(f"{p.stderr}\n--- console ---\n" +
                            "\n".join(f.read().splitlines()[-30:]))
        assert p.returncode == 5, p.stderr
        with open(os.path.join(out, "exit-status")) as f:
            assert f.read().strip() == "5"


@lanes("debug", "preempt", "x86", x86_check=True)
def test_kernel_warning_fails_a_successful_script(lane):
    # Without kmemleak's closing scans (half of an x86-64 run): the warning
    # alone must fail the run.
    r = run_vm("tests/guest/lib/provoke-warning.sh", debug=True, disks=(), timeout=300,
               extra=("--no-kmemleak",), **LANES[lane])
    assert r.status == 125, r.explain()
    assert "splat" in r.stderr


def qemu_guest_checks(r):
    """What write-disk.sh in a QEMU guest with --smp 3 and disks 64M, 1G
    must leave: exit 0, the disks as vda, vdb in order and size, a file
    written to the host, 3 CPUs. Returns the guest's kernel version."""
    assert r.status == 0, r.explain()
    with open(r.path("disk-sizes")) as f:
        assert f.read().split() == [str(64 << 20), str(1 << 30)]
    with open(r.path("from-guest.txt")) as f:
        assert f.read() == "guest was here\n"
    with open(r.path("guest-kernel")) as f:
        cpus, disks, version = f.read().split("\n")[:3]
    assert cpus == "3" and disks == "vda vdb", (cpus, disks)
    return version


@pytest.mark.x86
@pytest.mark.xdist_group(X86_LANE_GROUP)
def test_x86_lane_keeps_the_runners_contract():
    """The x86-64 lane (QEMU): the script's exit status, scratch disks as
    virtio-blk in the order and sizes asked for, named $DISK0/$DISK1, files
    the guest writes reach the host, dmesg is kept, the guest really has
    the CPUs asked for and a preemptible SMP kernel, and the runner says
    which accelerator ran it."""
    r = run_vm("tests/guest/lib/write-disk.sh", disks=("64M", "1G"), timeout=300, x86=True,
               smp=3, extra=("--no-kmemleak",))
    version = qemu_guest_checks(r)
    assert "SMP PREEMPT" in version and "-totalcow-x86-debug" in version, version
    assert os.path.getsize(r.path("dmesg.txt")) > 0
    assert "accelerator KVM" in r.stderr or "accelerator TCG (multi-threaded)" in r.stderr
    r = run_vm("tests/guest/lib/exit-with.sh", "3", disks=(), timeout=300, x86=True,
               extra=("--no-kmemleak",))
    assert r.status == 3, r.explain()


@pytest.mark.stock
@pytest.mark.xdist_group(X86_LANE_GROUP)
def test_stock_lane_keeps_the_runners_contract():
    """The stock lane (Debian's 6.1 through its initramfs): the script's
    exit status, scratch disks in order as $DISK0/$DISK1, files the guest
    writes reach the host, the guest runs Debian's kernel on the CPUs
    asked for, and loading our unsigned, out-of-tree module (a taint
    message) is no splat."""
    r = run_vm("tests/guest/lib/write-disk.sh", disks=("64M", "1G"), timeout=300,
               stock=STOCK_CHECK, smp=3)
    version = qemu_guest_checks(r)
    assert "Debian" in version and "totalcow" not in version, version
    assert "Debian's" in r.stderr
    r = run_vm("tests/guest/lib/exit-with.sh", "3", disks=(), timeout=300, stock=STOCK_CHECK)
    assert r.status == 3, r.explain()
    r = run_vm("tests/guest/lib/load-dm-totalcow.sh", disks=(), timeout=300, stock=STOCK_CHECK)
    assert r.status == 0, r.explain()
    assert "tainting kernel" in r.console, r.explain()


def test_stock_lane_given_a_root_needs_exactly_one_installed_kernel(tmp_path):
    """--stock PATH boots the kernel a package installed in a root
    (tests/deb/test-kernel-package, Debian's configuration): a root with
    no kernel, or with two, is refused before any VM starts, naming what
    it found, and a kernel image whose modules are missing does not
    count."""
    def refused(root):
        p = subprocess.run([RUNNER, "--stock", str(root), "tests/guest/lib/exit-with.sh", "0"],
                           cwd=TOP, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        return p.stderr
    root = tmp_path / "root"
    (root / "boot").mkdir(parents=True)
    assert "a root with one kernel in boot/ and its modules in lib/modules/, not 0" in refused(root)
    for release in ("6.12.117-a", "6.12.117-b"):
        (root / "boot" / f"vmlinuz-{release}").write_bytes(b"")
    assert "not 0" in refused(root)
    for release in ("6.12.117-a", "6.12.117-b"):
        (root / "lib" / "modules" / release).mkdir(parents=True)
    assert "not 2" in refused(root)


@pytest.mark.x86
@pytest.mark.xdist_group(X86_LANE_GROUP)
def test_x86_lane_timeout_kills_qemu():
    r = run_vm("tests/guest/lib/sleep-forever.sh", disks=(), timeout=30, x86=True)
    assert r.status == 124, r.explain()
    assert "timeout" in r.stderr


def fake_qemu_run(tmp, *boots):
    """Run the runner's x86-64 lane against a stand-in for QEMU that prints
    BOOTS[i] as the console of its i-th start and exits. Returns (exit
    status, stderr, how many times QEMU started, the output directory)."""
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    for i, text in enumerate(boots, 1):
        with open(os.path.join(tmp, f"boot{i}"), "w") as f:
            f.write(text)
    fake = os.path.join(bindir, "qemu-system-x86_64")
    with open(fake, "w") as f:
        f.write('#!/bin/bash\n'
                '[ "$1" = --version ] && { echo "QEMU emulator version 10.0.2"; exit 0; }\n'
                'n=$(( $(cat "$FAKE_QEMU/n" 2>/dev/null || echo 0) + 1 ))\n'
                'echo $n > "$FAKE_QEMU/n"\n'
                'cat "$FAKE_QEMU/boot$n" 2>/dev/null\n')
    os.chmod(fake, 0o755)
    outdir = os.path.join(tmp, "out")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_QEMU=tmp)
    # Disks in the output directory, where the caller looks for them.
    env.pop("TOTALCOW_DISK_DIR", None)
    p = subprocess.run([RUNNER, "--x86", "-q", "-k", fake, "-d", "1M", "-o", outdir,
                        "-t", "60", os.path.join(TOP, "tests/guest/lib/exit-with.sh"), "0"],
                       env=env, capture_output=True, text=True, timeout=300)
    with open(os.path.join(tmp, "n")) as f:
        return p.returncode, p.stderr, int(f.read()), outdir


STALL = ("[ 43.3] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n"
         "[ 43.3] rcu: rcu_preempt kthread timer wakeup didn't happen for 25999 jiffies!\n")
STARTED = "TOTALCOW-START: /x/exit-with.sh\n"


QEMU_ABORT = ("[ 6.81] pci 0000:00:03.0: BAR 4 [mem 0xfebf0000-0xfebf3fff 64bit pref]\n"
              "qemu-system-x86_64: hw/pci/msix.c:228: msix_table_mmio_write: Assertion "
              "`addr + size <= dev->msix_entries_nr * PCI_MSIX_ENTRY_SIZE' failed.\n")


@pytest.mark.parametrize("fault, said, fails", [
    (STALL, "the kernel stalled before init", 125),
    (QEMU_ABORT, "QEMU failed an assertion of its own before init", 126),
], ids=["stall", "qemu-abort"])
def test_x86_fault_before_init_boots_once_more_and_only_once(fault, said, fails):
    """Under multi-threaded TCG a vCPU has slept through its timer in boot,
    and QEMU 10.0 has failed an assertion of its own while the guest probed
    PCI (CI, 2026-12-01), each before anything of the test ran: the runner
    boots once more (keeping the first console, on fresh disks), and a
    second such fault fails the run. The same fault once the script has
    started is the run's: never retried."""
    with tempfile.TemporaryDirectory() as tmp:
        status, err, boots, out = fake_qemu_run(tmp, fault, STARTED + "TOTALCOW-EXIT: 0\n")
        assert (status, boots) == (0, 2), err
        assert "booting once more" in err and said in err
        with open(os.path.join(out, "console-stalled-boot.log")) as f:
            assert f.read() == fault
        assert os.path.getsize(os.path.join(out, "disk0.img")) == 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        status, err, boots, _ = fake_qemu_run(tmp, fault, fault, STARTED + "TOTALCOW-EXIT: 0\n")
        assert (status, boots) == (fails, 2), err
    with tempfile.TemporaryDirectory() as tmp:
        status, err, boots, _ = fake_qemu_run(tmp, STARTED + fault,
                                              STARTED + "TOTALCOW-EXIT: 0\n")
        assert (status, boots) == (fails, 1), err
        assert "booting once more" not in err
