#!/bin/bash
# A template written through a descriptor opened before it was made
# read-only. btrfs checks the read-only flag at open
# only, so the template's unprivileged owner can keep a descriptor from
# before `btrfs property set ro true` and write through it after the
# group exists; the extent proof then licensed the template's dirty pages
# (new bytes, old extents: still the members') for every member. Now:
# groups/create refuses a template with a file open for writing (EBUSY,
# with the inode in the kernel log) and one with data not written back;
# once it is closed and synced a group is made, and the members read
# their own bytes, never the ones the owner wrote. Runs the owner's side
# unprivileged.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
owner=4242
as_owner=(setpriv --reuid=$owner --regid=$owner --clear-groups)
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/data 4 data
chown -R $owner $mnt/T
sync
want=$(sha256sum < $mnt/T/data | cut -d' ' -f1)

# The owner opens its file for writing, then makes the subvolume read-only
# (its right as the owner) and waits with the descriptor open.
mkdir -m 755 /tmp/w && mkfifo /tmp/w/go /tmp/w/ready
chmod 666 /tmp/w/go /tmp/w/ready
"${as_owner[@]}" python3 - $mnt/T/data $mnt/T <<'PY' &
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
d = os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)
fcntl.ioctl(d, 0x4008941a, struct.pack("=Q", 2))	# SUBVOL_SETFLAGS RDONLY
open("/tmp/w/ready", "w").write("ro\n")
open("/tmp/w/go").read()
os.pwrite(fd, b"\xee" * 8192, 4096)	# two pages, not synced
os.close(fd)
open("/tmp/w/ready", "w").write("written\n")
PY
owner_pid=$!
[ "$(cat /tmp/w/ready)" = ro ] || die "the owner did not make its template read-only"
[ "$(btrfs property get $mnt/T ro)" = ro=true ] || die "T is not read-only"
btrfs -q subvolume snapshot $mnt/T $mnt/m1
btrfs -q subvolume snapshot $mnt/T $mnt/m2

dmesg -C
if echo "g $mnt/T" > $groups/create 2>/tmp/err; then
	# What the old code let happen: the owner writes, members read it.
	echo "g $mnt/m1" > $groups/add || die "groups/add"
	echo go > /tmp/w/go
	[ "$(cat /tmp/w/ready)" = written ] || die "the owner could not write"
	wait $owner_pid
	got=$(sha256sum < $mnt/m1/data | cut -d' ' -f1)
	[ "$got" = "$want" ] || die "a group was made on a template with a file open for writing, and m1 now reads the owner's bytes"
	die "a group was made on a template with a file open for writing"
fi
grep -q "Device or resource busy" /tmp/err || die "unclear refusal: $(cat /tmp/err)"
dmesg | grep -q "totalcow: groups/create: template $mnt/T has a file open for writing" ||
	die "no reason in the kernel log: $(dmesg | tail -3)"
[ ! -e $groups/g ] || die "a refused create left a group"
echo "writer: groups/create refused a template open for writing"

# The owner writes through its old descriptor and closes it: dirty pages.
echo go > /tmp/w/go
[ "$(cat /tmp/w/ready)" = written ] || die "the owner could not write"
wait $owner_pid || die "the owner's writer failed"
if echo "g $mnt/T" > $groups/create 2>/dev/null; then
	grep -q "Dirty: *0 kB" /proc/meminfo && echo "writer: (the flusher had written it back)" ||
		die "a group was made on a template with data not written back"
	echo g > $groups/delete
else
	echo "writer: groups/create refused a template with data not written back"
fi

sync
echo "g $mnt/T" > $groups/create || die "no group on a clean template"
echo "g $mnt/m1" > $groups/add && echo "g $mnt/m2" > $groups/add || die "groups/add"
drop_caches
cat $mnt/T/data > /dev/null
for m in m1 m2; do
	got=$(sha256sum < $mnt/$m/data | cut -d' ' -f1)
	[ "$got" = "$want" ] || die "$m reads bytes it never had (the owner's write)"
done
# And the other way round: the template's cache first, then the members.
drop_caches
for m in m1 m2; do
	got=$(sha256sum < $mnt/$m/data | cut -d' ' -f1)
	[ "$got" = "$want" ] || die "$m reads bytes it never had (cold)"
done
python3 - $mnt/T/data <<'PY' || die "the template does not hold the owner's write"
import sys
b = open(sys.argv[1], "rb").read()
assert b[4096:12288] == b"\xee" * 8192
PY
echo "writer: members read their own bytes, the template the owner's"
echo g > $groups/delete
umount $mnt
echo "writer: passed"
