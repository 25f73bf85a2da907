"""bench/fig5-8's table: ratios from the records, and the control column
(warm writes against stock btrfs cold) only in runs that have both states."""

import importlib.machinery
import importlib.util
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 2**20


def load_fig5_8():
    path = os.path.join(TOP, "bench", "fig5-8")
    if os.path.dirname(path) not in sys.path:
        sys.path.insert(0, os.path.dirname(path))  # benchlib, as when run
    loader = importlib.machinery.SourceFileLoader("fig5_8", path)
    spec = importlib.util.spec_from_loader("fig5_8", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def rec(config, state, repeat, ms):
    return {"config": config, "state": state, "repeat": repeat, "model": "hdd",
            "file_bytes": 16 * MIB, "write_bytes": 2 * MIB, "elapsed_ms": ms,
            "page_cache_bytes": 4 * MIB, "tc_cache_bytes": 0, "xa_node_bytes": 0,
            "disk_read_bytes": 0, "disk_write_bytes": 2 * MIB, "data_alloc_bytes": 2 * MIB}


META = {"name": "fig5-8", "models": ["hdd"], "sizes": [16], "big_mib": 16, "writes": [2],
        "configs": ["btrfs", "totalcow"]}


def rows(table, heading):
    """The data rows under the first heading that contains @heading."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("###") and heading in line)
    out = []
    for line in lines[start + 1:]:
        if line.startswith("###"):
            break
        if line.startswith("| ") and not line.startswith("| file size"):
            out.append([c.strip() for c in line.strip("|").split("|")])
    return out, lines[start + 2]


def test_warm_rows_compare_with_stock_btrfs_cold():
    f = load_fig5_8()
    # Per repeat: btrfs cold 110/120, btrfs warm 100/100, totalcow warm 110/132.
    recs = [rec("btrfs", "cold", 1, 110), rec("btrfs", "cold", 2, 120),
            rec("btrfs", "warm", 1, 100), rec("btrfs", "warm", 2, 100),
            rec("totalcow", "warm", 1, 110), rec("totalcow", "warm", 2, 132),
            rec("totalcow", "cold", 1, 110), rec("totalcow", "cold", 2, 120)]
    table = f.table(recs, dict(META, states=["cold", "warm"]))
    warm, header = rows(table, "hdd, warm")
    assert "per repeat vs btrfs cold" in header
    tc = next(r for r in warm if r[1] == "TotalCOW both layers")
    assert tc[4] == "1.21 (1.10..1.32)"        # against btrfs warm: 1.10, 1.32
    assert tc[6] == "1.05 (1.00..1.10)"        # against btrfs cold: 1.00, 1.10
    assert len(tc) == len(header.strip("|").split("|"))
    cold, header = rows(table, "hdd, cold")
    assert "btrfs cold" not in header
    assert all(len(r) == len(header.strip("|").split("|")) for r in cold)


def test_a_warm_only_run_has_no_control_column():
    f = load_fig5_8()
    recs = [rec("btrfs", "warm", 1, 100), rec("totalcow", "warm", 1, 104)]
    table = f.table(recs, dict(META, states=["warm"]))
    warm, header = rows(table, "hdd, warm")
    assert "btrfs cold" not in header
    assert warm[1][4] == "1.04 (1.04..1.04)"
