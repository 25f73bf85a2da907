#!/bin/bash
# A file marked as having no use for the alias policy (AS_NO_PAGE_ALIASES)
# must be asked again after every change that can make it shared, and
# must not be marked while a scope shares it (docs/design/scopes.md,
# "Classification after a change").
# Two such paths were missed before:
#
# 1. mmap of a group member's file that its group refuses (no template
#    file of that name), in a subvolume that is also in a sharing scope:
#    the mmap hook bound it, the group refused it, and the mark then kept
#    the scope from sharing its extents at every later read.
# 2. groups/delete: a file the group refused (and marked) belongs to no
#    group afterwards, so its subvolume follows its source into a scope;
#    no reclassification came, and the mark kept it out.
#
# Each case reads the refused file cold after the change: it must come
# from the scope's canonical pages (device reads under a tenth of the
# file, the scope's aliased count up by the file's pages), not from disk.
# Arguments: [MIB [CASES]]: MIB default 4; CASES, of "mmap delete" (the
# default), the ones to run.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
mib=${1:-4}
cases=${2:-mmap delete}
bytes=$((mib << 20)) pages=$((mib << 8))
x=/sys/kernel/mm/totalcow/extents
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
sum() { sha256sum < "$1" | cut -d' ' -f1; }
aliased() { scope_field s aliased; }
refused() { awk '$1 == "files_refused" { print $2 }' $groups/g/stats; }
# drop FILE: its pages out of the page cache (the inode, and its mark, stay).
drop() { python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }
# shared_read CASE FILE: read FILE cold; it must alias the scope's pages.
shared_read() {
	local a0 rd0 a1 rd1
	drop "$2"
	a0=$(aliased) rd0=$(sectors_read "$DISK0")
	[ "$(sum "$2")" = "$want" ] || die "$1: $2 read back wrong"
	a1=$(aliased) rd1=$(sectors_read "$DISK0")
	echo "classify-changes: $1: aliased +$((a1 - a0)) pages, device reads $(((rd1 - rd0) * 512)) bytes of $bytes"
	[ $((a1 - a0)) -ge $pages ] && [ $(((rd1 - rd0) * 512)) -lt $((bytes / 10)) ] ||
		die "$1: $2 was read from disk, not shared: $(cat $x/scopes)"
}

btrfs_mount /dev/$DISK0 $mnt
# The template T is a read-only snapshot of an image I in scope s (a
# group's template is never in a scope itself).
btrfs -q subvolume create $mnt/I
mkdir $mnt/I/d
make_file $mnt/I/d/f "$mib" template
sync
btrfs -q subvolume snapshot -r $mnt/I $mnt/T
# R, in scope s, holds the extents the members' refused files share:
# the group finds them neither by name nor by extents in the template.
btrfs -q subvolume create $mnt/R
make_file $mnt/R/g "$mib" other
want=$(sum $mnt/R/g)
for v in M N; do
	btrfs -q subvolume snapshot $mnt/T $mnt/$v
	cp --reflink=always $mnt/R/g $mnt/$v/d/extra
done
sync
for v in I R N; do
	echo "s $mnt/$v" > $x/enable || die "extents/enable $v"
done
echo "g $mnt/T" > $groups/create || die "groups/create"
echo "g $mnt/M" > $groups/add || die "groups/add M"
echo "g $mnt/N" > $groups/add || die "groups/add N"
drop_caches
cat $mnt/R/g > /dev/null	# the scope's canonical pages of those extents

# 1. N is a member and in scope s: mmap its refused file first.
case " $cases " in *" mmap "*)
r0=$(refused)
python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
m[0]; m.close(); os.close(fd)' $mnt/N/d/extra || die "mmap N/d/extra"
[ "$(refused)" = $((r0 + 1)) ] || die "the group did not refuse N/d/extra at mmap: $(cat $groups/g/stats)"
shared_read "mmap of a refused member file in a scope" $mnt/N/d/extra ;;
esac

# 2. M is a member, in no scope: its refused file is marked; the group
# goes, and M follows I (through T) into s.
case " $cases " in *" delete "*)
r0=$(refused)
cat $mnt/M/d/extra > /dev/null
[ "$(refused)" = $((r0 + 1)) ] || die "the group did not refuse M/d/extra: $(cat $groups/g/stats)"
echo g > $groups/delete || die "groups/delete"
shared_read "a file refused by a group since deleted" $mnt/M/d/extra
case " $(cat $x/scopes) " in
*" followed $(btrfs inspect-internal rootid $mnt/M) "*) ;;
*) die "M did not follow I: $(cat $x/scopes)" ;;
esac ;;
esac
umount $mnt
echo "classify-changes: every change asked again"
