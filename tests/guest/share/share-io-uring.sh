#!/bin/bash
# Buffered io_uring reads of shared files (mm-patches/7.3): io_uring
# retries a buffered read that would block with IOCB_WAITQ, which needs
# the kiocb's wait queue entry, only on files whose operations say
# FOP_BUFFER_RASYNC. The sharing routes read the source's page cache with
# a cloned kiocb, which has no wait queue entry, so their operations must
# not say it: a kernel whose sharing operations kept the flag oopsed
# here (a NULL wait queue in __folio_lock_async()), on a cold cache,
# where the first attempt finds folios locked under readahead.
#   1. a bound file (identical to its twin), 2. a file read by runs
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mnt=/mnt/btrfs
py="python3 $TOTALCOW_TOP/tests/guest/share/share-backing-file.py"
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/B
make_file $mnt/B/bound 32 uring-bound
make_file $mnt/B/runs 32 uring-runs
btrfs -q subvolume snapshot -r $mnt/B $mnt/T
btrfs -q subvolume snapshot $mnt/T $mnt/M
dd if=/dev/urandom of=$mnt/M/runs bs=4k count=1 seek=1000 conv=notrunc status=none
sync
want_bound=$(sha256sum < $mnt/T/bound)
want_runs=$(sha256sum < $mnt/M/runs)
$py pair $mnt/M $mnt/T || die "pair"
for f in bound runs; do
	for round in 1 2 3; do
		echo 1 > /proc/sys/vm/drop_caches
		fio --name=uring-$f --filename=$mnt/M/$f --ioengine=io_uring --rw=read \
			--bs=64k --iodepth=16 --direct=0 --size=32m --numjobs=2 \
			--output=/dev/null || die "fio on $f failed"
	done
	echo "io_uring: $f read 3 times cold, 2 jobs, depth 16"
done
[ "$(sha256sum < $mnt/M/bound)" = "$want_bound" ] || die "the bound file read other bytes"
[ "$(sha256sum < $mnt/M/runs)" = "$want_runs" ] || die "the runs file read other bytes"
[ "$($py cached $mnt/M/bound)" = 0 ] || die "the bound file was not bound"
# Unmounted with M/bound still bound: a binding must not hold the mount.
# io_uring puts a ring's files from a worker after the ring is gone: the
# mount may be busy for a moment, never for long.
for i in $(seq 50); do umount $mnt 2>/dev/null && break; sleep 0.2; done
mountpoint -q $mnt && die "the mount stayed busy: a file reference leaked"
echo "io-uring: passed"
