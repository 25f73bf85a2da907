#!/bin/bash
# A sparse 1 TiB template file read a few bytes by each of 64 members
# costs kernel memory in proportion to what was read, not to the file's
# size: the policy's per-page bytes come in chunks allocated on
# first read, counted in the group's stats (policy_bytes) and charged to
# the memory cgroup of the readers.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
members=64
chunk=4096	# bytes of one chunk of policy bytes (2048 pages)

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
truncate -s 1T $mnt/template/sparse.bin
make_file /tmp/page 1 sparse
dd if=/tmp/page of=$mnt/template/sparse.bin bs=4k count=1 seek=$((1 << 27)) conv=notrunc status=none
btrfs property set $mnt/template ro true
for i in $(seq 1 $members); do btrfs -q subvolume snapshot $mnt/template $mnt/m$i; done
sync
echo "g $mnt/template" > $groups/create || die "group create"
for i in $(seq 1 $members); do echo "g $mnt/m$i" > $groups/add || die "groups/add m$i"; done
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
kmem() { awk '$1 == "SUnreclaim:" || $1 == "VmallocUsed:" { s += $2 } END { print s * 1024 }' /proc/meminfo; }

# The readers run in a memory cgroup of their own.
grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
	echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/readers
cg_unreclaimable() { awk '$1 == "slab_unreclaimable" { print $2 }' /sys/fs/cgroup/readers/memory.stat; }

drop_caches
k0=$(kmem) c0=$(cg_unreclaimable)
byte() { dd if="$1" bs=1 count=1 skip="$2" status=none | od -An -tx1; }
want="$(byte $mnt/template/sparse.bin $((1 << 39))) $(byte $mnt/template/sparse.bin $(((1 << 39) + 100))) $(byte $mnt/template/sparse.bin $(((1 << 40) - 1)))"
sh -c 'echo $$ > /sys/fs/cgroup/readers/cgroup.procs
	for i in $(seq 1 '$members'); do
		f='$mnt'/m$i/sparse.bin
		echo "$(dd if=$f bs=1 count=1 skip=$((1 << 39)) status=none | od -An -tx1)" \
		     "$(dd if=$f bs=1 count=1 skip=$(((1 << 39) + 100)) status=none | od -An -tx1)" \
		     "$(dd if=$f bs=1 count=1 skip=$(((1 << 40) - 1)) status=none | od -An -tx1)"
	done' > /tmp/got || die "readers"
k1=$(kmem) c1=$(cg_unreclaimable)
[ "$(sort -u /tmp/got)" = "$want" ] ||
	die "members read other bytes than the template's: $(sort -u /tmp/got | head -3)"

policy=$(stat_of policy_bytes)
bound=$(stat_of files_bound)
[ -n "$policy" ] || die "no policy_bytes in the group's stats"
[ "$bound" = $members ] || die "$bound of $members member files bound"
# Two places read per member (1 TiB / 2 and its end): at most two chunks each.
echo "sparse: $members members x 3 bytes of a 1 TiB file: policy_bytes $policy," \
     "kernel memory +$(( (k1 - k0) >> 10 )) KiB, readers' cgroup unreclaimable slab +$(( (c1 - c0) >> 10 )) KiB"
[ "$policy" -gt 0 ] && [ "$policy" -le $((members * 2 * 2 * chunk)) ] ||
	die "policy_bytes $policy for $members members reading 3 bytes each"
[ $((k1 - k0)) -le $((32 << 20)) ] || die "kernel memory grew by $(( (k1 - k0) >> 20 )) MiB"
[ $((c1 - c0)) -ge "$policy" ] || die "the readers' cgroup was not charged the policy bytes"

# Leaving frees them.
echo g > $groups/delete
sleep 1
umount $mnt
echo "sparse: O(pages read), charged to the readers"
