#!/bin/bash
# One tenant cannot make another's mmap() wait (tc_clone_build(),
# docs/design.md "Mapped pages of shared extents"). Two writable
# snapshots of a subvolume hold the same file, in one sharing scope: the
# attacker's (a) and the victim's (v). The attacker, unprivileged and in
# an I/O cgroup of its own limited to 100 KB/s on the disk, starts an
# O_DIRECT read of 1 MiB of its copy (btrfs holds the copy's inode lock
# shared until the read is done, about 10 s), then maps its copy: making
# the clone (btrfs's clone locks the copy's inode) waits for the read.
# The victim, another user in no such cgroup, then maps its own copy of
# the same extents. It must map a clone (its own, made meanwhile) while
# the attacker's read is still going; when the read ends the attacker's
# mapping maps the victim's clone too. Before 2026-11-29 the attacker's
# making was a placeholder the victim waited for, 2 s, and then the
# victim mapped privately.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
attacker=65534 victim=1000

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/w
mkdir -p $mnt/w/data
make_file $mnt/w/data/file 8 stall
chmod 644 $mnt/w/data/file
for s in a v; do btrfs -q subvolume snapshot $mnt/w $mnt/$s; done
sync
for s in w a v; do echo "default $mnt/$s" > $x/enable; done
# The attacker's extent maps cached (its mapping's proof needs no lock).
cat $mnt/a/data/file > /dev/null

grep -qw io /sys/fs/cgroup/cgroup.subtree_control || echo +io > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/attacker
echo "$(cat /sys/block/$DISK0/dev) rbps=100000" > /sys/fs/cgroup/attacker/io.max
attack() { # the attacker's command line, in its cgroup
	sh -c 'echo $$ > /sys/fs/cgroup/attacker/cgroup.procs &&
		exec setpriv --reuid='$attacker' --regid='$attacker' --clear-groups "$@"' attack "$@"
}
py=$TOTALCOW_TOP/tests/guest/share-extents-mmap-stall.py
attack python3 $py read $mnt/a/data/file > /tmp/read.log 2>&1 &
reader=$!
sleep 1
attack python3 $py map $mnt/a/data/file > /tmp/attacker.log 2>&1 &
mapper=$!
sleep 1
s0=$(awk '{for (i = 1; i < NF; i++) if ($i == "mmaps_shared") print $(i + 1)}' $x/scopes)
setpriv --reuid=$victim --regid=$victim --clear-groups python3 $py map $mnt/v/data/file \
	> /tmp/victim.log 2>&1 || die "the victim's mapping: $(cat /tmp/victim.log)"
s1=$(awk '{for (i = 1; i < NF; i++) if ($i == "mmaps_shared") print $(i + 1)}' $x/scopes)
running=no
kill -0 $reader 2>/dev/null && ! grep -q "read done" /tmp/read.log && running=yes
echo "stall: victim mapped in $(cat /tmp/victim.log); mmaps_shared +$((s1 - s0));" \
	"attacker's read still going: $running"
[ $running = yes ] || die "the attacker's read ended before the victim mapped: no stall tried"
[ $((s1 - s0)) = 1 ] || die "the victim's mapping did not map a clone while the attacker's making waited"
wait $reader || die "the attacker's read failed: $(cat /tmp/read.log)"
wait $mapper || die "the attacker's mapping failed: $(cat /tmp/attacker.log)"
s2=$(awk '{for (i = 1; i < NF; i++) if ($i == "mmaps_shared") print $(i + 1)}' $x/scopes)
echo "stall: attacker mapped in $(cat /tmp/attacker.log); mmaps_shared +$((s2 - s1)); scopes: $(cat $x/scopes)"
[ $((s2 - s1)) = 1 ] || die "the attacker's mapping did not map the victim's clone"
umount $mnt || die "umount"
echo "share-extents-mmap-stall: all checks passed"
