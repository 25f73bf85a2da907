#!/bin/bash
# Bad tables and messages: each fails with a clear kernel message and
# changes nothing (status, table, whitelist and cached data stay as they
# were).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow

sectors=$(blockdev --getsz /dev/$DISK0)
dmesg -C

# Tables: dmsetup create must fail and leave no device behind.
bad_tables=(
	"extra"
	"1 cache_size"
	"2 cache_size 0"
	"2 cache_size 101%"
	"2 cache_size 1048577"
	"2 cache_size 12x"
	"2 cache_size -1"
	"2 cache_sizes 10"
	"2 cache_size 10 extra"
	"4 cache_size 10 cache_size"
	"2 admit third"
	"2 admit"
	"1 admit"
	"4 admit first admit"
	"6 cache_size 10 admit second admit first"
	"2 readahead 6"
	"2 readahead 8192"
	"2 readahead -4"
	"2 readahead"
	"8 cache_size 10 admit first readahead 4 readahead 8"
	"-1"
	"x"
)
for args in "${bad_tables[@]}"; do
	if dmsetup create bad --table "0 $sectors totalcow /dev/$DISK0 $args" 2>/dev/null; then
		die "table '$args' was accepted"
	fi
	[ ! -e /dev/mapper/bad ] || die "table '$args' left a device"
done
# Two totalcow targets in one table: the kernel API names a target by its
# device, so the second is refused with a clear error.
half=$((sectors / 2))
if printf '0 %s totalcow /dev/%s\n%s %s totalcow /dev/%s\n' "$half" "$DISK0" "$half" "$half" "$DISK0" |
	dmsetup create bad 2>/dev/null; then
	die "a table with two totalcow targets was accepted"
fi
[ ! -e /dev/mapper/bad ] || die "the two-target table left a device"
dmesg | grep -q "Only one totalcow target per device" ||
	die "no clear error for two totalcow targets in one table"
if dmsetup create bad --table "0 $sectors totalcow" 2>/dev/null; then
	die "table without an origin was accepted"
fi
if dmsetup create bad --table "0 $sectors totalcow /dev/nonexistent" 2>/dev/null; then
	die "table with a missing origin was accepted"
fi
n=$(dmesg | grep -c "totalcow: ")
[ "$n" -ge $((${#bad_tables[@]} + 2)) ] || { dmesg | tail -n 30; die "only $n table errors explained in the kernel log"; }
dmesg | grep "totalcow: " | head -n 20

# Messages on a working device with a whitelist and cached data.
make_file /tmp/pattern 4 bad-input
dd if=/tmp/pattern of=/dev/$DISK0 bs=1M oflag=direct status=none
tc_create tc /dev/$DISK0 cache_size 16
dmsetup message tc 0 whitelist_add good 0 4096 8192 8
dd if=/dev/mapper/tc of=/dev/null bs=64k count=32 iflag=direct status=none
before_status=$(dmsetup status tc) before_table=$(dmsetup table tc)
dmesg -C

bad_messages=(
	"frobnicate"
	"whitelist_add"
	"whitelist_add t"
	"whitelist_add t 0"
	"whitelist_add t 0 0"
	"whitelist_add t 0 8 16"
	"whitelist_add t x 8"
	"whitelist_add t 0x10 8"
	"whitelist_add t -8 8"
	"whitelist_add t 0 $((sectors + 1))"
	"whitelist_add t $sectors 1"
	"whitelist_add t 18446744073709551615 2"
	"whitelist_add bad/tag 0 8"
	"whitelist_add $(printf 'x%.0s' {1..65}) 0 8"
	"whitelist_add t 0 8 16 0"
	"whitelist_del"
	"whitelist_del nosuch"
	"whitelist_del good 4096 8"
	"whitelist_del good 0 4097"
	"whitelist_del good 0"
	"whitelist_del bad/tag"
	"whitelist_clear now"
	"cache_size"
	"cache_size 0"
	"cache_size 101%"
	"cache_size 5 6"
	"drop_cache please"
	"admit"
	"admit never"
	"admit first second"
	"readahead"
	"readahead 2"
	"readahead 4100"
	"readahead 1M"
	"readahead 4 8"
	"clear_stats all"
	"fleet_cgroup"
	"fleet_cgroup machine.slice"
	"fleet_cgroup /no/such/cgroup"
	"fleet_cgroup / auto"
)
for msg in "${bad_messages[@]}"; do
	# shellcheck disable=SC2086
	if dmsetup message tc 0 -- $msg 2>/dev/null; then
		die "message '$msg' was accepted"
	fi
done
[ "$(dmsetup status tc)" = "$before_status" ] || die "a bad message changed the status: $(dmsetup status tc)"
[ "$(dmsetup table tc)" = "$before_table" ] || die "a bad message changed the table"
n=$(dmesg | grep -c "totalcow: ")
[ "$n" -ge ${#bad_messages[@]} ] || { dmesg | tail -n 40; die "only $n of ${#bad_messages[@]} bad messages explained"; }
dmesg | grep "totalcow: " | head -n 40
cmp <(dd if=/dev/mapper/tc bs=64k count=64 iflag=direct status=none) /tmp/pattern ||
	die "data wrong after bad messages"
# The fleet's I/O cgroup: pinned to a directory (the status gives its id,
# which is its inode number in cgroup2fs), then auto again.
dmsetup message tc 0 fleet_cgroup / || die "fleet_cgroup / refused"
fleet=$(dmsetup status tc | awk '{ print $17, $18 }')
[ "$fleet" = "$(stat -c %i /sys/fs/cgroup) pinned" ] || die "fleet_cgroup /: status says '$fleet'"
dmsetup message tc 0 fleet_cgroup auto || die "fleet_cgroup auto refused"
[ "$(dmsetup status tc | awk '{ print $17, $18 }')" = "0 auto" ] || die "fleet_cgroup auto: $(dmsetup status tc)"

dmsetup remove tc

# Good tables round-trip through dmsetup table, the admit and readahead
# options included.
for args in "2 admit second" "4 cache_size 16 admit second" "4 admit first cache_size 5%" \
	"2 readahead 1024" "6 readahead 0 cache_size 16 admit second"; do
	dmsetup create good --table "0 $sectors totalcow /dev/$DISK0 $args" || die "table '$args' refused"
	got=$(dmsetup table good | cut -d' ' -f5-)
	dmsetup create again --table "$(dmsetup table good | sed 's|^0 [0-9]* totalcow [^ ]*|0 '"$sectors"' totalcow /dev/'"$DISK0"'|')" ||
		die "table '$got' does not round-trip"
	[ "$(dmsetup table again | cut -d' ' -f5-)" = "$got" ] || die "round trip changed '$got'"
	dmsetup remove again
	dmsetup remove good
done
echo "dm-totalcow bad input: all rejected"
