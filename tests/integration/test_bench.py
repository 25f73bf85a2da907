"""The bench scenarios themselves, small: the figures in bench/README.md
come from these scripts, so their counts must mean what the tables say.
Each scenario runs every configuration through the disk model (dm-delay
and io.max), so the model's plumbing is covered as well. The write
scenario runs in the debug kernel (any splat fails it): it writes into
shared pages and whitelisted extents. Only deterministic counts are
asserted (bytes read from the device, page-cache bytes, bytes allocated),
never times."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from vmrun import BUILD, TOP, run_vm

# The tests share module fixtures (one VM run each): keep them on one
# pytest-xdist worker so the runs are not repeated.
# Minutes of VM time: make check runs it, check-quick not.
pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]

MIB = 1 << 20
SIZE_MIB = 8
NS = (1, 3)
MODEL = ("--disk-delay-ms", "1", "--disk-mbps", "400")


def passed(r):
    assert r.status == 0, r.explain()
    return r


def test_disk_model_charges_requests_not_bios():
    """The modelled hard disk's bandwidth limit is charged per request of at
    most 64 KiB: a 1 MiB read reaches the disk as 16 bios, and the model
    leaves no device behind (tests/guest/dm/bench-disk-model.sh)."""
    passed(run_vm("tests/guest/dm/bench-disk-model.sh", disks=("1G",), debug=False,
                  name="bench-disk-model"))


@pytest.fixture(scope="module")
def reads():
    recs = []
    for target, configs in (("linear", "btrfs,overlayfs,totalcow-share"),
                            ("totalcow", "totalcow-dm,totalcow")):
        r = passed(run_vm("bench/scenarios/snapshot-read", "--snapshots",
                          ",".join(map(str, NS)), "--size-mib", str(SIZE_MIB),
                          "--configs", configs, "--target", target,
                          "--readers", "dd,fio", *MODEL, disks=("1G",), debug=False,
                          name=f"bench-read-{target}"))
        recs += r.records()
    return recs


def one(recs, **match):
    got = [r for r in recs if all(r[k] == v for k, v in match.items())]
    assert len(got) == 1, (match, got)
    return got[0]


@pytest.mark.parametrize("reader", ["dd", "fio"])
@pytest.mark.parametrize("n", NS)
def test_fig4_scenario_counts(reads, reader, n):
    """Every reader and N: stock btrfs reads and caches N copies; overlayfs,
    sharing and both layers one; the dm layer alone reads one from disk."""
    f = SIZE_MIB * MIB
    # Metadata (btrfs trees, overlay inodes) adds a little on top of data.
    slack = 0.05 * f + 256 * 1024
    for config in ("btrfs", "overlayfs", "totalcow-share", "totalcow-dm", "totalcow"):
        rec = one(reads, config=config, reader=reader, snapshots=n)
        assert rec["checksum_ok"] == 1 and rec["file_bytes"] == f, rec
        # The dm layer alone reads one copy with N concurrent readers too:
        # a reader of a block being filled waits for the fill.
        copies = n if config == "btrfs" else 1
        assert copies * f <= rec["disk_read_bytes"] <= copies * f + slack, rec
        cached = n if config in ("btrfs", "totalcow-dm") else 1
        assert cached * f - slack <= rec["page_cache_bytes"] <= cached * f + slack, rec
        if config == "totalcow-dm":
            # Admit first: every block of the file once in the dm cache.
            assert rec["tc_cache_bytes"] == f, rec
            assert rec["tc_meta_bytes"] > 0, rec
        elif config != "totalcow":
            assert rec["tc_cache_bytes"] == 0 and rec["tc_meta_bytes"] == 0, rec


# On the base kernel, like the reads: the counts are the scenario's, and
# the debug kernel's checkers watch the same write paths in the sharing
# tests (on the debug kernel this run cost 213 CPU-seconds of a CI run).
@pytest.fixture(scope="module")
def writes():
    r = passed(run_vm("bench/scenarios/snapshot-write", "--sizes", "8", "--big-mib", "8",
                      "--writes", "2,8", "--states", "cold,warm", "--configs",
                      "btrfs,overlayfs,overlayfs-copy,totalcow-dm,totalcow-share,totalcow",
                      *MODEL, disks=("1200M", "512M"), debug=False, name="bench-write"))
    return r.records()


def expected_page_cache(config, state, f, w):
    """Page-cache growth of one overwrite (w <= f), warm-up read included."""
    if config == "overlayfs-copy":
        return 2 * f        # the lower file read, the upper copy written
    if state == "cold":
        return w
    if config in ("btrfs", "totalcow-dm"):
        return f            # the write lands in the pages just read
    # The warm-up read cached the shared (template's) pages; the write
    # goes to the container's own file: a reflinked upper file, or the
    # member's private pages.
    return f + w


def test_figs5_8_scenario_counts(writes):
    """Each overwrite: the copy is right (checked in the guest), the page
    cache grows by what was read and written, the device is read only by
    overlayfs copying up into a second file system, and data is allocated
    only for what was written (plus the whole copy for copy-up)."""
    # 2 and 8 MiB into an 8 MiB file; 6 configurations; cold and warm.
    assert len(writes) == 2 * 6 * 2
    for rec in writes:
        c, state, f, w = rec["config"], rec["state"], rec["file_bytes"], rec["write_bytes"]
        slack = 0.05 * f + 512 * 1024
        assert rec["ok"] == 1, rec
        want = expected_page_cache(c, state, f, w)
        assert want - slack <= rec["page_cache_bytes"] <= want + slack, rec
        read = f if c == "overlayfs-copy" and state == "cold" else 0
        assert read <= rec["disk_read_bytes"] <= read + slack, rec
        alloc = (f + w if w < f else f) if c == "overlayfs-copy" else w
        assert alloc <= rec["data_alloc_bytes"] <= alloc + slack, rec
        # Only the dm layer alone (admit first) caches the warm-up read;
        # with both layers (admit second) one read admits nothing.
        tc = f if c == "totalcow-dm" and state == "warm" else 0
        assert rec["tc_cache_bytes"] == tc, rec
    # Stock btrfs's file system and TotalCOW's are alike: a larger one has
    # larger data chunks, so one write allocates a chunk (and its fdatasync
    # commits the transaction) on one file system and not on the other.
    assert len({r["fs_bytes"] for r in writes}) == 1, {r["fs_bytes"] for r in writes}



def test_figs5_8_trace_cuts_fdatasync_at_the_first_bio():
    """--trace (the debug kernel has the block tracepoints too): every
    write gets its fdatasync cut in two parts that add up to it, and the
    data bios the trace counted are exactly the bytes written. Cold writes
    only (the scenario's default): the cut is the same code for a warm
    template, and under the debug kernel each state costs about 90 s of
    CI's CPU."""
    r = passed(run_vm("bench/scenarios/snapshot-write", "--sizes", "4", "--big-mib", "4",
                      "--writes", "1,4", "--states", "cold", "--configs", "btrfs,totalcow",
                      "--trace", *MODEL, disks=("1200M", "512M"), name="bench-write-trace"))
    recs = r.records()
    assert len(recs) == 3 * 2     # (4, 2), (4, 1), (4, 4); 2 configs; cold
    for rec in recs:
        assert rec["ok"] == 1, rec
        assert rec["data_bio_kib"] == rec["write_bytes"] // 1024, rec
        assert 1 <= rec["data_bios"] and rec["max_bio_kib"] <= rec["data_bio_kib"], rec
        parts = rec["fdatasync_wait_ms"] + rec["fdatasync_io_ms"]
        assert abs(parts - rec["fdatasync_ms"]) <= 0.1 * rec["fdatasync_ms"] + 5, rec


def test_figs5_8_trace_wants_the_trace_kernel():
    """--trace on a kernel without block tracepoints (the base kernel)
    stops at once and says which kernel it wants, instead of measuring
    without a trace."""
    r = run_vm("bench/scenarios/snapshot-write", "--sizes", "2", "--big-mib", "2",
               "--writes", "2", "--configs", "btrfs", "--trace", *MODEL, debug=False,
               disks=("1200M", "512M"), name="bench-write-notrace")
    assert r.status == 1, r.explain()
    assert "--trace wants a kernel with block tracepoints (make kernel-trace)" in r.console
    assert r.records() == []


def test_demo_prints_its_run_and_leaves_the_checkout_as_it_was():
    """make demo (bench/demo without --record), a newcomer's first
    command, writes its run under the build directory and prints it; the
    committed results and the READMEs generated from them stay as they
    were (the demo used to rewrite bench/results/demo.* and README.md)."""
    tracked = [os.path.join(TOP, p) for p in
               ("README.md", "bench/README.md", "bench/results/demo.json",
                "bench/results/demo.md")]

    def digests():
        return [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in tracked]

    before = digests()
    out = os.path.join(BUILD, "demo")
    for name in ("demo.json", "demo.md"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    p = subprocess.run([sys.executable, os.path.join(TOP, "bench", "demo"), "--snapshots", "2",
                        "--size-mib", "8", "--configs", "btrfs,totalcow"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert digests() == before
    with open(os.path.join(out, "demo.json")) as f:
        records = json.load(f)["records"]
    assert [r["config"] for r in records] == ["btrfs", "totalcow"]
    assert "| stock btrfs |" in p.stdout and "demo.md" in p.stdout
