#!/bin/bash
# Randomized torture of page-cache sharing (tests/guest/share/share-torture.py):
# members of one group take random reads, writes, mmap, truncate, punch,
# fsync and drop_caches, checked against a model; each member has its
# file and a reflink copy of it under another name.
# Arguments: OPS SEED [MEMBERS [WORKERS [SECONDS]]] (default 6 members,
# 1 worker, no time budget: with SECONDS the workers stop there if they
# have not done OPS, and the closing line counts what they did;
# WORKERS processes, each on its own CPU, share the members out).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
ops=${1:-100000}; seed=${2:-1}; members=${3:-6}; workers=${4:-1}; seconds=${5:-0}
mnt=/mnt/btrfs
tc_btrfs tc /dev/$DISK0 $mnt cache_size 64
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data
make_file $mnt/template/data/file 2 torture
btrfs property set $mnt/template ro true
for i in $(seq 1 $members); do
	btrfs -q subvolume snapshot $mnt/template $mnt/m$i
	# A reflink copy under another name: bound by its extents.
	cp --reflink=always $mnt/m$i/data/file $mnt/m$i/data/copy
done
sync
ctl template add base $mnt/template -q
ctl group create torture $mnt/template
ctl group add torture $(for i in $(seq 1 $members); do echo $mnt/m$i; done)
drop_caches
TORTURE_SECONDS=$seconds python3 "$TOTALCOW_TOP/tests/guest/share/share-torture.py" $mnt "$members" "$ops" "$seed" "$workers" ||
	die "mismatches: $(cat /sys/kernel/mm/totalcow/groups/torture/stats | tr '\n' ' ')"
cat /sys/kernel/mm/totalcow/groups/torture/stats
shared=$(awk '$1 == "aliases_resolved" { print $2 }' /sys/kernel/mm/totalcow/groups/torture/stats)
[ "$shared" -gt 0 ] || die "nothing was ever shared: the torture tested nothing"
by_extents=$(awk '$1 == "files_bound_by_extents" { print $2 }' /sys/kernel/mm/totalcow/groups/torture/stats)
[ "$by_extents" -gt 0 ] || die "no reflink copy was bound by its extents"
echo torture > /sys/kernel/mm/totalcow/groups/delete
umount $mnt
