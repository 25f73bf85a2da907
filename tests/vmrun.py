"""Host-side helpers for pytest: boot a test VM and collect its results."""

import json
import os
import re
import resource
import subprocess
import tempfile
import time

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("TOTALCOW_BUILD_DIR", os.path.join(TOP, "build")))
RUNNER = os.path.join(TOP, "tests", "vm", "run")


# The kernels a test runs on (tests/vm/run's lanes and flavours), as
# run_vm() keyword arguments:
#   debug    User-Mode Linux, lockdep, KASAN, DEBUG_VM, kmemleak: one CPU,
#            no preemption, fast
#   preempt  User-Mode Linux with CONFIG_PREEMPT: the base kernel, which is
#            preemptible and has no debug option (the races and the
#            sharing holes' tests; on the debug kernel preemption doubled every test's
#            host CPU, docs/test-harness.md)
#   x86      x86-64 debug (same checks), SMP, CONFIG_PREEMPT, in QEMU on 2
#            CPUs: real parallelism; under TCG several times slower
#   stock-K  Debian's own, unpatched kernel K (tests/vm/fetch-stock-kernel:
#            6.1, 6.12, 6.12-trixie, newest) with our dm-totalcow.ko, in
#            QEMU on 2 CPUs: what a DKMS user runs; no debug checks
#            beyond the kernel's own WARN/BUG/Oops
STOCK_KERNELS = ("6.1", "6.12", "6.12-trixie", "newest")
# The one `make check` runs: Debian 12's default kernel.
STOCK_CHECK = "6.1"
LANES = {
    "debug": {},
    "preempt": {"preempt": True},
    "x86": {"x86": True, "smp": 2},
    **{f"stock-{k}": {"stock": k, "smp": 2} for k in STOCK_KERNELS},
}
STOCK_LANES = tuple(f"stock-{k}" for k in STOCK_KERNELS)


def small_mem(lane):
    """Guest memory (run_vm's MEM) for a test whose guest needs little
    (disks of a few MiB in use, no page cache counted in copies): 1 GiB on
    the QEMU lanes instead of tests/vm/run's 2 GiB, which halves kmemleak's
    two closing scans of an x86-64 debug guest under TCG (a script that
    does nothing: 44 s against 58 s); UML's default otherwise."""
    return "1G" if "x86" in LANES[lane] or "stock" in LANES[lane] else None


def lanes(*names, extra=(), x86_check=False, stock_check=True):
    """Parametrize a test over the lanes NAMES (its argument "lane", to
    pass on as run_vm(..., **LANES[lane])). Runs on the x86-64 lane are
    marked x86, and x86_check too if X86_CHECK: `make check` runs those
    of the x86-64 lane (the races; CI time allows no more), `make
    check-x86` all. Runs on a stock kernel are marked stock (`make
    check-stock`), and the one on STOCK_CHECK's kernel stock_check too
    (`make check`) unless not STOCK_CHECK. The lanes in EXTRA are marked
    lane_extra: `make check` leaves them out to keep CI within its time,
    `make check-lanes` runs them (pytest.ini)."""
    params = []
    for name in names:
        marks = []
        if name == "x86":
            marks += X86_MARKS
            if x86_check:
                marks.append(pytest.mark.x86_check)
        elif name in STOCK_LANES:
            marks += STOCK_MARKS
            if stock_check and LANES[name]["stock"] == STOCK_CHECK:
                marks.append(pytest.mark.stock_check)
        if name in extra:
            marks.append(pytest.mark.lane_extra)
        params.append(pytest.param(name, id=name, marks=marks))
    return pytest.mark.parametrize("lane", params)


# How much longer a run may take on the x86-64 lane under TCG than in UML:
# run_vm scales its timeout by this (a bound on a hang, never a measurement).
X86_TIMEOUT_SCALE = 2
# Tests on the x86-64 lane: marked x86, and one pytest-xdist worker runs
# them one after the other (--dist loadgroup), so that two QEMUs with 2
# vCPUs each never share the 2 host cores a UML VM also needs.
X86_LANE_GROUP = "x86-lane"
X86_MARKS = [pytest.mark.x86, pytest.mark.xdist_group(X86_LANE_GROUP)]
# Tests on a stock kernel: marked stock, and in the same queue as the
# x86-64 lane's: they are QEMU on 2 vCPUs too.
STOCK_MARKS = [pytest.mark.stock, pytest.mark.xdist_group(X86_LANE_GROUP)]


class VMResult:
    def __init__(self, status, outdir, stderr):
        self.status = status
        self.outdir = outdir
        self.stderr = stderr

    def path(self, name):
        return os.path.join(self.outdir, name)

    @property
    def console(self):
        with open(self.path("console.log"), errors="replace") as f:
            return f.read()

    def tail(self, lines=60):
        return "\n".join(self.console.splitlines()[-lines:])

    def records(self, name="results.jsonl"):
        """JSON objects the guest appended to <name>, one per line."""
        if not os.path.exists(self.path(name)):
            return []
        with open(self.path(name)) as f:
            return [json.loads(line) for line in f if line.strip()]

    def explain(self):
        return (f"VM exited {self.status}: {self.stderr.strip()}\n"
                f"--- last lines of {self.path('console.log')} ---\n{self.tail()}")


def ok(r):
    """Fail the test unless the VM run R exited 0, with what it printed
    last (R.explain()); return R."""
    assert r.status == 0, r.explain()
    return r


def search(pattern, r, flags=re.M):
    """The first match of PATTERN in R's console (re.M: ^ and $ match at
    each line); fails the test with R.explain() when there is none. A
    check that a line is absent says so itself (`not re.search(...)`)."""
    m = re.search(pattern, r.console, flags)
    assert m, r.explain()
    return m


def run_vm(script, *args, debug=True, disks=("2G",), mem=None, timeout=900,
           kunit=None, name=None, extra=(), disk_dir=None, preempt=False, x86=False,
           smp=2, kcsan=False, stock=None):
    """Run SCRIPT (relative to the repository) in a fresh VM; never raises on
    a failing guest: callers assert on .status and print .explain().
    PREEMPT: boot the preemptible UML kernel, the base one (DEBUG does
    not apply; tests/vm/run --preempt boots the preemptible debug kernel
    of make kernel-preempt, which no lane uses).
    X86: boot the x86-64 kernel (make kernel-x86: SMP, CONFIG_PREEMPT) in
    QEMU on SMP CPUs; KCSAN its KCSAN flavour. STOCK: boot Debian's kernel
    of that name (tests/vm/fetch-stock-kernel; DEBUG does not apply) in
    QEMU on SMP CPUs. Under TCG a guest runs several times slower than
    UML: TIMEOUT is scaled here for both.
    DISK_DIR: where tests/vm/run makes (and afterwards deletes) the disk
    images; default the run's own directory.
    MEM: guest memory; default tests/vm/run's (4G in UML, 2G on x86-64,
    where kmemleak's closing scans of all of it are slow)."""
    os.makedirs(os.path.join(BUILD, "runs"), exist_ok=True)
    lane = f"-stock-{stock}" if stock else "-x86" if x86 or kcsan else ""
    if lane:
        timeout *= X86_TIMEOUT_SCALE
    outdir = tempfile.mkdtemp(prefix=f"{name or os.path.basename(script or 'kunit')}{lane}-",
                              dir=os.path.join(BUILD, "runs"))
    cmd = [RUNNER, "-q", "-o", outdir, "-t", str(timeout)] + (["-m", mem] if mem else [])
    if stock:
        # Debian's kernel has no flavours to choose from.
        cmd += ["--stock", stock, "--smp", str(smp)]
    else:
        if x86 or kcsan:
            cmd += ["--x86", "--smp", str(smp)]
        if kcsan:
            cmd.append("--kcsan")
        elif preempt:
            pass
        elif debug:
            cmd.append("--debug")
    for d in disks:
        cmd += ["-d", d]
    if disk_dir:
        cmd += ["--disk-dir", disk_dir]
    if kunit:
        cmd += ["--kunit", kunit]
    cmd += list(extra)
    if script:
        cmd += [os.path.join(TOP, script), *args]
    cpu0, wall0 = children_cpu(), time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout + 60)
    log_vm_cost(outdir, children_cpu() - cpu0, time.monotonic() - wall0)
    return VMResult(p.returncode, outdir, p.stderr)


# What each VM cost, one line per run in $B/runs/vm-cost.tsv: the test,
# host CPU seconds (the VM's and the runner's), wall seconds, the run's
# directory. CI is bound by the host's CPU, not by wall time:
# tests/vm/vm-cost prints the most expensive runs.
VM_COST = os.path.join(BUILD, "runs", "vm-cost.tsv")


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def log_vm_cost(outdir, cpu, wall):
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").rsplit(" ", 1)[0]
    # One write() of a short line in append mode: the lines of two
    # pytest-xdist workers do not interleave.
    with open(VM_COST, "a") as f:
        f.write(f"{test}\t{cpu:.1f}\t{wall:.1f}\t{os.path.basename(outdir)}\n")
