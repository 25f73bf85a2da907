#!/bin/bash
# One tenant cannot make another's mmap(), a freeze, a writer or a
# remount wait (tc_clone_make(), docs/design/mapped-files.md "Who waits for whom").
# Two writable snapshots of a subvolume hold the same file, in one
# sharing scope: the attacker's (a) and the victim's (v). The attacker,
# unprivileged, allowed to write nothing, and in an I/O cgroup of its own
# limited to 100 KB/s on the disk, starts an O_DIRECT read of 3 MiB of its
# copy (btrfs holds the copy's inode lock shared while the read is
# submitted, about 30 s, and counts it in flight), then maps its copy.
# Making a clone would lock the copy's inode: the making gives up and the
# attacker's mapping maps its copy itself, at once. Meanwhile, with the
# read still going: an admin's 1-second freeze, another user's 4 KiB write
# with fsync that comes during the freeze, and a remount read-only and
# back take as long as before the attack (1.1x and 1 s at most); the
# victim, another user, maps its own
# copy of the same extents and gets a clone. When the read ends, a new
# mapping of the attacker's maps the victim's clone (the read's limit is
# lifted after the checks, to end it).
#
# Failed before 2026-12-02: the making waited for the read with the file
# system's write access held (the attacker's mmap() 9.5 s; the freeze
# 9.8 s against 1.2 s before the attack; remount: "mount point is busy").
# Before 2026-11-29 the victim waited too.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
attacker=65534 victim=1000

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/w
mkdir -p $mnt/w/data $mnt/other
make_file $mnt/w/data/file 8 stall
chmod 644 $mnt/w/data/file
chown $victim $mnt/other
for s in a v; do btrfs -q subvolume snapshot $mnt/w $mnt/$s; done
sync
for s in w a v; do echo "default $mnt/$s" > $x/enable; done
# The attacker's extent maps cached (its mapping's proof needs no lock).
cat $mnt/a/data/file > /dev/null
field() { awk -v f="$1" '{for (i = 1; i < NF; i++) if ($i == f) print $(i + 1)}' $x/scopes; }
now() { date +%s.%N; }
# The admin's and the other user's operations, each timed: "<seconds>".
freeze_cycle() { local t=$(now); fsfreeze -f $mnt && sleep 1 && fsfreeze -u $mnt || die "freeze"
	echo "$(now) - $t" | bc; }
write_sync() { local t=$(now)
	setpriv --reuid=$victim --regid=$victim --clear-groups \
		dd if=/dev/urandom of=$mnt/other/w bs=4k count=1 conv=fsync status=none || die "write"
	echo "$(now) - $t" | bc; }
# A freeze, and another user's write that comes while it is on.
freeze_and_write() { freeze_cycle > /tmp/freeze.t & local f=$!
	sleep 0.2; local w=$(write_sync); wait $f || die "freeze"; echo "$(cat /tmp/freeze.t) $w"; }
remount_cycle() { mount -o remount,ro $mnt 2>/tmp/remount.err || { echo "failed: $(cat /tmp/remount.err)"; return; }
	mount -o remount,rw $mnt || die "remount rw"; echo ok; }
# A bound with room for a loaded host's jitter (3 test VMs on 2 cores in
# CI): a freeze the attack held would last the read's 30 s.
within() { echo "$1 <= $2 * 1.1 + 1" | bc; }
read -r f0 w0 < <(freeze_and_write)
r0=$(remount_cycle)
[ "$r0" = ok ] || die "remount before the attack: $r0"

grep -qw io /sys/fs/cgroup/cgroup.subtree_control || echo +io > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/attacker
echo "$(cat /sys/block/$DISK0/dev) rbps=100000" > /sys/fs/cgroup/attacker/io.max
attack() { # the attacker's command line, in its cgroup
	sh -c 'echo $$ > /sys/fs/cgroup/attacker/cgroup.procs &&
		exec setpriv --reuid='$attacker' --regid='$attacker' --clear-groups "$@"' attack "$@"
}
py=$TOTALCOW_TOP/tests/guest/extents/share-extents-mmap-stall.py
attack python3 $py read $mnt/a/data/file 3 > /tmp/read.log 2>&1 &
reader=$!
# Until the read is submitted (python's start takes seconds on a loaded
# x86-64 debug guest), and a moment more.
for i in $(seq 1 300); do grep -q reading /tmp/read.log && break; sleep 0.1; done
grep -q reading /tmp/read.log || die "the attacker's read did not start: $(cat /tmp/read.log)"
sleep 0.5
p0=$(field mmaps_private) s0=$(field mmaps_shared)
attack python3 $py map $mnt/a/data/file > /tmp/attacker.log 2>&1 &
mapper=$!
sleep 1
read -r f1 w1 < <(freeze_and_write)
r1=$(remount_cycle)
wait $mapper || die "the attacker's mapping: $(cat /tmp/attacker.log)"
p1=$(field mmaps_private) s1=$(field mmaps_shared)
setpriv --reuid=$victim --regid=$victim --clear-groups python3 $py map $mnt/v/data/file \
	> /tmp/victim.log 2>&1 || die "the victim's mapping: $(cat /tmp/victim.log)"
s2=$(field mmaps_shared)
running=no
kill -0 $reader 2>/dev/null && ! grep -q "read done" /tmp/read.log && running=yes
echo "stall: attacker mapped in $(cat /tmp/attacker.log); mmaps_private +$((p1 - p0)) mmaps_shared +$((s1 - s0))"
echo "stall: freeze cycle $f1 s (before the attack $f0 s); 4 KiB write and fsync during it $w1 s" \
	"(before $w0 s); remount read-only: $r1"
echo "stall: victim mapped in $(cat /tmp/victim.log); mmaps_shared +$((s2 - s1)); attacker's read still going: $running"
[ $running = yes ] || die "the attacker's read ended before the checks: no stall tried"
[ $((p1 - p0)) = 1 ] && [ $((s1 - s0)) = 0 ] ||
	die "the attacker's mapping, whose making would wait, did not map its copy itself"
[ "$(within "$f1" "$f0")" = 1 ] || die "a freeze waited for the attacker's making"
[ "$(within "$w1" "$w0")" = 1 ] || die "another user's write waited for the attacker's making"
[ "$r1" = ok ] || die "remount read-only during the attack: $r1"
[ $((s2 - s1)) = 1 ] || die "the victim's mapping did not map a clone while the attacker's read went on"
# The rest of the read at full speed.
echo "$(cat /sys/block/$DISK0/dev) rbps=max" > /sys/fs/cgroup/attacker/io.max
wait $reader || die "the attacker's read failed: $(cat /tmp/read.log)"
attack python3 $py map $mnt/a/data/file > /tmp/attacker.log 2>&1 ||
	die "the attacker's second mapping: $(cat /tmp/attacker.log)"
s3=$(field mmaps_shared)
echo "stall: after the read, attacker mapped in $(cat /tmp/attacker.log); mmaps_shared +$((s3 - s2)); scopes: $(cat $x/scopes)"
[ $((s3 - s2)) = 1 ] || die "the attacker's mapping after its read did not map the victim's clone"
umount $mnt || die "umount"
echo "share-extents-mmap-stall: all checks passed"
