#!/bin/bash
# Binding a member file to its template file runs with the group
# creator's credentials and stays on the template's mount: a
# reader who cannot search the template's directories does not make the
# file unshareable for everyone, and a mount over a template directory is
# not followed into (it would bind a member to whatever is mounted there,
# and deny writes to it).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
mkdir -m 0700 $mnt/template/secret
mkdir -m 0755 $mnt/template/data
make_file $mnt/template/secret/f 4 secret
make_file $mnt/template/data/g 4 data
chmod 0644 $mnt/template/secret/f $mnt/template/data/g
btrfs property set $mnt/template ro true
for m in m1 m2; do btrfs -q subvolume snapshot $mnt/template $mnt/$m; done
# In m1 the directory is opened up to everyone; the template's is not.
chmod 0755 $mnt/m1/secret
sync
echo "g $mnt/template" > $groups/create || die "group create"
echo "g $mnt/m1" > $groups/add && echo "g $mnt/m2" > $groups/add || die "groups/add"
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
drop_caches

# 1. An unprivileged first reader of m1/secret/f.
setpriv --reuid 65534 --regid 65534 --clear-groups cat $mnt/m1/secret/f > /tmp/f ||
	die "nobody cannot read m1/secret/f"
cmp -s /tmp/f $mnt/template/secret/f || die "m1/secret/f read wrong"
echo "creds: after nobody's read: bound $(stat_of files_bound) refused $(stat_of files_refused)"
[ "$(stat_of files_refused)" = 0 ] || die "nobody's read made m1/secret/f unshareable"
[ "$(stat_of files_bound)" = 1 ] || die "m1/secret/f was not bound"
# Now root reads it again from an empty cache: the template's pages serve.
drop_caches
cat $mnt/template/secret/f > /dev/null
pc0=$(page_cache_bytes)
cat $mnt/m1/secret/f > /dev/null
grown=$(( $(page_cache_bytes) - pc0 ))
echo "creds: m1/secret/f after the template: page cache +$((grown >> 10)) KiB"
[ $grown -lt $((1 << 20)) ] || die "m1/secret/f is not shared ($grown bytes cached)"

# 2. A mount over a template directory is not crossed: m2's data bind-
# mounted over the template's would bind m1/data/g to m2/data/g (same
# inode number and generation) and deny writes to it. The path lookup
# stops at the mount; the file is then found by its extents, in the
# template's own subvolume under the mount (docs/design/policy.md, "Binding by
# extents"), and m2/data/g stays writable.
mount --bind $mnt/m2/data $mnt/template/data
drop_caches
r0=$(stat_of files_refused) b0=$(stat_of files_bound) e0=$(stat_of files_bound_by_extents)
cat $mnt/m1/data/g > /tmp/g || die "read m1/data/g"
r1=$(stat_of files_refused) b1=$(stat_of files_bound) e1=$(stat_of files_bound_by_extents)
echo "creds: m1/data/g with a mount over template/data: bound +$((b1 - b0))" \
	"(by extents +$((e1 - e0))) refused +$((r1 - r0))"
[ $((r1 - r0)) = 0 ] && [ $((b1 - b0)) = 1 ] && [ $((e1 - e0)) = 1 ] ||
	die "the lookup crossed the mount over template/data"
cmp -s /tmp/g $mnt/m2/data/g || die "m1/data/g read wrong"
echo more >> $mnt/m2/data/g || die "m2/data/g was made read-only by m1's read"
umount $mnt/template/data
echo g > $groups/delete
umount $mnt
echo "creds: the creator's credentials, no mount crossed"
