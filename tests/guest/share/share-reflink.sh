#!/bin/bash
# A reflink copy of a template file under a new name inside a member
# (cp --reflink, FICLONERANGE) shares the template's pages where its
# extents prove it (docs/design/policy.md "Binding by
# extents").
#
#   share-reflink.sh [MIB] [N]
#
# Plain btrfs on /dev/$DISK0 (no dm layer: sectors_read counts every read).
# N members each copy the template's MIB MiB file under a new name; read
# once from an empty cache, the copies cost about one file of page cache
# and of device reads, every byte right. Then: a write into one copy stays
# in it (others and the template unchanged, before and after
# drop_caches); a partial FICLONERANGE at another offset is read right
# (and not bound); one at the template's offsets is shared; a copy whose
# extents were partly rewritten before its first read is bound by its
# remaining extents and reads its own bytes; a private mapping of a copy
# maps the template; a plain copy deduplicated against the member's file
# (FIDEDUPERANGE, as duperemove does) is shared.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
mib=${1:-64}
n=${2:-8}
bytes=$((mib << 20))

mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
mkdir -p $mnt && mount /dev/$DISK0 $mnt || die "mount"
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data
make_file $mnt/template/data/big.bin "$mib" reflink
btrfs property set $mnt/template ro true
for i in $(seq 1 "$n"); do btrfs -q subvolume snapshot $mnt/template $mnt/m$i; done
sum() { sha256sum < "$1"; }
want=$(sum $mnt/template/data/big.bin)
# Each member copies the file under a new name, sharing its extents.
for i in $(seq 1 "$n"); do
	mkdir $mnt/m$i/copies
	cp --reflink=always $mnt/m$i/data/big.bin $mnt/m$i/copies/renamed.bin ||
		die "cp --reflink in m$i"
done
sync

echo "g $mnt/template" > $groups/create || die "group create"
for i in $(seq 1 "$n"); do echo "g $mnt/m$i" > $groups/add || die "add m$i"; done
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
stat_line() { tr '\n' ' ' < $groups/g/stats; }

# 1. The copies, read once from an empty cache.
drop_caches
pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
for i in $(seq 1 "$n"); do cat $mnt/m$i/copies/renamed.bin > /dev/null; done
pc1=$(page_cache_bytes) rd1=$(sectors_read "$DISK0")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mem=$(ratio $((pc1 - pc0)) $bytes) rd=$(ratio $(((rd1 - rd0) * 512)) $bytes)
echo "reflink: $n copies: page cache ${mem}x, device reads ${rd}x the file"
echo "reflink: stats: $(stat_line)"
for i in $(seq 1 "$n"); do
	[ "$(sum $mnt/m$i/copies/renamed.bin)" = "$want" ] || die "m$i copy read back wrong"
done
awk -v m="$mem" -v r="$rd" 'BEGIN { exit !(m <= 1.05 && r <= 1.05) }' ||
	die "the copies are not shared: page cache ${mem}x, reads ${rd}x"
[ "$(stat_of files_bound_by_extents)" -ge "$n" ] || die "copies not bound: $(stat_line)"

# 2. A write into one copy stays there.
python3 - $mnt/m1/copies/renamed.bin <<'PY' || die "write into m1's copy"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for off in (0, 4096 * 1000, os.fstat(fd).st_size - 4096):
    os.pwrite(fd, b"W" * 4096, off)
os.close(fd)
PY
expect_m1() { # the source with the three pages written
	python3 - $mnt/template/data/big.bin <<'PY'
import hashlib, sys
d = bytearray(open(sys.argv[1], "rb").read())
for off in (0, 4096 * 1000, len(d) - 4096):
    d[off:off + 4096] = b"W" * 4096
print(hashlib.sha256(d).hexdigest() + "  -")
PY
}
want1=$(expect_m1)
check_all() { # WHEN
	[ "$(sum $mnt/m1/copies/renamed.bin)" = "$want1" ] || die "$1: m1's copy lost its write"
	[ "$(sum $mnt/template/data/big.bin)" = "$want" ] || die "$1: the template changed"
	for i in $(seq 2 "$n"); do
		[ "$(sum $mnt/m$i/copies/renamed.bin)" = "$want" ] || die "$1: m$i's copy changed"
		[ "$(sum $mnt/m$i/data/big.bin)" = "$want" ] || die "$1: m$i's file changed"
	done
	[ "$(sum $mnt/m1/data/big.bin)" = "$want" ] || die "$1: m1's file changed"
}
check_all "after the write"
drop_caches
check_all "after drop_caches"
echo "reflink: a write into m1's copy stays in it"

# 3. FICLONERANGE: [4, 12) MiB of the template's file to offset 2 MiB of
# m2/part-moved (other offsets: not bound by extents, read right), and to
# offset 4 MiB of m2/part-same (the template's offsets: shared).
clone_range() { # SRC SRC_OFF LEN DST DST_OFF (MiB)
	python3 - "$@" <<'PY'
import fcntl, os, struct, sys
FICLONERANGE = 0x4020940D
src, soff, ln, dst, doff = sys.argv[1], *map(int, sys.argv[2:4]), sys.argv[4], int(sys.argv[5])
s = os.open(src, os.O_RDONLY)
d = os.open(dst, os.O_RDWR | os.O_CREAT, 0o644)
fcntl.ioctl(d, FICLONERANGE, struct.pack("=qQQQ", s, soff << 20, ln << 20, doff << 20))
PY
}
expect_range() { # DST_OFF (MiB): the file a clone of [4, 12) MiB there gives
	python3 - $mnt/template/data/big.bin "$1" <<'PY'
import hashlib, sys
d = open(sys.argv[1], "rb").read()[4 << 20:12 << 20]
print(hashlib.sha256(bytes(int(sys.argv[2]) << 20) + d).hexdigest() + "  -")
PY
}
[ "$mib" -ge 16 ] || die "the FICLONERANGE cases want a file of 16 MiB or more"
clone_range $mnt/m2/data/big.bin 4 8 $mnt/m2/copies/part-moved 2 || die "FICLONERANGE moved"
clone_range $mnt/m2/data/big.bin 4 8 $mnt/m2/copies/part-same 4 || die "FICLONERANGE same"
sync
drop_caches
b0=$(stat_of files_bound_by_extents) p0=$(stat_of aliases_proven)
[ "$(sum $mnt/m2/copies/part-moved)" = "$(expect_range 2)" ] || die "part-moved read back wrong"
b1=$(stat_of files_bound_by_extents) p1=$(stat_of aliases_proven)
[ "$(sum $mnt/m2/copies/part-same)" = "$(expect_range 4)" ] || die "part-same read back wrong"
b2=$(stat_of files_bound_by_extents) p2=$(stat_of aliases_proven)
echo "reflink: FICLONERANGE elsewhere: bound +$((b1 - b0)), proven +$((p1 - p0));" \
	"at the template's offsets: bound +$((b2 - b1)), proven +$((p2 - p1))"
[ $((b1 - b0)) = 0 ] && [ $((p1 - p0)) = 0 ] || die "a clone at other offsets was bound"
[ $((b2 - b1)) = 1 ] && [ $((p2 - p1)) -ge 2048 ] || die "a clone at the same offsets was not shared"

# 4. A copy whose extents were partly rewritten before its first read:
# bound by its remaining extents, the rewritten pages its own.
cp --reflink=always $mnt/m3/data/big.bin $mnt/m3/copies/rewritten.bin
python3 - $mnt/m3/copies/rewritten.bin <<'PY' || die "rewrite m3's copy"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for off in range(0, os.fstat(fd).st_size, 1 << 20):
    os.pwrite(fd, b"R" * 8192, off)
os.fsync(fd)
os.close(fd)
PY
want3=$(python3 - $mnt/template/data/big.bin <<'PY'
import hashlib, sys
d = bytearray(open(sys.argv[1], "rb").read())
for off in range(0, len(d), 1 << 20):
    d[off:off + 8192] = b"R" * 8192
print(hashlib.sha256(d).hexdigest() + "  -")
PY
)
drop_caches
b0=$(stat_of files_bound_by_extents) p0=$(stat_of aliases_proven)
[ "$(sum $mnt/m3/copies/rewritten.bin)" = "$want3" ] || die "m3's rewritten copy read back wrong"
b1=$(stat_of files_bound_by_extents) p1=$(stat_of aliases_proven)
echo "reflink: partly rewritten copy: bound +$((b1 - b0)), proven +$((p1 - p0)) pages"
[ $((b1 - b0)) = 1 ] && [ $((p1 - p0)) -ge $(((mib << 8) * 3 / 4)) ] ||
	die "the rewritten copy's other extents were not shared"
drop_caches
[ "$(sum $mnt/m3/copies/rewritten.bin)" = "$want3" ] || die "m3's copy wrong after drop_caches"
# Bound by its extents but not the template's bytes throughout: a private
# mapping of it must map its own pages, never the template file's.
s0=$(stat_of mmaps_shared) q0=$(stat_of mmaps_private)
python3 - $mnt/m3/copies/rewritten.bin "$want3" <<'PY' || die "a private mapping of m3's rewritten copy reads wrong"
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    assert hashlib.sha256(m).hexdigest() + "  -" == sys.argv[2], "mapping reads wrong"
    m.close()
PY
[ "$(stat_of mmaps_shared)" = "$s0" ] && [ "$(stat_of mmaps_private)" -gt "$q0" ] ||
	die "the rewritten copy's mapping was substituted by the template's"
echo "reflink: a partly rewritten copy maps its own pages"

# 5. A private mapping of an unchanged copy maps the template's file.
s0=$(stat_of mmaps_shared)
python3 - $mnt/m4/copies/renamed.bin "$want" <<'PY' || die "mmap of m4's copy"
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    assert hashlib.sha256(m).hexdigest() + "  -" == sys.argv[2], "mapping reads wrong"
    m[0:5] = b"xxxxx"	# private to the mapping
    m.close()
PY
[ "$(stat_of mmaps_shared)" -gt "$s0" ] || die "the copy's private mapping was not shared"
[ "$(sum $mnt/m4/copies/renamed.bin)" = "$want" ] || die "m4's copy changed by a private write"
[ "$(sum $mnt/template/data/big.bin)" = "$want" ] || die "template changed by a private write"

# 6. duperemove's way: a plain copy (its own extents, read as a plain
# file) deduplicated against the member's file (FIDEDUPERANGE) takes the
# template's extents and is bound by them at its next first read.
cp --reflink=never $mnt/m$n/data/big.bin $mnt/m$n/copies/deduped.bin
python3 - $mnt/m$n/data/big.bin $mnt/m$n/copies/deduped.bin <<'PY' || die "dedupe into m$n's copy"
import fcntl, os, struct, sys
FIDEDUPERANGE = 0xC0189436
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_RDWR)
length, off = os.fstat(src).st_size, 0
while off < length:  # the kernel dedupes at most 16 MiB per call
    n = min(16 << 20, length - off)
    arg = bytearray(struct.pack("=QQHHI", off, n, 1, 0, 0) +
                    struct.pack("=qQQiI", dst, off, 0, 0, 0))
    fcntl.ioctl(src, FIDEDUPERANGE, arg)
    _, _, done, status, _ = struct.unpack_from("=qQQiI", arg, 24)
    assert status == 0 and done > 0, f"dedupe at {off}: status {status}, {done} bytes"
    off += done
PY
sync
drop_caches
b0=$(stat_of files_bound_by_extents) p0=$(stat_of aliases_proven)
[ "$(sum $mnt/m$n/copies/deduped.bin)" = "$want" ] || die "m$n's deduped copy read back wrong"
b1=$(stat_of files_bound_by_extents) p1=$(stat_of aliases_proven)
echo "reflink: deduped copy: bound +$((b1 - b0)), proven +$((p1 - p0)) pages"
[ $((b1 - b0)) = 1 ] && [ $((p1 - p0)) = $((mib << 8)) ] ||
	die "the deduped copy was not shared"

echo g > $groups/delete
check_all "after the group"
umount $mnt
echo "share-reflink: all checks passed"
