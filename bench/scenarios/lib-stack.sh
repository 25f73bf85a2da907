# shellcheck shell=bash
# Guest-side helpers shared by the bench scenarios (snapshot-read,
# snapshot-write): the disk model under the stack, the dm device btrfs sits
# on, and the per-configuration setup of overlayfs, the dm layer and
# page-cache sharing. Sourced after tests/vm/lib.sh.
#
# Stack: /dev/$DISKn [-> split] [-> dm-delay] -> dm device (linear | totalcow)
# -> btrfs.

# Sectors of the largest request the modelled disk is charged for at once.
DISK_MODEL_CHUNK=128

# disk_model DISK DELAY_MS MBPS: put the disk model under DISK and print
# the device to build on. The ubd image lives in the host's page cache, so
# without a model the "disk" is RAM. DELAY_MS > 0 adds dm-delay (the delay
# on every read and write, named $DISK-delay); MBPS > 0 limits reads and
# writes of this script and everything it starts from then on to MBPS MB/s
# on DISK (cgroup v2 io.max, one cgroup "disk-model" for all disks). Both
# together are a crude model of the paper's hard disks (~150 MB/s, ~8 ms).
#
# With MBPS > 0 every bio is also cut into pieces of at most
# DISK_MODEL_CHUNK sectors (64 KiB) before it reaches DISK ($DISK-split, a
# one-stripe dm-striped target): io.max charges a bio whole before it lets
# any of it through, and the split into requests happens after that. A
# 64 MiB writeback bio (btrfs builds one when the pages are physically
# contiguous, as freshly allocated pages often are) waited 0.45 s and was
# then written as 532 requests one after the other, where a disk streams
# them while the rest waits: the time of a write depended on where its
# pages happened to lie in memory (bench/README.md, "Disk models").
disk_model() {
	local disk=$1 delay_ms=$2 mbps=$3 sectors lower=/dev/$1
	sectors=$(blockdev --getsz "/dev/$disk")
	if [ "$mbps" != 0 ]; then
		# dm-striped wants whole chunks: a partial one at the end is left out.
		sectors=$((sectors - sectors % DISK_MODEL_CHUNK))
		dmsetup create "$disk-split" --table \
			"0 $sectors striped 1 $DISK_MODEL_CHUNK /dev/$disk 0"
		lower=/dev/mapper/$disk-split
	fi
	if [ "$delay_ms" != 0 ]; then
		dmsetup create "$disk-delay" --table "0 $sectors delay $lower 0 $delay_ms"
		lower=/dev/mapper/$disk-delay
	fi
	if [ "$mbps" != 0 ]; then
		grep -qw io /sys/fs/cgroup/cgroup.subtree_control ||
			echo +io > /sys/fs/cgroup/cgroup.subtree_control
		mkdir -p /sys/fs/cgroup/disk-model
		echo "$(cat "/sys/block/$disk/dev") rbps=$((mbps * 1000000)) wbps=$((mbps * 1000000))" \
			> /sys/fs/cgroup/disk-model/io.max
		# Readers may get I/O cgroups of their own below the model's
		# (cgroup-read), so the script lives in a leaf of it, "main" ($$ is
		# the script itself: this runs in a command substitution).
		echo +io > /sys/fs/cgroup/disk-model/cgroup.subtree_control
		mkdir -p /sys/fs/cgroup/disk-model/main
		echo $$ > /sys/fs/cgroup/disk-model/main/cgroup.procs
	fi
	echo "$lower"
}

# disk_model_cg: the model's cgroup (the directory under /sys/fs/cgroup)
# while a bandwidth model is on, else empty.
disk_model_cg() {
	[ ! -d /sys/fs/cgroup/disk-model ] || echo disk-model
}

# disk_model_off DISK: remove what disk_model set up (devices above it first).
disk_model_off() {
	[ ! -e "/dev/mapper/$1-delay" ] || dmsetup remove "$1-delay"
	[ ! -e "/dev/mapper/$1-split" ] || dmsetup remove "$1-split"
}

# unthrottled CMD...: run CMD outside the io.max cgroup (checks that are
# not measured need not crawl at the modelled bandwidth).
unthrottled() {
	( echo "$BASHPID" > /sys/fs/cgroup/cgroup.procs; "$@" )
}

# stack_create NAME LOWER TARGET [START SECTORS]: dm device NAME over LOWER
# (all of it, or SECTORS from START): "linear" or "totalcow" (cache_size
# 100%, admit first: unlimited, like the paper's configuration).
stack_create() {
	local name=$1 lower=$2 target=$3 start=${4:-0} len=${5:-}
	[ -n "$len" ] || len=$(blockdev --getsz "$lower")
	case "$target" in
	linear) dmsetup create "$name" --table "0 $len linear $lower $start" ;;
	totalcow)
		[ "$start" = 0 ] || die "stack_create: totalcow spans its whole device"
		tc_create "$name" "$lower" cache_size 100%
		# Under a bandwidth model every fill is the model's to charge
		# (docs/dm-totalcow.rst, "I/O cgroups"): a check run unthrottled
		# must not make later fills bypass it. Older targets lack the
		# message and charged fills to the reader, which is in the model.
		if [ -n "$(disk_model_cg)" ]; then
			dmsetup message "$name" 0 fleet_cgroup "/$(disk_model_cg)" 2>/dev/null ||
				echo "stack_create: $name: no fleet_cgroup message (target before 1.3)" >&2
		fi ;;
	*) die "unknown target '$target' (linear, totalcow)" ;;
	esac
}

# is_totalcow NAME: is dm device NAME a totalcow target?
is_totalcow() {
	[ "$(dmsetup table "$1" | awk '{ print $3 }')" = totalcow ]
}

# tc_cache_bytes NAME: bytes in the totalcow cache of NAME (0 for linear).
tc_cache_bytes() {
	if is_totalcow "$1"; then
		echo $(($(tc_stat "$1" cached) * 4096))
	else
		echo 0
	fi
}

# tc_meta_bytes NAME: the dm layer's metadata, estimated from its own
# counters and the per-item costs in docs/dm-totalcow.rst (an xarray slot
# of about 9 bytes per cached block; 16 bytes per template extent plus 16
# per merged extent, counted here as 32 per merged extent). 0 for linear.
tc_meta_bytes() {
	if is_totalcow "$1"; then
		echo $(($(tc_stat "$1" cached) * 9 + $(tc_stat "$1" extents) * 32))
	else
		echo 0
	fi
}

# kernel_meta_bytes: Slab + VmallocUsed, the kernel memory that is not page
# cache (its growth over a run includes dentries, inodes, btrfs extent maps
# and TotalCOW's own structures).
kernel_meta_bytes() {
	awk '$1 == "Slab:" { s = $2 } $1 == "VmallocUsed:" { v = $2 }
	     END { printf "%.0f\n", (s + v) * 1024 }' /proc/meminfo
}

# writes_done DISK: write requests completed so far by block device DISK.
writes_done() {
	awk '{ print $5 }' "/sys/block/$1/stat"
}

# sectors_written DISK: sectors (512 B) written so far to block device DISK.
sectors_written() {
	awk '{ print $7 }' "/sys/block/$1/stat"
}

# drop_all_caches NAME: page cache, dentries, inodes and (drop_caches runs
# every shrinker) the totalcow cache of NAME, which is also told directly.
drop_all_caches() {
	drop_caches
	! is_totalcow "$1" || dmsetup message "$1" 0 drop_cache
}

# --- configurations ---------------------------------------------------------

# ovl_mount MNT LOWER UPPERBASE: an overlay mount at MNT over directory
# LOWER, with upper and work directories under UPPERBASE (created).
ovl_mount() {
	mkdir -p "$3/upper" "$3/work" "$1"
	mount -t overlay "ovl-$(basename "$1")" \
		-o "lowerdir=$2,upperdir=$3/upper,workdir=$3/work" "$1"
}

# dm_layer_on NAME TAG ADMIT FILE...: TotalCOW layer 1: register FILEs
# (btrfs on /dev/mapper/NAME) as template TAG with totalcowctl, as an admin
# does (tests/vm/fiemap-ranges stays the tests' oracle), and admit blocks
# on their first or second miss. "second" is for both layers: the page
# cache keeps the shared copy, the dm cache takes only blocks that are read
# again.
dm_layer_on() {
	local name=$1 tag=$2 admit=$3; shift 3
	"$TOTALCOW_TOP/tools/totalcowctl" template add "$tag" "$@" --device "/dev/mapper/$name" -q ||
		die "totalcowctl template add $tag"
	dmsetup message "$name" 0 admit "$admit"
}

# dm_layer_off NAME TAG: print the target's status, deregister the template.
dm_layer_off() {
	echo "dm-layer $1: $(dmsetup status "$1")"
	"$TOTALCOW_TOP/tools/totalcowctl" template del "$2" || die "totalcowctl template del $2"
	dmsetup message "$1" 0 admit first
}

# share_on GROUP TEMPLATE_DIR MEMBER_DIR...: TotalCOW layer 2, a page-cache
# sharing group of a read-only template subvolume and its snapshots.
# On a kernel of the 7.3 series (mm-patches/7.3/: no policy module, no
# sysfs) each member subvolume is paired with the template instead
# (BTRFS_IOC_SHARE_SUBVOL), which binds or reads by runs at open.
share_on() {
	local group=$1 template=$2 m; shift 2
	if [ ! -d /sys/kernel/mm/totalcow ]; then
		SHARE_PAIRED=("$@")
		for m in "$@"; do
			python3 "$TOTALCOW_TOP/tests/guest/share/share-backing-file.py" pair "$m" "$template" ||
				die "share_on: cannot pair $m with $template"
		done
		return 0
	fi
	echo "$group $template" > /sys/kernel/mm/totalcow/groups/create
	for m in "$@"; do
		echo "$group $m" > /sys/kernel/mm/totalcow/groups/add
	done
}

# share_stats GROUP: the group's counters as "key value key value ..."
# (for json_kv).
share_stats() {
	awk '{ printf "%s %s ", $1, $2 }' "/sys/kernel/mm/totalcow/groups/$1/stats"
}

# share_off GROUP: print the group's counters and delete it.
share_off() {
	local m
	if [ ! -d /sys/kernel/mm/totalcow ]; then
		for m in "${SHARE_PAIRED[@]}"; do
			python3 "$TOTALCOW_TOP/tests/guest/share/share-backing-file.py" unpair "$m" ||
				die "share_off: cannot unpair $m"
		done
		SHARE_PAIRED=()
		return 0
	fi
	sed "s/^/share $1: /" "/sys/kernel/mm/totalcow/groups/$1/stats"
	echo "$1" > /sys/kernel/mm/totalcow/groups/delete
}
