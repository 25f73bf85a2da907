#!/bin/bash
# Randomized torture of shared extents (tests/guest/share/share-torture.py in its "extents" mode): no group; a
# writable subvolume's file and its reflinked copy, and the same in
# MEMBERS writable snapshots of it, all in one sharing scope, take random
# reads, writes, mmap reads and writes, truncates, punches, O_DIRECT
# writes, reflinks, dedupes, evictions and drop_caches on both sides of
# their shared extents, checked against a model of each file.
# Arguments: OPS SEED [MEMBERS [WORKERS [SECONDS [COMPRESS]]]] (default 6
# members, 1 worker, no time budget: with SECONDS the workers stop there
# if they have not done OPS, and the closing line counts what they did;
# WORKERS processes, each on its own CPU, share the files out; with
# COMPRESS (zstd, lzo, zlib) the file system compresses every write
# (compress-force) and every byte written is compressible, so the shared
# extents are compressed ones).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ops=${1:-100000}; seed=${2:-1}; members=${3:-6}; workers=${4:-1}; seconds=${5:-0}
compress=${6:-}
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
if [ -n "$compress" ]; then
	mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
	mkdir -p $mnt && mount -o compress-force="$compress" /dev/$DISK0 $mnt ||
		die "mount with compress-force=$compress"
else
	btrfs_mount /dev/$DISK0 $mnt
fi
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data
if [ -n "$compress" ]; then
	make_text $mnt/template/data/file 2 torture
else
	make_file $mnt/template/data/file 2 torture
fi
cp --reflink=always $mnt/template/data/file $mnt/template/data/copy
for i in $(seq 1 $members); do
	btrfs -q subvolume snapshot $mnt/template $mnt/m$i
done
sync
"$TOTALCOW_TOP/tools/totalcowctl" extents enable --scope torture $mnt/template \
	$(for i in $(seq 1 $members); do echo $mnt/m$i; done) || die "extents enable"
drop_caches
TORTURE_SECONDS=$seconds TORTURE_COMPRESSIBLE=${compress:+1} python3 "$TOTALCOW_TOP/tests/guest/share/share-torture.py" $mnt "$members" "$ops" "$seed" "$workers" \
	extents || die "mismatches: $(cat $x/scopes)"
cat $x/scopes
[ "$(scope_field torture resolved)" -gt 0 ] || die "nothing was ever shared: the torture tested nothing"
[ "$(scope_field torture invalidations)" -gt 0 ] || die "no canonical page was ever dropped"
if [ -n "$compress" ]; then
	read -r e n < <(encoded_extents $mnt/template/data/file)
	echo "compressed extents: $e of the source file's $n"
	[ "$e" -gt 0 ] || die "no compressed extent left: the torture tested regular ones"
fi
echo "extents torture: $(scope_field torture aliased) pages aliased, $(scope_field torture resolved) resolved," \
	"$(scope_field torture invalidations) canonical pages dropped"
umount $mnt
