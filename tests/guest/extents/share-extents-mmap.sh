#!/bin/bash
# Private mappings of files that share extents (tc_extent_mmap_file(),
# docs/design/mapped-files.md "Mapped pages of shared extents"): N writable snapshots
# of a writable subvolume, each file mapped MAP_PRIVATE by a process of
# its own and every page touched: page cache x the file without a scope
# (stock: N) and with one (one clone: 1), then the semantics
# (tests/guest/extents/share-extents-mmap.py). After the mappings are gone the
# file system unmounts: no clone is left holding it.
#
#   share-extents-mmap.sh [MIB]   (default 16)
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
mib=${1:-16}
n=8
py() { python3 "$TOTALCOW_TOP/tests/guest/extents/share-extents-mmap.py" $mnt $n "$@"; }

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/w
mkdir -p $mnt/w/data $mnt/w/bin
make_file $mnt/w/data/file "$mib" mapped
cp /bin/busybox $mnt/w/bin/busybox
for i in $(seq 1 $n); do btrfs -q subvolume snapshot $mnt/w $mnt/s$i; done
sync

py stock || die "stock mappings"
echo "default $mnt/w" > $x/enable
for i in $(seq 1 $n); do echo "default $mnt/s$i" > $x/enable; done
py shared || die "shared mappings"
echo "scopes: $(cat $x/scopes)"
# Unused clones stay (a process started again maps the same one) but do
# not hold the mount; the unmount deletes them: no orphan is left.
umount $mnt || die "umount after the mappings went: a clone still holds it"
orphans=$(btrfs inspect-internal dump-tree /dev/$DISK0 | grep -c "ORPHAN_ITEM" || true)
[ "$orphans" = 0 ] || die "$orphans orphan items left: clones not deleted at unmount"
btrfs check --readonly /dev/$DISK0 > /dev/null 2>&1 || die "btrfs check after the clones"
echo "share-extents-mmap: all checks passed"
