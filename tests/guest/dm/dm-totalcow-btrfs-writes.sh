#!/bin/bash
# btrfs on dm-totalcow: writes through the file system into cached,
# whitelisted blocks read back right. A copy-on-write overwrite of the
# template moves the new data elsewhere (snapshots keep the old blocks,
# still cached and still right); a nodatacow file is overwritten in place,
# buffered and with O_DIRECT, which must drop the cached blocks.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow btrfs

tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc >/dev/null 2>&1
mnt=/mnt/btrfs
mkdir -p $mnt
mount /dev/mapper/tc $mnt
btrfs -q subvolume create $mnt/template
make_file $mnt/template/data.bin 64 writes-template
cp $mnt/template/data.bin /tmp/orig
btrfs -q subvolume snapshot $mnt/template $mnt/s1
btrfs -q subvolume snapshot $mnt/template $mnt/s2
mkdir $mnt/nocow
chattr +C $mnt/nocow
make_file $mnt/nocow/f 16 writes-nocow
cp $mnt/nocow/f /tmp/nocow
sync
tc_register tc template $mnt/template/data.bin
tc_register tc nocow $mnt/nocow/f

verify() { # LABEL
	drop_caches
	cmp $mnt/s1/data.bin /tmp/orig || die "$1: s1 wrong"
	cmp $mnt/s2/data.bin /tmp/orig || die "$1: s2 wrong"
	cmp $mnt/template/data.bin /tmp/template || die "$1: template wrong"
	cmp $mnt/nocow/f /tmp/nocow || die "$1: nocow file wrong"
}
cp /tmp/orig /tmp/template
verify first-read
verify cached-read
[ "$(tc_stat tc hits)" -gt 0 ] || die "no hits"

# Copy-on-write overwrite of 1 MiB of the template (snapshots unchanged).
head -c 1048576 /dev/urandom > /tmp/patch
dd if=/tmp/patch of=$mnt/template/data.bin bs=1M seek=4 conv=notrunc,fsync status=none
dd if=/tmp/patch of=/tmp/template bs=1M seek=4 conv=notrunc status=none
verify cow-overwrite

# In-place overwrites of the nodatacow file: buffered, then O_DIRECT.
inval0=$(tc_stat tc invalidations)
head -c 2097152 /dev/urandom > /tmp/patch
dd if=/tmp/patch of=$mnt/nocow/f bs=1M seek=1 conv=notrunc,fsync status=none
dd if=/tmp/patch of=/tmp/nocow bs=1M seek=1 conv=notrunc status=none
verify nocow-buffered
head -c 1048576 /dev/urandom > /tmp/patch
dd if=/tmp/patch of=$mnt/nocow/f bs=1M seek=8 oflag=direct conv=notrunc status=none
dd if=/tmp/patch of=/tmp/nocow bs=1M seek=8 conv=notrunc status=none
verify nocow-direct
[ "$(tc_stat tc invalidations)" -ge $((inval0 + 768)) ] ||
	die "in-place overwrites of 3 MiB dropped only $(($(tc_stat tc invalidations) - inval0)) blocks"

# Unmount, check the file system through the target, mount, read again.
umount $mnt
btrfs check --readonly /dev/mapper/tc >/dev/null 2>&1 || die "btrfs check found errors"
mount /dev/mapper/tc $mnt
verify remount
dmsetup status tc
umount $mnt
dmsetup remove tc
echo "dm-totalcow btrfs writes: all data right"
