#!/bin/bash
# Automatic membership: with groups/<g>/auto on, any
# subvolume whose parent UUID chain reaches the template within 4
# snapshots joins the group at its first read: no groups/add, no hook, no
# privilege. An unprivileged user snapshots a clone it owns (2 hops) and
# reads it: it shares the template's pages. Five hops, an unrelated
# subvolume and a chain through a deleted snapshot do not join; a deleted
# member leaves auto_members; with auto off nothing new joins; groups/add
# of an automatic member makes it an added one, groups/remove takes one
# out. Every
# byte read is compared with what was written, writes stay private.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
user=(setpriv --reuid=1000 --regid=1000 --clear-groups)
btrfs_mount /dev/$DISK0 $mnt

btrfs -q subvolume create $mnt/T
mkdir $mnt/T/d
make_file $mnt/T/d/f 8 auto
btrfs property set $mnt/T ro true
mkdir $mnt/home && chown 1000:1000 $mnt/home
btrfs -q subvolume snapshot $mnt/T $mnt/home/C1
chown 1000:1000 $mnt/home/C1 $mnt/home/C1/d $mnt/home/C1/d/f
btrfs -q subvolume create $mnt/U
cp --reflink=never $mnt/T/d/f $mnt/U/f
sync
want=$(sha256sum < $mnt/T/d/f | cut -d' ' -f1)
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
auto_has() { awk '{ print $2 }' $groups/g/auto_members | grep -qx "$1"; }
reads_right() { # PATH [as user]
	local got
	got=$("${@:2}" sha256sum < "$1" | cut -d' ' -f1) || die "cannot read $1"
	[ "$got" = "$want" ] || die "$1 read back wrong"
}

echo "plain $mnt/T" > $groups/create || die "groups/create"
[ "$(cat $groups/plain/auto)" = 0 ] || die "auto is on by default"
echo plain > $groups/delete
"$TOTALCOW_TOP/tools/totalcowctl" group create g $mnt/T --auto || die "totalcowctl group create --auto"
if echo maybe > $groups/g/auto 2>/dev/null; then die "auto took 'maybe'"; fi
[ "$(cat $groups/g/auto)" = 1 ] || die "a refused write changed auto"

# The user snapshots its own clone (snapshots need the source's owner)
# and reads the snapshot: two hops from the template.
"${user[@]}" btrfs -q subvolume snapshot $mnt/home/C1 $mnt/home/C2 || die "user snapshot"
sync
drop_caches
reads_right $mnt/T/d/f
# The tools the user's read runs come from the root file system, whose
# pages count as page cache too (9p on x86-64, hostfs on UML): load them
# before the count starts, so that it counts the file's pages only.
"${user[@]}" sha256sum < /dev/null > /dev/null
pc0=$(page_cache_bytes)
reads_right $mnt/home/C2/d/f "${user[@]}"
pc1=$(page_cache_bytes)
grow=$(( (pc1 - pc0) * 100 / (8 << 20) ))
echo "auto: the user's 2-hop snapshot read once: page cache +${grow}% of the file, pages_shared $(stat_of pages_shared)"
auto_has /home/C2 || die "C2 did not join: $(cat $groups/g/auto_members)"
[ "$grow" -le 5 ] || die "C2's read grew the page cache by ${grow}% of the file"
[ "$(stat_of pages_shared)" -ge 2000 ] || die "C2 shares $(stat_of pages_shared) pages"
[ -z "$(cat $groups/g/members)" ] || die "an automatic member shows in members"

# C1 joins at its own first read; its write stays its own.
reads_right $mnt/home/C1/d/f
auto_has /home/C1 || die "C1 did not join"
printf 'mine' | dd of=$mnt/home/C1/d/f bs=1 seek=4096 conv=notrunc status=none
[ "$(dd if=$mnt/home/C1/d/f bs=1 skip=4096 count=4 status=none)" = mine ] || die "C1 lost its write"
reads_right $mnt/T/d/f
reads_right $mnt/home/C2/d/f

# Not within 4 hops, not related: no join, reads right.
for i in 3 4 5; do
	"${user[@]}" btrfs -q subvolume snapshot $mnt/home/C$((i - 1)) $mnt/home/C$i || die "C$i"
done
sync
drop_caches
reads_right $mnt/home/C4/d/f
auto_has /home/C4 || die "C4 (4 hops) did not join"
reads_right $mnt/home/C5/d/f
if auto_has /home/C5; then die "C5 (5 hops) joined"; fi
cmp -s $mnt/U/f $mnt/T/d/f || die "U's copy differs"
cat $mnt/U/f > /dev/null
if auto_has /U; then die "an unrelated subvolume joined"; fi
echo "auto: 4 hops join, 5 hops and an unrelated subvolume do not"

# groups/add of an automatic member makes it an added one (an LXC hook
# for a clone that joined by itself succeeds), its files still bound;
# groups/remove takes an automatic member out.
cat $mnt/home/C1/d/f > /dev/null	# bound, to the automatic member
auto_has /home/C1 || die "C1 is not automatic before the add"
echo "g $mnt/home/C1" > $groups/add || die "groups/add of an automatic member"
[ "$(cat $groups/g/members)" = "$mnt/home/C1" ] || die "members after adopting C1: $(cat $groups/g/members)"
if auto_has /home/C1; then die "C1 is both added and automatic"; fi
# Its bound file went with it: removing the added member unbinds it.
echo "g $mnt/home/C1" > $groups/remove || die "groups/remove of the adopted C1"
[ -z "$(cat $groups/g/members)" ] || die "C1 still a member after groups/remove"
drop_caches
[ "$(dd if=$mnt/home/C1/d/f bs=1 skip=4096 count=4 status=none)" = mine ] || die "C1 lost its write"
auto_has /home/C1 || die "C1 did not join again at its next read (auto is on)"
echo "g $mnt/home/C1" > $groups/add || die "groups/add of C1 again"
echo "g $mnt/home/C4" > $groups/remove || die "groups/remove of an automatic member"
if auto_has /home/C4; then die "C4 still listed after groups/remove"; fi

# A deleted member leaves; a snapshot of it made before does not join
# through it (the chain ends at the deleted subvolume).
"${user[@]}" btrfs -q subvolume snapshot $mnt/home/C2 $mnt/home/D || die "D"
btrfs -q subvolume delete $mnt/home/C2
sync
if auto_has /home/C2; then die "a deleted member is still listed"; fi
drop_caches
reads_right $mnt/home/D/d/f
if auto_has /home/D; then die "D joined through a deleted subvolume"; fi

# Auto off: nothing new joins; those that joined stay.
"$TOTALCOW_TOP/tools/totalcowctl" group auto g off || die "totalcowctl group auto off"
[ "$(cat $groups/g/auto)" = 0 ] || die "auto still on"
btrfs -q subvolume snapshot $mnt/T $mnt/home/E
sync
reads_right $mnt/home/E/d/f
if auto_has /home/E; then die "E joined with auto off"; fi
grep -qx "$mnt/home/C1" $groups/g/members || die "C1 left when auto went off"
"$TOTALCOW_TOP/tools/totalcowctl" group list --json | python3 -c '
import json, sys
g = [g for g in json.load(sys.stdin) if g["name"] == "g"][0]
assert not g["auto"] and g["auto_members"] == [] and g["members"] == ["/mnt/btrfs/home/C1"], g
' || die "totalcowctl group list --json disagrees with auto_members"
echo "auto: members_joined $(stat_of members_joined), auto_members: $(awk '{ print $2 }' $groups/g/auto_members | tr '\n' ' ')"
echo g > $groups/delete || die "groups/delete"
reads_right $mnt/home/C3/d/f
umount $mnt
echo "auto: passed"
