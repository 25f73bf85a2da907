#!/bin/bash
# Sharing scopes keep tenants apart (docs/design/scopes.md,
# "Opt-in, scopes and the side channel"): one 32 MiB extent referred to
# by files in two subvolumes of scope tenant-a, one of scope tenant-b and
# one in no scope. Read once each, cold: tenant-a keeps one copy for its
# two files, tenant-b one of its own, the unscoped file its own page
# cache: 3x the file in memory and 3x in device reads, never 1x, and
# each scope's canonical mapping holds exactly the file's pages. A page
# of tenant-b's is never the one tenant-a's files resolve to: dropping
# tenant-b (extents/disable) leaves tenant-a's pages and every byte.
# Scopes are set with totalcowctl extents (all or nothing) and sysfs.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
mib=32
bytes=$((mib << 20))
pages=$((bytes / 4096))
sum() { sha256sum < "$1" | cut -d' ' -f1; }
btrfs_mount /dev/$DISK0 $mnt
for v in a1 a2 b none; do
	btrfs -q subvolume create $mnt/$v
done
make_file $mnt/a1/f $mib scoped
for v in a2 b none; do
	cp --reflink=always $mnt/a1/f $mnt/$v/f
done
sync
want=$(sum $mnt/a1/f)
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
ctl extents enable --scope tenant-a $mnt/a1 $mnt/a2 || die "extents enable tenant-a"
echo "tenant-b $mnt/b" > $x/enable
# All or nothing: a2 is in tenant-a, so none must not stay in x.
if ctl extents enable --scope x $mnt/none $mnt/a2 2>/tmp/err; then
	die "enabling a subvolume that is in another scope succeeded"
fi
grep -q "its subvolume is in a scope already" /tmp/err || die "totalcowctl said: $(cat /tmp/err)"
ctl extents list --json | python3 -c '
import json, sys
ss = {s["scope"]: s["subvolumes"] for s in json.load(sys.stdin)}
assert sorted(ss) == ["tenant-a", "tenant-b"] and len(ss["tenant-a"]) == 2, ss
' || die "extents list: $(ctl extents list)"

cold_reads $bytes $mnt/{a1,a2,b,none}/f
mem=$MEM reads=$READS
echo "scopes: page cache ${mem}x, device reads ${reads}x the file for 4 files in 2 scopes and none"
awk -v m="$mem" -v r="$reads" 'BEGIN { exit !(m >= 2.99 && m <= 3.02 && r >= 2.99 && r <= 3.02) }' ||
	die "want 3x and 3x: $(cat $x/scopes)"
[ "$(scope_field tenant-a pages)" = $pages ] && [ "$(scope_field tenant-b pages)" = $pages ] ||
	die "each scope should hold the file once: $(cat $x/scopes)"
[ "$(scope_field tenant-a aliased)" -ge $((2 * pages)) ] && [ "$(scope_field tenant-b aliased)" -ge $pages ] ||
	die "files not aliased in their scopes: $(cat $x/scopes)"

ctl extents disable --scope tenant-b $mnt/b || die "extents disable tenant-b"
[ "$(scope_field tenant-a pages)" = $pages ] || die "tenant-a lost pages with tenant-b: $(cat $x/scopes)"
for v in a1 a2 b none; do
	[ "$(sum $mnt/$v/f)" = "$want" ] || die "$v/f read back wrong"
done
echo "scopes: tenant-b dropped, tenant-a kept $(scope_field tenant-a pages) pages, every byte right"
umount $mnt
