"""Host-side helpers for pytest: boot a test VM and collect its results."""

import json
import os
import subprocess
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("TOTALCOW_BUILD_DIR", os.path.join(TOP, "build")))
RUNNER = os.path.join(TOP, "tests", "vm", "run")


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


def run_vm(script, *args, debug=True, disks=("2G",), mem="4G", timeout=900,
           kunit=None, name=None, extra=(), disk_dir=None, preempt=False):
    """Run SCRIPT (relative to the repository) in a fresh VM; never raises on
    a failing guest: callers assert on .status and print .explain().
    PREEMPT: boot the preemptible debug kernel (make kernel-preempt) instead
    of the debug one.
    DISK_DIR: where tests/vm/run makes (and afterwards deletes) the disk
    images; default the run's own directory."""
    os.makedirs(os.path.join(BUILD, "runs"), exist_ok=True)
    outdir = tempfile.mkdtemp(prefix=f"{name or os.path.basename(script or 'kunit')}-",
                              dir=os.path.join(BUILD, "runs"))
    cmd = [RUNNER, "-q", "-o", outdir, "-m", mem, "-t", str(timeout)]
    if preempt:
        cmd.append("--preempt")
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
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout + 60)
    return VMResult(p.returncode, outdir, p.stderr)
