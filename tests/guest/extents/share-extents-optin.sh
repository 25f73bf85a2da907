#!/bin/bash
# Shared extents, the opt-in (docs/design/scopes.md, "Opt-in, scopes and
# the side channel"): /sys/kernel/mm/totalcow/extents/ puts subvolumes of a
# btrfs file system in sharing scopes, each with a canonical mapping. Bad input and writers without
# CAP_SYS_ADMIN change nothing and are told why; a file system with mixed
# block groups is refused. With scopes enabled, btrfs calls the cache
# whenever it hands data space out and whenever it unpins space: writes,
# reflinks, deletes and commits run those hooks here, and unmounting with
# scopes enabled frees them (lockdep, KASAN and kmemleak watch every path
# on the debug kernels). The scopes file reports each scope's pages and
# reads: nothing here is read through them, so they stay 0
# (share-extents-reflink.sh reads).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
mixed=/mnt/mixed
[ -d $x ] || die "no $x: a kernel without shared extents"

# put FILE LINE: the write must succeed.
put() { printf '%s\n' "$2" > "$x/$1" || die "$1 '$2' failed"; }
# refused FILE ERROR LINE: the write must fail with ERROR (strerror text),
# and the scopes must be as they were.
refused() {
	local before err
	before=$(cat $x/scopes)
	if printf '%s\n' "$3" 2>/tmp/err > "$x/$1"; then
		die "$1 '$3' was accepted"
	fi
	err=$(cat /tmp/err)
	[[ $err == *"$2"* ]] || die "$1 '$3': want '$2', got '$err'"
	[ "$(cat $x/scopes)" = "$before" ] || die "$1 '$3' changed the scopes"
}
scopes() { grep -c . $x/scopes || true; }
# logged TEXT: the kernel said TEXT (read whole: no SIGPIPE under pipefail).
logged() { dmesg | grep -F -- "$1" > /dev/null; }
[ "$(scopes)" = 0 ] || die "scopes before any enable: $(cat $x/scopes)"
btrfs_mount /dev/$DISK0 $mnt
fsid=$(blkid -s UUID -o value /dev/$DISK0)
btrfs -q subvolume create "$mnt/sub with spaces"
btrfs -q subvolume create "$mnt/third"
mkdir -p $mnt/dir
sub=$(btrfs inspect-internal rootid "$mnt/sub with spaces")
third=$(btrfs inspect-internal rootid $mnt/third)

put enable "default $mnt/dir"
grep -qx "$fsid default pages 0 compressed_pages 0 reads 0 read_failures 0 invalidations 0 aliased 0 resolved 0 mmaps_shared 0 mmaps_private 0 subvolumes 5 followed" \
	$x/scopes || die "scopes after enable: $(cat $x/scopes)"
put enable "tenant-b.2 $mnt/sub with spaces"
put enable "default $mnt/third"
[ "$(scopes)" = 2 ] || die "two scopes: $(cat $x/scopes)"
grep -q " default .* subvolumes 5 $third followed\$" $x/scopes && grep -q " tenant-b.2 .* subvolumes $sub followed\$" $x/scopes ||
	die "subvolumes of the scopes: $(cat $x/scopes)"

# A subvolume is in one scope at most.
refused enable "File exists" "default $mnt"
refused enable "File exists" "other $mnt/third"
refused enable "Invalid argument" ""
refused enable "Invalid argument" "default"
refused enable "Invalid argument" "default "
refused enable "Invalid argument" " $mnt"
refused enable "Invalid argument" "bad/name $mnt"
refused enable "Invalid argument" "bad:name $mnt"
refused enable "Invalid argument" "$(printf 'x%.0s' {1..33}) $mnt"
refused enable "Invalid argument" "x relative/path"
refused enable "No such file or directory" "x /nonexistent"
refused enable "Invalid argument" "x /proc"
refused disable "No such file or directory" "nosuch $mnt"
refused disable "No such file or directory" "tenant-b.2 $mnt/third"
logged 'extents/enable: want "<scope> <path on btrfs>"' ||
	die "no message for a bad line"
logged "extents/enable: /proc is not on btrfs" || die "no message for /proc"
# Without CAP_SYS_ADMIN, root cannot either.
if setpriv --bounding-set=-sys_admin bash -c "printf 'x %s\n' $mnt > $x/enable" 2>/tmp/err; then
	die "enable without CAP_SYS_ADMIN was accepted"
fi
grep -q "Operation not permitted" /tmp/err || die "without CAP_SYS_ADMIN: $(cat /tmp/err)"
[ "$(scopes)" = 2 ] || die "scopes changed by refused writes"

# Mixed block groups: a data address can come back as metadata.
mkfs.btrfs -q -f -K --mixed /dev/$DISK1 >/dev/null 2>&1 || die "mkfs.btrfs --mixed"
mkdir -p $mixed && mount /dev/$DISK1 $mixed
refused enable "Operation not supported" "default $mixed"
logged "mixed block groups" || die "no message for mixed block groups"
umount $mixed

# No data checksums (a rescue mount): a canonical page is proven by its
# checksums, so a scope is refused, and the files read as on stock (a
# scope here once let any reader's cat panic the kernel on the missing
# checksum root).
mkfs.btrfs -q -f -K /dev/$DISK1 >/dev/null 2>&1 || die "mkfs.btrfs"
mount /dev/$DISK1 $mixed
make_file $mixed/f 4 rescue
cp --reflink=always $mixed/f $mixed/g
want=$(sha256sum < $mixed/f)
umount $mixed
mount -o ro,rescue=ignoredatacsums /dev/$DISK1 $mixed
refused enable "Operation not supported" "default $mixed"
logged "without data checksums" || die "no message for a file system without data checksums"
for f in f g; do
	[ "$(setpriv --reuid=65534 --regid=65534 --clear-groups sha256sum < $mixed/$f)" = "$want" ] ||
		die "$f on the rescue mount reads wrong"
done
umount $mixed

# Data space handed out and unpinned while scopes are enabled.
for round in 1 2 3; do
	make_file $mnt/f$round 16 "r$round"
	cp --reflink=always $mnt/f$round "$mnt/sub with spaces/g$round"
	fallocate -l 8M $mnt/p$round
	dd if=/dev/zero of=$mnt/p$round bs=1M count=4 conv=notrunc status=none
	sync
	rm -f $mnt/f$round
	btrfs filesystem sync $mnt
done
rm -f "$mnt/sub with spaces"/g* $mnt/p*
sync
for s in default tenant-b.2; do
	[ "$(scope_field $s pages)" = 0 ] && [ "$(scope_field $s reads)" = 0 ] ||
		die "scope $s holds pages nothing read: $(cat $x/scopes)"
done

# Unmounting frees the scopes; a new mount starts without any.
umount $mnt
[ "$(scopes)" = 0 ] || die "scopes after umount: $(cat $x/scopes)"
mount /dev/$DISK0 $mnt
[ "$(scopes)" = 0 ] || die "scopes after mount: $(cat $x/scopes)"
put enable "default $mnt"
put enable "other $mnt/third"
put disable "default $mnt"
[ "$(scope_field other pages)" = 0 ] && [ "$(scopes)" = 1 ] || die "after disable: $(cat $x/scopes)"
refused disable "No such file or directory" "default $mnt"
put disable "other $mnt/third"
[ "$(scopes)" = 0 ] || die "after the last disable: $(cat $x/scopes)"
make_file $mnt/after 4 after
sync
umount $mnt
echo "extents opt-in: scopes enabled, refused and freed as expected"
