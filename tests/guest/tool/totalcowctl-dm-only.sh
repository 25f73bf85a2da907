#!/bin/bash
# totalcowctl on a stock kernel (dm-totalcow from DKMS, no sysfs layer):
# template add, list, refresh and del send the ranges with dmsetup
# messages to a real target, say so, and the target caches exactly them.
# The kernel here has the sysfs layer; TOTALCOW_SYSFS points the tool
# elsewhere, as on a kernel without it.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
export TOTALCOW_SYSFS=/run/no-totalcow-sysfs TOTALCOW_STATE_DIR=/run/totalcow-dm-only
mnt=/mnt/btrfs
# dry_sectors DIR: the sectors --dry-run would register for DIR.
dry_sectors() {
	ctl template add x "$1" --dry-run -q | awk '{ s += $2 } END { print s + 0 }'
}
# read_all DIR: read every file of DIR once, from the disk or the cache
# (the page cache dropped; drop_caches' 2 would empty the target's cache
# too, through its shrinker).
read_all() {
	sync
	echo 1 > /proc/sys/vm/drop_caches
	find "$1" -type f -exec cat {} + > /dev/null
}

tc_btrfs tc /dev/$DISK0 $mnt
btrfs subvolume create $mnt/t >/dev/null
make_file $mnt/t/a 8 a
make_file $mnt/t/b 3 b
sync
btrfs subvolume snapshot $mnt/t $mnt/s1 >/dev/null

# add: the dm-only route, said on stderr; the target holds the ranges.
want=$(dry_sectors $mnt/t)
[ "$want" -ge $((11 * 2048)) ] || die "dry run registers $want sectors for 11 MiB"
ctl template add base $mnt/t -q 2> /tmp/err || die "template add: $(cat /tmp/err)"
grep -q "is absent (dm-totalcow without the sysfs layer.*whitelist_add" /tmp/err ||
	die "add did not say it used dmsetup messages: $(cat /tmp/err)"
[ "$(tc_stat tc templates)" = 1 ] || die "templates: $(tc_stat tc templates), want 1"
[ "$(tc_stat tc sectors)" = "$want" ] ||
	die "whitelisted $(tc_stat tc sectors) sectors, --dry-run said $want"
echo "dm-only: add whitelisted $want sectors"

# A snapshot's files read twice: the second time from the target's cache.
read_all $mnt/s1
hits=$(tc_stat tc hits)
read_all $mnt/s1
[ $(( $(tc_stat tc hits) - hits )) -ge $((11 * 256)) ] ||
	die "second read of the snapshot hit $(( $(tc_stat tc hits) - hits )) blocks"

# list: from the records, and says so.
ctl template list 2> /tmp/err > /tmp/out || die "template list: $(cat /tmp/err)"
grep -q "^base" /tmp/out || die "list does not show base: $(cat /tmp/out)"
grep -q "recorded in" /tmp/err || die "list did not say where it looked: $(cat /tmp/err)"

# refresh after a rewrite: the target holds the new ranges, not the old.
make_file $mnt/t/b 3 b2
sync
want=$(dry_sectors $mnt/t)
ctl template refresh base -q 2> /tmp/err || die "template refresh: $(cat /tmp/err)"
grep -q "whitelist_del of the [1-9][0-9]* stale ones" /tmp/err ||
	die "refresh did not say what it sends: $(cat /tmp/err)"
[ "$(tc_stat tc sectors)" = "$want" ] ||
	die "after refresh $(tc_stat tc sectors) sectors whitelisted, want $want"
echo "dm-only: refresh left $want sectors"

# A table reload forgets the template; refresh registers it again.
umount $mnt
dmsetup remove tc
tc_create tc /dev/$DISK0
mount /dev/mapper/tc $mnt
[ "$(tc_stat tc templates)" = 0 ] || die "a new table kept a template"
ctl template refresh base -q 2> /tmp/err || die "refresh after reload: $(cat /tmp/err)"
[ "$(tc_stat tc sectors)" = "$want" ] ||
	die "refresh after a reload: $(tc_stat tc sectors) sectors, want $want"

# del: gone from the target and from the records.
ctl template del base 2> /tmp/err || die "template del: $(cat /tmp/err)"
[ "$(tc_stat tc templates)" = 0 ] && [ "$(tc_stat tc sectors)" = 0 ] ||
	die "del left $(tc_stat tc templates) templates, $(tc_stat tc sectors) sectors"
ctl template list > /tmp/out 2>/dev/null
! grep -q "^base" /tmp/out || die "del left base in the list"

umount $mnt
dmsetup remove tc
echo "totalcowctl dm-only: add, list, refresh and del through dmsetup messages"
