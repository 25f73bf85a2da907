#!/bin/bash
# One container's io.max must not stall another's reads.
# A member's read miss read a proof window of up to 1088 template pages in
# the reader's cgroup and then waited on every folio of it, those another
# container's throttled read had locked included: a container that
# throttles itself made every other container wait at its rate, and every
# 4 KiB miss cost up to 4.25 MiB of template I/O.
#  1. Template I/O per 4 KiB miss: a cold 4 KiB read at page 1000 of a
#     member reads no more template pages than the same read of a plain
#     file reads of that file (its readahead); at the file's start, too.
#  2. A throttled neighbour: the attacker (uid 1000, cgroup io.max 2 KiB/s
#     on the disk) reads 16 KiB of its member; one second later the
#     victim (uid 1001, another cgroup) reads 4 KiB 2 MiB into its own
#     member. The victim's read returns, with the template's bytes, while
#     the attacker's read is still throttled (it needs 8 s at that rate;
#     before the fix the victim waited for all of its 4.25 MiB window).
#  3. io_uring: the victim's pages 200-203 are aliases of template pages
#     that left the page cache; the attacker, throttled again, reads its
#     member's pages 200-203, which reads those template pages (8 s). The
#     victim's io_uring buffered read of its page 200 (fio) must return
#     from submission at once (io_uring promises not to block on I/O
#     there), whenever the read completes. Failed before 2026-12-02:
#     io_uring's retry with IOCB_WAITQ ran the policy's miss, which waited
#     in the submitting task for the attacker's template read.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
cg=/sys/fs/cgroup
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 16 neighbour
btrfs property set $mnt/T ro true
btrfs -q subvolume create $mnt/U
make_file $mnt/U/plain 16 plain
for m in A V; do btrfs -q subvolume snapshot $mnt/T $mnt/$m; done
chown -R 1000 $mnt/A && chown -R 1001 $mnt/V
echo "g $mnt/T" > $groups/create && echo "g $mnt/A" > $groups/add &&
	echo "g $mnt/V" > $groups/add || die "group"
sync

pages() { fincore -b -n -o PAGES "$1" | awk '{ print $1 }'; }
# read4k UID PAGE FILE: one 4 KiB read at PAGE, buffered, as UID; prints
# the bytes' sha256.
read4k() {
	setpriv --reuid="$1" --regid="$1" --clear-groups \
		dd if="$3" bs=4096 skip="$2" count=1 status=none | sha256sum | cut -d' ' -f1
}
want_at() { dd if=$mnt/T/f bs=4096 skip="$1" count=1 status=none | sha256sum | cut -d' ' -f1; }
declare -A want
for at in 0 512 1000; do want[$at]=$(want_at $at); done

# 1. Template pages read per 4 KiB miss, against a plain file's readahead.
for at in 1000 0; do
	drop_caches
	read4k 0 $at $mnt/U/plain > /dev/null
	plain=$(pages $mnt/U/plain)
	[ "$(read4k 1001 $at $mnt/V/f)" = "${want[$at]}" ] || die "V read page $at wrong"
	tmpl=$(pages $mnt/T/f)
	echo "neighbour: a 4 KiB miss at page $at read $tmpl template pages ($((tmpl * 4)) KiB); a plain file's read: $plain pages"
	[ "$tmpl" -ge 1 ] || die "the miss read no template page (not shared?)"
	[ "$tmpl" -le "$plain" ] || die "a 4 KiB miss read $tmpl template pages, readahead reads $plain"
done

# 2. The throttled neighbour. No drop_caches: the file system's metadata
# stays in memory (a reader of a shared b-tree block waits for whoever
# reads it, with or without TotalCOW); the attacker first reads a page of
# its own member unthrottled, for its metadata, and only the template's
# data is dropped. Then, throttled to 2 KiB/s,
# it reads 16 KiB at page 100 (template pages 100-103: 8 s at that rate;
# before the fix, 1088 pages from page 64: half an hour), and the victim
# reads page 512, whose template page nobody has read yet.
# A miss's template reads are charged to the group's fleet, the closest
# common ancestor of its readers' I/O cgroups (share-throttled-fleet.sh):
# the limit that holds them back is on the attacker's parent, t (an
# admin's limit on a tenant's subtree), and the group is made anew (a
# fleet of its own) with only readers in t before the attack.
echo +io > $cg/cgroup.subtree_control
mkdir $cg/t $cg/vic
echo +io > $cg/t/cgroup.subtree_control
mkdir $cg/t/att $cg/t/pre
# regroup: the group anew; the attacker's metadata read in t/att, and the
# victim's pages 200-203 aliases of the template's (part 3), read in t/pre.
regroup() {
	echo g > $groups/delete && echo "g $mnt/T" > $groups/create &&
		echo "g $mnt/A" > $groups/add && echo "g $mnt/V" > $groups/add || die "group"
	in_cgroup $cg/t/att setpriv --reuid=1000 --regid=1000 --clear-groups \
		dd if=$mnt/A/f of=/dev/null bs=4096 skip=2000 count=1 status=none || die "A's read"
	in_cgroup $cg/t/pre setpriv --reuid=1001 --regid=1001 --clear-groups \
		dd if=$mnt/V/f of=/dev/null bs=16K skip=50 count=1 status=none || die "V's read"
	# The template's data leaves the page cache, its metadata stays.
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' $mnt/T/f
	[ "$(pages $mnt/T/f)" = 0 ] || die "the template's pages stayed: $(pages $mnt/T/f)"
}
# attack SKIP: the attacker, its fleet throttled to 2 KiB/s, reads 16 KiB
# of its member at 16 KiB block SKIP into /tmp/att, in the background ($att).
attack() {
	echo "$(cat /sys/block/$DISK0/dev) rbps=2048" > $cg/t/io.max || die "io.max"
	sh -c "echo \$\$ > $cg/t/att/cgroup.procs && exec setpriv --reuid=1000 --regid=1000 \
		--clear-groups dd if=$mnt/A/f of=/tmp/att bs=16K skip=$1 count=1 status=none" &
	att=$!
	sleep 1
	kill -0 $att 2>/dev/null || die "the attacker's read was not throttled (finished within a second)"
}
unthrottle() { echo "$(cat /sys/block/$DISK0/dev) rbps=max" > $cg/t/io.max; }
regroup
attack 25
got=$(sh -c "echo \$\$ > $cg/vic/cgroup.procs && exec timeout 60 setpriv --reuid=1001 --regid=1001 \
	--clear-groups dd if=$mnt/V/f bs=4096 skip=512 count=1 status=none" | sha256sum | cut -d' ' -f1)
kill -0 $att 2>/dev/null && still=yes || still=no
[ "$got" = "${want[512]}" ] || die "the victim's read did not finish within 60 s, or read wrong bytes"
echo "neighbour: the victim's 4 KiB read returned while the attacker's throttled read was in flight: $still"
[ $still = yes ] || die "the attacker's read finished first: nothing was tested"
unthrottle
wait $att || die "the attacker's read failed"
cmp /tmp/att <(dd if=$mnt/T/f bs=16K skip=25 count=1 status=none) || die "the attacker read wrong bytes"

# 3. io_uring, against the same attacker reading template pages 200-203
# (the victim's read in part 2 widened the fleet to the root: anew).
regroup
attack 50
sh -c "echo \$\$ > $cg/vic/cgroup.procs && exec timeout 60 setpriv --reuid=1001 --regid=1001 \
	--clear-groups fio --name=uring --filename=$mnt/V/f --ioengine=io_uring --rw=read \
	--bs=4k --offset=$((200 * 4096)) --size=4k --iodepth=1 --invalidate=0 \
	--output-format=json" > /tmp/fio.json 2>/tmp/fio.err || die "fio: $(cat /tmp/fio.err)"
read -r slat clat < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print(r["slat_ns"]["max"] / 1e9, r["clat_ns"]["max"] / 1e9)' /tmp/fio.json) || die "fio's output: $(cat /tmp/fio.json)"
echo "neighbour: io_uring read of an alias behind the throttled read: submission $slat s, completion $clat s"
[ "$(echo "$slat < 0.5" | bc)" = 1 ] || die "io_uring's submission waited for another cgroup's read ($slat s)"
unthrottle
wait $att || die "the attacker's second read failed"
cmp /tmp/att <(dd if=$mnt/T/f bs=16K skip=50 count=1 status=none) || die "the attacker read wrong bytes"
[ "$(read4k 1001 200 $mnt/V/f)" = "$(want_at 200)" ] || die "V's page 200 reads wrong"
rmdir $cg/t/att $cg/t/pre $cg/t $cg/vic
echo g > $groups/delete
umount $mnt
echo "neighbour: passed"
