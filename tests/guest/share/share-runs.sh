#!/bin/bash
# Reading by runs (docs/design/sharing-in-the-file-system.md, route B), on
# a kernel with mm-patches/7.3: a file of a paired snapshot that differs
# from its source's file in a few blocks reads those from its own cache
# and the rest from the source's page cache, whose folios may be large.
#   1. a file changed in a 4 KiB block inside a large folio of the source,
#      and in a 64 KiB range: the member reads only its own blocks from
#      the disk, keeps only those in its cache (its reads of them read no
#      further), and reads the same bytes as before the pairing, by
#      read(), by a private mapping and by sendfile()
#   2. a reader that has the file open sees a write into a run it read
#      from the source, the same after writeback, zeroes after a punch
#   3. the source's file is write-denied while a reader has the member
#      open, even after an unpairing made the source writable
#   4. reads at unaligned offsets across run boundaries
. "$TOTALCOW_TOP/tests/vm/lib.sh"
. "$TOTALCOW_TOP/tests/guest/share/read-counted.sh"
mnt=/mnt/btrfs
py="python3 $TOTALCOW_TOP/tests/guest/share/share-backing-file.py"
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/B
make_file $mnt/B/f 8 runs-f
btrfs -q subvolume snapshot -r $mnt/B $mnt/T
btrfs -q subvolume snapshot $mnt/T $mnt/M
# 4 KiB at 404 KiB (inside the source's folios there, whatever their
# size), 64 KiB at 5 MiB.
dd if=/dev/urandom of=$mnt/M/f bs=4k count=1 seek=101 conv=notrunc status=none
dd if=/dev/urandom of=$mnt/M/f bs=64k count=1 seek=80 conv=notrunc status=none
sync
want=$($py sums $mnt/M/f | tail -n 1) || die "sums before pairing"
ref=/tmp/runs-ref
cp $mnt/M/f $ref
cmp -s $mnt/M/f $mnt/T/f && die "the member did not differ"
$py pair $mnt/M $mnt/T || die "pair"

# 1. Runs: only the member's own blocks come from the disk.
read_counted $mnt/M/f $mnt/T/f
own=$OWN_PAGES bytes=$READ_BYTES
echo "runs: member read $bytes bytes from the disk, own cache $own pages"
[ "$SUM" = "$want" ] || die "the member read other bytes by runs"
pages=$(((4096 + 65536) / $(getconf PAGESIZE)))
[ "$own" = "$pages" ] || die "own cache $own pages, want $pages (its changed blocks)"
# Its own 68 KiB and the metadata of its changed tree: not 8 MiB.
[ "$bytes" -le $((68 * 1024 + 256 * 1024)) ] || die "the member read $bytes bytes from the disk"
$py sums $mnt/M/f | head -n 1
[ "$($py sums $mnt/M/f | tail -n 1)" = "$want" ] || die "read, mapping and sendfile differ"

# 4. Unaligned reads across the run boundaries, against the same bytes
# read before the pairing.
for off in 413000 409599 5242000 5308415; do
	a=$(dd if=$mnt/M/f bs=1 skip=$off count=10000 status=none | sha256sum)
	b=$(dd if=$ref bs=1 skip=$off count=10000 status=none | sha256sum)
	[ "$a" = "$b" ] || die "an unaligned read at $off differs from the disk's bytes"
done
echo "unaligned: same bytes at 4 boundaries"

# 3. The source's file stays write-denied while a reader reads through
# it, even unpaired and made writable.
exec 8< $mnt/M/f
$py unpair $mnt/M || die "unpair"
btrfs property set -ts $mnt/T ro false || die "the source stayed read-only unpaired"
if ( : >> $mnt/T/f ) 2>/dev/null; then die "the source's file was writable under a reader"; fi
exec 8<&-
( : >> $mnt/T/f ) || die "the source's file stayed write-denied after the reader closed"
echo "source: write-denied while read through"
btrfs property set -ts $mnt/T ro true
$py pair $mnt/M $mnt/T || die "pair again"

# 2. A reader across changes.
$py changes $mnt/M/f $((2 << 20)) || die "a reader missed a change"
umount $mnt
echo "runs: passed"
