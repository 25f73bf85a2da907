#!/bin/bash
# totalcowctl's address translation against filefrag + btrfs-map-logical
# (tests/vm/fiemap-ranges), on real file systems: single, DUP data, RAID1
# over two devices, compressed files, tiny inline files, sparse and
# preallocated files. Both of the tool's ways are checked: --fiemap (FIEMAP
# per file + chunk tree) and the default (file extent items read from the
# fs tree + chunk tree), which must agree with each other exactly except
# for compressed extents, where the fs tree gives the exact disk length
# and FIEMAP only the logical one.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
ref() { "$TOTALCOW_TOP/tests/vm/fiemap-ranges" "$@"; }
mnt=/mnt/btrfs
mkdir -p $mnt

populate() { # a tree with every kind of file
	mkdir -p $mnt/t/dir/sub
	make_file $mnt/t/big 150 big
	make_file $mnt/t/dir/medium 5 medium
	for i in $(seq 1 20); do echo "tiny $i" > $mnt/t/dir/sub/tiny$i; done
	truncate -s 64M $mnt/t/sparse
	make_file /tmp/chunk 1 sparse
	dd if=/tmp/chunk of=$mnt/t/sparse bs=1M seek=10 conv=notrunc status=none
	dd if=/tmp/chunk of=$mnt/t/sparse bs=1M seek=40 conv=notrunc status=none
	fallocate -l 8M $mnt/t/prealloc
	dd if=/tmp/chunk of=$mnt/t/prealloc bs=1M seek=2 conv=notrunc status=none
	ln -s big $mnt/t/link
	sync
}
regular_files() { find $mnt/t -type f -size +4k | sort; }

compare() { # LABEL REF-OPTIONS...
	local label=$1; shift
	ctl template add x $mnt/t --dry-run -q --device /dev/mapper/tc --fiemap > /tmp/got
	ctl template add x $mnt/t --dry-run -q --device /dev/mapper/tc > /tmp/tree
	cmp -s /tmp/got /tmp/tree || { diff /tmp/got /tmp/tree | head; die "$label: fs tree and FIEMAP disagree"; }
	# shellcheck disable=SC2046
	ref "$@" /dev/mapper/tc $(regular_files) > /tmp/want
	if ! diff /tmp/got /tmp/want > /tmp/diff; then
		head -n 20 /tmp/diff
		die "$label: totalcowctl and btrfs-map-logical disagree"
	fi
	[ -s /tmp/got ] || die "$label: nothing to register"
	echo "$label: $(wc -l < /tmp/got) ranges, same as btrfs-map-logical"
}

# 1. single data profile
tc_create tc /dev/$DISK0
mkfs.btrfs -q -f -K -d single -m dup /dev/mapper/tc >/dev/null 2>&1
mount /dev/mapper/tc $mnt
populate
compare single
ctl template add x $mnt/t --dry-run --device /dev/mapper/tc > /dev/null 2>/tmp/notes ||
	die "dry run failed"
umount $mnt

# 2. DUP data: both copies are on the device and both are registered.
mkfs.btrfs -q -f -K -d dup -m dup /dev/mapper/tc >/dev/null 2>&1
mount /dev/mapper/tc $mnt
populate
compare dup --all-mirrors
n1=$(ref /dev/mapper/tc $(regular_files) | awk '{ s += $2 } END { print s }')
n2=$(awk '{ s += $2 } END { print s }' /tmp/got)
[ "$n2" = $((2 * n1)) ] || die "dup: expected both copies ($((2 * n1)) sectors), got $n2"
umount $mnt

# 3. RAID1 over the totalcow device and a plain disk: only the copies on
# the totalcow device are registered, and the tool says so.
mkfs.btrfs -q -f -K -d raid1 -m raid1 /dev/mapper/tc /dev/$DISK1 >/dev/null 2>&1
btrfs device scan /dev/mapper/tc /dev/$DISK1 >/dev/null
mount /dev/mapper/tc $mnt
populate
compare raid1 --all-mirrors
if ctl template add x $mnt/t --dry-run -q --fiemap > /dev/null 2>/tmp/err; then
	die "raid1 without --device should be refused"
fi
grep -q "multi-device" /tmp/err || die "raid1: unclear refusal: $(cat /tmp/err)"
umount $mnt

# 4. Compressed files: registered from their disk address.
mkfs.btrfs -q -f -K /dev/mapper/tc >/dev/null 2>&1
mount -o compress-force=zstd /dev/mapper/tc $mnt
mkdir -p $mnt/t
(yes "compressible line of text for the zstd test" || true) | head -c 20M > $mnt/t/text
sync
# Not "filefrag | grep -q": grep quits at the first match, filefrag dies of
# SIGPIPE on its long listing and pipefail turns that into a failure.
filefrag -v $mnt/t/text > /tmp/filefrag
grep -q encoded /tmp/filefrag || die "the file did not compress"
ctl template add x $mnt/t --dry-run -q --device /dev/mapper/tc --fiemap > /tmp/got
ref --encoded /dev/mapper/tc $mnt/t/text > /tmp/want
diff /tmp/got /tmp/want > /dev/null || die "compressed: totalcowctl and btrfs-map-logical disagree"
echo "compressed: $(wc -l < /tmp/got) ranges, same as btrfs-map-logical"
# The fs tree gives each compressed extent's exact disk range: inside the
# FIEMAP ranges, and smaller.
ctl template add x $mnt/t --dry-run -q --device /dev/mapper/tc > /tmp/tree
python3 - /tmp/tree /tmp/got <<'PY' || die "compressed: fs-tree ranges are not inside the FIEMAP ones"
import sys
tree = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
fiemap = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
assert tree, "no ranges"
for s, n in tree:
    assert any(fs <= s and s + n <= fs + fn for fs, fn in fiemap), (s, n)
t, f = sum(n for _, n in tree), sum(n for _, n in fiemap)
assert t < f, (t, f)
print(f"compressed: fs tree registers {t} sectors, FIEMAP {f}")
PY
umount $mnt

# 5. A file system that is not on the totalcow device is refused.
mkfs.btrfs -q -f -K /dev/$DISK1 >/dev/null 2>&1
mount /dev/$DISK1 $mnt
mkdir -p $mnt/t && make_file $mnt/t/f 1 other
rc=0; ctl template add x $mnt/t --device /dev/mapper/tc -q 2>/tmp/err || rc=$?
[ $rc = 4 ] || die "file system on another device: exit $rc, want 4"
grep -q "not on" /tmp/err || die "unclear: $(cat /tmp/err)"
umount $mnt
echo "totalcowctl translation: all profiles agree"
