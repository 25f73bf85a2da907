"""The 7.3 series (mm-patches/7.3/, docs/design/sharing-in-the-file-system.md)
on its own UML kernels: the preemptible base kernel and the debug one
(lockdep, KASAN, kmemleak). `make check-7.3` builds them and runs these
(in `make check-lanes`). btrfs data has large folios on 7.3 only where
CONFIG_TRANSPARENT_HUGEPAGE is (mapping_set_folio_order_range() does
nothing without it), which UML cannot have: on these kernels every folio
is one page, and the tests of large folios need the x86-64 lane."""

import os
import re

import pytest

from vmrun import BUILD, X86_LANE_GROUP, run_vm

KERNELS_73 = {
    "base-7.3": os.path.join(BUILD, "uml-base-7.3", "linux"),
    "debug-7.3": os.path.join(BUILD, "uml-debug-7.3", "linux"),
}

# The x86-64 debug kernel of the 7.3 series (make kernel-x86-7.3: SMP,
# CONFIG_PREEMPT, KASAN, lockdep; no THP yet, so no large folios either).
KERNEL_73_X86 = os.path.join(BUILD, "x86-debug-7.3", "bzImage")

pytestmark = pytest.mark.linux73


@pytest.mark.parametrize("kernel", sorted(KERNELS_73))
def test_a_bound_file_reads_and_maps_the_template_and_leaves_before_a_change(kernel):
    """Route A: a snapshot's file bound to its source's identical file
    reads it through the source's page cache (no disk read, no page cache
    of its own, the same bytes); the source is write-denied; an open for
    writing unbinds first and moves the private mapping back, so that it
    shows the write where it did not write itself (a kernel that unbinds
    without moving the VMA fails here); a truncation unbinds too (SIGBUS);
    a different file and a file open for writing are refused."""
    r = run_vm("tests/guest/share/share-backing-file.sh", debug=False,
               extra=("-k", KERNELS_73[kernel]), disks=("1G",))
    assert r.status == 0, r.explain()
    assert "read: member read 0 bytes from the disk, own cache 0 pages" in r.console, \
        r.explain()
    m = re.search(r"^follows: page0 (\S+) page1 (\S+) page2 (\S+)", r.console, re.M)
    assert m and m.groups() == ("b'NEW0'", "b'MINE'", "b'NEW2'"), r.explain()
    assert "sigbus: past the end after truncate: SIGBUS" in r.console, r.explain()
    assert "backing-file: passed" in r.console, r.explain()


@pytest.mark.parametrize("kernel", sorted(KERNELS_73))
def test_no_mapping_keeps_the_template_after_a_racing_unbinding(kernel):
    """mmap() and fork() racing the unbinding: 40 rounds of 4 mappers
    (two of them forking children that keep their mappings) mapping and
    reading a bound file while a writer's open unbinds it; after the
    write returned, every mapping shows the written page. A kernel whose
    unbinding walks the template's i_mmap once instead of until a walk
    finds nothing left 29 of 5812 mappings stale on the preemptible UML
    kernel (the children forked during the move). The mmap() window that
    ->mapped closes is too narrow for one CPU: a kernel without that move
    passed 100 rounds on UML; it needs the x86-64 lane, whose 7.3
    kernel (make kernel-x86-7.3) builds but does not run the guest yet:
    /proc/self/mounts gives ELOOP there, so mkfs.btrfs fails."""
    r = run_vm("tests/guest/share/share-backing-file-race.sh", "40", debug=False,
               extra=("-k", KERNELS_73[kernel]), disks=("1G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^race: (\d+) rounds, (\d+) mappings checked, (\d+) stale$",
                  r.console, re.M)
    assert m and m.group(1) == "40" and int(m.group(2)) > 1000 and m.group(3) == "0", \
        r.explain()


@pytest.mark.parametrize("kernel", sorted(KERNELS_73))
def test_a_paired_snapshot_binds_its_identical_files_at_open(kernel):
    """Binding at open: a snapshot paired once with its read-only source
    (BTRFS_IOC_SHARE_SUBVOL) reads an identical file through the source's
    page cache at its first open, with no per-file ioctl; a file changed
    before, or rewritten with the same bytes in new extents, reads its
    own, and a dedupe makes the latter bind at its next open (the proof's
    failure is remembered only until the file changes); the source stays
    read-only and undeleted while paired; unpairing unbinds, and deleting
    the member frees the source. A kernel without the pairing fails the
    first read (the member reads the disk)."""
    r = run_vm("tests/guest/share/share-subvol-pairing.sh", debug=False,
               extra=("-k", KERNELS_73[kernel]), disks=("1G",))
    assert r.status == 0, r.explain()
    assert "identical: member read 0 bytes from the disk, own cache 0 pages" in r.console, \
        r.explain()
    assert "deduped: member read 0 bytes from the disk, own cache 0 pages" in r.console, \
        r.explain()
    for refusal in ("pair %s/M %s/B: pair: Invalid argument",
                    "pair %s/X %s/W: pair: Read-only file system",
                    "pair %s/T %s/B: pair: Too many levels of symbolic links"):
        assert "refused, " + refusal % ("/mnt/btrfs", "/mnt/btrfs") in r.console, r.explain()
    assert "source: held read-only and undeleted" in r.console, r.explain()
    assert "subvol-pairing: passed" in r.console, r.explain()


@pytest.mark.parametrize("kernel", sorted(KERNELS_73))
def test_a_changed_file_reads_its_unchanged_runs_from_the_source(kernel):
    """Route B: a paired snapshot's file changed in a 4 KiB block and a
    64 KiB range reads those 17 pages from the disk into its own cache
    and everything else from the source's page cache, with the bytes it
    had before the pairing by read(), a private mapping and sendfile(), and at unaligned offsets across the runs; a
    reader open across a write, its writeback and a punch sees each; the
    source's file is write-denied while read through, even unpaired and
    made writable. A kernel without runs reads all 8 MiB into the
    member's cache and fails the first count."""
    r = run_vm("tests/guest/share/share-runs.sh", debug=False,
               extra=("-k", KERNELS_73[kernel]), disks=("1G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^runs: member read (\d+) bytes from the disk, own cache (\d+) pages$",
                  r.console, re.M)
    assert m and int(m.group(1)) <= 68 * 1024 + 256 * 1024 and m.group(2) == "17", r.explain()
    assert "changes: dirty seen, written back seen, punched seen" in r.console, r.explain()
    assert "source: write-denied while read through" in r.console, r.explain()
    assert "runs: passed" in r.console, r.explain()


@pytest.mark.parametrize("kernel", sorted(KERNELS_73))
def test_buffered_io_uring_reads_of_shared_files(kernel):
    """io_uring's buffered reads of a bound file and of a file read by
    runs, on a cold cache: the sharing routes clone the kiocb, which loses
    io_uring's wait queue entry, so their file operations must not offer
    async buffered reads (FOP_BUFFER_RASYNC); a kernel whose operations
    kept the flag oopsed here (a NULL wait queue in __folio_lock_async()).
    The file system is unmounted with the file still bound: a kernel whose
    bindings held the template as a file kept the mount busy (EBUSY)."""
    r = run_vm("tests/guest/share/share-io-uring.sh", debug=False,
               extra=("-k", KERNELS_73[kernel]), disks=("1G",))
    assert r.status == 0, r.explain()
    assert "io-uring: passed" in r.console, r.explain()


@pytest.mark.x86
@pytest.mark.xdist_group(X86_LANE_GROUP)
@pytest.mark.xfail(strict=True, reason="the x86-64 7.3 kernel is built without "
                   "CONFIG_TRANSPARENT_HUGEPAGE (tests/vm/configs/x86.config), so btrfs "
                   "gives it no large folios either: the script finds none and fails")
def test_changes_inside_a_large_folio_of_the_source_read_as_a_stock_copy_would():
    """Route B against a source whose cache holds large folios: a write
    into the middle of one, a hole punched inside one, that folio's range
    reflinked into the member one page further on (the same disk blocks
    at another offset, which must not be read from the source's folio at
    the member's offset), and a second file cut inside one and extended
    again (zeroes after the cut, never the source's bytes): the member
    reads what a plain copy given the same changes reads, by read(), a
    private mapping and sendfile(), at unaligned offsets across every
    boundary; it keeps no page of what it still shares and reads no more
    than its own blocks; the source's bytes and its folio are untouched.
    The script fails if the source's cache holds no folio of 4 pages: it
    runs on the x86-64 7.3 kernel, since UML has no large folios."""
    r = run_vm("tests/guest/share/share-large-folios.sh", x86=True,
               extra=("-k", KERNEL_73_X86), disks=("1G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^large-folios: source folio F at (\d+), (\d+) bytes", r.console, re.M)
    assert m and int(m.group(2)) >= 4 * 4096, r.explain()
    assert "large-folios: passed" in r.console, r.explain()
