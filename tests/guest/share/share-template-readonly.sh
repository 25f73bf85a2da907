#!/bin/bash
# A group's template subvolume stays read-only and cannot be deleted while
# the group exists: `btrfs property set ro false`, the
# SUBVOL_SETFLAGS ioctl by the template's unprivileged owner, and
# `btrfs subvolume delete` all fail with EPERM, and nothing changes. A
# btrfs send of the template meanwhile (btrfs counts the same hold) leaves
# it held; two groups on one template hold it until the last is deleted;
# after groups/delete it can be made writable again. A group cannot be
# created on a writable template.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
owner=4242
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
make_file $mnt/template/data 4 data
chown $owner $mnt/template
btrfs property set $mnt/template ro true
btrfs -q subvolume snapshot $mnt/template $mnt/m1
sync
want=$(sha256sum < $mnt/template/data)

ro_is() { # WANT (true|false)
	[ "$(btrfs property get $mnt/template ro)" = "ro=$1" ] ||
		die "template ro is $(btrfs property get $mnt/template ro), want $1"
}
# setflags_as UID FLAGS: BTRFS_IOC_SUBVOL_SETFLAGS on the template as UID
# (FLAGS 2: BTRFS_SUBVOL_RDONLY, 0: writable).
setflags_as() {
	setpriv --reuid="$1" --regid="$1" --clear-groups python3 - $mnt/template "$2" <<'PY'
import errno, fcntl, os, struct, sys
BTRFS_IOC_SUBVOL_SETFLAGS = 0x4008941a
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
try:
    fcntl.ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, struct.pack("=Q", int(sys.argv[2])))
except OSError as e:
    print(errno.errorcode[e.errno])
    sys.exit(1)
print("OK")
PY
}
expect_held() { # WHEN
	if btrfs property set $mnt/template ro false 2>/tmp/err; then
		die "$1: the template was made writable"
	fi
	grep -q "Operation not permitted" /tmp/err || die "$1: unclear refusal: $(cat /tmp/err)"
	ro_is true
	[ "$(setflags_as $owner 0)" = EPERM ] || die "$1: its owner's SETFLAGS did not get EPERM"
	ro_is true
	if btrfs -q subvolume delete $mnt/template 2>/tmp/err; then
		die "$1: the template was deleted"
	fi
	[ -d $mnt/template ] && [ "$(sha256sum < $mnt/template/data)" = "$want" ] ||
		die "$1: the template changed"
}

# Unprivileged owners may flip the flag without a group: the check is real.
[ "$(setflags_as $owner 0)" = OK ] && ro_is false || die "the owner cannot clear ro on a plain subvolume"
if echo "g $mnt/template" > $groups/create 2>/dev/null; then
	die "a group was created on a writable template"
fi
r=$(setflags_as $owner 2 2>&1) || true; [ "$r" = OK ] && ro_is true || die "the owner cannot set ro: $r"

echo "g $mnt/template" > $groups/create && echo "g $mnt/m1" > $groups/add || die "group"
cmp -s $mnt/m1/data $mnt/template/data || die "m1 read wrong"
expect_held "with a group"
btrfs send -q -f /tmp/template.send $mnt/template || die "btrfs send of the template"
expect_held "after a send"
echo "g2 $mnt/template" > $groups/create || die "a second group on the template"
echo g > $groups/delete || die "groups/delete g"
expect_held "with the second group left"
echo "readonly: held by the group, through a send and a second group"

echo g2 > $groups/delete || die "groups/delete g2"
btrfs property set $mnt/template ro false || die "the template stays read-only after the groups"
ro_is false
echo more >> $mnt/template/data || die "the writable template cannot be written"
btrfs property set $mnt/template ro true
btrfs -q subvolume delete $mnt/template || die "the template cannot be deleted after the groups"
[ "$(sha256sum < $mnt/m1/data)" = "$want" ] || die "m1 changed"
echo "readonly: writable and deletable once the groups are gone"
umount $mnt
