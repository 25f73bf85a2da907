#!/bin/bash
# A substituted private mapping follows its file as a plain one does
# (mm-patches/0022). A private mapping of an unchanged member maps the
# template's pages (a scope's file: a clone's). Before, only a truncation
# made it follow its file: after a write(), a hole punch, a zero range or
# a reflink into the member, its pages the process had not written kept
# the bytes of the time of mmap(), where Linux shows the change. Now the
# open for writing, which every such change needs, makes every
# substituted mapping of the file map the file itself first, private
# copies kept (tests/guest/share/share-mmap-follows.py): for a group's member,
# for a file in a sharing scope, and for a plain file (the control).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
py=$TOTALCOW_TOP/tests/guest/share/share-mmap-follows.py
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 1 follows
make_file $mnt/T/src 1 follows-src
btrfs property set $mnt/T ro true
btrfs -q subvolume snapshot $mnt/T $mnt/M
btrfs -q subvolume create $mnt/S
make_file $mnt/S/f 1 follows-scope
make_file $mnt/S/src 1 follows-scope-src
cp --reflink=always $mnt/S/f $mnt/S/g
btrfs -q subvolume create $mnt/plain
make_file $mnt/plain/f 1 follows-plain
make_file $mnt/plain/src 1 follows-plain-src
sync
echo "g $mnt/T" > $groups/create && echo "g $mnt/M" > $groups/add || die "group"
echo "s $mnt/S" > $x/enable || die "extents/enable"
# Each file read first: metadata and extent maps in memory.
for f in $mnt/M/f $mnt/S/g $mnt/plain/f; do cat $f > /dev/null; done
python3 "$py" $mnt/M/f group:g $mnt/M/src | sed 's/^/group: /'
[ "${PIPESTATUS[0]}" = 0 ] || die "a group member's mapping"
python3 "$py" $mnt/S/g scope:s $mnt/S/src | sed 's/^/scope: /'
[ "${PIPESTATUS[0]}" = 0 ] || die "a scope file's mapping"
python3 "$py" $mnt/plain/f - $mnt/plain/src | sed 's/^/plain: /'
[ "${PIPESTATUS[0]}" = 0 ] || die "a plain file's mapping"
echo g > $groups/delete
umount $mnt
echo "follows: passed"
