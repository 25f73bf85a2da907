"""bench/fig5-8's tables: ratios from the records, the control column
(warm writes against stock btrfs cold) only in runs that have both states,
and the fdatasync phases of a traced run (bench/scenarios/write-phases)."""

import importlib.machinery
import importlib.util
import os

from vmrun import TOP
MIB = 2**20


def load_script(name, rel):
    """The Python script at @rel (no .py name) as a module."""
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(TOP, *rel.split("/")))
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def load_fig5_8():
    return load_script("fig5_8", "bench/fig5-8")


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


def test_the_table_counts_the_writes_that_committed():
    """The last column: how many of a row's timed writes had a btrfs
    transaction commit in them (a commit on one file system only made
    the two stacks' times incomparable)."""
    f = load_fig5_8()
    recs = [dict(rec("btrfs", "warm", 1, 100), commits=0),
            dict(rec("btrfs", "warm", 2, 100), commits=2),
            dict(rec("totalcow", "warm", 1, 100), commits=1),
            dict(rec("totalcow", "warm", 2, 100), commits=1)]
    warm, header = rows(f.table(recs, dict(META, states=["warm"])), "hdd, warm")
    assert header.rstrip().endswith("| writes that committed |")
    assert [r[-1] for r in warm] == ["1/2", "2/2"]


def test_a_warm_only_run_has_no_control_column():
    f = load_fig5_8()
    recs = [rec("btrfs", "warm", 1, 100), rec("totalcow", "warm", 1, 104)]
    table = f.table(recs, dict(META, states=["warm"]))
    warm, header = rows(table, "hdd, warm")
    assert "btrfs cold" not in header
    assert warm[1][4] == "1.04 (1.04..1.04)"


TRACE = """\
# tracer: nop
      sw-46 [000] .....    10.000000: block_bio_queue: 254,1 WS 100 + 8 [sw]
 python3-7  [000] .....    10.100000: tracing_mark_write: timed-write open
 python3-7  [000] .....    10.106000: tracing_mark_write: timed-write fdatasync
 python3-7  [000] .....    10.107000: block_bio_queue: 254,1 WSM 200 + 32 [python3]
 python3-7  [000] .....    10.115000: block_bio_queue: 254,4 WS 300 + 2048 [python3]
 python3-7  [000] .....    10.115500: block_bio_queue: 254,1 WS 300 + 2048 [python3]
 python3-7  [000] .....    10.116000: block_bio_queue: 254,1 WS 2348 + 30720 [python3]
 kworker-9  [000] .....    10.200000: block_bio_queue: 254,1 FWS 0 + 0 [kworker]
 python3-7  [000] .....    10.260000: tracing_mark_write: timed-write done
 python3-7  [000] .....    10.270000: block_bio_queue: 254,1 WS 9000 + 8 [python3]
"""


def test_write_phases_cut_fdatasync_at_the_first_data_bio():
    wp = load_script("write_phases", "bench/scenarios/write-phases")
    # Before fdatasync, metadata, another device, flushes and after the
    # end: not counted. First data bio 9.5 ms after the start.
    assert wp.phases(TRACE.splitlines(), "254,1") == (9500, 144500, 2, 15360, 16384)
    assert wp.phases(TRACE.splitlines(), "254,4") == (9000, 145000, 1, 1024, 1024)
    assert wp.phases(TRACE.splitlines(), "254,2") is None
    no_end = [line for line in TRACE.splitlines() if "done" not in line]
    assert wp.phases(no_end, "254,1") is None


def test_traced_runs_get_a_phase_table():
    f = load_fig5_8()
    recs = [dict(rec("btrfs", "warm", i, 100), fdatasync_ms=90 + i, fdatasync_wait_ms=1.0 + i,
                 fdatasync_io_ms=89.0, data_bios=9, max_bio_kib=7444) for i in (1, 2, 3)]
    meta = dict(META, states=["warm"], configs=["btrfs"])
    md = f.phase_table(recs, meta)
    row = next(line for line in md.splitlines() if line.startswith("| hdd, warm | 16 MiB, 2 MiB"))
    assert row.split(" | ")[3:5] == ["92.0 (91.0..93.0)", "3.0 (2.0..4.0)"]
    assert f.phase_table([rec("btrfs", "warm", 1, 100)], meta) == ""
