#!/bin/bash
# Page-cache sharing (layer 2) with the dm layer under it: 8 snapshots of a
# 256 MiB template file read once keep about one copy in the page cache and
# read the device once; every byte is right. Then every way of changing a
# member (write, mmap write, truncate, punch, O_DIRECT, reflink), fsync,
# drop_caches and group deletion must keep each file exactly as a stock
# kernel shows it, and bad group input changes nothing.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
mib=${1:-256}
layer1=${2:-dm}	# "nodm": no template extents on the dm layer
n=8

tc_btrfs tc /dev/$DISK0 $mnt cache_size 100%
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data
make_file $mnt/template/data/file $mib template
echo small > $mnt/template/data/small
btrfs property set $mnt/template ro true
# c1..c8 are the fleet; c9 is changed below, to be compared page by page.
for i in $(seq 1 $((n + 1))); do btrfs -q subvolume snapshot $mnt/template $mnt/c$i; done
sync
bytes=$((mib << 20))
want=$(sha256sum < $mnt/template/data/file)

# Refusals first: nothing may change.
expect_fail() { # WHAT FILE TEXT
	if echo "$3" > "$2" 2>/dev/null; then die "$1 was accepted"; fi
}
expect_fail "a writable template" $groups/create "g $mnt/c1"
expect_fail "a template off btrfs" $groups/create "g /tmp"
expect_fail "a relative path" $groups/create "g mnt/btrfs/template"
expect_fail "a bad name" $groups/create "g/x $mnt/template"
expect_fail "no path" $groups/create "g"
expect_fail "a missing group" $groups/add "nosuch $mnt/c1"
[ -z "$(ls -d $groups/*/ 2>/dev/null)" ] || die "a refused create left a group"

btrfs -q subvolume create $mnt/stranger
ctl group create fleet $mnt/c1 2>/tmp/err && die "totalcowctl: a writable template"
grep -q "not a read-only subvolume" /tmp/err || die "unclear: $(cat /tmp/err)"
ctl group create fleet $mnt/template || die "group create"
expect_fail "a duplicate group" $groups/create "fleet $mnt/template"
rc=0; ctl group add fleet $mnt/stranger 2>/tmp/err || rc=$?
[ $rc = 1 ] && grep -q "not a snapshot of the template" /tmp/err || die "stranger: $rc $(cat /tmp/err)"
ctl group add fleet $(for i in $(seq 1 $((n + 1))); do echo $mnt/c$i; done) || die "group add"
expect_fail "a member twice" $groups/add "fleet $mnt/c1"
expect_fail "the template as a member" $groups/add "fleet $mnt/template"
[ "$(wc -l < $groups/fleet/members)" = $((n + 1)) ] || die "members: $(cat $groups/fleet/members)"
if [ "$layer1" = dm ]; then
	ctl template add base $mnt/template -q || die "template add failed"
	# The page cache keeps the one shared copy; the dm cache takes only
	# blocks read again (docs/dm-totalcow.rst, admit).
	dmsetup message tc 0 admit second
fi

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/fleet/stats; }
# c9's file is touched (metadata changed, extents not) and its first MiB
# rewritten with the same bytes (new extents): the rest is still proven
# from the extents, the rewritten MiB is read, screened and compared.
touch $mnt/c9/data/file
dd if=$mnt/template/data/file of=$mnt/c9/data/file bs=1M count=1 conv=notrunc,fsync status=none
drop_caches
pc0=$(page_cache_bytes); r0=$(sectors_read "$DISK0"); xa0=$(xa_node_bytes)
for i in $(seq 1 $n); do
	[ "$(sha256sum < $mnt/c$i/data/file)" = "$want" ] || die "c$i read back wrong"
done
pc1=$(page_cache_bytes); r1=$(sectors_read "$DISK0"); xa1=$(xa_node_bytes)
cached=$(( $(tc_stat tc cached) * 4096 ))
ratio() { echo "scale=3; $1 / $bytes" | bc; }
mem=$(ratio $((pc1 - pc0))); reads=$(ratio $(((r1 - r0) * 512))); both=$(ratio $((pc1 - pc0 + cached)))
echo "shared: page cache ${mem}x, device reads ${reads}x, page cache + dm cache ${both}x"
# xarray nodes: the template's page cache and the dm cache's index need a
# leaf node per 64 pages each; the members' aliases, proven aligned blocks
# of 64 pages each in one slot (block aliases), add almost nothing. With a
# slot per page the 8 members alone would add 8 leaf nodes per 64 pages.
xa=$(ratio $((xa1 - xa0)))
echo "shared: xarray nodes ${xa}x the file"
[ "$(echo "$xa <= 0.01" | bc)" = 1 ] || die "xarray nodes grew ${xa}x the file"
cat $groups/fleet/stats
[ "$(echo "$mem <= 1.05" | bc)" = 1 ] || die "page cache grew ${mem}x the file"
[ "$layer1" != dm ] || [ "$(echo "$reads <= 1.01" | bc)" = 1 ] || die "device reads ${reads}x the file"
[ "$(echo "$both <= 1.05" | bc)" = 1 ] || die "page cache + dm cache ${both}x the file"
[ "$(sha256sum < $mnt/c9/data/file)" = "$want" ] || die "c9 read back wrong"
ctl group list
shared=$(stat_of pages_shared)
[ "$shared" -ge $((n * (bytes / 4096) * 99 / 100)) ] || die "only $shared pages shared"
[ "$(stat_of aliases_proven)" -ge $(((n + 1) * (bytes / 4096) - 256)) ] || die "unchanged extents not proven"
[ "$(stat_of compares)" -ge 256 ] || die "the rewritten MiB was not compared"
[ "$(stat_of aliases_installed)" -ge 256 ] || die "the rewritten MiB was not shared"

# Reading again is served from the template's pages, still right.
for i in 1 5; do
	[ "$(sha256sum < $mnt/c$i/data/file)" = "$want" ] || die "c$i re-read wrong"
done

# A buffered write into a shared page: private to c1.
orig=$(dd if=$mnt/template/data/file bs=4096 skip=256 count=1 status=none | sha256sum)
head -c 4096 /dev/urandom > /tmp/new
dd if=/tmp/new of=$mnt/c1/data/file bs=4096 seek=256 conv=notrunc,fsync status=none
new=$(sha256sum < /tmp/new)
page() { dd if="$1" bs=4096 skip="$2" count=1 status=none | sha256sum; }
[ "$(page $mnt/c1/data/file 256)" = "$new" ] || die "c1 does not see its write"
for f in $mnt/template/data/file $mnt/c2/data/file; do
	[ "$(page $f 256)" = "$orig" ] || die "$f sees c1's write"
done
[ "$(stat_of cow_breaks)" -ge 1 ] || die "no COW break counted"

# mmap: reads through a mapping; a shared write through a mapping.
python3 - $mnt/c3/data/file $mnt/c4/data/file "$want" <<'PY' || die "mmap"
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
    assert hashlib.sha256(m).hexdigest() + "  -" == sys.argv[3], "mmap read"
with open(sys.argv[2], "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
    m[8192:8192 + 5] = b"MMAP!"
    m.flush()
PY
[ "$(dd if=$mnt/c4/data/file bs=1 skip=8192 count=5 status=none)" = "MMAP!" ] || die "c4 mmap write lost"
[ "$(dd if=$mnt/c5/data/file bs=1 skip=8192 count=5 status=none)" != "MMAP!" ] || die "c5 sees c4's mmap write"
[ "$(sha256sum < $mnt/c5/data/file)" = "$want" ] || die "c5 changed"

# truncate, punch, O_DIRECT, reflink into members.
truncate -s 100M $mnt/c6/data/file
[ "$(head -c 100M $mnt/template/data/file | sha256sum)" = "$(sha256sum < $mnt/c6/data/file)" ] || die "truncate"
fallocate -p -o 8M -l 1M $mnt/c7/data/file
[ "$(page $mnt/c7/data/file 2100)" = "$(head -c 4096 /dev/zero | sha256sum)" ] || die "punch hole"
[ "$(page $mnt/c8/data/file 2100)" = "$(page $mnt/template/data/file 2100)" ] || die "c8 sees c7's hole"
[ "$(dd if=$mnt/c8/data/file bs=1M iflag=direct status=none | sha256sum)" = "$want" ] || die "O_DIRECT read"
dd if=/tmp/new of=$mnt/c8/data/file bs=4096 seek=300 oflag=direct conv=notrunc status=none
[ "$(page $mnt/c8/data/file 300)" = "$new" ] || die "O_DIRECT write not seen"
cp --reflink=always $mnt/c1/data/file $mnt/c2/data/file
[ "$(page $mnt/c2/data/file 256)" = "$new" ] || die "reflink into c2 not seen"

# Everything again after dropping caches (and under no sharing at all).
check_all() {
	[ "$(page $mnt/c1/data/file 256)" = "$new" ] || die "$1: c1"
	[ "$(page $mnt/c2/data/file 256)" = "$new" ] || die "$1: c2"
	[ "$(dd if=$mnt/c4/data/file bs=1 skip=8192 count=5 status=none)" = "MMAP!" ] || die "$1: c4"
	[ "$(stat -c %s $mnt/c6/data/file)" = $((100 << 20)) ] || die "$1: c6 size"
	[ "$(page $mnt/c7/data/file 2100)" = "$(head -c 4096 /dev/zero | sha256sum)" ] || die "$1: c7"
	[ "$(page $mnt/c8/data/file 300)" = "$new" ] || die "$1: c8"
	[ "$(sha256sum < $mnt/c5/data/file)" = "$want" ] || die "$1: c5"
	[ "$(sha256sum < $mnt/c3/data/file)" = "$want" ] || die "$1: c3"
	[ "$(sha256sum < $mnt/template/data/file)" = "$want" ] || die "$1: template"
}
check_all "warm"
drop_caches
check_all "after drop_caches"
# The template's files are write-denied while members are bound to them.
if echo x >> $mnt/template/data/file 2>/dev/null; then die "template writable"; fi
echo fleet > $groups/delete
[ ! -e $groups/fleet ] || die "group still listed"
check_all "after delete"
expect_fail "deleting it twice" $groups/delete fleet
umount $mnt
echo "share-snapshots: all checks passed"
