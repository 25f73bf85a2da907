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
    """The one definition of memory every driver reports (issue 16 item
    4), all measured by the kernel during the run: page-cache growth, the
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


def machine():
    """The host a run was measured on, and how busy it was at the end."""
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
                break
    return {"cores": os.cpu_count(), "mem_kib": mem_kib, "loadavg": os.getloadavg()}


def run_meta(name, **fields):
    """A results document's "meta": the run's name, commit, command line,
    date (UTC), machine and load, and the driver's own @fields."""
    return {"name": name, "commit": git_describe(), "argv": sys.argv,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **machine(), **fields}


def write_results(name, meta, records):
    """bench/results/NAME.json: {"meta": ..., "records": [...]}; returns its path."""
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    with open(path, "w") as f:
        json.dump({"meta": meta, "records": records}, f, indent=1)
    return path
