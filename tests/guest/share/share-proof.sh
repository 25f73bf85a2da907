#!/bin/bash
# A member page is proven identical to the template's only by the file
# system's extent records, never by timestamps: same-tick
# rewrites and direct writes racing the proof (tests/guest/share/share-proof.py).
# Arguments: MODE (same-tick|dio-race) TRIES COLLISIONS.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mnt=/mnt/btrfs
mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
mkdir -p $mnt && mount /dev/$DISK0 $mnt || die "mount"
python3 "$TOTALCOW_TOP/tests/guest/share/share-proof.py" $mnt "$@" || die "share-proof.py $*"
umount $mnt
