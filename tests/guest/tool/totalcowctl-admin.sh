#!/bin/bash
# totalcowctl as an admin meets it: refresh of a template on a
# multi-device (RAID1) file system, a refresh whose registration fails
# (the template keeps its old ranges), status without the sysfs layer (the
# DKMS deployment) and as non-root, a device btrfs names that is not there,
# and exit codes as documented.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
tpl=/sys/kernel/mm/totalcow/templates
mnt=/mnt/btrfs
mkdir -p $mnt
# expect CODE ARGS...: totalcowctl ARGS exits CODE, with a message and no
# Python traceback.
expect() {
	local want=$1 rc=0; shift
	ctl "$@" > /tmp/out 2> /tmp/err || rc=$?
	[ "$rc" = "$want" ] || die "totalcowctl $*: exit $rc, want $want: $(cat /tmp/err)"
	! grep -q Traceback /tmp/err || die "totalcowctl $*: traceback: $(cat /tmp/err)"
	[ "$want" = 0 ] || [ -s /tmp/err ] || die "totalcowctl $*: exit $rc without a message"
}
extents() { cat "$tpl/$1/extents"; }

# 1. RAID1 over the totalcow device and a plain disk: add needs --device;
# refresh uses the device recorded at add.
tc_create tc /dev/$DISK0
mkfs.btrfs -q -f -K -d raid1 -m raid1 /dev/mapper/tc /dev/$DISK1 >/dev/null 2>&1
btrfs device scan /dev/mapper/tc /dev/$DISK1 >/dev/null
mount /dev/mapper/tc $mnt
mkdir -p $mnt/t $mnt/empty
make_file $mnt/t/a 8 a
make_file $mnt/t/b 3 b
: > $mnt/empty/nothing
sync
expect 4 template add base $mnt/t -q
grep -q "multi-device" /tmp/err || die "unclear refusal: $(cat /tmp/err)"
expect 0 template add base $mnt/t -q --device /dev/mapper/tc
extents base > /tmp/before
[ -s /tmp/before ] || die "nothing registered"
expect 0 template refresh base -q
extents base | cmp -s - /tmp/before || die "refresh of unchanged files changed the ranges"
# A file rewritten (new extents): refresh follows it, nothing is left
# staged, and the new ranges are exactly what an add would register.
make_file $mnt/t/b 3 b2
sync
expect 0 template refresh base -q
ctl template add x $mnt/t --dry-run -q --device /dev/mapper/tc |
	awk '{ printf "%20d %20d\n", $1, $2 }' > /tmp/want
extents base | cmp -s - /tmp/want || die "refresh did not register the current extents"
[ ! -e "$tpl/base:refresh" ] || die "refresh left its staging template"
echo "raid1: refresh on the recorded device: $(wc -l < /tmp/want) extents"
# Registering a tree writes back its one file system (syncfs), not every
# file system on the machine (sync).
strace -f -qq -e trace=sync,syncfs -o /tmp/strace.out "$TOTALCOW_TOP/tools/totalcowctl" \
	template add x $mnt/t --dry-run -q --device /dev/mapper/tc >/dev/null ||
	die "template add under strace"
grep -q "syncfs(" /tmp/strace.out || die "no syncfs: $(cat /tmp/strace.out)"
grep -Eq "(^|[[:space:]])sync\(" /tmp/strace.out && die "a sync of every file system: $(cat /tmp/strace.out)"
echo "syncfs: the template's file system only"

# 2. A refresh whose registration fails keeps the old ranges. The kernel's
# add_extents is replaced by /dev/full (every write fails with ENOSPC, as
# the kernel's does past its extent limit) in a copy of the sysfs
# directory whose other entries are the real ones.
fake=/tmp/fake-sysfs
mkdir -p $fake/templates
for e in "$tpl"/*; do ln -s "$e" "$fake/templates/$(basename "$e")"; done
ln -sfn /dev/full $fake/templates/add_extents
make_file $mnt/t/b 3 b3
sync
extents base > /tmp/before
rc=0; TOTALCOW_SYSFS=$fake ctl template refresh base -q 2> /tmp/err || rc=$?
[ "$rc" = 1 ] || die "failed refresh: exit $rc, want 1: $(cat /tmp/err)"
grep -q "No space left" /tmp/err || die "failed refresh: unclear: $(cat /tmp/err)"
[ -d "$tpl/base" ] || die "a failed refresh removed the template"
extents base | cmp -s - /tmp/before || die "a failed refresh changed the template's ranges"
[ ! -e "$tpl/base:refresh" ] || die "a failed refresh left its staging template"
# A staging template left behind (a refresh killed mid-way) goes with the
# next refresh; the name is reserved.
echo "base:refresh $(cat $tpl/base/device)" > $tpl/register
expect 0 template refresh base -q
[ ! -e "$tpl/base:refresh" ] || die "refresh did not remove a stale staging template"
expect 2 template add "x:refresh" $mnt/t -q --device /dev/mapper/tc
echo "failed refresh: old ranges kept, nothing staged left"

# 3. status: as root with the sysfs layer, without it (DKMS), as non-root.
expect 0 status
grep -q "^tc: " /tmp/out || die "status: no device line: $(cat /tmp/out)"
grep -q "template base" /tmp/out || die "status: no template"
rc=0; TOTALCOW_SYSFS=/nonexistent ctl status > /tmp/out 2> /tmp/err || rc=$?
[ "$rc" = 0 ] || die "status without sysfs: exit $rc: $(cat /tmp/err)"
grep -q "^tc: " /tmp/out || die "status without sysfs: no device counters: $(cat /tmp/out)"
TOTALCOW_SYSFS=/nonexistent ctl status --json |
	python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["devices"][0]["name"] == "tc" and s["templates"] == [] and not s["sysfs"], s' ||
	die "status --json without sysfs"
rc=0; setpriv --reuid 65534 --regid 65534 --clear-groups \
	"$TOTALCOW_TOP/tools/totalcowctl" status > /tmp/out 2> /tmp/err || rc=$?
[ "$rc" = 5 ] || die "status as non-root: exit $rc, want 5: $(cat /tmp/out /tmp/err)"
grep -q "root only" /tmp/err || die "status as non-root: unclear: $(cat /tmp/err)"
echo "status: root, without sysfs, non-root as documented"

# 4. Exit codes and paths.
expect 1 template add none $mnt/empty -q --device /dev/mapper/tc
grep -q "no extents" /tmp/err || die "empty template: unclear: $(cat /tmp/err)"
expect 3 template add none $mnt/missing -q --device /dev/mapper/tc
expect 3 template refresh nosuch
ln -sfn $mnt/t /tmp/link-to-t
expect 0 template add y /tmp/link-to-t --dry-run -q --device /dev/mapper/tc
cmp -s /tmp/out <(ctl template add y $mnt/t --dry-run -q --device /dev/mapper/tc) ||
	die "a symlinked PATH is not followed"
mkdir -p /tmp/state/containers
echo '{"name": "ct", "lxcpath": "/var/lib/lxc", "rootfs": "/nonexistent"}' > /tmp/state/containers/ct.json
rc=0; TOTALCOW_STATE_DIR=/tmp/state ctl container untemplate ct -P /srv/lxc 2> /tmp/err || rc=$?
[ "$rc" = 3 ] || die "untemplate -P elsewhere: exit $rc, want 3: $(cat /tmp/err)"
grep -q "not in /srv/lxc" /tmp/err || die "untemplate -P: unclear: $(cat /tmp/err)"
expect 0 template del base
umount $mnt

# 5. A single-device file system whose device node btrfs names is gone:
# a clear refusal, not a crash.
mkfs.btrfs -q -f -K /dev/mapper/tc >/dev/null 2>&1
mount /dev/mapper/tc $mnt
make_file $mnt/f 1 f
sync
mv /dev/mapper/tc /dev/mapper/tc-elsewhere
rc=0; ctl template add z $mnt/f -q 2> /tmp/err || rc=$?
mv /dev/mapper/tc-elsewhere /dev/mapper/tc
[ "$rc" = 4 ] || die "missing device node: exit $rc, want 4: $(cat /tmp/err)"
! grep -q Traceback /tmp/err || die "missing device node: traceback: $(cat /tmp/err)"
grep -q "does not exist here" /tmp/err || die "missing device node: unclear: $(cat /tmp/err)"

# 6. Subvolume facts come from BTRFS_IOC_GET_SUBVOL_INFO and read as
# `btrfs subvolume show` prints them: UUIDs, parent UUID of a snapshot,
# received UUID of a received subvolume, the read-only flag; a directory
# inside a subvolume is not one.
btrfs -q subvolume create $mnt/sv
btrfs property set $mnt/sv ro true
btrfs -q subvolume snapshot $mnt/sv $mnt/sv-snap
mkdir -p $mnt/recv
btrfs -q send $mnt/sv | btrfs -q receive $mnt/recv || die "send | receive"
mkdir $mnt/sv-snap/dir
for sv in sv sv-snap recv/sv; do
	btrfs subvolume show $mnt/$sv | awk '
		{ v = $0; sub(/^[^:]*:[ \t]*/, "", v) }
		/^[ \t]*UUID:/ { u = v } /Parent UUID:/ { p = v }
		/Received UUID:/ { r = v } /Flags:/ { f = v }
		END { print u, p, r, (f ~ /readonly/ ? "readonly" : "-") }' > /tmp/want
	PYTHONPATH=$TOTALCOW_TOP/tools python3 - $mnt/$sv > /tmp/got <<'PY' || die "subvol_show $sv"
import sys
from totalcow.btrfs import subvol_show
i = subvol_show(sys.argv[1])
print(i["UUID"], i["Parent UUID"], i["Received UUID"], i["Flags"])
PY
	cmp -s /tmp/want /tmp/got || die "$sv: ioctl says $(cat /tmp/got), btrfs show $(cat /tmp/want)"
done
grep -q " - - readonly$" <(head -1 /tmp/got) && die "recv/sv has no received UUID"
rc=0; ctl group create g $mnt/sv-snap/dir 2> /tmp/err || rc=$?
[ "$rc" = 4 ] && grep -q "not a btrfs subvolume" /tmp/err ||
	die "a directory inside a subvolume: exit $rc, $(cat /tmp/err)"
echo "subvolume facts: from the ioctl, as btrfs subvolume show prints them"
umount $mnt
dmsetup remove tc
echo "totalcowctl admin: all as documented"
