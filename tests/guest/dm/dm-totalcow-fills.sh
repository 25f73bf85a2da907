#!/bin/bash
# dm-totalcow fills read into the target's own pages, and readers of a
# block being filled wait for it (tests/guest/dm/dm-totalcow-fills.py):
#   1. an unprivileged O_DIRECT reader that rewrites its buffer during the
#      read cannot poison the cache: nodatacow and checksummed btrfs files
#      of a template, read through a snapshot afterwards;
#   2. aliased iovecs on the raw device (one buffer twice) cache nothing
#      wrong;
#   3. N concurrent readers of one cold range read it from the disk once
#      (counted from /sys/block/$DISK0/stat), readers in different I/O
#      cgroups too, and with writes interleaved every byte matches the
#      writer's model.
#
#   dm-totalcow-fills.sh [TRIES] [SECONDS]
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow dm-delay btrfs

tries=${1:-300}
seconds=${2:-20}
helper=$TOTALCOW_TOP/tests/guest/dm/dm-totalcow-fills.py

# 1. Scribbling O_DIRECT reader, btrfs on totalcow, admit first.
tc_btrfs tc /dev/$DISK0 /mnt/tc
btrfs subvolume create /mnt/tc/tpl >/dev/null
touch /mnt/tc/tpl/nocow
chattr +C /mnt/tc/tpl/nocow
make_file /tmp/data 1 fills-data
cat /tmp/data > /mnt/tc/tpl/nocow
cat /tmp/data > /mnt/tc/tpl/csum
chmod 644 /mnt/tc/tpl/nocow /mnt/tc/tpl/csum
sync
btrfs property set /mnt/tc/tpl ro true
btrfs subvolume snapshot -r /mnt/tc/tpl /mnt/tc/member >/dev/null
tc_register tc tpl /mnt/tc/tpl/nocow /mnt/tc/tpl/csum
for f in nocow csum; do
	python3 "$helper" scribble /mnt/tc/member/$f /mnt/tc/tpl/$f "$tries" ||
		die "an O_DIRECT reader's buffer reached the cache ($f)"
done
[ "$(tc_stat tc fills)" -gt 0 ] || die "the scribbling reads never filled the cache"
cmp /tmp/data /mnt/tc/member/nocow || die "member file wrong at the end"
umount /mnt/tc
dmsetup remove tc

# 2. Aliased iovecs on the raw device.
make_file /tmp/raw 4 fills-raw
dd if=/tmp/raw of=/dev/$DISK0 bs=1M oflag=direct status=none
tc_create tc /dev/$DISK0 cache_size 64
dmsetup message tc 0 whitelist_add raw 0 $((4 << 11))
python3 "$helper" aliased /dev/mapper/tc || die "aliased iovecs poisoned the cache"

# Concurrent readers and a writer on the plain disk.
python3 "$helper" concurrent /dev/mapper/tc 256 4 "$seconds" ||
	die "concurrent readers and writes: wrong data"
dmsetup remove tc

# 3. Then with reads and writes delayed below the target (10 ms each, like
# a disk's seek), so that the readers' requests for one block overlap.
dd if=/tmp/raw of=/dev/$DISK0 bs=1M oflag=direct status=none
sectors=$(blockdev --getsz /dev/$DISK0)
dmsetup create slow --table "0 $sectors delay /dev/$DISK0 0 10"
tc_create tc /dev/mapper/slow cache_size 64
dmsetup message tc 0 whitelist_add raw 0 $((4 << 11))

# 3a. N concurrent readers of one cold 4 MiB range read it from disk once.
readers=8
for round in 1 2 3; do
	dmsetup message tc 0 drop_cache
	before=$(sectors_read "$DISK0")
	for i in $(seq "$readers"); do
		dd if=/dev/mapper/tc of=/tmp/got.$i bs=128K count=32 iflag=direct status=none &
	done
	wait
	read_sectors=$(($(sectors_read "$DISK0") - before))
	for i in $(seq "$readers"); do
		cmp /tmp/raw /tmp/got.$i || die "concurrent reader $i got wrong bytes"
	done
	echo "fills: round $round: $readers concurrent readers of 4 MiB read $read_sectors sectors from the disk"
	# On failure the counters say which way a block was read twice:
	# misses above fills (a reader went to the origin itself), requeued
	# (a fill did not publish) or evictions.
	[ "$read_sectors" -le $((4 * 2048 * 101 / 100)) ] || {
		dmsetup status tc
		die "$readers concurrent readers read the range $(awk -v s="$read_sectors" 'BEGIN { printf "%.2f", s / 8192 }')x from the disk"
	}
done
dmsetup status tc
[ "$(tc_stat tc waited)" -gt 0 ] || die "no reader ever waited for a fill"

# 3c. Readers in two I/O cgroups share fills: each fill is charged to the
# cgroup of the target's fleet (here the root, the parent of the first
# reader's), which both may wait for (tests/guest/dm/dm-totalcow-cgroups.sh
# has the limits). One reader per cgroup, both on the same cold range at
# once: the range is read from the disk once.
echo +io > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/fills-a /sys/fs/cgroup/fills-b
for round in 1 2 3; do
	dmsetup message tc 0 drop_cache
	before=$(sectors_read "$DISK0")
	for g in a b; do
		sh -c "echo \$\$ > /sys/fs/cgroup/fills-$g/cgroup.procs &&
			exec dd if=/dev/mapper/tc of=/tmp/got.$g bs=128K count=32 iflag=direct status=none" &
	done
	wait
	read_sectors=$(($(sectors_read "$DISK0") - before))
	for g in a b; do cmp /tmp/raw /tmp/got.$g || die "cgroup $g reader got wrong bytes"; done
	echo "fills: round $round: readers in two cgroups read $read_sectors sectors from the disk"
	[ "$read_sectors" -le $((4 * 2048 * 101 / 100)) ] ||
		die "readers in two cgroups read the range $(awk -v s="$read_sectors" 'BEGIN { printf "%.2f", s / 8192 }')x from the disk"
done
rmdir /sys/fs/cgroup/fills-a /sys/fs/cgroup/fills-b

# 3b. The same with writes interleaved: fills, waits and writes overlap.
python3 "$helper" concurrent /dev/mapper/tc 256 4 "$seconds" ||
	die "concurrent readers and delayed writes: wrong data"
dmsetup status tc
echo "fills: $(tc_stat tc waited) blocks waited, $(tc_stat tc requeued) requeued"
dmsetup remove tc
dmsetup remove slow
echo "dm-totalcow fills: every byte right"
