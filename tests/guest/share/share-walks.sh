#!/bin/bash
# Walks over a group's files and pages are bounded: a group of
# MEMBERS members over a sparse template file of PAGES pages, FULL of them
# read whole (a member mapping of PAGES alias entries each), the others a
# little; then, while readers keep reading, a member that read the whole
# file is removed and the group is deleted. Clearing a member's aliases,
# unbinding and the stats read walk in batches (no interrupts-off or
# spinlocked section proportional to the file or the fleet); the runner
# fails on any splat, soft lockups and hung tasks included (thresholds
# shortened below). Every byte read is checked against the template.
# Arguments: PAGES MEMBERS FULL.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
pages=${1:-1048576} members=${2:-64} full=${3:-2}
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
truncate -s $((pages * 4096)) $mnt/template/big
make_file /tmp/chunk 1 walks
for off in 0 $((pages / 2)) $((pages - 256)); do
	dd if=/tmp/chunk of=$mnt/template/big bs=4k seek=$off conv=notrunc status=none
done
btrfs property set $mnt/template ro true
for i in $(seq 1 "$members"); do btrfs -q subvolume snapshot $mnt/template $mnt/m$i; done
sync
echo "g $mnt/template" > $groups/create || die "group create"
for i in $(seq 1 "$members"); do echo "g $mnt/m$i" > $groups/add || die "groups/add m$i"; done
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
want=$(sha256sum < $mnt/template/big | cut -d' ' -f1)

# Detectors armed with short thresholds (the debug kernel has both) from
# here on, for the reads, the stats read, the removal and the delete: a
# CPU that does not schedule for 6 s, a task blocked for 20 s, is a splat.
# Not during the setup, whose bulk I/O can stall UML's only CPU for
# seconds on a busy host.
if [ -e /proc/sys/kernel/watchdog_thresh ] && [ -e /proc/sys/kernel/hung_task_timeout_secs ]; then
	echo 3 > /proc/sys/kernel/watchdog_thresh
	echo 20 > /proc/sys/kernel/hung_task_timeout_secs
	echo 5 > /proc/sys/kernel/hung_task_check_interval_secs
	echo "walks: detectors armed: soft lockup after $((2 * $(cat /proc/sys/kernel/watchdog_thresh))) s, hung task after $(cat /proc/sys/kernel/hung_task_timeout_secs) s"
fi
# FULL members read the whole file; the others their first MiB.
for i in $(seq 1 "$full"); do
	[ "$(sha256sum < $mnt/m$i/big | cut -d' ' -f1)" = "$want" ] || die "m$i read wrong"
done
for i in $(seq $((full + 1)) "$members"); do
	head -c 1M $mnt/m$i/big | cmp -s - <(head -c 1M $mnt/template/big) || die "m$i read wrong"
done
t0=$(date +%s%N)
shared=$(stat_of pages_shared)
t1=$(date +%s%N)
echo "walks: $members members, $pages-page template, $full read whole: pages_shared $shared (stats read in $(( (t1 - t0) / 1000000 )) ms)"
[ "$shared" -ge "$full" ] || die "nothing shared"

# Readers keep reading while m1 leaves and the group goes.
for i in $(seq 2 5); do
	( while [ ! -e /tmp/stop ]; do
		head -c 8M $mnt/m$i/big | cmp -s - <(head -c 8M $mnt/template/big) || { echo "m$i read wrong" > /tmp/bad; break; }
	  done ) &
done
sleep 1
t0=$(date +%s%N)
echo "g $mnt/m1" > $groups/remove || die "groups/remove m1"
t1=$(date +%s%N)
[ "$(sha256sum < $mnt/m1/big | cut -d' ' -f1)" = "$want" ] || die "m1 reads wrong after leaving"
t2=$(date +%s%N)
echo g > $groups/delete || die "groups/delete"
t3=$(date +%s%N)
touch /tmp/stop
wait
[ ! -e /tmp/bad ] || die "$(cat /tmp/bad)"
echo "walks: remove of a member with $pages aliases $(( (t1 - t0) / 1000000 )) ms, delete $(( (t3 - t2) / 1000000 )) ms, readers right throughout"
[ "$(sha256sum < $mnt/m2/big | cut -d' ' -f1)" = "$want" ] || die "m2 reads wrong after the delete"
umount $mnt
echo "walks: bounded, no splat"
