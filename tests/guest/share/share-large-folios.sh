#!/bin/bash
# Reading by runs against a source whose page cache holds large folios
# (docs/design/sharing-in-the-file-system.md, route B), on a kernel with
# mm-patches/7.3. Each change to a paired snapshot's file lands inside one
# large folio F of the source's cache, and each is made to a plain copy in
# tmpfs too; the member must then read the copy's bytes, by read(), a
# private mapping and sendfile(), while the source's file and its folio F
# stay as they were:
#   1. a write of 100 bytes into the middle of F (one block of the member's
#      own, the rest of F read from the source)
#   2. a punched hole of two pages inside F (zeroes, not the source's bytes)
#   3. F's range reflinked into the member one page further on: the same
#      disk blocks at another file offset, which must not be read from the
#      source's folio at the member's offset
#   4. a second file truncated inside F and extended again: zeroes after
#      the cut, never the source's bytes there
# and the member's reads cost only its own blocks: its cache holds no page
# of a range it still shares, and it reads no more than its own from disk.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
. "$TOTALCOW_TOP/tests/guest/share/read-counted.sh"
mnt=/mnt/btrfs
py="python3 $TOTALCOW_TOP/tests/guest/share/share-backing-file.py"
page=$(getconf PAGESIZE)
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/B
make_file $mnt/B/f 8 large-f
make_file $mnt/B/g 8 large-g
btrfs -q subvolume snapshot -r $mnt/B $mnt/T
btrfs -q subvolume snapshot $mnt/T $mnt/M
sync
sum() { sha256sum < "$1" | cut -d' ' -f1; }
src_f=$(sum $mnt/T/f) src_g=$(sum $mnt/T/g)

# The source's cache after a cold sequential read: large folios, or this
# test tests nothing.
echo 1 > /proc/sys/vm/drop_caches
cat $mnt/T/f $mnt/T/g > /dev/null
# F: the first folio of at least 4 pages beyond the first MiB.
read -r fo fs < <($py folios $mnt/T/f | awk -v p=$((4 * page)) \
	'$1 >= 1048576 && $2 >= p { print; exit }')
[ -n "$fo" ] || die "the source's cache has no folio of 4 pages or more: $($py folios $mnt/T/f | head -n 3)"
echo "large-folios: source folio F at $fo, $fs bytes ($($py folios $mnt/T/f | wc -l) large folios in the file)"

ref=/tmp/ref
mkdir -p $ref
cp $mnt/M/f $ref/f
cp $mnt/M/g $ref/g
$py pair $mnt/M $mnt/T || die "pair"

# Every change twice: on the member and on the plain copy.
both() { "$@" $mnt/M/f && "$@" $ref/f; }
# 1. 100 bytes into the middle of F.
head -c 100 /dev/urandom > /tmp/hundred
at=$((fo + fs / 2 + 7))
write_at() { dd if=/tmp/hundred of="$1" bs=1 seek=$at conv=notrunc status=none; }
both write_at || die "write into F"
# 2. Two pages punched inside F.
punch() { fallocate -p -o $((fo + page)) -l $((2 * page)) "$1"; }
both punch || die "punch inside F"
# 3. F's range reflinked one page further on, from the source: the same
# disk blocks, shifted. (The plain copy takes the same bytes by dd.)
$py clone $mnt/T/f "$fo" $mnt/M/f $((fo + fs + page)) "$fs" || die "reflink F shifted"
dd if=$mnt/T/f of=$ref/f bs=$page skip=$((fo / page)) seek=$(((fo + fs + page) / page)) \
	count=$((fs / page)) conv=notrunc status=none
# 4. The second file cut inside F and extended again.
cut=$((fo + 3 * page / 2 + 100))
for g in $mnt/M/g $ref/g; do
	truncate -s $cut $g && truncate -s $((8 << 20)) $g || die "truncate $g"
done
sync

for f in g f; do
	want=$(sum $ref/$f)
	read_counted $mnt/M/$f $mnt/T/$f
	echo "large-folios: $f: member read $READ_BYTES bytes from the disk, own cache $OWN_PAGES pages"
	[ "$SUM" = "$want" ] || die "the member's $f reads other bytes than its plain copy"
	[ "$($py sums $mnt/M/$f | tail -n 1)" = "$want" ] || die "read, mapping and sendfile of $f differ"
	for off in $((fo - 5)) $((at - 3)) $((fo + page - 1)) $((fo + 3 * page)) \
		$((fo + fs + page - 1)) $((2 * fs + fo)) $((cut - 1)); do
		a=$(dd if=$mnt/M/$f bs=1 skip=$off count=9000 status=none | sha256sum)
		b=$(dd if=$ref/$f bs=1 skip=$off count=9000 status=none | sha256sum)
		[ "$a" = "$b" ] || die "$f: an unaligned read at $off differs from the plain copy"
	done
	case $f in
	f)
		# Its own: the written block, the punched pages (holes, its own
		# zeroes) and the shifted reflink; nothing of the range it shares.
		own=$((1 + 2 + fs / page))
		[ "$OWN_PAGES" -le "$own" ] ||
			die "f: own cache $OWN_PAGES pages, more than its $own changed pages"
		[ "$READ_BYTES" -le $((fs + page + 256 * 1024)) ] ||
			die "f: the member read $READ_BYTES bytes from the disk"
		;;
	g)
		tail_pages=$((((8 << 20) - cut / page * page) / page))
		[ "$OWN_PAGES" -le "$tail_pages" ] ||
			die "g: own cache $OWN_PAGES pages, more than its $tail_pages pages past the cut"
		[ "$READ_BYTES" -le $((page + 256 * 1024)) ] ||
			die "g: the member read $READ_BYTES bytes from the disk"
		;;
	esac
done

# The source: its bytes unchanged; F, read again cold before the member's
# reads of f, is one folio again and was not split by them.
[ "$(sum $mnt/T/f)" = "$src_f" ] && [ "$(sum $mnt/T/g)" = "$src_g" ] ||
	die "the source's files changed"
$py folios $mnt/T/f | grep -qx "$fo $fs" || die "the source's folio F at $fo was split or dropped"
echo "large-folios: source unchanged, F still one folio of $fs bytes"
umount $mnt
echo "large-folios: passed"
