#!/bin/bash
# Fills racing with writes never leave stale data (dm-totalcow-race.py),
# once straight on the disk and once with writes delayed below the target
# (dm-delay): a fill that starts while a delayed write is in flight reads
# the old data, the case the writes-in-flight rule is for.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow dm-delay

seconds=${1:-20}
sectors=$(blockdev --getsz /dev/$DISK0)
dd if=/dev/zero of=/dev/$DISK0 bs=1M count=1 oflag=direct status=none

tc_create tc /dev/$DISK0 cache_size 16
dmsetup message tc 0 whitelist_add race 0 $((256 * 8))
python3 "$TOTALCOW_TOP/tests/guest/dm/dm-totalcow-race.py" /dev/mapper/tc "$seconds" ||
	die "stale data on the plain disk"
dmsetup status tc
[ "$(tc_stat tc fills)" -gt 0 ] && [ "$(tc_stat tc hits)" -gt 0 ] || die "the hammer never used the cache"
[ "$(tc_stat tc invalidations)" -gt 0 ] || die "the hammer never invalidated"
dmsetup remove tc

dd if=/dev/zero of=/dev/$DISK0 bs=1M count=1 oflag=direct status=none
dmsetup create slow --table "0 $sectors delay /dev/$DISK0 0 0 /dev/$DISK0 0 3"
tc_create tc /dev/mapper/slow cache_size 16
dmsetup message tc 0 whitelist_add race 0 $((256 * 8))
python3 "$TOTALCOW_TOP/tests/guest/dm/dm-totalcow-race.py" /dev/mapper/tc "$seconds" ||
	die "stale data with delayed writes"
dmsetup status tc
dmsetup remove tc

# Readahead fills (no caller's bio) race with the same writes.
dd if=/dev/zero of=/dev/$DISK0 bs=1M count=1 oflag=direct status=none
tc_create tc /dev/mapper/slow cache_size 16 readahead 32
dmsetup message tc 0 whitelist_add race 0 $((256 * 8))
python3 "$TOTALCOW_TOP/tests/guest/dm/dm-totalcow-race.py" /dev/mapper/tc "$seconds" ||
	die "stale data with readahead"
dmsetup status tc
[ "$(tc_stat tc readahead)" -gt 0 ] || die "readahead never read ahead"
dmsetup remove tc
dmsetup remove slow
echo "dm-totalcow race: no stale data"
