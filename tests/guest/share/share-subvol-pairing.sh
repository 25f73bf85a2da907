#!/bin/bash
# Binding at open (docs/design/sharing-in-the-file-system.md, route A,
# lifetime), on a kernel with mm-patches/7.3: a snapshot paired once with
# the read-only subvolume it was taken of has each file bound to the
# source's file of the same inode number at its first open for reading,
# when the two are identical; nobody binds files one by one.
#   1. refusals: not a snapshot of it, a writable source, a chain
#   2. an identical file is read through the source's page cache at its
#      first open: no disk read, no page cache of its own, same bytes
#   3. a file changed before the open is read as itself
#   4. a file rewritten with the same bytes (new extents) is read as
#      itself; a dedupe makes it identical and its next open binds it
#   5. the source stays read-only and undeleted while paired
#   6. unpairing unbinds the member's files; deleting a member drops its
#      pairing, and the source can be made writable again
. "$TOTALCOW_TOP/tests/vm/lib.sh"
. "$TOTALCOW_TOP/tests/guest/share/read-counted.sh"
mnt=/mnt/btrfs
py="python3 $TOTALCOW_TOP/tests/guest/share/share-backing-file.py"
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/B
make_file $mnt/B/f 8 pair-f
make_file $mnt/B/g 4 pair-g
make_file $mnt/B/h 4 pair-h
make_file $mnt/B/d 4 pair-d
btrfs -q subvolume snapshot -r $mnt/B $mnt/T
btrfs -q subvolume snapshot $mnt/T $mnt/M
btrfs -q subvolume snapshot $mnt/B $mnt/W
btrfs -q subvolume snapshot $mnt/W $mnt/X
# Changed in the member before anybody opened it through the pairing.
dd if=/dev/urandom of=$mnt/M/g bs=4k count=1 seek=100 conv=notrunc status=none
# The same bytes as the source's, in new extents.
dd if=$mnt/T/d of=$mnt/M/d bs=1M conv=notrunc status=none
sync

# 1. Refusals.
expect() {
	local out
	out=$($py "$@" || true)
	echo "refused, $*: ${out:-accepted}"
	[ "$out" = "$EXPECTED" ] || die "$* gave '${out:-nothing}', want '$EXPECTED'"
}
EXPECTED="pair: Invalid argument" expect pair $mnt/M $mnt/B
EXPECTED="pair: Read-only file system" expect pair $mnt/X $mnt/W
$py pair $mnt/M $mnt/T || die "pair M with T"
EXPECTED="pair: Too many levels of symbolic links" expect pair $mnt/T $mnt/B
mkdir $mnt/M/sub
EXPECTED="pair: Invalid argument" expect pair $mnt/M/sub $mnt/T

# 2. Bound at the first open, by the pairing alone.
read_counted $mnt/M/f $mnt/T/f
echo "identical: member read $READ_BYTES bytes from the disk, own cache $OWN_PAGES pages"
[ "$READ_BYTES" -lt 32768 ] || die "the paired member read the disk"
[ "$OWN_PAGES" = 0 ] || die "the paired member has a page cache of its own"
[ "$SUM" = "$(sha256sum < $mnt/T/f | cut -d' ' -f1)" ] || die "different bytes"
if ( : >> $mnt/T/f ) 2>/dev/null; then die "the source's file was writable"; fi

# 3. A changed file reads its own bytes.
cat $mnt/T/g > /dev/null
sum_g=$(sha256sum < $mnt/M/g)
own=$($py cached $mnt/M/g)
echo "changed: own cache $own pages"
[ "$own" -gt 0 ] || die "a changed file was bound"
[ "$sum_g" != "$(sha256sum < $mnt/T/g)" ] || die "a changed file read the source's bytes"

# 4. Same bytes in other extents: not bound, until a dedupe.
cat $mnt/T/d > /dev/null
cat $mnt/M/d > /dev/null
own=$($py cached $mnt/M/d)
echo "rewritten: own cache $own pages"
[ "$own" -gt 0 ] || die "a file with other extents was bound"
$py dedupe $mnt/T/d $mnt/M/d || die "dedupe"
sync
read_counted $mnt/M/d $mnt/T/d
echo "deduped: member read $READ_BYTES bytes from the disk, own cache $OWN_PAGES pages"
[ "$READ_BYTES" -lt 32768 ] && [ "$OWN_PAGES" = 0 ] || die "a deduped file was not bound at its next open"
[ "$SUM" = "$(sha256sum < $mnt/T/d | cut -d' ' -f1)" ] || die "different bytes after the dedupe"

# 5. The source is held.
if btrfs property set -ts $mnt/T ro false 2>/dev/null; then
	die "the source was made writable while paired"
fi
if btrfs -q subvolume delete $mnt/T 2>/dev/null; then
	die "the source was deleted while paired"
fi
echo "source: held read-only and undeleted"

# 6. Unpairing unbinds; deleting a member drops its pairing.
exec 8< $mnt/M/h
cat $mnt/T/h > /dev/null
cat <&8 > /dev/null
[ "$($py cached $mnt/M/h)" = 0 ] || die "h was not bound"
$py unpair $mnt/M || die "unpair"
cat $mnt/M/h > /dev/null
own=$($py cached $mnt/M/h)
exec 8<&-
echo "unpaired: h own cache $own pages"
[ "$own" -gt 0 ] || die "unpairing left a file bound"
btrfs property set -ts $mnt/T ro false || die "the source stayed read-only after unpairing"
btrfs property set -ts $mnt/T ro true
$py pair $mnt/M $mnt/T || die "pair again"
btrfs -q subvolume delete $mnt/M || die "delete the member"
btrfs property set -ts $mnt/T ro false || die "the source stayed held after its member went"
echo "member deleted: the source is free"
umount $mnt
echo "subvol-pairing: passed"
