#!/bin/bash
# A group's template is the group's, never a sharing scope's (review of
# 2026-11-28). The usual way to make a template is a read-only snapshot
# of an image subvolume; if the image is in a sharing scope, the first
# read of a template file made the template follow its source into the
# scope. Its pages then became aliases of the scope's canonical pages,
# which the group's path treats as absent: every member kept its own copy
# of every page, and nothing said so.
#  1. The template, a snapshot of an enabled image, is read first, then
#     a member cold: the template did not follow (not listed in the
#     scope), and the member's file aliases the template's pages
#     (pages_shared = the file's pages, its read took under an eighth
#     of the file from the disk).
#  2. extents/enable of the template's subvolume is refused (EBUSY).
#  3. groups/create on a subvolume that followed into a scope before any
#     group named it is refused (EBUSY) until extents/disable takes it out.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mib=4 pages=1024
x=/sys/kernel/mm/totalcow/extents
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
sum() { sha256sum < "$1" | cut -d' ' -f1; }
shared() { awk '$1 == "pages_shared" { print $2 }' $groups/g/stats; }
subvol_id() { btrfs inspect-internal rootid "$1"; }
# followed ID: is subvolume ID listed as followed in scope s?
followed() {
	awk -v id="$1" '$2 == "s" { f = 0; for (i = 3; i <= NF; i++) {
		if ($i == "followed") f = 1; else if (f && $i == id) found = 1 } }
		END { exit !found }' $x/scopes
}

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/img
make_file $mnt/img/f $mib image
want=$(sum $mnt/img/f)
sync
echo "s $mnt/img" > $x/enable || die "extents/enable img"
btrfs -q subvolume snapshot -r $mnt/img $mnt/t
echo "g $mnt/t" > $groups/create || die "groups/create on a snapshot of an enabled image"
btrfs -q subvolume snapshot $mnt/t $mnt/m
echo "g $mnt/m" > $groups/add || die "groups/add m"
drop_caches

# 1. The template is read first, the member cold after it.
[ "$(sum $mnt/t/f)" = "$want" ] || die "t/f read back wrong"
if followed "$(subvol_id $mnt/t)"; then
	die "the template followed its image into scope s: $(cat $x/scopes)"
fi
rd0=$(sectors_read "$DISK0")
[ "$(sum $mnt/m/f)" = "$want" ] || die "m/f read back wrong"
rd=$((($(sectors_read "$DISK0") - rd0) * 512))
echo "template-in-scope: member pages shared with the template $(shared) of $pages, device reads $rd bytes of $((mib << 20))"
[ "$(shared)" -ge $pages ] && [ $rd -lt $((mib << 20 >> 3)) ] ||
	die "the member did not share the template's pages: $(cat $groups/g/stats)"

# 2. Enabling the template's subvolume is refused.
if echo "s2 $mnt/t" > $x/enable 2>/dev/null; then
	die "extents/enable of a group's template was accepted: $(cat $x/scopes)"
fi
dmesg | grep -q "extents/enable: the subvolume of $mnt/t holds a group's template" ||
	die "no reason given for the refused enable"

# 3. A subvolume that followed into the scope first cannot become a template.
btrfs -q subvolume snapshot -r $mnt/img $mnt/t2
cat $mnt/t2/f > /dev/null
followed "$(subvol_id $mnt/t2)" || die "t2, in no group, did not follow its image: $(cat $x/scopes)"
if echo "g2 $mnt/t2" > $groups/create 2>/dev/null; then
	die "groups/create on a subvolume in a scope was accepted"
fi
dmesg | grep -q "groups/create: template $mnt/t2 is in a sharing scope" ||
	die "no reason given for the refused create"
echo "s $mnt/t2" > $x/disable || die "extents/disable t2"
echo "g2 $mnt/t2" > $groups/create || die "groups/create after the disable"
echo "template-in-scope: enable of a template and create on a scope's subvolume refused"

echo g2 > $groups/delete && echo g > $groups/delete || die "groups/delete"
echo "s $mnt/img" > $x/disable || die "extents/disable img"
umount $mnt
echo "template-in-scope: passed"
