#!/bin/bash
# Page-cache sharing refuses what it cannot prove: files in a subvolume
# nested inside a member and files replaced inside a member by new data
# are read as plain files, never aliased to the template. Files renamed or
# swapped inside a member are bound by their extents to the template file
# they came from (docs/design/policy.md, "Binding by extents"), never to the
# file now at their path, and read their own bytes. A dedupe into a member
# (FIDEDUPERANGE) keeps every byte right, as a stock kernel would.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs

tc_btrfs tc /dev/$DISK0 $mnt cache_size 64
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data/sub
for f in a b c d; do make_file $mnt/template/data/$f 4 "$f"; done
make_file $mnt/template/data/sub/f 4 sub
btrfs property set $mnt/template ro true
for i in 1 2 3 4; do btrfs -q subvolume snapshot $mnt/template $mnt/c$i; done
sum() { sha256sum < "$1"; }
declare -A want
for f in a b c d sub/f; do want[$f]=$(sum $mnt/template/data/$f); done

# c1: data/sub becomes a nested subvolume holding a copy of sub/f.
rm -rf $mnt/c1/data/sub
btrfs -q subvolume create $mnt/c1/data/sub
cp $mnt/template/data/sub/f $mnt/c1/data/sub/f
# c2: a renamed away, b and c swapped.
mv $mnt/c2/data/a $mnt/c2/data/a.moved
mv $mnt/c2/data/b $mnt/c2/data/tmp
mv $mnt/c2/data/c $mnt/c2/data/b
mv $mnt/c2/data/tmp $mnt/c2/data/c
# c3: d replaced by a new file with other data.
make_file $mnt/c3/data/d.new 4 other
mv $mnt/c3/data/d.new $mnt/c3/data/d
other=$(sum $mnt/c3/data/d)
sync

ctl group create fleet $mnt/template || die "group create"
ctl group add fleet $mnt/c1 $mnt/c2 $mnt/c3 $mnt/c4 || die "group add"
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/fleet/stats; }
drop_caches

# Every refused file reads its own data and is counted, not shared.
check() { [ "$(sum "$1")" = "$2" ] || die "$1 read back wrong"; }
check $mnt/c1/data/sub/f "${want[sub/f]}"
check $mnt/c2/data/a.moved "${want[a]}"
check $mnt/c2/data/b "${want[c]}"
check $mnt/c2/data/c "${want[b]}"
check $mnt/c3/data/d "$other"
refused=$(stat_of files_refused)
echo "refusals: $refused files refused, $(stat_of pages_shared) pages shared," \
	"$(stat_of files_bound_by_extents) bound by extents"
# nested sub/f, new d
[ "$refused" -ge 2 ] || die "only $refused files refused: $(tr '\n' ' ' < $groups/fleet/stats)"
# a.moved, swapped b and c: each to the template file it came from
[ "$(stat_of files_bound)" = 3 ] && [ "$(stat_of files_bound_by_extents)" = 3 ] ||
	die "renamed files not bound by extents: $(tr '\n' ' ' < $groups/fleet/stats)"
[ "$(stat_of pages_shared)" = $((3 * 1024)) ] || die "renamed files not shared, or others were"
drop_caches
check $mnt/c2/data/b "${want[c]}"
check $mnt/c2/data/c "${want[b]}"
check $mnt/c2/data/a.moved "${want[a]}"
# The unchanged files of c4 are shared, so the group does work.
for f in a b c d; do check $mnt/c4/data/$f "${want[$f]}"; done
[ "$(stat_of pages_shared)" -ge $((4 * 1024)) ] || die "c4 was not shared"

# Dedupe into a shared member file: c4/data/a's range from a copy with the
# same data (FIDEDUPERANGE), then every byte as before, cached and not.
cp $mnt/template/data/a $mnt/copy-a
python3 - $mnt/copy-a $mnt/c4/data/a <<'PY' || die "dedupe"
import fcntl, os, struct, sys
FIDEDUPERANGE = 0xC0189436
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_RDWR)
length = os.fstat(src).st_size
# struct file_dedupe_range + one file_dedupe_range_info
arg = bytearray(struct.pack("=QQHHI", 0, length, 1, 0, 0) +
                struct.pack("=qQQiI", dst, 0, 0, 0, 0))
fcntl.ioctl(src, FIDEDUPERANGE, arg)
_, _, done, status, _ = struct.unpack_from("=qQQiI", arg, 24)
assert status == 0 and done == length, f"dedupe: status {status}, {done} of {length} bytes"
PY
check $mnt/c4/data/a "${want[a]}"
drop_caches
check $mnt/c4/data/a "${want[a]}"
for f in b c d; do check $mnt/c4/data/$f "${want[$f]}"; done

# A member leaves (groups/remove): its aliases go, the others keep theirs.
check $mnt/c1/data/a "${want[a]}"
before=$(stat_of pages_shared)
expect_fail() { # WHAT FILE TEXT
	if echo "$3" > "$2" 2>/dev/null; then die "$1 was accepted"; fi
}
expect_fail "removing from a missing group" $groups/remove "nosuch $mnt/c4"
expect_fail "removing a non-member" $groups/remove "fleet $mnt/template"
expect_fail "removing without a path" $groups/remove "fleet"
[ "$(stat_of pages_shared)" = "$before" ] || die "a refused remove changed sharing"
echo "fleet $mnt/c4" > $groups/remove || die "remove c4"
grep -qx "$mnt/c4" $groups/fleet/members && die "c4 still listed"
[ "$(wc -l < $groups/fleet/members)" = 3 ] || die "members: $(cat $groups/fleet/members)"
after=$(stat_of pages_shared)
echo "remove: pages shared $before before, $after after c4 left"
[ "$after" -ge 1024 ] && [ "$after" -lt "$before" ] || die "c4's aliases: $before -> $after"
for f in a b c d; do check $mnt/c4/data/$f "${want[$f]}"; done
[ "$(stat_of pages_shared)" = "$after" ] || die "c4 shares again after it left"
check $mnt/c1/data/a "${want[a]}"
expect_fail "removing c4 twice" $groups/remove "fleet $mnt/c4"
echo fleet > $groups/delete
umount $mnt
echo "share-refusals: all checks passed"
