"""bench/goals: each section 7 figure computed from results, verdicts, and
"not run" for a benchmark that left no results."""

import json
import os
import subprocess
import sys
import tempfile

from vmrun import TOP
MIB = 2**20


def read_rec(config, n, model, reader, mem_x, reads_x, ms):
    size = 256 * MIB
    return {"config": config, "snapshots": n, "model": model, "reader": reader,
            "file_bytes": size, "page_cache_bytes": int(mem_x * size), "tc_cache_bytes": 0,
            "tc_meta_bytes": 0, "disk_read_bytes": int(reads_x * size), "elapsed_ms": ms}


def write_rec(config, model, fmib, wmib, ms, pc, repeat=1):
    return {"config": config, "model": model, "state": "cold", "file_bytes": fmib * MIB,
            "write_bytes": wmib * MIB, "elapsed_ms": ms, "page_cache_bytes": pc,
            "repeat": repeat}


def goals(files, status=None):
    """The table's rows by scenario; the status summary is appended to
    @status when given."""
    with tempfile.TemporaryDirectory() as d:
        for name, doc in files.items():
            with open(os.path.join(d, name), "w") as f:
                if name.endswith(".jsonl"):
                    f.write("".join(json.dumps(r) + "\n" for r in doc))
                else:
                    json.dump(doc, f)
        out = subprocess.run([sys.executable, os.path.join(TOP, "bench", "goals"),
                              "--results", d], capture_output=True, text=True, check=True)
        with open(os.path.join(d, "goals.md")) as f:
            assert f.read().strip() == out.stdout.strip()
        if status is not None:
            with open(os.path.join(d, "status.md")) as f:
                status.append(f.read())
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in out.stdout.splitlines() if line.startswith("| ")}


def test_figures_and_verdicts():
    paper = [read_rec("btrfs", 8, "hdd", "dd", 8, 8, 1400),
             read_rec("overlayfs", 8, "hdd", "dd", 1, 1, 1000),
             read_rec("totalcow", 8, "hdd", "dd", 1.02, 1, 1100)]
    scaling = [read_rec(c, n, "ram", "dd", n if c == "btrfs" else 1 + 0.001 * n, 1, 10)
               for c in ("btrfs", "overlayfs", "totalcow") for n in (1, 2, 4)]
    writes = [write_rec("btrfs", "ram", 1024, w, 100, w * MIB) for w in (2, 16)] + \
        [write_rec("totalcow", "ram", 1024, w, t, w * MIB) for w, t in ((2, 104), (16, 90))]
    status = []
    rows = goals({
        "fig4-paper.json": {"meta": {"snapshots": [8], "size_mib": 256}, "records": paper},
        "fig4.json": {"meta": {"snapshots": [1, 2, 4]}, "records": scaling},
        "fig5-8.json": {"meta": {"models": ["ram"]}, "records": writes},
        "registration.jsonl": [{"test": "register-tree", "method": "fs-tree",
                                "files": 100000, "seconds": 2.5}],
    }, status)
    mem = rows["Fig. 4: 8 snapshots of a 256 MiB file read once: memory (x file)"]
    assert mem[1:4] == ["8.000", "1.000", "1.020"] and mem[5] == "met"
    t = rows["same: time vs overlayfs, modelled disk (hdd)"]
    assert t[3] == "1.10" and t[5] == "**missed**"
    worst = [r for k, r in rows.items() if k.startswith("Figs. 5-6")][0]
    assert worst[3] == "1.04" and worst[5] == "met"
    per = [r for k, r in rows.items() if k.startswith("N = 1, 2, 4")][0]
    assert per[1] == "1.0000" and per[3] == "0.0010" and per[5] == "met"
    reg = [r for k, r in rows.items() if k.startswith("register")][0]
    assert reg[3] == "2.50 (2.50..2.50, 1 run)" and reg[5] == "**missed**"
    fleet = [r for k, r in rows.items() if k.startswith("LXC fleet")][0]
    assert fleet[5] == "not run"
    # The goals' summary counts what the table judges and names every
    # row that misses or was not run, with its figure and source.
    verdicts = [r[5] for r in rows.values()]
    met, missed = verdicts.count("met"), verdicts.count("**missed**")
    absent = verdicts.count("not run")
    text = status[0]
    assert f"**{met} of {met + missed + absent} met**, {missed} missed, {absent} not run" in text
    assert "- missed: same: time vs overlayfs, modelled disk (hdd): 1.10 (goal <= 1.02" in text
    assert text.count("\n- missed: ") == missed and text.count("\n- not run: ") == absent


def test_warm_writes_allow_the_written_bytes():
    """Warm Figs. 5-8 (the copy read first): TotalCOW keeps the template's
    pages and the written ones, stock btrfs overwrote its copy in place;
    the page-cache goal is against btrfs + the written bytes."""
    def warm(config, w, ms, pc):
        r = write_rec(config, "hdd", 256, w, ms, pc)
        r["state"] = "warm"
        return r
    writes = [warm("btrfs", w, 100, 256 * MIB) for w in (2, 64)] + \
        [warm("totalcow", 2, 103, (256 + 2) * MIB), warm("totalcow", 64, 101, 330 * MIB)]
    rows = goals({"fig5-8.json": {"meta": {"models": ["hdd"]}, "records": writes}})
    t = [r for k, r in rows.items() if k.startswith("Figs. 5-6 warm")][0]
    assert t[3] == "1.03" and t[5] == "met" and t[6].rstrip(" |") == "fig5-8 hdd warm"
    pc = [r for k, r in rows.items() if k.startswith("Figs. 7-8 warm")][0]
    # 330 MiB against 256 + 64: 1.031, over the 1.01 allowed.
    assert pc[3] == "1.031" and pc[5] == "**missed**"
    assert not [k for k in rows if k.startswith("Figs. 5-6: 2 MiB")]


def test_write_time_is_judged_per_repeat():
    """Figs. 5-6: each repeat's time over stock btrfs' in the same repeat,
    the median over the repeats. Repeats 3 and 4 were slow for both (the
    host was busy): the ratio of the medians (49 / 30 = 1.63) would blame
    TotalCOW for them; per repeat it is 1.02, and the one repeat where only
    TotalCOW was slow is outvoted."""
    bt = [30, 30, 48, 48, 30]
    tc = [30.6, 30.6, 48.96, 48.96, 49]
    writes = []
    for rep, (b, t) in enumerate(zip(bt, tc), 1):
        writes += [write_rec("btrfs", "ram", 256, 16, b, 256 * MIB, rep),
                   write_rec("totalcow", "ram", 256, 16, t, 256 * MIB, rep)]
    rows = goals({"fig5-8.json": {"meta": {"models": ["ram"]}, "records": writes}})
    t = [r for k, r in rows.items() if k.startswith("Figs. 5-6: 2 MiB")][0]
    assert "median of per-repeat ratios" in t[0]
    assert t[3] == "1.02" and t[5] == "met"
    # TotalCOW slow in three repeats of five: missed.
    for rec in writes:
        if rec["config"] == "totalcow" and rec["repeat"] in (1, 2):
            rec["elapsed_ms"] = 40
    rows = goals({"fig5-8.json": {"meta": {"models": ["ram"]}, "records": writes}})
    t = [r for k, r in rows.items() if k.startswith("Figs. 5-6: 2 MiB")][0]
    assert t[3] == "1.33" and t[5] == "**missed**"


def test_dm_layer_share_scale_and_registration_rows():
    """The dm layer's hit/miss ratios and the bypass, per repeat; the
    memory per extra member from share-scale; registration's median over
    its runs, from the results documents the drivers write."""
    dm = []
    for rep in range(1, 6):
        dm += [{"test": "bypass-randread-4k", "device": "lin", "repeat": rep, "iops": 100},
               {"test": "bypass-randread-4k", "device": "tc", "repeat": rep, "iops": 98},
               {"test": "randread-4k", "device": "lin", "repeat": rep, "iops": 100},
               {"test": "randread-4k-hit", "device": "tc", "repeat": rep, "iops": 150},
               {"test": "randread-4k-miss", "device": "tc", "repeat": rep, "iops": 95},
               {"test": "seqread-1m", "device": "lin", "repeat": rep, "mb_s": 1000},
               {"test": "seqread-1m-hit", "device": "tc", "repeat": rep, "mb_s": 3000},
               {"test": "seqread-1m-miss", "device": "tc", "repeat": rep, "mb_s": 800}]
    f = 32 * MIB
    scale = [{"kind": "scale", "members": n, "repeat": 1, "file_bytes": f,
              "page_cache_bytes": f, "tc_cache_bytes": 0, "xa_node_bytes": 1000 * n,
              "policy_bytes": 0} for n in (1, 2, 4)]
    reg = [{"test": "register-tree", "method": m, "repeat": i, "files": 100000, "seconds": s}
           for i, (m, s) in enumerate((("fs-tree", 1.0), ("fs-tree", 3.0), ("fs-tree", 1.5),
                                        ("fiemap", 9.0)))]
    rows = goals({"dm-overhead.json": {"meta": {}, "records": dm},
                  "share-scale.json": {"meta": {"members": "1,2,4"}, "records": scale},
                  "registration.json": {"meta": {}, "records": reg}})
    bypass = [r for k, r in rows.items() if k.startswith("4 KiB random reads outside")][0]
    assert bypass[3] == "0.98 (0.98..0.98)" and bypass[5] == "met"
    hit = [r for k, r in rows.items() if k.startswith("whitelisted random 4 KiB reads, hit")][0]
    assert hit[3].startswith("1.50") and hit[5] == "**missed**"
    seq = {k.split(", ")[1]: r for k, r in rows.items()
           if k.startswith("whitelisted sequential 1 MiB reads") and "RAM disk (median" in k}
    # The miss goal was restated against one memcpy (bench/dm-miss): the
    # figure stays, unjudged.
    assert seq["miss vs dm-linear"][3].startswith("0.80")
    assert seq["miss vs dm-linear"][4] == "restated below"
    assert seq["miss vs dm-linear"][5] == "no goal"
    assert seq["hit vs dm-linear"][3].startswith("3.00") and seq["hit vs dm-linear"][5] == "met"
    per = [r for k, r in rows.items() if k.startswith("N = 1,2,4 members")][0]
    assert per[3] == "0.00003" and per[5] == "met"
    r = [r for k, r in rows.items() if k.startswith("register")][0]
    assert r[3] == "1.50 (1.00..3.00, 3 runs)" and r[5] == "met"


def test_sequential_miss_rows_against_dm_linear_and_one_memcpy():
    """The sequential-miss goal from bench/dm-miss: on the modelled hard disk the
    miss's throughput over dm-linear's; on the RAM disk the time a miss
    adds over dm-linear in units of one memcpy (the guest kernel's) of
    the same bytes, per repeat; "not run" without results. Beside it,
    unjudged, what the floor (miss-floor.c: no cache) adds in the same
    units, when the run measured it."""
    size = 256 * MIB

    def doc(memcpy_s, floor=False):
        recs = []
        for rep in (1, 2, 3):
            recs += [{"model": "hdd", "test": "lin", "repeat": rep, "mb_s": 100.0, "bytes": size},
                     {"model": "hdd", "test": "miss", "repeat": rep, "mb_s": 98.0, "bytes": size},
                     {"model": "ram", "test": "lin", "repeat": rep, "mb_s": 1000.0,
                      "bytes": size},
                     {"model": "ram", "test": "miss", "repeat": rep, "mb_s": 800.0,
                      "bytes": size}]
            for model in ("hdd", "ram"):
                recs += [{"model": model, "test": "memcpy-kernel", "repeat": rep,
                          "seconds": memcpy_s, "bytes": size},
                         {"model": model, "test": "memcpy-libc", "repeat": rep,
                          "seconds": memcpy_s / 2, "bytes": size}]
            if floor:
                # Landing and the copy add 0.075 s to the direct pass.
                recs += [{"model": "ram", "test": f"floor-{kib}", "repeat": rep,
                          "direct_s": 0.1, "land_s": 0.11, "cache_s": 0.175,
                          "copy_s": 0.07, "landed_copy_s": 0.065, "bytes": size}
                         for kib in (256, 1024)]
        # The warm-up (repeat 0) is never counted.
        recs.append({"model": "ram", "test": "miss", "repeat": 0, "mb_s": 1.0, "bytes": size})
        return {"meta": {}, "records": recs}

    def row(rows, what):
        return [r for k, r in rows.items() if k.startswith("whitelisted sequential 1 MiB reads")
                and what in k][0]
    # A miss adds 268435456 B / 800 MB/s - / 1000 MB/s = 67.1 ms.
    rows = goals({"dm-miss.json": doc(0.05)})
    assert row(rows, "modelled hard disk")[3] == "0.98 (0.98..0.98)"
    assert row(rows, "modelled hard disk")[5] == "met"
    assert row(rows, "x one memcpy")[3] == "1.34 (1.34..1.34)"
    assert row(rows, "x one memcpy")[5] == "**missed**"
    assert not [k for k in rows if k.startswith("RAM disk, no cache at all")]
    rows = goals({"dm-miss.json": doc(0.06)})
    assert row(rows, "x one memcpy")[3] == "1.12 (1.12..1.12)"
    assert row(rows, "x one memcpy")[5] == "met"
    rows = goals({"dm-miss.json": doc(0.05, floor=True)})
    assert row(rows, "x one memcpy")[5] == "**missed**"
    floor = [r for k, r in rows.items() if k.startswith("RAM disk, no cache at all")]
    assert len(floor) == 1 and floor[0][3] == "1.50 (1.50..1.50)", floor
    assert floor[0][4] == "-" and floor[0][5] == "no goal"
    rows = goals({})
    assert row(rows, "x one memcpy")[5] == "not run"


def test_fleet_rows_of_the_dm_layer_alone():
    """The dm layer alone in fleets, from bench/fleet --name fleet-dm: each engine's
    dm-layer-alone fleet, disk reads and memory x the stock
    configuration's one container of the same run; no row for an engine
    that did not run it."""
    def rec(config, clones, reads, pc, tc=0, rep=1):
        return {"config": config, "clones": clones, "repeat": rep, "disk_read_bytes": reads,
                "page_cache_bytes": pc, "tc_cache_bytes": tc, "xa_node_bytes": 0,
                "start_ms": 1000}

    def doc(dm_reads):
        recs = []
        for rep in (1, 2):
            recs += [rec("stock", 1, 100 * MIB, 100 * MIB, rep=rep),
                     rec("stock", 16, 1600 * MIB, 1600 * MIB, rep=rep),
                     rec("dmonly", 1, 100 * MIB, 100 * MIB, 100 * MIB, rep=rep),
                     rec("dmonly", 16, dm_reads, 1600 * MIB, 100 * MIB, rep=rep)]
        return {"meta": {}, "records": recs}
    rows = goals({"fleet-dm.json": doc(100 * MIB)})
    lxc = {k: r for k, r in rows.items() if k.startswith("LXC fleet, the dm layer alone")}
    reads = [r for k, r in lxc.items() if "disk reads" in k][0]
    mem = [r for k, r in lxc.items() if "memory" in k][0]
    assert reads[1] == "16.00" and reads[3] == "1.00 (1.00..1.00, 2 runs)" and reads[5] == "met"
    assert mem[3] == "17.00 (17.00..17.00, 2 runs)" and mem[5] == "no goal"
    assert not [k for k in rows if k.startswith("Podman fleet, the dm layer alone")]
    rows = goals({"fleet-dm.json": doc(103 * MIB)})
    reads = [r for k, r in rows.items()
             if k.startswith("LXC fleet, the dm layer alone") and "disk reads" in k][0]
    assert reads[3].startswith("1.03") and reads[5] == "**missed**"


def test_dm_concurrency_rows():
    """Concurrent readers of the dm layer, from bench/dm-concurrency: the new kernel's worst
    disk reads, and its read time against the baseline's, per repeat, with
    a cell where every new run is slower than every baseline run missing
    the goal even when the mean is below 1."""
    def rec(kernel, rep, n, reader, ms, reads_x=1.0):
        return {"kernel": kernel, "repeat": rep, "config": "totalcow-dm", "model": "hdd",
                "reader": reader, "snapshots": n, "file_bytes": MIB,
                "disk_read_bytes": int(reads_x * MIB), "elapsed_ms": ms}

    def doc(slow_dd):
        recs = []
        for rep in (1, 2, 3):
            for n in (1, 8):
                recs += [rec("new", rep, n, "fio", 90), rec("baseline", rep, n, "fio", 100,
                                                            reads_x=n * 0.9)]
                recs += [rec("new", rep, n, "dd", 104 + rep if slow_dd else 100),
                         rec("baseline", rep, n, "dd", 100)]
        return {"meta": {"baseline_label": "c9c97eb"}, "records": recs}

    rows = goals({"dm-concurrency.json": doc(False)})
    reads = [r for k, r in rows.items() if k.startswith("dm layer alone")][0]
    assert reads[3] == "1.000" and reads[5] == "met"
    t = [r for k, r in rows.items() if k.startswith("same: read time vs the dm layer of "
                                                     "c9c97eb")][0]
    # fio 0.90 in two cells, dd 1.00 in two: geometric mean 0.95.
    assert t[3] == "0.95; 0 of 4 cells slower beyond the spread" and t[5] == "met"
    rows = goals({"dm-concurrency.json": doc(True)})
    t = [r for k, r in rows.items() if k.startswith("same: read time vs the dm layer")][0]
    # dd: 105..107 new against 100 baseline, in both cells.
    assert t[3].endswith("2 of 4 cells slower beyond the spread") and t[5] == "**missed**"
    rows = goals({})
    assert [r for k, r in rows.items() if k.startswith("dm layer alone")][0][5] == "not run"
