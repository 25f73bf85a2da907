#!/bin/bash
# Private mappings of shared extents while their files change, every
# role in a process of its own so that they overlap on SMP (the x86-64
# lane's vCPUs): tests/guest/extents/share-extents-mmap-race.py.
#
#   share-extents-mmap-race.sh [SECONDS] [FILES]   (default 60, 4)
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
seconds=${1:-60}
files=${2:-4}
pages=256

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/w
mkdir -p $mnt/w/data $mnt/w/versions
# page(tag, version, index) of share-extents-mmap-race.py, for a file.
python3 - $mnt $files $pages <<'PY'
import struct, sys
mnt, files, pages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def page(t, v, i):
    h = struct.pack("<III", t, v, i)
    return (h * (4096 // len(h) + 1))[:4096]
def write(path, t, v):
    with open(path, "wb") as f:
        f.write(b"".join(page(t, v, i) for i in range(pages)))
write(f"{mnt}/w/data/file", 0, 0)
for j in range(1, files + 1):
    for k in range(1, 9):
        write(f"{mnt}/w/versions/{j}.{k - 1}", j, k)
PY
for i in $(seq 1 $files); do btrfs -q subvolume snapshot $mnt/w $mnt/s$i; done
sync
echo "default $mnt/w" > $x/enable
for i in $(seq 1 $files); do echo "default $mnt/s$i" > $x/enable; done
python3 "$TOTALCOW_TOP/tests/guest/extents/share-extents-mmap-race.py" $mnt $files "$seconds" ||
	die "mapping race"
echo "scopes: $(cat $x/scopes)"
umount $mnt || die "umount after the race"
orphans=$(btrfs inspect-internal dump-tree /dev/$DISK0 | grep -c "ORPHAN_ITEM" || true)
[ "$orphans" = 0 ] || die "$orphans orphan items left"
echo "share-extents-mmap-race: all checks passed"
