"""What the bench drivers share: where results go, how a run is described,
and how records are selected and summarized. One copy of each, so that
every driver records its runs the same way (bench/README.md)."""

import json
import os
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(TOP, "bench", "results")  # committed: the evidence


def memory_bytes(r):
    """The one definition of memory every driver reports, all
    measured by the kernel during the run: page-cache growth, the
    dm cache, growth of the xarray node slab (the slots of every page
    cache, a member's alias slots included, and the dm cache's index) and
    the sharing groups' signature arrays (policy_bytes). Records made
    before scenarios measured xarray nodes add the dm layer's estimated
    metadata (tc_meta_bytes) instead, as their tables did."""
    extra = (r["xa_node_bytes"] + r.get("policy_bytes", 0) if "xa_node_bytes" in r
             else r.get("tc_meta_bytes", 0))
    return r["page_cache_bytes"] + r["tc_cache_bytes"] + extra


def sel(recs, **match):
    """The records whose fields equal every keyword given."""
    return [r for r in recs if all(r.get(k) == v for k, v in match.items())]


def stat(values):
    """(median, min, max) of @values, or None if there are none."""
    v = list(values)
    return (statistics.median(v), min(v), max(v)) if v else None


def per_repeat_ratios(recs, base, key="elapsed_ms"):
    """@key of each record over @base's record of the same repeat. The
    configurations of one repeat run back to back in the same VM: what
    slows a whole repeat (the host, the guest's background work) slows them
    alike and cancels here, where a ratio of medians keeps it."""
    b = {r["repeat"]: r[key] for r in base}
    return [r[key] / b[r["repeat"]] for r in recs if b.get(r["repeat"])]


def slope(xs, ys):
    """Least-squares slope of ys over xs (NaN if every x is the same)."""
    xs, ys = list(xs), list(ys)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def git_describe():
    """The commit the tree is at, with -dirty if a file other than a
    results file differs from it: bench/results/ is what runs write (an
    earlier run of the same make bench, or this run's own records written
    as it goes), not what they measure."""
    def git(*args):
        return subprocess.run(["git", "-C", TOP, *args], capture_output=True,
                              text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":(exclude)bench/results")
    return git("describe", "--always") + ("-dirty" if dirty else "")


def _proc_field(path, key):
    """The value of the first "KEY: value" line of @path ("" if none)."""
    with open(path) as f:
        for line in f:
            name, sep, value = line.partition(":")
            if sep and name.strip() == key:
                return value.strip()
    return ""


def machine():
    """The host a run was measured on (its CPU model and kernel too: the
    same code's ratios moved by 2x between two hosts of this project), and
    how busy it was at the end."""
    mem = _proc_field("/proc/meminfo", "MemTotal")
    return {"cores": os.cpu_count(), "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
            "host_kernel": os.uname().release, "mem_kib": int(mem.split()[0]) if mem else 0,
            "loadavg": os.getloadavg()}


def machine_label(meta):
    """"2 cores (AMD EPYC)": the host of a run's @meta, its CPU model where
    the run recorded one."""
    model = meta.get("cpu_model")
    return f"{meta.get('cores', '?')} cores" + (f" ({model})" if model else "")


def add_cpu_option(ap):
    """--cpu N: the VM on one host CPU (see pin_cpu())."""
    ap.add_argument("--cpu", type=int,
                    help="run the VM on this host CPU only (sched_setaffinity; default: "
                    "anywhere). On a virtual host UML's cost per I/O depends on whether "
                    "its threads wake each other across CPUs: unpinned, runs of the same "
                    "device flip between about 10k and 40k IOPS")


def pin_cpu(ap, cpu):
    """Run this process, and so the VM and its I/O threads, on host CPU
    @cpu only (None: leave it); a CPU this process may not use is an
    argument error."""
    if cpu is None:
        return
    if cpu not in os.sched_getaffinity(0):
        ap.error(f"--cpu {cpu}: not a CPU this process may run on")
    os.sched_setaffinity(0, {cpu})


def run_meta(name, **fields):
    """A results document's "meta": the run's name, commit, command line,
    date (UTC), machine and load, and the driver's own @fields."""
    return {"name": name, "commit": git_describe(), "argv": sys.argv,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **machine(), **fields}


def write_results(name, meta, records, results=None):
    """RESULTS/NAME.json (bench/results/, committed), or NAME.json in the
    directory RESULTS: {"meta": ..., "records": [...]}; returns its path."""
    results = results or RESULTS
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, name + ".json")
    with open(path, "w") as f:
        json.dump({"meta": meta, "records": records}, f, indent=1)
    return path
