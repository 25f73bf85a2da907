#!/bin/bash
# mmap() and fork() racing the unbinding of a bound file, on the 7.3
# series (tests/guest/share/share-backing-file-race.py): after the write
# that unbound the file returned, no mapping may show the template's page.
#   share-backing-file-race.sh [ROUNDS]
. "$TOTALCOW_TOP/tests/vm/lib.sh"
rounds=${1:-40}
mnt=/mnt/btrfs
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 1 race
sync
python3 "$TOTALCOW_TOP/tests/guest/share/share-backing-file-race.py" $mnt/T/f $mnt/T/m "$rounds" ||
	die "a mapping kept the template's page"
umount $mnt
echo "backing-file-race: passed"
