"""Page-cache sharing among snapshots (layer 2, mm-patches/0002 and
module/share/), in the debug UML kernel, again in the
preemptible one (CONFIG_PREEMPT: the base kernel): UML runs one CPU,
and only preemption lets a second thread run inside a window that holds no
sleep, as it can on every kernel users run; and on the x86-64
lane (SMP and preemptible, in QEMU), where the threads of a race
run at the same time on CPUs of their own."""

import re

import pytest

from vmrun import LANES, lanes, ok, run_vm, search, small_mem

# Each sharing test runs on the three: the debug kernel, the preemptible
# one (the base kernel: no debug option) and x86-64 (SMP and preemptible,
# debug, in QEMU). `make check` runs a test on the lanes that can catch
# what it looks for: the tests that race nothing on the debug kernel; the
# races and the holes (below) on the preemptible kernel, the races on
# x86-64 too, where lockdep, KASAN and kmemleak watch them, and the holes
# on the debug kernel too. With a race guard reverted, the debug kernel
# (one CPU, no preemption) caught nothing that the preemptible one did not
# (docs/test-harness.md), so it runs the races in `make check-lanes` only,
# with everything else on every lane.
KERNELS = lanes("debug", "preempt", "x86", extra=("preempt",))
# The races: preempted anywhere in UML; on x86-64 their threads run at
# the same time.
RACES = lanes("debug", "preempt", "x86", x86_check=True, extra=("debug",))
# The torture where the checkers watch: the 100k-operation run on the base
# kernel is the preemptible one's.
TORTURE = lanes("debug", "x86", x86_check=True, extra=("debug",))
# The holes a review of the sharing found (a template's writer from
# before read-only, a miss that waited for others' reads, a truncation
# under a substituted mapping): found on the preemptible kernel; the debug
# kernel watches their paths.
HOLES = lanes("debug", "preempt", "x86")


@KERNELS
def test_eight_snapshots_share_one_copy_and_writes_stay_private(lane):
    """8 snapshots of a 128 MiB file: page cache <= 1.05x, device reads
    <= 1.01x, xarray nodes <= 0.01x (the members' aliases in block aliases;
    0.022x with a slot per page), every byte right; write, mmap, truncate, punch, O_DIRECT,
    reflink, drop_caches and group deletion keep every file right; bad
    group input is refused. (The script's default, 256 MiB as in the
    paper's Fig. 4, takes twice as long in the debug kernel and tests
    nothing more: the ratios are counts.)"""
    r = run_vm("tests/guest/share/share-snapshots.sh", "128", **LANES[lane], disks=("2G",))
    ok(r)
    m = search(r"^shared: page cache ([\d.]+)x, device reads ([\d.]+)x", r)
    assert float(m.group(1)) <= 1.05 and float(m.group(2)) <= 1.01, m.group(0)


@KERNELS
def test_whole_page_overwrites_break_aliases_without_a_copy(lane):
    """mm-patches/0010: a write covering whole aliased pages breaks their
    aliases without copying the template's pages; partial pages and a
    shared mapping's fault still copy; every byte reads back right after
    fsync and drop_caches, the template and another member unchanged."""
    r = run_vm("tests/guest/share/share-overwrite.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "overwrite: 1 MiB, aligned: cow_breaks +256, cow_copies +0" in r.console, \
        r.explain()
    assert "overwrite: every write read back right" in r.console, r.explain()


def torture(ops, debug, lane="debug", members=6, workers=1,
            script="tests/guest/share/share-torture.sh", extra=()):
    r = run_vm(script, str(ops), "1", str(members), str(workers), *extra,
               disks=("2G",), debug=debug, **LANES[lane])
    ok(r)
    m = search(r"^torture: (\d+) operations, (\d+) mismatches$", r)
    assert int(m.group(1)) >= ops and m.group(2) == "0", r.explain()
    return r


@pytest.mark.slow
def test_randomized_torture_matches_the_model():
    """100k random reads, writes, mmap, truncate, punch, fsync,
    drop_caches, same-tick rewrites, O_DIRECT writes, reflinks into a
    member and evictions on 6 members of a group: zero mismatches with the
    model (the base kernel, which is preemptible: the tick can preempt
    any step anywhere; the debug kernel needs about 13 minutes for this)."""
    torture(100000, debug=False)


@pytest.mark.slow
@TORTURE
def test_randomized_torture_under_the_debug_kernel(lane):
    """The same, shorter, where lockdep, KASAN, DEBUG_VM and kmemleak watch
    (15000 operations on the debug UML kernel); on x86-64, 2000 operations
    by 2 workers, each on its own CPU with 4 of 8 members, so that the
    members' sharing paths run at the same time."""
    if lane == "x86":
        torture(2000, debug=True, lane=lane, members=8, workers=2)
    else:
        torture(15000, debug=True, lane=lane)


@pytest.mark.slow
@KERNELS
def test_private_mappings_of_unchanged_members_map_the_template(lane):
    """MAP_PRIVATE mappings (data files, executables) of 8 unchanged
    members keep one copy in the page cache; /proc/PID/maps names the
    member; private writes stay private; changed members and members open
    for writing keep pages of their own; random mappings match a model."""
    r = run_vm("tests/guest/share/share-mmap.sh", "64", "3000", **LANES[lane], disks=("2G",))
    ok(r)
    m = search(r"^mmap: \d+ private mappings, page cache ([\d.]+)x the file", r)
    assert float(m.group(1)) <= 1.05, r.explain()
    m = search(r"^mmap: \d+ random operations \((\d+) mappings shared, (\d+) private\), "
               r"(\d+) mismatches", r)
    assert int(m.group(1)) > 0 and m.group(3) == "0", r.explain()


@KERNELS
def test_unprovable_files_are_refused_and_dedupe_keeps_every_byte(lane):
    """Files in a nested subvolume or replaced inside a member are read as
    plain files and never shared; renamed and swapped files are bound by
    their extents to the template files they came from and read right; a
    dedupe into a shared member file keeps every byte right; a member that
    leaves (groups/remove) drops its aliases and the others keep theirs."""
    r = run_vm("tests/guest/share/share-refusals.sh", **LANES[lane], disks=("1G",))
    ok(r)
    m = search(r"^refusals: (\d+) files refused, 3072 pages shared, 3 bound by extents$", r)
    assert int(m.group(1)) >= 2, r.explain()
    search(r"^remove: pages shared \d+ before, \d+ after c4 left$", r)


def proof(mode, tries, collisions, lane):
    r = run_vm("tests/guest/share/share-proof.sh", mode, str(tries), str(collisions),
               disks=("2G",), mem=small_mem(lane), **LANES[lane])
    ok(r)
    m = search(rf"^proof {mode}: (\d+) tries, (\d+) collisions, (\d+) wrong reads, "
               r"(\d+) pages proven$", r)
    assert int(m.group(2)) >= 1 and m.group(3) == "0", m.group(0)


@KERNELS
def test_same_tick_rewrite_of_a_member_reads_its_own_bytes(lane):
    """A member file rewritten (same size) in the clock tick of the
    template's write keeps the template's ctime, mtime and size; it must
    still read its own bytes (timestamps prove nothing)."""
    proof("same-tick", 400, 3, lane)


@RACES
def test_direct_write_racing_the_proof_reads_its_own_bytes(lane):
    """An O_DIRECT rewrite of a member file, in the template's clock tick,
    while another thread keeps reading the file from an empty page cache:
    once the write returns, and after drop_caches, the member reads its
    own bytes."""
    proof("dio-race", 400, 3, lane)


@KERNELS
def test_groups_add_refuses_what_is_not_a_snapshot_of_the_template(lane):
    """groups/add through sysfs refuses the template's origin subvolume, a
    snapshot of a member, an unrelated subvolume and a directory inside a
    snapshot (EXDEV, nothing changed); it takes snapshots of the template
    and, for a received template, of the subvolume it was sent from;
    totalcowctl agrees."""
    r = run_vm("tests/guest/share/share-lineage.sh", **LANES[lane], disks=("1G",))
    ok(r)
    search(r"^lineage: the origin S: EXDEV$", r)


@KERNELS
def test_descendants_of_an_auto_template_join_at_their_first_read(lane):
    """With groups/<g>/auto on (`totalcowctl group create --auto`), a
    snapshot an unprivileged user takes of its own clone (2 hops from the
    template) joins at its first read and shares the template's pages
    (page cache +0% of the file); 4 hops join, 5 hops, an unrelated
    subvolume and a chain through a deleted snapshot do not; a deleted
    member leaves auto_members; groups/add of an automatic member is
    refused, groups/remove takes it out; with auto off nothing new joins.
    Fails on the code before automatic membership (no auto file)."""
    r = run_vm("tests/guest/share/share-auto.sh", **LANES[lane], disks=("1G",))
    ok(r)
    m = search(r"^auto: the user's 2-hop snapshot read once: page cache \+(\d+)% of the file", r)
    assert int(m.group(1)) <= 5, r.explain()
    assert "auto: passed" in r.console, r.explain()


@HOLES
def test_sysfs_reads_change_nothing(lane):
    """A monitoring agent that polls
    /sys/kernel/mm/totalcow changes nothing. Three rounds each delete an
    automatic member of a group (a file of it held open and bound) and a
    followed snapshot that alone, with the others, holds a scope, then
    read every readable file twice while another process changes a second
    file system (joins, follows, groups/add and remove, extents enable and
    disable, templates register and deregister, subvolume deletes): the
    group's files, its members' ids, the scope's line and a template's
    files stay as they were before the reads. The kernel's pruning,
    let go afterwards, takes the deleted member and snapshots out with no
    write. Fails on the code before (a read of auto_members unbound the
    deleted member's files: pages_shared 3072 -> 2048; one of scopes
    dropped the deleted snapshot)."""
    r = run_vm("tests/guest/share/share-sysfs-reads.sh", **LANES[lane], disks=("512M", "512M"))
    ok(r)
    search(r"^sysfs-reads: 3 rounds, \d+ files read twice each pass .* A's state "
           r"unchanged by every read$", r)
    assert "sysfs-reads: the kernel pruned the deleted members and snapshots itself" \
        in r.console, r.explain()
    assert "sysfs-reads: passed" in r.console, r.explain()


@pytest.mark.slow
@KERNELS
def test_sparse_terabyte_template_costs_what_is_read(lane):
    """64 members each read 3 bytes of a sparse 1 TiB template file: the
    policy's per-page bytes are allocated for what was read (group stat
    policy_bytes <= 2 chunks per place read), the kernel's unreclaimable
    slab and vmalloc grow by less than 32 MiB (a per-page array would be
    512 MiB per member), and the readers' memory cgroup is charged them;
    every byte read is the template's."""
    r = run_vm("tests/guest/share/share-sparse.sh", **LANES[lane], disks=("2G",))
    ok(r)
    assert "sparse: O(pages read), charged to the readers" in r.console, r.explain()


@KERNELS
def test_binding_uses_the_creators_credentials_and_stays_on_the_template(lane):
    """An unprivileged first reader who may not search the template's
    directory does not make a member file unshareable (the lookup runs as
    the group's creator); a mount over a template directory is not
    crossed (it would bind a member to another member's file and deny
    writes to it): the file is bound by its extents to the template's own
    file instead."""
    r = run_vm("tests/guest/share/share-creds.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "creds: the creator's credentials, no mount crossed" in r.console, r.explain()


@KERNELS
def test_template_stays_write_denied_while_substituted_mappings_live(lane):
    """A member's private mapping maps the template's pages; after
    groups/delete and `btrfs property set ro false` the template file
    cannot be written or truncated (ETXTBSY) while a forked child still
    holds the mapping, whose bytes stay the member's; once it exits the
    template can be written, and the member keeps its own bytes."""
    r = run_vm("tests/guest/share/share-template-writable.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "writable: the template's file is writable again" in r.console, r.explain()


@pytest.mark.slow
@KERNELS
def test_member_removal_and_group_delete_walk_in_bounded_batches(lane):
    """16 members over a sparse 512 MiB template (131072 pages), one read
    whole: while readers keep reading, the member that read the whole file
    leaves and the group is deleted; every byte read stays right and the
    debug kernel logs no splat (alias clearing, unbinding, stats and
    reclassification walk in batches), with the soft-lockup (6 s) and
    hung-task (20 s) detectors armed. The issue's size (64 members over
    1 M pages) takes ~10 minutes: `tests/vm/run -d 2G
    tests/guest/share/share-walks.sh 1048576 64 2`."""
    r = run_vm("tests/guest/share/share-walks.sh", "131072", "16", "1", **LANES[lane], disks=("2G",))
    ok(r)
    assert "walks: bounded, no splat" in r.console, r.explain()
    if lane != "preempt":  # the base kernel has neither detector
        assert "walks: detectors armed" in r.console, r.explain()


@KERNELS
def test_reflink_copies_under_new_names_share_the_templates_pages(lane):
    """8 members each `cp --reflink` the template's 64 MiB file under a new
    name: read once, page cache and device reads <= 1.05x the file (8x on
    the code before binding by extents), every byte right; a write into
    one copy stays in it (before and after drop_caches); a FICLONERANGE at
    other offsets is not bound and reads right, one at the template's
    offsets is shared; a copy partly rewritten before its first read is
    bound by its other extents; a private mapping of a copy maps the
    template."""
    r = run_vm("tests/guest/share/share-reflink.sh", "64" if lane == "debug" else "32", "8",
               **LANES[lane],
               disks=("2G",))
    ok(r)
    m = search(r"^reflink: 8 copies: page cache ([\d.]+)x, device reads ([\d.]+)x", r)
    assert float(m.group(1)) <= 1.05 and float(m.group(2)) <= 1.05, m.group(0)
    assert "share-reflink: all checks passed" in r.console, r.explain()


@KERNELS
def test_template_stays_read_only_and_undeletable_while_grouped(lane):
    """While a group shares a template, `btrfs property set ro false`, the
    template owner's SUBVOL_SETFLAGS and `btrfs subvolume delete` fail
    with EPERM and change nothing (through a send and a second group);
    after groups/delete the template can be made writable and deleted; no
    group on a writable template."""
    r = run_vm("tests/guest/share/share-template-readonly.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "readonly: writable and deletable once the groups are gone" in r.console, r.explain()


@HOLES
def test_a_template_written_through_an_old_descriptor_is_refused(lane):
    """The template's unprivileged owner keeps a
    descriptor opened before it made the subvolume read-only. groups/create
    refuses the template while the file is open for writing (EBUSY, the
    reason in the kernel log) and while the owner's write through it is not
    written back; once synced, a group is made and its members read their
    own bytes, never the owner's. Fails on the code before the fix: the
    group was made, and members read the bytes the owner wrote."""
    r = run_vm("tests/guest/share/share-template-writer.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "writer: groups/create refused a template open for writing" in r.console, r.explain()
    assert "writer: passed" in r.console, r.explain()


@HOLES
def test_a_throttled_container_does_not_stall_another_ones_reads(lane):
    """A 4 KiB miss of a member reads no more template
    pages than the same read of a plain file reads of it (counted with
    fincore: 1 page at page 1000, 4 at the file's start; was 1088); and a
    container whose reads are throttled (io.max 2 KiB/s) does not make
    another container's 4 KiB read wait for them: the victim's read
    returns while the attacker's is still in flight. Fails on the code
    before the fix (1088 pages; the victim waited for the attacker's
    window). An io_uring buffered read (fio) of the victim's alias whose
    template page the throttled attacker is reading returns from
    submission at once; before mm-patches/0019 the submission waited for
    the attacker's read."""
    r = run_vm("tests/guest/share/share-throttled-neighbour.sh", **LANES[lane], disks=("1G",),
               timeout=600)
    ok(r)
    for at in ("1000", "0"):
        m = search(rf"^neighbour: a 4 KiB miss at page {at} read (\d+) template pages "
                   rf"\(\d+ KiB\); a plain file's read: (\d+) pages$", r)
        assert int(m.group(1)) <= int(m.group(2)), r.explain()
    search(r"^neighbour: io_uring read of an alias behind the throttled read: "
           r"submission [\d.e-]+ s", r)
    assert "neighbour: passed" in r.console, r.explain()


@HOLES
def test_a_reader_never_waits_at_another_cgroups_throttled_rate(lane):
    """A shared page's read (a template's page of a group, a canonical page
    of a scope) is charged to the fleet's I/O cgroup, the closest common
    ancestor of its readers', and a reader waits for one only if it is
    charged to its own cgroup or an ancestor, else reads its own file's
    page. A container at io.max 512 KiB/s reading 4 MiB of its member gets
    none of the template's reads charged to it (was 4096 KiB; the victim's
    read at that offset waited 1.3 s); the victim's read of a page that a
    throttled fleet (128 bytes/s), or the attacker's own private mapping of
    the template, is reading returns while that read is in flight (before:
    it waited for it, beyond 60 s for a scope's window)."""
    r = run_vm("tests/guest/share/share-throttled-fleet.sh", **LANES[lane], disks=("1G",),
               timeout=600)
    ok(r)
    for kind in ("group", "scope"):
        m = search(rf"^fleet: {kind}: the attacker's 4 MiB read at 512 KiB/s: its cgroup "
                   r"read (\d+) KiB from the disk", r)
        assert int(m.group(1)) < 1024, r.explain()
    for kind in ("group", "group, private mapping", "scope"):
        search(rf"^fleet: {re.escape(kind)}: the victim's 4 KiB read returned while "
               r"the attacker's throttled read was in flight \(and stayed so 2 s "
               r"longer\): yes$", r)
    assert "fleet: passed" in r.console, r.explain()


@HOLES
def test_a_substituted_private_mapping_follows_its_file_as_linux_does(lane):
    """A private mapping that maps a template's (a group member) or a
    clone's (a file in a scope) pages shows what a plain file's shows
    (mm-patches/0022): after write(), a hole punch, a zero range and a
    reflink into the file, its pages not written through it show the
    change, its own written page stays, and read() agrees. Fails on the
    code before: the pages kept the bytes of the time of mmap()."""
    r = run_vm("tests/guest/share/share-mmap-follows.sh", **LANES[lane], disks=("1G",))
    ok(r)
    for kind in ("group", "scope"):
        assert f"{kind}: follows: the mapping maps another file's pages: yes" in r.console, \
            r.explain()
        for what in ("write() shows", "a hole punch shows (zeros)", "a reflink into it shows"):
            assert f"{kind}: follows: {what}: yes" in r.console, r.explain()
    assert "follows: passed" in r.console, r.explain()


@HOLES
def test_checks_on_a_substituted_mapping_see_the_member(lane):
    """do_mmap() checks the member the process opened, and only then does
    the mapping map the template's backing file (mm-patches/0021): a
    member on a noexec mount shares (mmaps_shared +1; was +0, refused)
    while PROT_EXEC is refused (EPERM) and so is mprotect(PROT_EXEC)
    (EACCES), as for a plain file there; an exec member of a template on a
    noexec mount shares and may execute (was refused); mmap() moves the
    member's atime as a plain file's (stayed: the template was touched)."""
    r = run_vm("tests/guest/share/share-mmap-checks.sh", **LANES[lane], disks=("1G",))
    ok(r)
    search(r"^checks: noexec member, PROT_READ: mmap ok mprotect EACCES "
           r"\(mmaps_shared \+1\)$", r)
    search(r"^checks: mmap\(\) of \S+/C/f: atime moved$", r)
    assert "checks: passed" in r.console, r.explain()


@HOLES
def test_substituted_mappings_name_compare_and_truncate_as_the_member(lane):
    """A private mapping of an unchanged member maps the
    template file through a backing file. A member process's core dump
    names the member's files in its NT_FILE note (what gdb and
    systemd-coredump open), never the template's host path, and the
    ELF_HEADERS filter reads the member's mode; PR_SET_MM_EXE_FILE gets
    EBUSY while the member's executable is mapped, as from the template
    or a plain copy; truncating (to 5 pages + 100 bytes, back, to 0) a
    member under a private mapping gives exactly what a plain file gives:
    SIGBUS past the end, the zeroed tail, zeros after an extension, private
    copies kept below the end and gone past it, in a process forked before
    too. Fails on the code before mm-patches/0013-0014 (template path,
    prctl returned 0, old bytes instead of SIGBUS)."""
    r = run_vm("tests/guest/share/share-backing-paths.sh", **LANES[lane], disks=("1G",))
    ok(r)
    for line in ("paths: core dump names the member and reads its mode",
                 "paths: PR_SET_MM_EXE_FILE: EBUSY from template, plain copy and member",
                 "share-backing-paths: all checks passed"):
        assert line in r.console, r.explain()
    m = search(r"^paths: truncate under a private mapping: (\d+) outcomes, (\d+) differ", r)
    assert int(m.group(1)) >= 10 and m.group(2) == "0", r.explain()


# Shared extents: the hooks btrfs calls are the SMP-sensitive
# part, so x86-64 runs it too (make check-x86).
EXTENTS = lanes("debug", "x86")


@EXTENTS
def test_shared_extents_opt_in_per_scope_refuses_bad_input_and_frees_at_umount(lane):
    """/sys/kernel/mm/totalcow/extents/: enable and disable scopes of a
    btrfs file system (a path with spaces too); a duplicate scope, bad
    lines, bad names, a relative or missing path, a path not on btrfs and
    a writer without CAP_SYS_ADMIN are refused with their errno and leave
    the scopes as they were; a file system with mixed block groups gets
    EOPNOTSUPP. Writes, reflinks, preallocation, deletes and commits with
    scopes enabled (btrfs's reservation and unpin hooks, mm-patches/0015)
    and an unmount with scopes enabled (the close hook frees them) run
    clean under lockdep, KASAN and kmemleak. Fails before the extents
    directory existed."""
    r = run_vm("tests/guest/extents/share-extents-optin.sh", **LANES[lane], disks=("1G", "256M"))
    ok(r)
    assert "extents opt-in: scopes enabled, refused and freed as expected" in r.console, \
        r.explain()


@EXTENTS
def test_reflinked_copies_and_writable_snapshots_share_one_copy_without_a_group(lane):
    """Shared extents without a group, at 32 MiB (the ratios are counts;
    bench/extents runs 256 MiB): 8 reflinked copies, and 8 writable
    snapshots of a writable subvolume, each read once, cold, in a sharing
    scope: page cache and device reads <= 1.01x the file, where the same
    reads without the scope, in the same run, are 8x and 8x. The copies
    again with a busy writer elsewhere (another user rewriting 4 KiB of
    its own file, in no scope, with O_DIRECT in a loop): still <= 1.01x
    (before the per-region guard, 7.94x: every handout spoiled every
    miss). A dedupe of two shared copies reads at most 1% of them from
    the device (its comparison fills each broken alias from memory;
    before mm-patches/0020 it read both files again). Then writes
    on both sides of the shared extents (the original in place and
    through a shared mapping, a copy overwritten and truncated, a snapshot
    and its source): every file reads its own bytes, before and after
    drop_caches and when shared again. Fails before mm-patches/0016 (a
    read of an alias to a canonical page spins) and without the policy."""
    # On x86-64 the 9p root's own pages move the page cache by a few
    # hundred KiB during a read: a larger file keeps that under 1%.
    r = run_vm("tests/guest/extents/share-extents-reflink.sh", "64" if lane == "x86" else "32",
               **LANES[lane], disks=("2G",))
    ok(r)
    for what in ("reflinks", "snapshots"):
        m = search(rf"^{what}: shared ([\d.]+)x memory ([\d.]+)x reads; "
                   rf"stock ([\d.]+)x ([\d.]+)x", r)
        assert float(m.group(1)) <= 1.01 and float(m.group(2)) <= 1.01, m.group(0)
        assert float(m.group(3)) >= 7.9 and float(m.group(4)) >= 7.9, m.group(0)
    m = search(r"^busy: shared ([\d.]+)x memory ([\d.]+)x reads with a writer elsewhere; "
               r"busy writer: (\d+) writes/s", r)
    assert float(m.group(1)) <= 1.01 and float(m.group(2)) <= 1.01, m.group(0)
    assert int(m.group(3)) > 0, m.group(0)
    search(r"^dedupe: two shared copies compared and deduplicated, \d+ KiB read", r)
    assert "writes: every file reads its own bytes" in r.console, r.explain()


@EXTENTS
def test_reflinked_copies_of_compressed_files_share_one_decompressed_copy(lane):
    """The goal for compressed extents (same extent, same offset
    into it): 8 reflinked copies of a zstd-compressed file (compress-force),
    each read once, cold, in a sharing scope: page cache <= 1.01x the file
    and device reads <= 1.01x one stock read of it, where the same reads
    without the scope, in the same run, are 8x and 8x; 4 copies each of an
    lzo and a zlib file share too; no canonical read fails. Then writes on
    both sides (the original in place and through a shared mapping, a copy
    overwritten and truncated): every file reads its own bytes, before and
    after drop_caches and when shared again. Fails before compressed
    extents had canonical pages (they were read per file: 8x)."""
    r = run_vm("tests/guest/extents/share-extents-compressed.sh", "64" if lane == "x86" else "16",
               **LANES[lane], disks=("2G",))
    ok(r)
    m = search(r"^compressed: shared ([\d.]+)x memory ([\d.]+)x reads; "
               r"stock ([\d.]+)x ([\d.]+)x", r)
    assert float(m.group(1)) <= 1.01 and float(m.group(2)) <= 1.01, m.group(0)
    assert float(m.group(3)) >= 7.9 and float(m.group(4)) >= 7.9, m.group(0)
    assert "writes: every file reads its own bytes" in r.console, r.explain()


@EXTENTS
def test_private_mappings_of_shared_extents_map_one_clone(lane):
    """The goal for mapped pages of shared extents: 8 writable snapshots' copy of a
    file, each mapped MAP_PRIVATE by a process of its own with every page
    touched: page cache <= 1.05x the file in a sharing scope (one clone),
    where the same mappings without the scope, in the same run, are 8x.
    Then: a mapping shows a write to its file (as Linux's); a new mapping of a changed
    file shows the new bytes; a file open for writing maps its own pages;
    private writes stay private; a truncation while mapped gives SIGBUS
    past the new end; an unprivileged mapper shares; the snapshots'
    executables run. Unused clones do not keep the file system mounted and
    are deleted at unmount (no orphan item left; btrfs check clean).
    Fails before clones (each fault copied the canonical page: 8x)."""
    r = run_vm("tests/guest/extents/share-extents-mmap.sh", "64" if lane == "x86" else "16",
               **LANES[lane], disks=("2G",))
    ok(r)
    stock = search(r"^mmap stock: 8 mappings, page cache ([\d.]+)x", r)
    shared = search(r"^mmap shared: 8 mappings, page cache ([\d.]+)x", r)
    assert float(stock.group(1)) >= 7.9, stock.group(0)
    assert float(shared.group(1)) <= 1.05, shared.group(0)
    assert "share-extents-mmap: all checks passed" in r.console, r.explain()


@EXTENTS
def test_a_tenant_who_holds_its_files_lock_stalls_no_mapping_freeze_or_writer(lane):
    """An unprivileged attacker who may write nothing, in a 100 KB/s I/O
    cgroup, holds its copy's inode lock with an O_DIRECT read (about 30 s)
    and maps the copy: making a clone would wait for the read, so the
    mapping maps the copy itself, at once. With the read still going, an
    admin's 1-second freeze and another user's 4 KiB write with fsync take
    as long as before the attack (1.1x + 1 s), a remount read-only
    succeeds, and a victim mapping its own copy of the same extents maps a
    clone; after the read the attacker's next mapping maps that clone.
    Failed before 2026-12-02: the making waited for the read holding the
    file system's write access (the attacker's mmap() 9.5 s, the freeze
    9.8 s against 1.2 s, the remount "busy"); before 2026-11-29 the
    victim waited too."""
    r = run_vm("tests/guest/extents/share-extents-mmap-stall.sh", **LANES[lane], disks=("1G",),
               timeout=600)
    ok(r)
    search(r"^stall: attacker mapped in [\d.]+ s; mmaps_private \+1 mmaps_shared \+0$", r)
    search(r"^stall: freeze cycle [\d.]+ s .*remount read-only: ok$", r)
    search(r"^stall: victim mapped in [\d.]+ s; mmaps_shared \+1; attacker's read "
           r"still going: yes$", r)
    search(r"^stall: after the read, attacker mapped in [\d.]+ s; mmaps_shared \+1;", r)
    assert "share-extents-mmap-stall: all checks passed" in r.console, r.explain()


@EXTENTS
def test_a_private_mapping_suffers_neither_its_file_size_limit_nor_a_frozen_file_system(lane):
    """busybox run from a scope by an unprivileged user under `ulimit -f
    0` runs, 5 of 5, mapping itself while no clone exists and the clone an
    unlimited run made after; with 1024 idle clones of file system X and X
    frozen, a mapping on file system Y that makes one clone too many idle
    returns from munmap() within 1 s and Y unmounts before the thaw
    (waited for 20 s); after the thaw X
    unmounts with no orphan left. Failed before 2026-12-02: the limited
    runs were killed by SIGXFSZ (exit 153), and Y's munmap() deleted X's
    oldest clone itself, sleeping until the thaw."""
    r = run_vm("tests/guest/extents/share-extents-mmap-isolation.sh", **LANES[lane],
               disks=("1G", "1G"), timeout=600)
    ok(r)
    m = search(r"^limits: 5 runs under ulimit -f 0 with a clone: 5 ran, mmaps_shared "
               r"\+(\d+)", r)
    # Each run maps busybox's clone at least once (its text; the loader
    # may map it more than once): 5 runs, 5 or more shared mappings.
    assert int(m.group(1)) >= 5, r.explain()
    search(r"^freeze: Y's mapper with X frozen: .*exited within 20 s: yes .*Y unmounted "
           r"before the thaw: yes", r)
    assert "share-extents-mmap-isolation: all checks passed" in r.console, r.explain()


@EXTENTS
def test_a_reader_pins_no_more_than_one_old_copy_of_a_file_it_maps(lane):
    """The owner rewrites its world-readable 128 MiB file in place 8 times
    on a 1 GiB file system; after each rewrite user nobody syncs and maps
    it, keeping every mapping. A file has one clone of its own at most, so
    the file system's used space stays within stock + one file (+ 32 MiB)
    and every rewrite succeeds. Failed before 2026-12-02: each mapping
    made a clone of the new layout and kept the old ones, and the owner's
    8th rewrite ran out of space (913 MiB used)."""
    # 8 rewrites of 128 MiB take most of 20 minutes on the x86-64 debug
    # guest under TCG: 64 MiB there (the old code fails the space bound).
    r = run_vm("tests/guest/extents/share-extents-mmap-space.sh", "64" if lane == "x86" else "128",
               **LANES[lane], disks=("1G",), timeout=600)
    ok(r)
    search(r"^space: 8 rewrites, each mapped by a reader: \d+ MiB used", r)
    assert "share-extents-mmap-space: all checks passed" in r.console, r.explain()


@EXTENTS
def test_sharing_scopes_never_share_a_page_across_tenants(lane):
    """One extent referred to by files of two subvolumes in scope
    tenant-a, one in tenant-b and one in none, each read once, cold:
    3.00x the file in memory and in device reads (tenant-a's two files
    share one copy; tenant-b and the unscoped file keep their own), each
    scope's canonical mapping holds the file once; dropping tenant-b
    leaves tenant-a's pages and every file's bytes."""
    r = run_vm("tests/guest/extents/share-extents-scopes.sh", **LANES[lane], disks=("1G",))
    ok(r)
    m = search(r"^scopes: page cache ([\d.]+)x, device reads ([\d.]+)x", r)
    assert 2.99 <= float(m.group(1)) <= 3.02 and 2.99 <= float(m.group(2)) <= 3.02, \
        r.explain()
    assert "scopes: tenant-b dropped, tenant-a kept" in r.console, r.explain()


@EXTENTS
def test_an_unprivileged_user_cannot_share_pages_with_a_file_it_cannot_read(lane):
    """The permission tests of shared extents: in a sharing scope, user nobody
    tries FICLONE, FICLONERANGE and FIDEDUPERANGE against a root-only file
    through O_PATH descriptors, into files it may only read, and forges
    its subvolume's received UUID: every route to the secret's extent is
    refused (7 of them; the forged UUID is accepted by btrfs and changes
    nothing), the legitimate ones (a file it can read) share, and no file
    of nobody's ever holds the secret's bytes, before and after
    drop_caches."""
    r = run_vm("tests/guest/extents/share-extents-permissions.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert "permissions: 7 attempts refused, the legitimate shares done" in r.console, \
        r.explain()


@EXTENTS
def test_snapshots_made_after_enable_follow_their_source_into_its_scope(lane):
    """Sharing scopes per subtree: an image subvolume enabled once, and
    5 snapshots made from it afterwards (one a snapshot of a snapshot),
    read cold with an unscoped reflinked copy: 2.00x the file in memory
    and device reads (7x before snapshots followed). A followed snapshot
    that an admin disables stays out, and so does a snapshot made from
    it; one enabled in another scope moves there; user nobody cannot
    snapshot root's image into the scope, and its own snapshots follow
    its own enabled subvolume; with an auto group on the file system (its
    lineage walk looks 4 hops) a snapshot 6 hops from the image follows
    too; writes on both sides stay private."""
    r = run_vm("tests/guest/extents/share-extents-follow.sh", "64" if lane == "x86" else "32",
               **LANES[lane], disks=("2G",))
    ok(r)
    m = search(r"^follow: page cache ([\d.]+)x, device reads ([\d.]+)x", r)
    assert 1.99 <= float(m.group(1)) <= 2.03 and 1.99 <= float(m.group(2)) <= 2.03, \
        r.explain()
    assert "follow: disable keeps a lineage out, enable moves it, nobody follows only its own" \
        in r.console, r.explain()
    assert "follow: with an auto group on the file system, a snapshot 1 and one 6 hops" \
        in r.console, r.explain()


@EXTENTS
def test_a_file_marked_unshared_is_asked_again_after_every_change(lane):
    """A file marked as having no use for the alias policy must not stay
    marked past a change that makes it shareable (docs/design/scopes.md,
    "Classification after a change"). Two paths missed it: a group member's file that the
    group refuses, mapped privately first, in a subvolume that is also in
    a sharing scope (the mmap hook bound it, the group refused it, and
    the mark kept the scope away), and a file refused by a group that is
    then deleted (its subvolume follows its source into a scope; no
    reclassification came). Each refused file, read cold after the
    change, must alias the scope's pages: aliased up by the file's
    pages, device reads under a tenth of the file. Before the fix both
    read the whole file from disk (aliased +0)."""
    r = run_vm("tests/guest/share/share-classify-changes.sh", **LANES[lane], disks=("1G",))
    ok(r)
    assert r.console.count("aliased +1024 pages, device reads") == 2, r.explain()
    assert "classify-changes: every change asked again" in r.console, r.explain()


@EXTENTS
def test_a_throttled_reader_holds_only_its_own_scope(lane):
    """A read miss in a scope holds the scope while it waits for reads at
    its own I/O cgroup's rate. It held one SRCU shared by every file
    system, and every scope's burial waited for that SRCU's grace period
    under one global mutex, which every btrfs unmount took: a tenant
    throttled to 4 KiB/s kept other file systems' unmounts and every
    extents/ write waiting. While such a read is in flight on A: the
    unmount of B (a scope), a disable that empties B's scope, and the
    unmount of C (no scope) each end, and the throttled read then ends
    with the right bytes."""
    r = run_vm("tests/guest/extents/share-extents-throttled-holder.sh", **LANES[lane],
               disks=("512M", "512M", "512M"))
    ok(r)
    for label in ("umount of B (scope b)", "extents/disable of B's subvolume (scope b emptied)",
                  "umount of C (no scope)"):
        assert f"holder: {label} ended within" in r.console, r.explain()
    assert "holder: passed" in r.console, r.explain()


@EXTENTS
def test_a_groups_template_never_joins_a_sharing_scope(lane):
    """A template made as a read-only snapshot of an image in a sharing
    scope followed the image into the scope at its first read, and its
    group's members then shared nothing with it, silently. Now: the
    template read first does not follow, a member read cold after it
    shares its pages (pages_shared 1024, under an eighth of the file
    from disk); extents/enable of a template's subvolume, and
    groups/create on a subvolume that followed into a scope, are refused
    with a reason until the admin takes it out."""
    r = run_vm("tests/guest/share/share-template-in-scope.sh", **LANES[lane], disks=("1G",))
    ok(r)
    search(r"^template-in-scope: member pages shared with the template 10\d\d of 1024", r)
    assert "template-in-scope: passed" in r.console, r.explain()


@EXTENTS
def test_a_canonical_page_whose_read_failed_is_read_again(lane):
    """A failed canonical read left its page in the scope's mapping, not
    uptodate, and readahead skips a page that is present: the address
    was never read again until reclaim, and every file referring to it
    read its own copy. btrfs on dm-dust, the first page of a file shared
    with a reflinked copy a bad block: the file's read fails, the block
    heals, and the copy's cold read must read the canonical page again
    (the old code: 0 canonical reads) and give the file's bytes."""
    r = run_vm("tests/guest/extents/share-extents-failed-read.sh", **LANES[lane], disks=("1G",))
    ok(r)
    search(r"^failed-read: canonical read failures \+[1-9]\d*; the copy's cold read "
           r"then read [1-9]\d* canonical pages", r)


def extents_torture(ops, debug, lane="debug", members=6, workers=1, compress=None):
    r = torture(ops, debug, lane, members, workers, script="tests/guest/extents/share-extents-torture.sh",
                extra=("0", compress) if compress else ())
    search(r"^extents torture: \d+ pages aliased, [1-9]\d* resolved, [1-9]\d* "
           r"canonical pages dropped", r)
    return r


def test_randomized_torture_of_shared_extents_on_both_sides():
    """The torture of shared extents, short: 20000 random operations (writes, mmap
    writes, O_DIRECT, truncate, punch, FICLONERANGE, FIDEDUPERANGE,
    evictions, drop_caches) on a writable source's file and copy and on
    6 writable snapshots of it, all in one sharing scope, on the
    preemptible base kernel: zero mismatches with the model, pages
    shared and canonical pages dropped as their space was handed out."""
    extents_torture(20000, debug=False)


def test_randomized_torture_of_compressed_shared_extents():
    """The same on compressed extents: the file system compresses every
    write (compress-force=zstd) and every byte written is compressible,
    so the source's and copies' shared extents are compressed ones, whose
    canonical pages are decompressed from the extent read once (10000
    operations on the preemptible base kernel; at least one of the
    source's extents still compressed at the end)."""
    r = extents_torture(10000, debug=False, compress="zstd")
    search(r"^compressed extents: [1-9]\d* of the source file's", r)


@pytest.mark.slow
@EXTENTS
def test_randomized_torture_of_shared_extents_under_the_debug_kernel(lane):
    """The same where lockdep, KASAN, DEBUG_VM and kmemleak watch: 5000
    operations on the debug UML kernel; on x86-64, 4000 by 2 workers,
    each on its own CPU (worker 0 owns the source's files), so that
    proofs, stores, resolutions and the reservation hook's drops of one
    worker race another's for real."""
    if lane == "x86":
        extents_torture(4000, debug=True, lane=lane, members=8, workers=2)
    else:
        extents_torture(5000, debug=True, lane=lane)
