#!/bin/bash
# A reader that throttles itself must not stall another file system's
# unmount, or an admin's change to another scope (review of 2026-11-28).
# A read miss in a sharing scope holds the scope while it waits for the
# canonical reads it started, which go at the rate of its own I/O cgroup.
# It held one SRCU shared by every file system and scope, and freeing a
# scope (the unmount of any file system with scopes, a disable that
# empties a scope) waited for that SRCU's grace period under one global
# mutex, which every unmount of a btrfs took too: a tenant with io.max
# delegated to it could keep other file systems' unmounts in D state, and
# every extents/ write waiting, for as long as it liked.
#
# Three file systems: A (the attacker's, scope a), B (scope b), C (no
# scope). The attacker (uid 1000, cgroup t/att, io.max 4 KiB/s on t) reads
# 1 MiB of a file of A that nobody read yet: its canonical reads take
# minutes at that rate. Meanwhile, each of these must end while the
# attacker's read is still throttled:
#   1. umount of B (the close hook frees B's scope);
#   2. extents/disable of B's subvolume, after a mount and an enable,
#      which empties scope b;
#   3. umount of C, while step 2's scope is freed.
# Then the limit goes, the attacker's read ends with the right bytes, and
# A unmounts.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
cg=/sys/fs/cgroup
sum() { sha256sum < "$1" | cut -d' ' -f1; }

for d in A B C; do mkdir -p /mnt/$d; done
btrfs_mount /dev/$DISK0 /mnt/A
btrfs_mount /dev/$DISK1 /mnt/B
btrfs_mount /dev/$DISK2 /mnt/C
for d in A B; do
	btrfs -q subvolume create /mnt/$d/S
	make_file /mnt/$d/S/f 4 "holder-$d"
	cp --reflink=always /mnt/$d/S/f /mnt/$d/S/g
done
chown -R 1000 /mnt/A/S
make_file /mnt/C/f 1 holder-C
sync
echo "a /mnt/A/S" > $x/enable && echo "b /mnt/B/S" > $x/enable || die "extents/enable"
want=$(dd if=/mnt/A/S/f bs=1M skip=2 count=1 status=none | sha256sum | cut -d' ' -f1)
drop_caches
# A miss's canonical reads are charged to the scope's fleet, the closest
# common ancestor of its readers' I/O cgroups (share-throttled-fleet.sh):
# the limit that holds them back is on the attacker's parent, t, an
# admin's limit on a tenant's subtree, and t/att reads first.
echo +io > $cg/cgroup.subtree_control
mkdir $cg/t
echo +io > $cg/t/cgroup.subtree_control
mkdir $cg/t/att
# The attacker's metadata, unthrottled: its first page (the extent and
# checksum leaves of a 4 MiB file). Its data at 2 MiB stays unread.
in_cgroup $cg/t/att setpriv --reuid=1000 --regid=1000 --clear-groups dd if=/mnt/A/S/f \
	bs=4096 count=1 status=none of=/dev/null || die "the attacker's first read"
echo "$(cat /sys/block/$DISK0/dev) rbps=4096" > $cg/t/io.max || die "io.max"
r0=$(scope_field a reads)
sh -c "echo \$\$ > $cg/t/att/cgroup.procs && exec setpriv --reuid=1000 --regid=1000 --clear-groups \
	dd if=/mnt/A/S/f of=/tmp/att bs=1M skip=2 count=1 status=none" &
att=$!
sleep 2
kill -0 $att 2>/dev/null || die "the attacker's read was not throttled (finished within 2 s)"
r1=$(scope_field a reads)
[ "$r1" -gt "$r0" ] || die "the attacker's read started no canonical read: $(cat $x/scopes)"
echo "holder: the attacker's throttled read is in flight ($((r1 - r0)) canonical reads started)"

# step LABEL CMD...: CMD must end within 30 s, while the attacker still
# reads. (A CMD stuck in the kernel cannot be killed: it is left.)
step() {
	local label=$1 pid i
	shift
	"$@" &
	pid=$!
	for i in $(seq 300); do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		echo "holder: $label: still waiting after 30 s; the attacker's read in flight:" \
			"$(kill -0 $att 2>/dev/null && echo yes || echo no)"
		die "$label waited for another file system's throttled reader"
	fi
	wait $pid || die "$label failed"
	kill -0 $att 2>/dev/null || die "the attacker's read ended before $label: nothing was tested"
	echo "holder: $label ended within $((i / 10)).$((i % 10)) s, the attacker's read in flight"
}

step "umount of B (scope b)" umount /mnt/B
mount /dev/$DISK1 /mnt/B || die "mount B again"
echo "b /mnt/B/S" > $x/enable || die "extents/enable B again"
cat /mnt/B/S/g > /dev/null
disable_b() { echo "b /mnt/B/S" > $x/disable; }
step "extents/disable of B's subvolume (scope b emptied)" disable_b
step "umount of C (no scope)" umount /mnt/C
grep -q "^[^ ]* b " $x/scopes && die "scope b is still listed: $(cat $x/scopes)"

echo "$(cat /sys/block/$DISK0/dev) rbps=max" > $cg/t/io.max
wait $att || die "the attacker's read failed"
[ "$(sum /tmp/att)" = "$want" ] || die "the attacker read wrong bytes"
rmdir $cg/t/att $cg/t
umount /mnt/B
echo "a /mnt/A/S" > $x/disable || die "extents/disable A"
umount /mnt/A
echo "holder: passed"
