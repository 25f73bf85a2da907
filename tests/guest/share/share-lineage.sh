#!/bin/bash
# The kernel checks lineage: groups/add, written directly through
# sysfs, takes only the root of a snapshot of the group's template (its
# parent UUID is the template's UUID, or the received UUID of a template
# that came from btrfs receive). The origin subvolume the template was
# snapshotted from, a snapshot of a member, an unrelated subvolume and a
# directory inside a snapshot get EXDEV and change nothing; totalcowctl
# agrees with the kernel.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
mkdir -p $mnt && mount /dev/$DISK0 $mnt || die "mount"

btrfs -q subvolume create $mnt/S
mkdir $mnt/S/data
make_file $mnt/S/data/f 1 lineage
btrfs -q subvolume snapshot -r $mnt/S $mnt/T
btrfs -q subvolume snapshot $mnt/T $mnt/M
btrfs -q subvolume snapshot $mnt/T $mnt/M3
btrfs -q subvolume snapshot $mnt/M $mnt/M2
btrfs -q subvolume create $mnt/U
mkdir -p $mnt/recv
btrfs -q send $mnt/T 2>/dev/null | btrfs -q receive $mnt/recv || die "send | receive"
btrfs -q subvolume snapshot $mnt/recv/T $mnt/RM
sync

# errno_of FILE TEXT: write TEXT to FILE in one write(2), print the errno
# name (OK if it was taken).
errno_of() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, sys.argv[2].encode())
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
PY
}
want() { # WHAT FILE TEXT ERRNO
	local got
	got=$(errno_of "$2" "$3")
	[ "$got" = "$4" ] || die "$1: $got, want $4"
	echo "lineage: $1: $got"
}

want "a template that is not a subvolume" $groups/create "g2 $mnt/T/data" EINVAL
want "group create" $groups/create "g $mnt/T" OK
want "the origin S" $groups/add "g $mnt/S" EXDEV
want "a snapshot of a member" $groups/add "g $mnt/M2" EXDEV
want "an unrelated subvolume" $groups/add "g $mnt/U" EXDEV
want "a directory inside a snapshot" $groups/add "g $mnt/M/data" EXDEV
want "a snapshot of a copy received from T" $groups/add "g $mnt/RM" EXDEV
[ -z "$(cat $groups/g/members)" ] || die "a refused add left members: $(cat $groups/g/members)"
want "a snapshot of the template" $groups/add "g $mnt/M" OK
[ "$(cat $groups/g/members)" = "$mnt/M" ] || die "members: $(cat $groups/g/members)"

# A received template: its own snapshots, and snapshots of the subvolume
# it was sent from (parent UUID = its received UUID).
want "received template" $groups/create "r $mnt/recv/T" OK
want "a snapshot of the received template" $groups/add "r $mnt/RM" OK
want "the origin S, to the received template" $groups/add "r $mnt/S" EXDEV

# totalcowctl says the same as the kernel.
rc=0; ctl group add g $mnt/S 2>/tmp/err || rc=$?
[ $rc = 1 ] && grep -q "not a snapshot of the template" /tmp/err || die "totalcowctl S: $rc $(cat /tmp/err)"
rc=0; ctl group add g $mnt/M2 2>/tmp/err || rc=$?
[ $rc = 1 ] && grep -q "not a snapshot of the template" /tmp/err || die "totalcowctl M2: $rc $(cat /tmp/err)"
ctl group add r $mnt/M3 || die "totalcowctl refused a snapshot of the sent subvolume"
[ "$(sort $groups/r/members | tr '\n' ' ')" = "$mnt/M3 $mnt/RM " ] || die "r: $(cat $groups/r/members)"

# The members read their own data; the origin reads its own after a write.
want_sum=$(sha256sum < $mnt/T/data/f)
echo changed >> $mnt/S/data/f
drop_caches
for d in M M3 RM; do
	[ "$(sha256sum < $mnt/$d/data/f)" = "$want_sum" ] || die "$d read wrong"
done
grep -q changed $mnt/S/data/f || die "S read wrong"
echo g > $groups/delete
echo r > $groups/delete
umount $mnt
echo "share-lineage: all checks passed"
