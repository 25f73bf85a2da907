"""bench/benchlib.py: record selection, summaries and what a results
document records about its run."""

import json
import os
import subprocess

import benchlib
from vmrun import TOP


def test_sel_and_stat():
    recs = [{"config": "btrfs", "n": 1, "t": 5}, {"config": "btrfs", "n": 2, "t": 1},
            {"config": "overlayfs", "n": 1, "t": 3}]
    assert benchlib.sel(recs, config="btrfs") == recs[:2]
    assert benchlib.sel(recs, config="btrfs", n=2) == [recs[1]]
    assert benchlib.sel(recs, config="none") == []
    assert benchlib.stat(r["t"] for r in recs) == (3, 1, 5)
    assert benchlib.stat([]) is None


def test_results_document_records_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(benchlib, "RESULTS", str(tmp_path))
    meta = benchlib.run_meta("unit", repeats=5)
    path = benchlib.write_results("unit", meta, [{"x": 1}])
    assert path == os.path.join(str(tmp_path), "unit.json")
    with open(path) as f:
        doc = json.load(f)
    m = doc["meta"]
    assert doc["records"] == [{"x": 1}]
    assert m["name"] == "unit" and m["repeats"] == 5 and m["argv"]
    assert m["commit"] and m["cores"] == os.cpu_count() and m["mem_kib"] > 0
    assert "cpu_model" in m and m["host_kernel"] == os.uname().release
    assert len(m["loadavg"]) == 3 and m["date"].endswith("Z")


def test_one_memory_definition():
    """Page cache, dm cache, xarray nodes and signature arrays, all measured;
    records from before xarray nodes were measured add the dm layer's
    estimate, as their tables did."""
    new = {"page_cache_bytes": 1000, "tc_cache_bytes": 200, "xa_node_bytes": 30,
           "policy_bytes": 4, "tc_meta_bytes": 99999}
    assert benchlib.memory_bytes(new) == 1234
    del new["policy_bytes"]  # no sharing group in the configuration
    assert benchlib.memory_bytes(new) == 1230
    old = {"page_cache_bytes": 1000, "tc_cache_bytes": 200, "tc_meta_bytes": 7}
    assert benchlib.memory_bytes(old) == 1207
    assert benchlib.memory_bytes({"page_cache_bytes": 1, "tc_cache_bytes": 2}) == 3


def test_policy_bytes_without_groups_stands_in_an_assignment():
    """The guest helper that adds the groups' signature arrays to memory
    prints 0 and succeeds where no group exists (the host has none), also
    in an assignment under set -e -o pipefail, where the fleet scenarios
    use it: it used to fail there and end the scenario without a word."""
    r = subprocess.run(["bash", "-c", '. tests/vm/lib.sh; rec=(policy_bytes "$(policy_bytes)"); '
                        'echo "${rec[1]}"'], cwd=TOP, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_commit_is_dirty_for_sources_not_for_results(tmp_path, monkeypatch):
    """A run's own results files (written as it goes, or by an earlier run
    of make bench) do not make its commit -dirty; a changed source does."""
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "r.json").write_text("{}")
    (tmp_path / "src").write_text("a")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    monkeypatch.setattr(benchlib, "TOP", str(tmp_path))
    clean = benchlib.git_describe()
    assert clean and not clean.endswith("-dirty")
    (tmp_path / "bench" / "results" / "r.json").write_text('{"records": []}')
    assert benchlib.git_describe() == clean
    (tmp_path / "src").write_text("b")
    assert benchlib.git_describe() == clean + "-dirty"
