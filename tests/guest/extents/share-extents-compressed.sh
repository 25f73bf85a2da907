#!/bin/bash
# Shared extents that are compressed: files that refer to the
# same compressed extent keep one copy of its decompressed pages, in the
# scope's second canonical mapping (module/share/totalcow-canon-compressed.c).
#
#   share-extents-compressed.sh [MIB]   (default 32)
#
# 1. A MIB MiB file of compressible bytes written with zstd
#    (compress-force), 8 reflinked copies, each read once, cold: page
#    cache x the file and device reads x one stock read of the file,
#    without the scope and with it, in the same run (stock: 8x / 8x).
# 2. The same for a file written with lzo and one with zlib, 4 copies
#    each (btrfs property compression): every copy's bytes, and aliases.
# 3. Writes on both sides after the copies were read: the original in
#    place (a page, a partial page, a run across a block, through a
#    shared mapping), a copy overwritten and truncated: every file
#    reads its own bytes, before and after drop_caches, and when shared
#    again.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mib=${1:-32}
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
bytes=$((mib << 20))
sum() { sha256sum < "$1" | cut -d' ' -f1; }
mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
mkdir -p $mnt && mount -o compress-force=zstd /dev/$DISK0 $mnt || die "mount"
btrfs -q subvolume create $mnt/c
make_text $mnt/c/orig "$mib" zstd
for z in lzo zlib; do
	touch $mnt/c/$z
	btrfs property set $mnt/c/$z compression $z || die "property $z"
	make_text $mnt/c/$z.tmp "$mib" $z
	cat $mnt/c/$z.tmp > $mnt/c/$z
	rm $mnt/c/$z.tmp
done
sync
for f in orig lzo zlib; do
	read -r e n < <(encoded_extents $mnt/c/$f)
	[ "$e" -gt 0 ] && [ "$e" = "$n" ] || die "$f: $e of $n extents compressed"
done
for i in 1 2 3 4 5 6 7 8; do cp --reflink=always $mnt/c/orig $mnt/c/c$i; done
for z in lzo zlib; do
	for i in 1 2 3 4; do cp --reflink=always $mnt/c/$z $mnt/c/$z$i; done
done
sync
declare -A want
for f in $mnt/c/*; do want[$f]=$(sum "$f"); done

# One stock read of the file: what its compressed extents cost on disk.
cold_reads $bytes $mnt/c/orig
one=$READS
echo "one read of the file: device reads ${one}x its size"
awk -v r="$one" 'BEGIN { exit !(r < 0.9) }' || die "the file is not compressed on disk"

copies=($mnt/c/c{1..8})
cold_reads $bytes "${copies[@]}"
stock_mem=$MEM stock_reads=$(awk -v r="$READS" -v o="$one" 'BEGIN { printf "%.3f", r / o }')
echo "compressed, stock: page cache ${stock_mem}x, device reads ${stock_reads}x one read"

echo "default $mnt/c" > $x/enable
a0=$(scope_field default aliased)
cold_reads $bytes "${copies[@]}"
mem=$MEM reads=$(awk -v r="$READS" -v o="$one" 'BEGIN { printf "%.3f", r / o }')
echo "compressed: shared ${mem}x memory ${reads}x reads; stock ${stock_mem}x ${stock_reads}x"
awk -v m="$mem" -v r="$reads" 'BEGIN { exit !(m <= 1.01 && r <= 1.01) }' ||
	die "compressed copies not shared: $(cat $x/scopes)"
[ "$(($(scope_field default aliased) - a0))" -ge $((7 * bytes / 4096)) ] ||
	die "not every copy's pages aliased: $(cat $x/scopes)"
for f in "${copies[@]}"; do
	[ "$(sum "$f")" = "${want[$f]}" ] || die "$f read back wrong while shared"
done

# lzo and zlib: each file's pages shared by its copies, right bytes.
for z in lzo zlib; do
	zc=($mnt/c/${z}{1..4})
	a0=$(scope_field default aliased)
	cold_reads $bytes "${zc[@]}"
	echo "$z: page cache ${MEM}x the file"
	awk -v m="$MEM" 'BEGIN { exit !(m <= 1.01) }' || die "$z copies not shared"
	[ "$(($(scope_field default aliased) - a0))" -ge $((3 * bytes / 4096)) ] ||
		die "$z: not every copy's pages aliased"
	for f in "${zc[@]}"; do
		[ "$(sum "$f")" = "${want[$f]}" ] || die "$f read back wrong while shared"
	done
done
[ "$(scope_field default read_failures)" = 0 ] || die "canonical reads failed: $(cat $x/scopes)"
# The last file's pages (drop_caches took the others'), all in the
# compressed extents' mapping.
[ "$(scope_field default compressed_pages)" -ge $((bytes / 4096)) ] ||
	die "the pages are not in the compressed mapping: $(cat $x/scopes)"
echo "scopes: $(cat $x/scopes)"

# Writes on both sides, with every copy's pages shared in memory.
for f in "${copies[@]}"; do cat "$f" > /dev/null; done
write_in_place $mnt/c/orig
dd if=/dev/urandom of=$mnt/c/c2 bs=64K count=3 seek=1 conv=notrunc status=none
truncate -s $((bytes / 2 + 1234)) $mnt/c/c3
truncate -s $bytes $mnt/c/c3
declare -A now
for f in "${!want[@]}"; do now[$f]=$(sum "$f"); done
[ "${now[$mnt/c/orig]}" != "${want[$mnt/c/orig]}" ] || die "the original's writes were lost"
[ "${now[$mnt/c/c2]}" != "${want[$mnt/c/c2]}" ] || die "c2's write was lost"
for i in 1 4 5 6 7 8; do
	[ "${now[$mnt/c/c$i]}" = "${want[$mnt/c/c$i]}" ] || die "c$i changed by a write to another file"
done
cmp -s -n $((bytes / 2 + 1234)) $mnt/c/c3 $mnt/c/c1 || die "c3 below its truncation differs"
[ "$(tail -c $((bytes / 2 - 1234)) $mnt/c/c3 | tr -d '\0' | wc -c)" = 0 ] ||
	die "c3 past its truncation is not zeros"
sync
drop_caches
# drop_caches takes the scope's canonical pages too, as it takes files'.
[ "$(scope_field default pages)" = 0 ] ||
	die "drop_caches left the scope's pages cached: $(cat $x/scopes)"
for f in "${!now[@]}"; do
	[ "$(sum "$f")" = "${now[$f]}" ] || die "$f reads back differently after drop_caches"
done
for f in "${!now[@]}"; do cat "$f" > /dev/null; done
for f in "${!now[@]}"; do
	[ "$(sum "$f")" = "${now[$f]}" ] || die "$f reads back differently when shared again"
done
echo "writes: every file reads its own bytes"
umount $mnt
echo "share-extents-compressed: all checks passed"
