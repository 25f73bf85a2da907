#!/bin/bash
# Substituted private mappings (mm-patches/0003, tc_mmap_file) behave as
# mappings of the member file: a core dump names the
# member (NT_FILE) and reads its mode (ELF_HEADERS), PR_SET_MM_EXE_FILE
# finds the member's executable still mapped (EBUSY), and truncating a
# member gives what truncating a plain copy gives: SIGBUS past the new end
# of file, private copies past it gone, zeros after an extension
# (tests/guest/share/share-backing-paths.py).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
mnt=/mnt/btrfs
n=4

tc_btrfs tc /dev/$DISK0 $mnt cache_size 100%
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data $mnt/template/bin
make_file $mnt/template/data/file 1 paths
# Executable in the template, not in one member: ELF_HEADERS reads the mode.
chmod 755 $mnt/template/data/file
cp /bin/busybox $mnt/template/bin/busybox
cp "$(readlink -f /usr/bin/python3)" $mnt/template/bin/python3
btrfs property set $mnt/template ro true
for i in $(seq 1 $n); do btrfs -q subvolume snapshot $mnt/template $mnt/c$i; done
# The control: the same bytes in files of their own, in no group.
btrfs -q subvolume create $mnt/plain
cp -a --reflink=never $mnt/template/. $mnt/plain/
sync
ctl template add base $mnt/template -q || die "template add"
ctl group create fleet $mnt/template || die "group create"
ctl group add fleet $(for i in $(seq 1 $n); do echo $mnt/c$i; done) || die "group add"
# The truncations run as uid 1000 (tests/guest/share/share-backing-paths.py).
chown 1000 $mnt/c3/data/file $mnt/plain/data/file

python3 "$TOTALCOW_TOP/tests/guest/share/share-backing-paths.py" $mnt || die "share-backing-paths.py"
cat /sys/kernel/mm/totalcow/groups/fleet/stats
for f in bin/busybox bin/python3; do
	cmp $mnt/template/$f $mnt/plain/$f || die "template $f changed"
done
cmp $mnt/template/data/file $mnt/c4/data/file || die "template data/file changed"
# The group holds its members' paths (groups/add): the mount is busy until
# it goes.
ctl group del fleet || die "group del"
umount $mnt || die "umount: a reference to the file system leaked"
echo "share-backing-paths: all checks passed"
