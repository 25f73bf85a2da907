#!/bin/bash
# dm-totalcow on a raw disk, no file system: every byte read through the
# target must equal what the disk holds, whatever mix of cached, uncached,
# unaligned and non-whitelisted sectors a bio covers, and after writes,
# partial writes, discards and write-zeroes into cached blocks. Messages
# (drop_cache, clear_stats, cache_size, whitelist_del/clear) and the table
# round trip are checked on the way.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow

mib=16
make_file /tmp/pattern $mib raw-pattern
dd if=/tmp/pattern of=/dev/$DISK0 bs=1M oflag=direct status=none
tc_create tc /dev/$DISK0 cache_size 64
dev=/dev/mapper/tc

# check [LABEL]: the first $mib MiB through the target equal the disk, read
# in several bio shapes.
check() {
	local bs
	for bs in 4096 65536 1048576 3584; do
		cmp <(dd if=$dev bs=$bs count=$((mib * 1048576 / bs)) iflag=direct status=none) \
		    <(dd if=/dev/$DISK0 bs=1M count=$mib iflag=direct status=none | head -c $((mib * 1048576 / bs * bs))) ||
			die "${1:-check}: bs=$bs: target and disk differ"
	done
	# Unaligned: 7 sectors from sector 1, 3 sectors across a block boundary.
	cmp <(dd if=$dev bs=512 skip=1 count=7 iflag=direct status=none) \
	    <(dd if=/dev/$DISK0 bs=512 skip=1 count=7 iflag=direct status=none) ||
		die "${1:-check}: unaligned read differs"
	cmp <(dd if=$dev bs=512 skip=6 count=3 iflag=direct status=none) \
	    <(dd if=/dev/$DISK0 bs=512 skip=6 count=3 iflag=direct status=none) ||
		die "${1:-check}: read across a block boundary differs"
}

# Whitelist the first 8 MiB and an unaligned range [20001, 25001).
dmsetup message tc 0 whitelist_add raw 0 16384 20001 5000
[ "$(tc_stat tc extents)" = 2 ] || die "expected 2 whitelist extents"
[ "$(tc_stat tc sectors)" = $((16384 + 5000)) ] || die "whitelist sectors wrong"

check first-read
fills=$(tc_stat tc fills)
# 8 MiB = 2048 blocks, plus the whole blocks inside [20001, 25001): 624.
[ "$fills" = $((2048 + 624)) ] || die "expected 2672 blocks filled, got $fills"
[ "$(tc_stat tc cached)" = "$fills" ] || die "cached != fills"
hits0=$(tc_stat tc hits)
check second-read
[ "$(tc_stat tc hits)" -gt "$hits0" ] || die "second read did not hit"
[ "$(tc_stat tc fills)" = "$fills" ] || die "second read filled again"

# Writes into cached blocks: full block, partial block, spanning blocks.
head -c 4096 /dev/urandom > /tmp/w1
dd if=/tmp/w1 of=$dev bs=4096 seek=2 oflag=direct conv=notrunc status=none
head -c 512 /dev/urandom > /tmp/w2
dd if=/tmp/w2 of=$dev bs=512 seek=$((5 * 8 + 3)) oflag=direct conv=notrunc status=none
head -c 12288 /dev/urandom > /tmp/w3
dd if=/tmp/w3 of=$dev bs=512 seek=$((9 * 8 + 4)) count=24 oflag=direct conv=notrunc status=none
cmp <(dd if=$dev bs=4096 skip=2 count=1 iflag=direct status=none) /tmp/w1 ||
	die "full-block write not read back"
cmp <(dd if=$dev bs=512 skip=$((5 * 8 + 3)) count=1 iflag=direct status=none) /tmp/w2 ||
	die "partial-block write not read back"
cmp <(dd if=$dev bs=512 skip=$((9 * 8 + 4)) count=24 iflag=direct status=none) /tmp/w3 ||
	die "block-spanning write not read back"
[ "$(tc_stat tc invalidations)" -ge 5 ] || die "writes did not invalidate"
check after-writes

# Buffered writes through the block device's page cache, then fsync.
head -c 65536 /dev/urandom > /tmp/w4
dd if=/tmp/w4 of=$dev bs=4096 seek=100 conv=notrunc,fsync status=none
blockdev --flushbufs $dev
cmp <(dd if=$dev bs=4096 skip=100 count=16 iflag=direct status=none) /tmp/w4 ||
	die "buffered write not read back"

# Discard and write-zeroes into cached blocks.
check before-discard
blkdiscard -o $((200 * 4096)) -l $((16 * 4096)) $dev
blkdiscard -z -o $((300 * 4096)) -l $((16 * 4096)) $dev
cmp <(dd if=$dev bs=4096 skip=300 count=16 iflag=direct status=none) \
    <(head -c $((16 * 4096)) /dev/zero) || die "write-zeroes not read back as zeroes"
check after-discard

# cache_size shrinks the cache at once; the table shows it and round-trips.
dmsetup message tc 0 cache_size 1
[ "$(tc_stat tc capacity)" = 256 ] || die "cache_size 1 MiB should be 256 blocks"
[ "$(tc_stat tc cached)" -le 256 ] || die "cache not shrunk"
table=$(dmsetup table tc)
case "$table" in
*" totalcow "*" 2 cache_size 1") ;;
*) die "table does not show cache_size: $table" ;;
esac
check small-cache
dmsetup reload tc --table "$table"
dmsetup resume tc
[ "$(dmsetup table tc)" = "$table" ] || die "table did not round-trip"
# A reloaded table starts with an empty whitelist and cache.
[ "$(tc_stat tc extents)" = 0 ] || die "new table inherited a whitelist"

dmsetup message tc 0 whitelist_add a 0 8192
dmsetup message tc 0 whitelist_add b 4096 8192
[ "$(tc_stat tc templates)" = 2 ] || die "expected 2 templates"
[ "$(tc_stat tc extents)" = 1 ] || die "overlapping templates should merge"
check tagged
dmsetup message tc 0 drop_cache
[ "$(tc_stat tc cached)" = 0 ] || die "drop_cache left blocks"
dmsetup message tc 0 clear_stats
[ "$(tc_stat tc hits)" = 0 ] && [ "$(tc_stat tc fills)" = 0 ] || die "clear_stats"
check after-drop
# Removing template a keeps what b covers.
dmsetup message tc 0 whitelist_del a
[ "$(tc_stat tc sectors)" = 8192 ] || die "whitelist_del a removed b's ranges"
dmsetup message tc 0 whitelist_del b 4096 4096
[ "$(tc_stat tc sectors)" = 4096 ] || die "partial whitelist_del"
dmsetup message tc 0 whitelist_clear
[ "$(tc_stat tc extents)" = 0 ] && [ "$(tc_stat tc cached)" = 0 ] || die "whitelist_clear"
# With nothing whitelisted, reads bypass the cache.
hits0=$(tc_stat tc hits) byp0=$(tc_stat tc bypassed)
check cleared
[ "$(tc_stat tc hits)" = "$hits0" ] || die "hits without a whitelist"
[ "$(tc_stat tc bypassed)" -gt "$byp0" ] || die "reads not counted as bypassed"

dmsetup status tc
dmsetup remove tc
echo "dm-totalcow raw: all checks passed"
