#!/bin/bash
# Errors below dm-totalcow reach the caller and are never cached.
#
# Stack: $DISK0 -> "lower" (linear, swapped for error / flakey tables) ->
# totalcow. The first 8 MiB of a known pattern are whitelisted.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow dm-flakey

mib=8
sectors=$(blockdev --getsz /dev/$DISK0)
make_file /tmp/pattern $mib error-pattern
dd if=/tmp/pattern of=/dev/$DISK0 bs=1M oflag=direct status=none
lower_table() { printf '%s\n' "$@" | dmsetup reload lower && dmsetup resume lower; }
dmsetup create lower --table "0 $sectors linear /dev/$DISK0 0"
tc_create tc /dev/mapper/lower cache_size 64
dmsetup message tc 0 whitelist_add pat 0 $((mib * 2048))
dev=/dev/mapper/tc

read_all() { dd if=$dev bs=64k count=$((mib * 16)) iflag=direct status=none; }

# 1. The first 4 MiB fail below: reads of them fail, nothing is cached.
dmsetup suspend tc
lower_table "0 8192 error" "8192 $((sectors - 8192)) linear /dev/$DISK0 8192"
dmsetup resume tc
if dd if=$dev of=/dev/null bs=64k count=64 iflag=direct status=none 2>/dev/null; then
	die "read of failing sectors succeeded"
fi
if dd if=$dev of=/dev/null bs=4k count=1 skip=17 iflag=direct status=none 2>/dev/null; then
	die "4 KiB read of a failing sector succeeded"
fi
[ "$(tc_stat tc fills)" = 0 ] || die "failed reads were cached"
# The healthy half reads fine and is cached.
cmp <(dd if=$dev bs=64k skip=64 count=64 iflag=direct status=none) \
    <(tail -c $((4 << 20)) /tmp/pattern) || die "healthy half read wrong"
[ "$(tc_stat tc fills)" = 1024 ] || die "healthy half not cached"

# 2. Healthy again: everything reads right, no error was cached.
dmsetup suspend tc
lower_table "0 $sectors linear /dev/$DISK0 0"
dmsetup resume tc
cmp <(read_all) /tmp/pattern || die "data wrong after the device recovered"
read_all | cmp - /tmp/pattern || die "data wrong when served from the cache"

# 3. A flaky device (1 s up, 1 s failing reads), with an empty cache: every
# read either fails or returns the right bytes, and afterwards the cache
# holds only right bytes. Without feature arguments flakey fails all I/O
# while down, and this phase only reads: the same as error_reads, which
# older kernels' flakey does not know (Debian 12's 6.1 refuses it).
dmsetup message tc 0 drop_cache
dmsetup suspend tc
lower_table "0 $sectors flakey /dev/$DISK0 0 1 1"
dmsetup resume tc
# At least 5 s, and on until both kinds of read were seen (60 s at most):
# a slow guest (TCG, a loaded host) may fit only a few reads into 5 s,
# and a few reads can all land in the device's up periods.
end=$((SECONDS + 5)) last=$((SECONDS + 60)) ok=0 failed=0
while [ $SECONDS -lt $end ] ||
	{ [ $SECONDS -lt $last ] && { [ $ok = 0 ] || [ $failed = 0 ]; }; }; do
	blk=$((RANDOM % (mib * 256)))
	if out=$(dd if=$dev bs=4k skip=$blk count=4 iflag=direct status=none 2>/dev/null | sha256sum); then
		want=$(dd if=/tmp/pattern bs=4k skip=$blk count=4 status=none | sha256sum)
		# A short read (the tail of the device) is not an error here.
		[ "$out" = "$want" ] || [ $blk -gt $((mib * 256 - 4)) ] || die "flakey: block $blk wrong"
		ok=$((ok + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "flakey: $ok good reads, $failed failed reads"
[ $failed -gt 0 ] || die "flakey never failed a read"
[ $ok -gt 0 ] || die "flakey never succeeded"
dmsetup suspend tc
lower_table "0 $sectors linear /dev/$DISK0 0"
dmsetup resume tc
cmp <(read_all) /tmp/pattern || die "data wrong after flakey"

dmsetup status tc
dmsetup remove tc
dmsetup remove lower
echo "dm-totalcow errors: all checks passed"
