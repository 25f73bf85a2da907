#!/bin/bash
# A reader cannot pin a file owner's overwritten data on disk
# (tc_clone_origin_free(), docs/design/mapped-files.md "Mapped pages of shared
# extents"). A private mapping of a file in a sharing scope maps a clone,
# which holds the file's extents as of mmap(). The owner (uid 1000)
# rewrites its world-readable 128 MiB file in place, 8 times, on a 1 GiB
# file system; after each rewrite user nobody, who may only read it,
# syncs and maps it, keeping every mapping. A file has one clone of its
# own at most: a clone of its old layout in use makes the new mapping map
# the file itself, an unused one is deleted. So the file system's used
# space stays within stock + one file (and 32 MiB of metadata), and every
# rewrite succeeds. Failed before 2026-12-02: each mapping made a clone
# of the new layout, the old ones held theirs, and the owner's rewrites
# ran out of space (on 2 GiB with a 256 MiB file the 7th failed).
#
#   share-extents-mmap-space.sh [MIB]   (default 128)
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
mib=${1:-128}
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/home
mkdir $mnt/home/owner && chown 1000 $mnt/home/owner
echo "default $mnt/home" > $x/enable
f=$mnt/home/owner/data
as_owner() { setpriv --reuid=1000 --regid=1000 --clear-groups "$@"; }
as_owner dd if=/dev/urandom of=$f bs=1M count=$mib status=none || die "the first write"
chmod 644 $f
sync
used() { btrfs filesystem sync $mnt; df -B1M --output=used $mnt | tail -n 1 | tr -d ' '; }
u0=$(used)
mappers=()
for i in 1 2 3 4 5 6 7 8; do
	as_owner dd if=/dev/urandom of=$f bs=1M count=$mib conv=notrunc,fsync status=none ||
		die "the owner's rewrite $i failed (used $(used) MiB of the file system)"
	setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.sync()
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
m[0]
print("mapped", flush=True)
time.sleep(3600)' $f > /tmp/mapper.$i 2>&1 &
	mappers+=($!)
	for t in $(seq 1 100); do grep -q mapped /tmp/mapper.$i && break; sleep 0.1; done
	grep -q mapped /tmp/mapper.$i || die "mapper $i: $(cat /tmp/mapper.$i)"
	echo "space: rewrite $i, then a mapping: $(used) MiB used"
done
u1=$(used)
echo "space: 8 rewrites, each mapped by a reader: $u1 MiB used, $u0 MiB with the file alone; scopes: $(cat $x/scopes)"
[ "$u1" -le $((u0 + mib + 32)) ] || die "the reader's mappings pin $((u1 - u0)) MiB, more than one file"
kill "${mappers[@]}"
wait 2>/dev/null || true
umount $mnt
echo "share-extents-mmap-space: all checks passed"
