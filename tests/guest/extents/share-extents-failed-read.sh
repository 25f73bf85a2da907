#!/bin/bash
# A canonical page whose read failed must be read again by the next miss
# (review of 2026-11-28). The failed read left its page in the scope's
# canonical mapping, not uptodate; readahead skips a page that is
# present, so nothing read that address again until reclaim took the
# page, and every file of the scope that refers to it read its own copy.
# A tenant can cause such failures (a throttled read of an address that
# is reserved again meanwhile), and so can a disk.
#
# btrfs on dm-dust: the first page of a file, shared with a reflinked
# copy in scope s, is a bad block. The file's cold read fails (EIO; the
# scope counts a read failure). The block is good again (dust disabled),
# and the copy's first page is read cold: the miss must read the
# canonical page again (the scope's reads +1) and the copy reads the
# file's bytes.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
dev=/dev/mapper/dust
first_page() { dd if="$1" bs=4096 count=1 status=none | sha256sum | cut -d' ' -f1; }

dmsetup create dust --table "0 $(blockdev --getsz /dev/$DISK0) dust /dev/$DISK0 0 4096" ||
	die "dmsetup create dust"
btrfs_mount $dev $mnt
btrfs -q subvolume create $mnt/S
make_file $mnt/S/f 1 failed-read
cp --reflink=always $mnt/S/f $mnt/S/g
want=$(first_page $mnt/S/f)
sync
echo "s $mnt/S" > $x/enable || die "extents/enable"
# The first page's logical address (FIEMAP), then its place on the device.
logical=$(filefrag -v -b4096 $mnt/S/f | awk '$1 == "0:" { sub(/\.\..*/, "", $4); print $4 * 4096 }')
[ -n "$logical" ] || die "no extent for f"
physical=$(btrfs-map-logical -l "$logical" -b 4096 $dev 2>/dev/null |
	awk '/mirror 1/ { for (i = 1; i < NF; i++) if ($i == "physical") print $(i + 1) }')
[ -n "$physical" ] || die "btrfs-map-logical found no copy of $logical"
echo "failed-read: f's first page: logical $logical, on the device at $physical"

drop_caches
dmsetup message dust 0 addbadblock $((physical / 4096)) || die "addbadblock"
dmsetup message dust 0 enable || die "dust enable"
f0=$(scope_field s read_failures)
if dd if=$mnt/S/f of=/dev/null bs=4096 count=1 status=none 2>/dev/null; then
	die "f's first page was read from a bad block"
fi
f1=$(scope_field s read_failures)
[ "$f1" -gt "$f0" ] || die "no canonical read failed: $(cat $x/scopes)"
dmsetup message dust 0 disable || die "dust disable"

r0=$(scope_field s reads)
[ "$(first_page $mnt/S/g)" = "$want" ] || die "g's first page read back wrong"
r1=$(scope_field s reads)
echo "failed-read: canonical read failures +$((f1 - f0)); the copy's cold read then read $((r1 - r0)) canonical pages"
[ "$r1" -gt "$r0" ] || die "the failed canonical page was not read again: $(cat $x/scopes)"
[ "$(first_page $mnt/S/f)" = "$want" ] || die "f's first page read back wrong"
echo "s $mnt/S" > $x/disable || die "extents/disable"
umount $mnt
dmsetup remove dust
echo "failed-read: passed"
