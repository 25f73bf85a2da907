#!/bin/bash
# A member added while its files are being classified (the
# window docs/design/scopes.md once listed as open, "Classification
# after a change"): a file in
# no group, on a file system with sharing scopes, looks up its
# subvolume's lineage (tc_canon_follow()) after leaving tc_groups_lock and
# before it is marked as having no use for the policy. A groups/add in
# between reclassifies first, and the mark set after it kept the new
# member's file from sharing until the next admin change.
# tests/guest/share/share-classify-race.py runs the tries (as root: only an
# admin adds members) and counts files that did not bind.
#
#   share-classify-race.sh [TRIES [FILES [MAX_DELAY_US [READERS]]]]
#
# TRIES default 200; FILES, files of 16 KiB in the member, default 24;
# MAX_DELAY_US, the spread of the add's delay after the readers begin,
# default 3000; READERS default: the CPUs but one (at least 1).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
tries=${1:-200}
nfiles=${2:-24}
max_delay_us=${3:-3000}
readers=${4:-$(($(nproc) > 1 ? $(nproc) - 1 : 1))}
groups=/sys/kernel/mm/totalcow/groups
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
[ -d $x ] || die "no /sys/kernel/mm/totalcow/extents"

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
mkdir $mnt/T/d
python3 - "$mnt/T/d" "$nfiles" <<'PY' || die "cannot write the template's files"
import sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(f"{d}/f{i}", "wb") as f:
        f.write((b"%08d" % i) * (16384 // 8))
PY
sync
btrfs property set $mnt/T ro true
echo "g $mnt/T" > $groups/create || die "groups/create"
btrfs -q subvolume snapshot $mnt/T $mnt/M
for z in Z1 Z2; do
	btrfs -q subvolume create $mnt/$z
	make_file $mnt/$z/f 1 $z
	echo "other $mnt/$z" > $x/enable || die "extents/enable $z"
done
sync
tsum=$(cat $mnt/T/d/* | sha256sum)
echo "classify-race: $nfiles files, $(uname -r), $(nproc) CPUs"

now_us t0
rc=0
python3 "$TOTALCOW_TOP/tests/guest/share/share-classify-race.py" \
	$mnt "$tries" "$max_delay_us" "$readers" || rc=$?
now_us t1
echo "classify-race: $(us_ms $((t1 - t0))) ms; scopes: $(cat $x/scopes | tr '\n' ';')"
[ "$rc" = 0 ] || die "share-classify-race.py: files lost or read wrong"
[ "$(cat $mnt/T/d/* | sha256sum)" = "$tsum" ] || die "the template changed"
echo g > $groups/delete || die "groups/delete"
umount $mnt
echo "classify-race: passed"
