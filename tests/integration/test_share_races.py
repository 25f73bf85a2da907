"""Races of page-cache sharing against the member's own writeback and page
drops (module/share/totalcow-bind.c, tc_alias_proven()), run as an
unprivileged user in an --auto group."""

import re

import pytest

from vmrun import LANES, lanes, run_vm, small_mem

CLOSING = re.compile(r"^writeback-race: (\d+) tries, (\d+) wrong reads, (\d+) lost writes, "
                     r"(\d+) pages proven$", re.M)


def writeback_race(lane):
    r = run_vm("tests/guest/share/share-writeback-race.sh", "320", disks=("1G",),
               timeout=900, **LANES[lane])
    m = CLOSING.search(r.console)
    assert r.status == 0, r.explain()
    assert m, r.explain()
    tries, wrong, lost, proven = map(int, m.groups())
    assert tries >= 300 and wrong == 0 and lost == 0 and proven > 0, m.group(0)
    if lane != "debug":
        # The store refused for a folio gone since the proof began: the
        # race reached the window the fix closes, or the test tested nothing.
        m = re.search(r"^writeback-race: .*, proofs_stale \+(\d+),", r.console, re.M)
        assert m and int(m.group(1)) > 0, r.explain()


@pytest.mark.slow
# With the guard reverted, the preemptible UML kernel caught this race in
# 111 of 320 tries, x86-64 on 2 CPUs in 5 (docs/test-harness.md): the
# timer preempts the proof for as long as the writeback takes, where on
# SMP the writeback must fit between the proof's steps, and the debug
# kernel in none. make check runs it on the preemptible UML kernel;
# make check-lanes on the debug one and make check-x86 on x86-64 too.
@lanes("preempt", "debug", "x86", extra=("debug",))
def test_writeback_and_drop_racing_the_proof_lose_no_write(lane):
    """A proof and its store are one step: the read-miss proof reads a member page's extent
    map while the page is a dirty folio (so the map is still the
    template's), and only afterwards aliases the slots that are empty; a
    page written back (sync_file_range) and dropped (POSIX_FADV_DONTNEED)
    in between got an alias of the template's page. read() then gave the
    template's bytes, and the next 1-byte write copied them to disk over
    the user's write. As uid 1000, 320 tries on a 1 MiB template file
    whose pages are extents of their own: snapshot a clone it owns (each
    snapshot must join the --auto group by itself), overwrite page 0, read
    page 1 from a SCHED_IDLE thread while the main thread writes page 0
    back and drops it after a delay spread over the read; then read()
    must give the user's bytes and, after a 1-byte write and fsync, the
    disk (O_DIRECT) the user's bytes plus that byte: 0 wrong reads, 0 lost
    writes, and some pages proven (or nothing raced). On the preemptible
    debug kernel (CONFIG_PREEMPT, where the main thread's timer preempts
    the proof between its extent read and its store) the code before the
    fix fails it: 100 of 320 tries read the template's bytes and lost the
    follow-up write (the issue's own reproducer: 137 of 320), and with the
    fix the proof's store refuses a stale window instead (proofs_stale,
    118 times in 320 tries; asserted > 0, or nothing raced). The
    non-preemptible debug kernel cannot hit the window (proofs_stale 0)
    and checks that the workload runs clean there. About 3 and 1.7
    minutes."""
    writeback_race(lane)


CLASSIFY = re.compile(r"^classify-race: (\d+) tries, (\d+) files lost, (\d+) bound, "
                      r"(\d+) classifications raced, (\d+) wrong reads \((\d+) CPUs", re.M)
CLASSIFY_TRIES = 100


@pytest.mark.slow
# Only the SMP lane: on the preemptible UML kernel the old code lost no
# file in 100 tries (the reader must be preempted inside a lineage walk
# of microseconds), so a pass there proves nothing. 4 vCPUs (an admin
# and 3 readers, on the host's 2 cores under TCG) where the x86-64 lane
# has 2: the old code lost files in 6 of 100 tries on 4.
@lanes("x86", x86_check=True)
def test_a_member_added_while_its_files_are_classified_shares(lane):
    """A window once open in the classification of files (docs/design/scopes.md,
    "Classification after a change"): a file in no
    group, on a btrfs with sharing scopes, walks its subvolume's lineage
    (tc_canon_follow()) after leaving tc_groups_lock and was then marked
    AS_NO_PAGE_ALIASES unconditionally; a groups/add landing in between
    reclassified first, and the mark kept the new member's file unshared
    until the next admin change (and an extents enable had the same
    window). 100 tries: remove a snapshot from its group and toggle a
    scope (every mark cleared, the lineage answer stale), release 3
    readers that drop and read the snapshot's 24 files, add it back after
    a delay spread over 3 ms, then read every file: all 24 must bind, and
    every read gives the file's bytes. Before the fix (tc_classify_none()
    takes its mark back when a reclassification began meanwhile) 11 files
    were lost in 6 of 100 tries; such code passes 100 tries with
    probability 0.94^100, 0.2%."""
    r = run_vm("tests/guest/share/share-classify-race.sh", str(CLASSIFY_TRIES), disks=("1G",),
               mem=small_mem(lane), timeout=900, **{**LANES[lane], "smp": 4})
    assert r.status == 0, r.explain()
    m = CLASSIFY.search(r.console)
    assert m, r.explain()
    tries, lost, bound, raced, wrong, cpus = map(int, m.groups())
    assert tries == CLASSIFY_TRIES and lost == 0 and wrong == 0, m.group(0)
    assert bound == CLASSIFY_TRIES * 24, m.group(0)
    # The add began while readers were inside a read: the race was run.
    assert cpus == 4 and raced > 0, m.group(0)


MMAP_RACE = re.compile(r"^mmap race: (\d+) mappings \((\d+) of a clone, (\d+) private\), "
                       r"(\d+) writes, (\d+) allocations elsewhere, (\d+) evictions, "
                       r"(\d+) mismatches, (\d+) cpus$", re.M)


@pytest.mark.slow
# Only the SMP lane, with 4 vCPUs: the mappers, writers, the allocator
# and the evicter must run at once. On UML a FICLONE that zaps another
# process's mapping trips UML's own flush_tlb_mm() (a VMA walk without
# the mm's lock: "suspicious RCU usage"), whatever the policy does.
@lanes("x86", x86_check=True)
def test_private_mappings_of_shared_extents_race_their_files_changing(lane):
    """Mapped pages of shared extents (tc_extent_mmap_file(), docs/design/mapped-files.md) under KASAN and lockdep on 4 vCPUs,
    60 s: 4 mappers map 4 writable snapshots' file MAP_PRIVATE while 2
    writers give the files new layouts (FICLONE of per-file versions) or
    rewrite pages, an allocator moves the handout generation and an
    evicter drops the files' caches. A clone's mapping must show whole
    pages of its own file, unchanged when read again while no writer
    opened the file (an open for writing makes it map the file); any
    mapping only pages of its own file. Both paths must be taken (clone
    and private), with no mismatch. Fails before clones (no mapping maps
    one)."""
    r = run_vm("tests/guest/extents/share-extents-mmap-race.sh", "60", disks=("2G",),
               timeout=900, **{**LANES[lane], "smp": 4})
    assert r.status == 0, r.explain()
    m = MMAP_RACE.search(r.console)
    assert m, r.explain()
    maps, clone, private, writes, allocs, evictions, bad, cpus = map(int, m.groups())
    assert bad == 0 and cpus == 4, m.group(0)
    assert clone > 0 and private > 0 and writes > 0 and allocs > 0, m.group(0)
