"""Baseline (paper Fig. 4 without TotalCOW): 8 btrfs snapshots of a 256 MiB
file read once, against 8 overlayfs mounts over the template directory.

Counts are deterministic: page-cache growth and bytes read from the lowest
device. Stock btrfs reads and caches every snapshot separately (8x), overlay
shares the lower file (1x). Metadata adds a little on top of the data."""

import pytest

from vmrun import run_vm

# The tests share module fixtures (one VM run each): keep them on one
# pytest-xdist worker so the runs are not repeated.
# Minutes of VM time: make check runs it, check-quick not.
pytestmark = [pytest.mark.xdist_group("baseline"), pytest.mark.slow]

SNAPSHOTS = 8
SIZE_MIB = 256


@pytest.fixture(scope="module")
def baseline():
    r = run_vm("bench/scenarios/snapshot-read", "--snapshots", str(SNAPSHOTS),
               "--size-mib", str(SIZE_MIB), "--configs", "btrfs,overlayfs",
               name="baseline")
    assert r.status == 0, r.explain()
    return r, {rec["config"]: rec for rec in r.records()}


def ratio(rec, key):
    return rec[key] / rec["file_bytes"]


def test_stock_btrfs_caches_and_reads_every_snapshot(baseline):
    r, recs = baseline
    rec = recs["btrfs"]
    assert rec["checksum_ok"] == 1, r.explain()
    assert rec["snapshots"] == SNAPSHOTS and rec["file_bytes"] == SIZE_MIB << 20
    # Data is exactly 8x; btrfs metadata reads may add up to 1% on top.
    assert 8.0 <= ratio(rec, "disk_read_bytes") <= 8.08, rec
    # Page cache: 8 copies; readahead of metadata may add, a racing
    # reclaim of a few pages may remove a little.
    assert 7.9 <= ratio(rec, "page_cache_bytes") <= 8.08, rec


def test_overlayfs_caches_and_reads_the_lower_file_once(baseline):
    r, recs = baseline
    rec = recs["overlayfs"]
    assert rec["checksum_ok"] == 1, r.explain()
    assert 1.0 <= ratio(rec, "disk_read_bytes") <= 1.01, rec
    assert 0.99 <= ratio(rec, "page_cache_bytes") <= 1.01, rec
