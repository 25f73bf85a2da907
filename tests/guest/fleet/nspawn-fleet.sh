#!/bin/bash
# systemd-nspawn fleets (docs/nspawn.md): an image
# imported read-only into /var/lib/machines on btrfs (what `machinectl
# import-tar --read-only` runs: systemd-import, here without machined,
# which needs a systemd PID 1) is registered once with automatic
# membership; N containers made from it with `systemd-nspawn
# --register=no --template=` (a btrfs snapshot each, as `machinectl clone`
# makes) read its data and run its busybox with one copy in the page cache
# and one read of the disk, where clones of an unregistered twin image
# read and keep N copies. Ephemeral containers (`systemd-nspawn -x`, a
# snapshot deleted at exit) join and leave by themselves.
#
#   nspawn-fleet.sh [N]     N containers per fleet (default 8)
#
# Prints "nspawn-fleet: ..." lines; counts come from the kernel.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
n=${1:-8}
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
machines=/var/lib/machines
data_mib=8	# per data file; 4 files
nspawn=(systemd-nspawn --register=no --keep-unit --quiet --pipe)

[ -d $machines ] || die "$machines missing (package systemd-container)"
tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc
mount /dev/mapper/tc $machines

# The image: busybox, an os-release (nspawn refuses a tree without one),
# the shared data and the workload, as a tarball.
r=/tmp/rootfs
busybox_rootfs $r $data_mib nspawn
mkdir -p $r/proc $r/sys $r/dev $r/tmp $r/run $r/var/tmp
tar -C $r -cf /tmp/image.tar .
want="$(cat $r/srv/shared/data* | md5sum)"
one=$(( 4 * (data_mib << 20) + $(stat -c %s $r/bin/busybox) ))
for img in img plain; do
	/usr/lib/systemd/systemd-import --read-only tar /tmp/image.tar $img >/tmp/import.out 2>&1 ||
		{ cat /tmp/import.out; die "systemd-import $img"; }
	btrfs subvolume show $machines/$img | grep -q 'Flags:.*readonly' || die "$img not read-only"
done
sync

# --- registered once: dm whitelist and a group with automatic membership ---
ctl template add img $machines/img -q || die "template add"
ctl group create img $machines/img --auto || die "group create --auto"
dmsetup message tc 0 admit second
# What `machinectl read-only img false` and `machinectl remove img` do.
btrfs property set $machines/img ro false 2>/dev/null && die "the registered image became writable"
btrfs -q subvolume delete $machines/img 2>/dev/null && die "the registered image was deleted"

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/img/stats; }
auto_paths() { awk '{ print $2 }' $groups/img/auto_members | sort | tr '\n' ' '; }
# run_fleet IMAGE PREFIX: N containers cloned from IMAGE (--template makes
# PREFIX$i as a snapshot the first time), all started at once, each reads
# the data; sets pc (page-cache growth) and rd (bytes read from $DISK0).
run_fleet() {
	local img=$1 p=$2 i pc0 rd0 pids=()
	drop_caches
	"${nspawn[@]}" -x -D $machines/plain /bin/sh -c : || die "warm-up container"
	pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
	# Each in a cgroup of its own, as systemd-nspawn@.service runs: with
	# --keep-unit, nspawns started in one cgroup share its payload/ and
	# supervisor/, and the first to exit removes them under the others
	# ("Failed to move process: No such device").
	for i in $(seq 1 "$n"); do
		in_cgroup /sys/fs/cgroup/nspawn-$p$i \
			"${nspawn[@]}" --template=$machines/$img -D $machines/$p$i /bin/fleet-read \
			> /tmp/$p$i.out 2>&1 &
		pids+=($!)
	done
	for i in $(seq 1 "$n"); do
		wait "${pids[i - 1]}" || { cat /tmp/$p$i.out; die "nspawn $p$i"; }
		rm_cgroup /sys/fs/cgroup/nspawn-$p$i
		[ "$(cat /tmp/$p$i.out)" = "$want" ] || die "$p$i read '$(cat /tmp/$p$i.out)', want '$want'"
	done
	pc=$(( $(page_cache_bytes) - pc0 )) rd=$(( ($(sectors_read "$DISK0") - rd0) * 512 ))
}
ratio() { echo "scale=2; $1 / $one" | bc; }

run_fleet img c
expect=$(for i in $(seq 1 "$n"); do echo /c$i; done | sort | tr '\n' ' ')
[ "$(auto_paths)" = "$expect" ] || die "automatic members '$(auto_paths)', want '$expect'"
tc_pc=$(ratio $pc) tc_rd=$(ratio $rd)
cat $groups/img/stats
shared=$(stat_of pages_shared) mm=$(stat_of mmaps_shared)
echo "nspawn-fleet: totalcow: $n containers, page cache ${tc_pc}x one container, device reads ${tc_rd}x, $shared pages shared, $mm mappings of the template"
# Started again (the clones exist now), they still share.
run_fleet img c
echo "nspawn-fleet: started again: page cache $(ratio $pc)x one container, device reads $(ratio $rd)x"
[ "$(echo "$(ratio $pc) <= 1.2" | bc)" = 1 ] || die "second start: page cache $(ratio $pc)x"

run_fleet plain p
p_pc=$(ratio $pc) p_rd=$(ratio $rd)
echo "nspawn-fleet: unregistered image: $n containers, page cache ${p_pc}x one container, device reads ${p_rd}x"
[ "$(auto_paths)" = "$expect" ] || die "a clone of the other image joined: '$(auto_paths)'"

pages=$(( 4 * (data_mib << 20) / 4096 ))
fleet_checks "$n" "$tc_pc" "$tc_rd" "$p_pc" "$shared" "$mm" "$pages"

# --- a write in one container stays in it ----------------------------------
"${nspawn[@]}" -D $machines/c1 /bin/sh -c \
	'echo scribble | busybox dd of=/srv/shared/data2 bs=1 seek=5000 conv=notrunc 2>/dev/null' ||
	die "write in c1"
[ "$("${nspawn[@]}" -D $machines/c1 /bin/fleet-read)" != "$want" ] || die "c1's write is lost"
[ "$("${nspawn[@]}" -D $machines/c2 /bin/fleet-read)" = "$want" ] || die "c1's write reached c2"
[ "$(cat $machines/img/srv/shared/data* | md5sum)" = "$want" ] || die "c1's write reached the image"
echo "nspawn-fleet: a write in c1 stays in c1"

# --- ephemeral containers join while they run, leave with their snapshot -----
joined=$(stat_of members_joined)
for i in 1 2; do
	out=$("${nspawn[@]}" -x -D $machines/img /bin/fleet-read) || die "ephemeral $i"
	[ "$out" = "$want" ] || die "ephemeral $i read '$out'"
done
[ "$(stat_of members_joined)" -ge $((joined + 2)) ] ||
	die "ephemeral containers did not join: members_joined $joined -> $(stat_of members_joined)"
[ "$(auto_paths)" = "$expect" ] || die "ephemeral snapshots linger: '$(auto_paths)'"
echo "nspawn-fleet: 2 ephemeral containers joined and left"

# --- removing a clone takes it out ------------------------------------------
btrfs -q subvolume delete $machines/c$n || die "delete c$n"
expect=$(for i in $(seq 1 $((n - 1))); do echo /c$i; done | sort | tr '\n' ' ')
[ "$(auto_paths)" = "$expect" ] || die "after deleting c$n: '$(auto_paths)'"
ctl group del img && ctl template del img || die "unregister"
umount $machines
echo "nspawn-fleet: all checks passed"
