#!/bin/bash
# Snapshots follow their source into its sharing scope ("per subtree";
# docs/design/scopes.md, "Subtrees: snapshots follow their source"):
# an image subvolume is enabled once, and the containers made from it by
# snapshot afterwards (c1-c4, and c5, a snapshot of c1) share its pages
# with no admin step each, while a reflinked copy in a subvolume of its
# own (not a snapshot) keeps its own page cache: 6 files read cold cost
# 2x the file in memory and device reads, not 7x. An admin's disable of a
# followed snapshot keeps it, and snapshots made from it, out; an enable
# moves a followed snapshot to another scope; a user who may not snapshot
# the image (not its owner) cannot join its scope, but joins with a
# snapshot of its own enabled subvolume. With an auto group on the file
# system (whose lineage walk looks 4 hops), a snapshot 6 hops from the
# image still follows. Deleted snapshots leave the list, and a scope goes
# with its last subvolume. Every byte stays right.
# Arguments: [MIB] (default 32).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mib=${1:-32}
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
bytes=$((mib << 20))
sum() { sha256sum < "$1" | cut -d' ' -f1; }
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
# The subvolume ids listed after KEY ("subvolumes" or "followed") of SCOPE.
ids() {
	awk -v s="$1" -v k="$2" '$2 == s { on = 0; for (i = 3; i <= NF; i++) {
		if ($i == "subvolumes" || $i == "followed") { on = ($i == k); continue }
		if (on) printf "%s ", $i } }' $x/scopes
}
id() { btrfs inspect-internal rootid "$1"; }

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/image
make_file $mnt/image/f $mib image
btrfs -q subvolume create $mnt/other
cp --reflink=always $mnt/image/f $mnt/other/f
sync
want=$(sum $mnt/image/f)
ctl extents enable --scope fleet $mnt/image || die "extents enable"
for c in c1 c2 c3 c4; do
	btrfs -q subvolume snapshot $mnt/image $mnt/$c
done
btrfs -q subvolume snapshot $mnt/c1 $mnt/c5
sync
[ -z "$(ids fleet followed)" ] || die "followed before any read: $(cat $x/scopes)"

cold_reads $bytes $mnt/{image,c1,c2,c3,c4,c5,other}/f
mem=$MEM reads=$READS
echo "follow: page cache ${mem}x, device reads ${reads}x the file for an image, 5 snapshots made after enable and an unscoped reflink"
awk -v m="$mem" -v r="$reads" 'BEGIN { exit !(m >= 1.99 && m <= 2.03 && r >= 1.99 && r <= 2.03) }' ||
	die "want 2x and 2x: $(cat $x/scopes)"
want_ids=$(for c in c1 c2 c3 c4 c5; do id $mnt/$c; done | sort -n | tr '\n' ' ')
[ "$(ids fleet followed | tr ' ' '\n' | sort -n | tr '\n' ' ')" = "$want_ids" ] ||
	die "followed: want $want_ids: $(cat $x/scopes)"
[ "$(ids fleet subvolumes)" = "$(id $mnt/image) " ] || die "enabled: $(cat $x/scopes)"
ctl extents list --json | python3 -c '
import json, sys
s, = json.load(sys.stdin)
assert s["scope"] == "fleet" and len(s["subvolumes"]) == 1 and len(s["followed"]) == 5, s
' || die "extents list: $(ctl extents list)"

# Taken out by an admin: c2 stays out, and so does a snapshot of it; a
# snapshot of c3 (which followed) follows.
ctl extents disable --scope fleet $mnt/c2 || die "disable a followed snapshot"
btrfs -q subvolume snapshot $mnt/c2 $mnt/c2s
btrfs -q subvolume snapshot $mnt/c3 $mnt/c3s
sync
for v in c2 c2s c3s; do
	cat $mnt/$v/f > /dev/null
done
case " $(ids fleet followed)" in
*" $(id $mnt/c2) "*|*" $(id $mnt/c2s) "*) die "c2 or its snapshot followed back in: $(cat $x/scopes)" ;;
*" $(id $mnt/c3s) "*) ;;
*) die "c3's snapshot did not follow: $(cat $x/scopes)" ;;
esac
# An enable moves a followed snapshot to a scope of its own.
ctl extents enable --scope tenant $mnt/c4 || die "enable of a followed snapshot"
[ "$(ids tenant subvolumes)" = "$(id $mnt/c4) " ] || die "c4 not moved: $(cat $x/scopes)"
case " $(ids fleet followed)" in *" $(id $mnt/c4) "*) die "c4 still in fleet: $(cat $x/scopes)" ;; esac
if echo "other $mnt/c4" > $x/enable 2>/dev/null; then
	die "an enabled subvolume was enabled in another scope"
fi

# Unprivileged: nobody may not snapshot root's image into its own
# directory, so it cannot join the fleet; its own subvolume, enabled by
# the admin, takes its snapshots along.
mkdir $mnt/drop
chown nobody $mnt/drop
btrfs -q subvolume create $mnt/drop/mine
make_file $mnt/drop/mine/g 1 mine
chown -R nobody $mnt/drop/mine
ctl extents enable --scope tenant-n $mnt/drop/mine || die "enable nobody's subvolume"
if setpriv --reuid nobody --regid nogroup --clear-groups \
	btrfs -q subvolume snapshot $mnt/image $mnt/drop/stolen 2>/dev/null; then
	die "nobody made a snapshot of root's image"
fi
setpriv --reuid nobody --regid nogroup --clear-groups \
	btrfs -q subvolume snapshot $mnt/drop/mine $mnt/drop/mine2 || die "nobody's own snapshot"
sync
setpriv --reuid nobody --regid nogroup --clear-groups cat $mnt/drop/mine2/g > /dev/null
[ "$(ids tenant-n followed)" = "$(id $mnt/drop/mine2) " ] || die "nobody's snapshot: $(cat $x/scopes)"

# An auto group on the same file system: a file in no group has its
# lineage read for the group first, 4 hops. s1's chain ends within them:
# it follows on that reading. The image is 6 hops back from d6: the
# follow must look farther than the group did.
btrfs -q subvolume create $mnt/T
make_file $mnt/T/t 1 tmpl
btrfs property set $mnt/T ro true
sync
ctl group create g $mnt/T --auto || die "group create --auto"
btrfs -q subvolume snapshot $mnt/image $mnt/s1
prev=$mnt/image
for i in 1 2 3 4 5 6; do
	btrfs -q subvolume snapshot $prev $mnt/d$i
	prev=$mnt/d$i
done
sync
cat $mnt/s1/f $mnt/d6/f > /dev/null
for v in s1 d6; do
	case " $(ids fleet followed)" in
	*" $(id $mnt/$v) "*) ;;
	*) die "$v did not follow the image with an auto group on the file system: $(cat $x/scopes)" ;;
	esac
done
ctl group del g || die "group del"
echo "follow: with an auto group on the file system, a snapshot 1 and one 6 hops from the image follow"

# Writes on both sides stay private; every byte right after a cold read.
printf 'c1 was here' | dd of=$mnt/c1/f bs=1 seek=4096 conv=notrunc status=none
printf 'image too' | dd of=$mnt/image/f bs=1 seek=8192 conv=notrunc status=none
sync
drop_caches
[ "$(dd if=$mnt/c1/f bs=1 skip=4096 count=11 status=none)" = "c1 was here" ] || die "c1's write"
[ "$(dd if=$mnt/image/f bs=1 skip=8192 count=9 status=none)" = "image too" ] || die "image's write"
for v in c2 c3 c4 c5 c2s c3s s1 d6 other; do
	[ "$(sum $mnt/$v/f)" = "$want" ] || die "$v/f read back wrong"
done
# A deleted snapshot leaves the list; its scope goes with its last.
c5=$(id $mnt/c5) mine2=$(id $mnt/drop/mine2)
btrfs -q subvolume delete $mnt/c5 $mnt/drop/mine2
sync
case " $(ids fleet followed)" in *" $c5 "*) die "deleted c5 still followed: $(cat $x/scopes)" ;; esac
[ -z "$(ids tenant-n followed)" ] || die "deleted mine2 still followed: $(cat $x/scopes)"
ctl extents disable --scope tenant-n $mnt/drop/mine || die "disable nobody's subvolume"
grep -q " tenant-n " $x/scopes && die "tenant-n left with only deleted subvolumes: $(cat $x/scopes)"
echo "follow: disable keeps a lineage out, enable moves it, nobody follows only its own, every byte right"
umount $mnt
