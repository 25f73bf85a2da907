#!/bin/bash
# Podman fleets on its btrfs storage driver (docs/podman.md):
# `podman import` of a rootfs tarball makes an image whose top
# layer is a btrfs subvolume; every container's layer is a snapshot of it.
# The layer (its path from `podman image mount`) is made read-only and
# registered once with automatic membership; N containers run with
# `--network none` read its data and run its busybox with one copy in the
# page cache and one read of the disk, where containers of an unregistered
# twin image read and keep N copies. The registered image cannot be
# removed meanwhile; a removed container leaves the group.
#
#   podman-fleet.sh [N]     N containers per fleet (default 8)
#
# Prints "podman-fleet: ..." lines; counts come from the kernel.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
n=${1:-8}
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
top=/mnt/podman
data_mib=8	# per data file; 4 files
# No systemd in the guest: cgroupfs and a file for events (podman's
# defaults ask systemd and journald).
podman=(podman --storage-driver btrfs --root $top/storage --runroot /run/podman
	--cgroup-manager cgroupfs --events-backend file)

tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc
mkdir -p $top && mount /dev/mapper/tc $top
"${podman[@]}" info --format '{{.Store.GraphDriverName}}' | grep -qx btrfs ||
	die "podman has no btrfs storage driver"

# The image: busybox, the shared data and the workload, as a tarball.
r=/tmp/rootfs
busybox_rootfs $r $data_mib podman
tar -C $r -cf /tmp/img.tar .
# The twin differs by one file: containers-storage keeps one layer for
# one tarball, whichever image names it.
echo twin > $r/etc/twin
tar -C $r -cf /tmp/plain.tar .
want="$(cat $r/srv/shared/data* | md5sum)"
one=$(( 4 * (data_mib << 20) + $(stat -c %s $r/bin/busybox) ))
for img in img plain; do
	"${podman[@]}" import -q /tmp/$img.tar localhost/$img >/dev/null || die "podman import $img"
done

# --- registered once: the top layer read-only, whitelisted, a group -------
layer=$("${podman[@]}" image mount localhost/img) || die "podman image mount"
btrfs subvolume show "$layer" >/dev/null 2>&1 || die "image layer $layer is not a subvolume"
btrfs property set "$layer" ro true || die "read-only $layer"
ctl template add img "$layer" -q || die "template add"
ctl group create img "$layer" --auto || die "group create --auto"
dmsetup message tc 0 admit second
echo "podman-fleet: image layer $layer registered"

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/img/stats; }
auto_count() { wc -l < $groups/img/auto_members; }
# run_fleet IMAGE PREFIX: N containers of IMAGE (podman create: a snapshot
# of its top layer each), started at once, each reads the data; sets pc
# (page-cache growth) and rd (bytes read from $DISK0).
run_fleet() {
	local img=$1 p=$2 i pc0 rd0 pids=()
	for i in $(seq 1 "$n"); do
		"${podman[@]}" create -q --name $p$i --network none localhost/$img /bin/fleet-read \
			>/dev/null || die "podman create $p$i"
	done
	drop_caches
	# podman's own files (the host's, over hostfs) warmed outside both fleets
	"${podman[@]}" run --rm --network none localhost/plain /bin/sh -c : || die "warm-up"
	pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
	for i in $(seq 1 "$n"); do
		"${podman[@]}" start -a $p$i > /tmp/$p$i.out 2>&1 &
		pids+=($!)
	done
	for i in $(seq 1 "$n"); do
		wait "${pids[i - 1]}" || { cat /tmp/$p$i.out; die "podman start $p$i"; }
		[ "$(cat /tmp/$p$i.out)" = "$want" ] || die "$p$i read '$(cat /tmp/$p$i.out)'"
	done
	pc=$(( $(page_cache_bytes) - pc0 )) rd=$(( ($(sectors_read "$DISK0") - rd0) * 512 ))
}
ratio() { echo "scale=2; $1 / $one" | bc; }

run_fleet img c
[ "$(auto_count)" = "$n" ] || die "$(auto_count) automatic members, want $n: $(cat $groups/img/auto_members)"
tc_pc=$(ratio $pc) tc_rd=$(ratio $rd)
cat $groups/img/stats
shared=$(stat_of pages_shared) mm=$(stat_of mmaps_shared)
echo "podman-fleet: totalcow: $n containers, page cache ${tc_pc}x one container, device reads ${tc_rd}x, $shared pages shared, $mm mappings of the template"

run_fleet plain p
p_pc=$(ratio $pc) p_rd=$(ratio $rd)
echo "podman-fleet: unregistered image: $n containers, page cache ${p_pc}x one container, device reads ${p_rd}x"
[ "$(auto_count)" = "$n" ] || die "a container of the other image joined: $(cat $groups/img/auto_members)"

pages=$(( 4 * (data_mib << 20) / 4096 ))
fleet_checks "$n" "$tc_pc" "$tc_rd" "$p_pc" "$shared" "$mm" "$pages"

# --- a write in one container stays in it ----------------------------------
out=$("${podman[@]}" run --name w --network none localhost/img /bin/sh -c \
	'echo scribble | busybox dd of=/srv/shared/data2 bs=1 seek=5000 conv=notrunc 2>/dev/null
	 /bin/fleet-read') || die "write in w"
[ "$out" != "$want" ] || die "w's write is lost"
[ "$("${podman[@]}" start -a c2)" = "$want" ] || die "w's write reached c2"
[ "$(cat $layer/srv/shared/data* | md5sum)" = "$want" ] || die "w's write reached the image"
echo "podman-fleet: a write in one container stays in it"

# --- removing containers takes them out; the image stays while registered ---
"${podman[@]}" rm -f w c$n >/dev/null || die "podman rm"
[ "$(auto_count)" = $((n - 1)) ] || die "after podman rm c$n: $(cat $groups/img/auto_members)"
for i in $(seq 1 $((n - 1))); do "${podman[@]}" rm c$i >/dev/null || die "podman rm c$i"; done
[ "$(auto_count)" = 0 ] || die "removed containers linger: $(cat $groups/img/auto_members)"
# podman rmi of a registered image: btrfs refuses to delete (or write) the
# layer, so its bytes stay; podman has dropped the image record by then
# and keeps retrying the delete of the "incomplete" layer at every command
# until the layer is unregistered and writable (docs/podman.md).
if "${podman[@]}" rmi localhost/img >/tmp/rmi.out 2>&1; then
	die "podman rmi removed a registered image"
fi
echo "podman-fleet: podman rmi of the registered image fails: $(tail -n 1 /tmp/rmi.out)"
[ "$(cat $layer/srv/shared/data* | md5sum)" = "$want" ] || die "the failed rmi changed the layer"
ctl group del img && ctl template del img || die "unregister"
btrfs property set "$layer" ro false || die "writable $layer"
"${podman[@]}" images >/tmp/images.out 2>&1 || { cat /tmp/images.out; die "podman after unregistering"; }
[ ! -e "$layer" ] || die "podman did not finish removing the layer"
grep -q localhost/img /tmp/images.out && die "the image is still listed"
echo "podman-fleet: unregistered, the next podman command finished the removal"
umount $top
echo "podman-fleet: all checks passed"
