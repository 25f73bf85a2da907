#!/bin/bash
# A private mapping of a member file maps the template file's pages
# (mm-patches/0003). After groups/delete the template subvolume can be made
# writable, but its file stays write-denied (ETXTBSY) for as long as any
# such mapping lives, through fork and munmap, so the mapping never shows
# bytes the member did not have. Once the last mapping
# is gone, the template can be written.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
make_file $mnt/template/lib.so 4 lib
btrfs property set $mnt/template ro true
btrfs -q subvolume snapshot $mnt/template $mnt/m1
sync
want=$(sha256sum < $mnt/m1/lib.so | cut -d' ' -f1)
echo "g $mnt/template" > $groups/create && echo "g $mnt/m1" > $groups/add || die "group"
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
make_file /tmp/new 1 new

rm -f /tmp/ready /tmp/go /tmp/result
python3 "$TOTALCOW_TOP/tests/guest/share/share-hold-mapping.py" $mnt/m1/lib.so /tmp/ready /tmp/go /tmp/result "$want" ||
	die "mapper failed"
[ -e /tmp/ready ] || die "mapper did not map"
[ "$(stat_of mmaps_shared)" = 1 ] || die "the mapping was not substituted (mmaps_shared $(stat_of mmaps_shared))"
child=$(pgrep -f share-hold-mapping.py) || die "the child holding the mapping is gone"

echo g > $groups/delete || die "groups/delete"
btrfs property set $mnt/template ro false || die "making the template writable"
if dd if=/tmp/new of=$mnt/template/lib.so bs=4k count=1 conv=notrunc status=none 2>/tmp/err; then
	touch /tmp/go
	sleep 1
	die "the template was written while a mapping of its pages lives (child saw: $(cat /tmp/result))"
fi
grep -q "Text file busy" /tmp/err || die "unclear refusal: $(cat /tmp/err)"
truncate -s 0 $mnt/template/lib.so 2>/dev/null && die "the template was truncated under the mapping"
echo "writable: template write-denied while the child's mapping lives"

touch /tmp/go
for _ in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
[ "$(cat /tmp/result)" = ok ] || die "the child's mapping changed: $(cat /tmp/result)"
written=0
for _ in $(seq 50); do
	if dd if=/tmp/new of=$mnt/template/lib.so bs=4k count=1 conv=notrunc status=none 2>/dev/null; then
		written=1; break
	fi
	sleep 0.1
done
[ $written = 1 ] || die "the template stays write-denied after the last mapping went"
[ "$(sha256sum < $mnt/m1/lib.so | cut -d' ' -f1)" = "$want" ] || die "the member's file changed"
drop_caches
[ "$(sha256sum < $mnt/m1/lib.so | cut -d' ' -f1)" = "$want" ] || die "the member's file changed on disk"
umount $mnt
echo "writable: the template's file is writable again once the last mapping went"
