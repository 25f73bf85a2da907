#!/bin/bash
# Shared extents without a group: files that share disk
# extents keep one copy of those pages in memory when their subvolume is
# in a sharing scope (/sys/kernel/mm/totalcow/extents/).
#
#   share-extents-reflink.sh [MIB]   (default 64)
#
# 1. 8 reflinked copies (cp --reflink) of a MIB MiB file, each read once,
#    cold: page cache and device reads x the file, with the scope and,
#    in the same run, without it (stock: 8x / 8x).
# 2. 8 writable snapshots of a writable subvolume, each in the scope,
#    their file read once: the same two ratios.
# 3. The reflinked copies again, with a busy writer elsewhere on the file
#    system: an unprivileged user rewriting 4 KiB of its own file, in no
#    scope, with O_DIRECT in a loop (a new data extent each time): still
#    within 1.01x. Before 2026-12-02 every handout anywhere on the file
#    system spoiled every miss under way: 7.4x.
#    A dedupe of two shared copies then reads (almost) nothing from the
#    device: its comparison fills each broken alias from memory.
# 4. Writes on both sides after the copies were read: the original
#    written in place, a copy written, a snapshot and its source written:
#    every file reads its own bytes, before and after drop_caches.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mib=${1:-64}
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
bytes=$((mib << 20))
sum() { sha256sum < "$1" | cut -d' ' -f1; }
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/copies
make_file $mnt/copies/orig "$mib" orig
for i in 1 2 3 4 5 6 7 8; do
	cp --reflink=always $mnt/copies/orig $mnt/copies/c$i
done
btrfs -q subvolume create $mnt/w
make_file $mnt/w/file "$mib" snap
for i in 1 2 3 4 5 6 7 8; do
	btrfs -q subvolume snapshot $mnt/w $mnt/s$i
done
sync
orig=$(sum $mnt/copies/orig)
snap=$(sum $mnt/w/file)

# read_all LABEL FILE...: read each file once, cold; print and keep the
# page cache and device reads x the file.
read_all() {
	local label=$1
	shift
	cold_reads $bytes "$@"
	mem=$MEM reads=$READS
	echo "$label: page cache ${mem}x, device reads ${reads}x the file"
}

# shared WHY SUM FILE...: the last read_all was within 1.01x, and each
# FILE reads back as SUM; else die with WHY.
shared() {
	local why=$1 want=$2 f
	shift 2
	awk -v m="$mem" -v r="$reads" 'BEGIN { exit !(m <= 1.01 && r <= 1.01) }' ||
		die "$why: $(cat $x/scopes)"
	for f in "$@"; do
		[ "$(sum "$f")" = "$want" ] || die "$f read back wrong ($why?)"
	done
}

copies=($mnt/copies/c{1..8})
snaps=($mnt/s{1..8}/file)
read_all "reflinks, stock" "${copies[@]}"
stock_mem=$mem stock_reads=$reads
read_all "snapshots, stock" "${snaps[@]}"
stock_smem=$mem stock_sreads=$reads

echo "default $mnt/copies" > $x/enable
for i in 1 2 3 4 5 6 7 8; do
	echo "default $mnt/s$i" > $x/enable
done
read_all "reflinks, shared" "${copies[@]}"
echo "reflinks: shared ${mem}x memory ${reads}x reads; stock ${stock_mem}x ${stock_reads}x"
shared "reflinked copies not shared" "$orig" "${copies[@]}"
read_all "snapshots, shared" "${snaps[@]}"
echo "snapshots: shared ${mem}x memory ${reads}x reads; stock ${stock_smem}x ${stock_sreads}x"
shared "snapshots not shared" "$snap" "${snaps[@]}"
[ "$(scope_field default aliased)" -gt 0 ] && [ "$(scope_field default resolved)" -gt 0 ] ||
	die "no aliases counted: $(cat $x/scopes)"
echo "scopes: $(cat $x/scopes)"

# A busy writer elsewhere: user 2000, its own file, in no scope.
mkdir -p $mnt/elsewhere && chown 2000 $mnt/elsewhere
setpriv --reuid=2000 --regid=2000 --clear-groups \
	python3 "$TOTALCOW_TOP/tests/guest/lib/busy-writer.py" $mnt/elsewhere/log > /tmp/writer.log &
writer=$!
sleep 1
read_all "reflinks, shared, busy writer" "${copies[@]}"
kill -TERM $writer && wait $writer || die "the busy writer failed: $(cat /tmp/writer.log)"
echo "busy: shared ${mem}x memory ${reads}x reads with a writer elsewhere; $(cat /tmp/writer.log)"
shared "a writer elsewhere on the file system spoiled sharing" "$orig" "${copies[@]}"

# A dedupe of two shared copies compares their pages (read_mapping_folio()
# on each): an alias broken there is filled from the canonical page in
# memory and read nothing from the device (before 2026-12-02 it was read
# again, a wasted read that fails with EIO on a bad sector).
cat $mnt/copies/c1 $mnt/copies/c2 > /dev/null
rd0=$(sectors_read "$DISK0")
python3 "$TOTALCOW_TOP/tests/guest/lib/dedupe-range.py" $mnt/copies/c1 $mnt/copies/c2 > /tmp/dedupe.log ||
	die "dedupe of two copies: $(cat /tmp/dedupe.log)"
dedupe_kib=$((($(sectors_read "$DISK0") - rd0) / 2))
echo "dedupe: two shared copies compared and deduplicated, $dedupe_kib KiB read from the device ($(cat /tmp/dedupe.log))"
[ $dedupe_kib -le $((mib * 1024 / 100)) ] || die "the dedupe's comparison read the shared pages from the device"

# Writes on both sides, with every file's pages shared in memory.
for f in "${copies[@]}" "${snaps[@]}"; do cat "$f" > /dev/null; done
# The original, in place (its extent is the copies'): a page, a partial
# page, a run across a block, then through a shared mapping.
write_in_place $mnt/copies/orig
# A copy: overwritten at its start, truncated, extended.
dd if=/dev/urandom of=$mnt/copies/c2 bs=1M count=1 conv=notrunc status=none
truncate -s $((bytes / 2 + 1234)) $mnt/copies/c3
truncate -s $bytes $mnt/copies/c3
# A snapshot and its source.
dd if=/dev/urandom of=$mnt/s1/file bs=4096 seek=7 count=2 conv=notrunc status=none
dd if=/dev/urandom of=$mnt/w/file bs=4096 seek=9 count=1 conv=notrunc status=none
declare -A want
for f in "${copies[@]}" "${snaps[@]}" $mnt/copies/orig $mnt/w/file; do
	want[$f]=$(sum "$f")
done
# What each file must hold, from an independent reading of the bytes.
[ "${want[$mnt/copies/orig]}" != "$orig" ] || die "the original's writes were lost"
for i in 1 4 5 6 7 8; do
	[ "${want[$mnt/copies/c$i]}" = "$orig" ] || die "c$i changed by a write to another file"
done
[ "${want[$mnt/copies/c2]}" != "$orig" ] || die "c2's write was lost"
cmp -s -n $((bytes / 2 + 1234)) $mnt/copies/c3 $mnt/copies/c1 || die "c3 below its truncation differs"
[ "$(tail -c $((bytes / 2 - 1234)) $mnt/copies/c3 | tr -d '\0' | wc -c)" = 0 ] ||
	die "c3 past its truncation is not zeros"
for i in 2 3 4 5 6 7 8; do
	[ "${want[$mnt/s$i/file]}" = "$snap" ] || die "s$i changed by a write to another file"
done
[ "${want[$mnt/s1/file]}" != "$snap" ] && [ "${want[$mnt/w/file]}" != "$snap" ] ||
	die "a snapshot's write was lost"
sync
drop_caches
# drop_caches takes the scope's canonical pages too, as it takes files'.
[ "$(scope_field default pages)" = 0 ] ||
	die "drop_caches left the scope's pages cached: $(cat $x/scopes)"
for f in "${!want[@]}"; do
	[ "$(sum "$f")" = "${want[$f]}" ] || die "$f reads back differently after drop_caches"
done
# Once more, shared again, cold: still every file's own bytes.
for f in "${!want[@]}"; do cat "$f" > /dev/null; done
for f in "${!want[@]}"; do
	[ "$(sum "$f")" = "${want[$f]}" ] || die "$f reads back differently when shared again"
done
echo "writes: every file reads its own bytes"

# Files that end inside a page: their last page is shared too (the
# extent holds zeroes past the end, as btrfs's read of the page makes
# it), and growing one copy (a write past the end, a truncate up) shows
# zeroes between its old end and the new bytes, the others unchanged.
head -c 10000 $mnt/copies/c1 > $mnt/copies/small
for i in 1 2 3 4; do cp --reflink=always $mnt/copies/small $mnt/copies/small$i; done
sync
small=$(sum $mnt/copies/small)
drop_caches
a0=$(scope_field default aliased)
for i in 1 2 3 4; do cat $mnt/copies/small$i > /dev/null; done
[ "$(($(scope_field default aliased) - a0))" -ge 12 ] || die "the small files' 3 pages each were not all aliased"
printf 'grown' | dd of=$mnt/copies/small2 bs=1 seek=12000 conv=notrunc status=none
truncate -s 20000 $mnt/copies/small3
for i in 1 4; do [ "$(sum $mnt/copies/small$i)" = "$small" ] || die "small$i changed"; done
cmp -s -n 10000 $mnt/copies/small2 $mnt/copies/small || die "small2 below its old end changed"
[ "$(tail -c +10001 $mnt/copies/small2 | head -c 2000 | tr -d '\0' | wc -c)" = 0 ] ||
	die "small2 between its old end and the write is not zeroes"
[ "$(tail -c +12001 $mnt/copies/small2)" = grown ] || die "small2's write was lost"
[ "$(tail -c +10001 $mnt/copies/small3 | tr -d '\0' | wc -c)" = 0 ] && [ "$(stat -c %s $mnt/copies/small3)" = 20000 ] ||
	die "small3 past its old end is not zeroes"
echo "tails: partial last pages shared, and zeroes past the end when a copy grows"
umount $mnt
echo "share-extents-reflink: all checks passed"
