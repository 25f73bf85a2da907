# shellcheck shell=bash
# Helpers for guest scripts (sourced inside the test VM).
#
# Counters are read from the kernel, never estimated: page-cache bytes from
# /proc/vmstat (file pages minus shmem, so tmpfs does not count) and sectors
# read from /sys/block/<dev>/stat of the lowest device in the stack.

set -euo pipefail

die() { echo "FAIL: $*" >&2; exit 1; }

# The scratch disks tests/vm/run attached, in order: ubda, ubdb ... in
# User-Mode Linux, vda, vdb ... (virtio-blk) in QEMU. Guest scripts name
# them DISK0, DISK1 ... (/dev/$DISK0, /sys/block/$DISK0), never by a
# lane's device name; a script that uses a disk it was not given stops at
# the unset variable.
scratch_disks() {
	local d
	for d in /sys/block/ubd[a-z] /sys/block/vd[a-z]; do
		[ -e "$d" ] && echo "${d##*/}"
	done
	return 0
}
_n=0
for _d in $(scratch_disks); do
	printf -v "DISK$_n" '%s' "$_d"
	_n=$((_n + 1))
done
unset _n _d

# Bytes of file-backed page cache (excludes tmpfs/shmem).
page_cache_bytes() {
	awk '$1 == "nr_file_pages" { f = $2 } $1 == "nr_shmem" { s = $2 }
	     END { printf "%.0f\n", (f - s) * 4096 }' /proc/vmstat
}

# Sectors (512 B) read so far from block device $1 (e.g. $DISK0).
sectors_read() {
	awk '{ print $3 }' "/sys/block/$1/stat"
}

# Drop page cache, dentries and inodes. This runs every shrinker, so it
# also empties the dm-totalcow cache (use the drop_cache message or
# "echo 1" for the page cache alone).
drop_caches() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
}

# cold_reads BYTES FILE...: drop every cache, then read each FILE once
# with cat; set MEM and READS to the page cache it grew by and the bytes
# read from $DISK0, each x BYTES (three decimals). cat and its libraries
# are read back first: on the x86-64 lane the root is 9p, whose page
# cache counts as file pages too.
cold_reads() {
	local bytes=$1 pc0 rd0 pc1 rd1 f
	shift
	drop_caches
	cat /dev/null
	pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
	for f in "$@"; do
		cat "$f" > /dev/null
	done
	pc1=$(page_cache_bytes) rd1=$(sectors_read "$DISK0")
	MEM=$(awk -v d=$((pc1 - pc0)) -v b="$bytes" 'BEGIN { printf "%.3f", d / b }')
	READS=$(awk -v d=$(((rd1 - rd0) * 512)) -v b="$bytes" 'BEGIN { printf "%.3f", d / b }')
}

# make_file PATH MIB SEED: a file of MIB MiB of pseudo-random bytes that
# depend only on SEED (so runs are reproducible and blocks are not zero).
make_file() {
	openssl enc -aes-128-ctr -nosalt -pass "pass:$3" -pbkdf2 -iter 1 \
		-in <(head -c "$(($2 << 20))" /dev/zero) -out "$1" 2>/dev/null ||
		die "cannot write $1"
	[ "$(stat -c %s "$1")" = "$(($2 << 20))" ] || die "short file $1"
}

# make_text PATH MIB SEED: compressible bytes (base64 of a seeded stream:
# about 3/4 of the file on disk), different in every block.
make_text() {
	openssl enc -aes-128-ctr -nosalt -pass "pass:$3" -pbkdf2 -iter 1 \
		-in <(head -c "$(( ($2 << 20) * 3 / 4 ))" /dev/zero) 2>/dev/null |
		base64 -w 0 > "$1" || die "cannot write $1"
	[ "$(stat -c %s "$1")" = "$(($2 << 20))" ] || die "short file $1"
}

# encoded_extents FILE: how many of its extents are compressed (filefrag
# -v's "encoded" flag), and how many it has.
encoded_extents() {
	filefrag -v "$1" | awk '/^ *[0-9]+:/ { n++; if ($0 ~ /encoded/) e++ }
		END { print e + 0, n + 0 }'
}

# write_in_place FILE: write a file of at least 1 MiB in place, the ways
# that break shared pages: a page, a partial page across a page boundary,
# a run across a block, and through a shared mapping.
write_in_place() {
	dd if=/dev/urandom of="$1" bs=4096 seek=3 count=1 conv=notrunc status=none
	dd if=/dev/urandom of="$1" bs=100 seek=4097 count=3 conv=notrunc status=none
	dd if=/dev/urandom of="$1" bs=4096 seek=60 count=10 conv=notrunc status=none
	python3 - "$1" <<'EOF'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 1 << 20)
m[8192 * 16:8192 * 16 + 5] = b"mmap!"
m.flush()
m.close()
os.close(fd)
EOF
}

# json_kv KEY VALUE...: print a flat JSON object from key/value pairs
# (numbers stay numbers, everything else is quoted).
json_kv() {
	local sep="" out="{"
	while [ $# -ge 2 ]; do
		if [[ $2 =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then
			out+="$sep\"$1\": $2"
		else
			out+="$sep\"$1\": \"$2\""
		fi
		sep=", "
		shift 2
	done
	echo "$out}"
}

# now_us VAR: the wall clock in microseconds, into VAR, without a fork:
# in UML a $(date ...) costs 10-70 ms, more than some of what is timed.
now_us() {
	local t=$EPOCHREALTIME
	printf -v "$1" '%s' "${t/[.,]/}"
}

# us_ms US: microseconds as milliseconds with three decimals.
us_ms() {
	printf '%d.%03d\n' $(($1 / 1000)) $(($1 % 1000))
}

# Bytes in the xarray node slab (radix_tree_node): the slots of every page
# cache (a sharing member's alias slots included) and the dm cache's index.
# Its growth over a run is kernel memory that run made the page cache and
# TotalCOW allocate (benchlib.memory_bytes()).
xa_node_bytes() {
	awk '$1 == "radix_tree_node" { printf "%.0f\n", $2 * $4 }' /proc/slabinfo
}

# Bytes of per-page signatures all sharing groups hold now (the sum of
# their policy_bytes; 0 without groups). Succeeds without groups too, so
# that it can stand in an assignment under set -e -o pipefail.
policy_bytes() {
	local f stats=()
	for f in /sys/kernel/mm/totalcow/groups/*/stats; do
		[ -e "$f" ] && stats+=("$f")
	done
	[ ${#stats[@]} -gt 0 ] || { echo 0; return 0; }
	awk '$1 == "policy_bytes" { s += $2 } END { printf "%.0f\n", s }' "${stats[@]}"
}

# --- what the running kernel has ------------------------------------------

# kernel_has PART: the running kernel has PART, built in or as a module,
# which this loads if need be. PART is a device-mapper target by its
# module's name (dm-totalcow, dm-delay, dm-flakey: the target's name after
# "dm-") or a file system (btrfs). Our test kernels have all of them
# built in, and this loads nothing there; Debian's kernels on the stock
# lane have each as a module, and modprobe finds them, and our
# dm-totalcow.ko, in the unpacked kernel's tree (tests/vm/stock-init).
kernel_has() {
	kernel_part_present "$1" ||
		{ modprobe -q "$1" 2>/dev/null && kernel_part_present "$1"; }
}
kernel_part_present() {
	case "$1" in
	dm-*) dmsetup targets 2>/dev/null |
		awk -v t="${1#dm-}" '$1 == t { f = 1 } END { exit !f }' ;;
	*) awk -v fs="$1" '$NF == fs { f = 1 } END { exit !f }' /proc/filesystems ;;
	esac
}

# kernel_needs PART...: what the script cannot run without (kernel_has
# each), or stop, naming what is missing.
kernel_needs() {
	local part
	for part in "$@"; do
		kernel_has "$part" || die "the kernel ($(uname -r)) has no $part, built in or as a module"
	done
}

# --- dm-totalcow ---------------------------------------------------------

# tc_create NAME LOWER_DEV [OPT...]: a totalcow device over all of LOWER_DEV.
tc_create() {
	local name=$1 lower=$2; shift 2
	local table="0 $(blockdev --getsz "$lower") totalcow $lower"
	[ $# -eq 0 ] || table+=" $# $*"
	dmsetup create "$name" --table "$table"
}

# tc_btrfs NAME LOWER_DEV MNT [OPT...]: a new btrfs on a new totalcow device
# NAME over LOWER_DEV (table options OPT), mounted at MNT.
tc_btrfs() {
	local name=$1 lower=$2 mnt=$3; shift 3
	tc_create "$name" "$lower" "$@"
	mkfs.btrfs -q -f -K "/dev/mapper/$name" >/dev/null 2>&1 || die "mkfs.btrfs on $name"
	mkdir -p "$mnt"
	mount "/dev/mapper/$name" "$mnt"
}

# scope_field SCOPE NAME: counter NAME of sharing scope SCOPE, from
# /sys/kernel/mm/totalcow/extents/scopes ("<fsid> <scope> <name> <n> ...";
# one line per file system that has the scope).
scope_field() {
	awk -v s="$1" -v f="$2" '$2 == s { for (i = 3; i < NF; i += 2) if ($i == f) print $(i + 1) }' \
		/sys/kernel/mm/totalcow/extents/scopes
}

# btrfs_mount DEV MNT: a new btrfs straight on DEV (no dm device), at MNT.
btrfs_mount() {
	mkfs.btrfs -q -f -K "$1" >/dev/null 2>&1 || die "mkfs.btrfs on $1"
	mkdir -p "$2" && mount "$1" "$2" || die "mount $1 on $2"
}

# tc_register NAME TAG FILE...: whitelist the disk extents of FILEs (btrfs
# on /dev/mapper/NAME) under template TAG.
tc_register() {
	local name=$1 tag=$2; shift 2
	local ranges
	ranges=$("$TOTALCOW_TOP/tests/vm/fiemap-ranges" "/dev/mapper/$name" "$@") ||
		die "cannot map the extents of $*"
	[ -n "$ranges" ] || die "no extents to register for $*"
	# shellcheck disable=SC2086
	dmsetup message "$name" 0 whitelist_add "$tag" $ranges
}

# tc_stat NAME FIELD: one STATUSTYPE_INFO field of totalcow device NAME:
# hits misses bypassed fills evictions invalidations cached capacity
# extents sectors templates waited requeued readahead fleet fleet_mode.
tc_stat() {
	dmsetup status "$1" | awk -v f="$2" '{
		split($10, c, "/")
		v["hits"] = $4; v["misses"] = $5; v["bypassed"] = $6
		v["fills"] = $7; v["evictions"] = $8; v["invalidations"] = $9
		v["cached"] = c[1]; v["capacity"] = c[2]; v["extents"] = $11
		v["sectors"] = $12; v["templates"] = $13
		v["waited"] = $14; v["requeued"] = $15; v["readahead"] = $16
		v["fleet"] = $17; v["fleet_mode"] = $18
		if (!(f in v)) exit 1
		print v[f]
	}' || die "tc_stat: no field '$2'"
}

# --- an unprivileged user for LXC ----------------------------------------

# unpriv_user UID NAME HOME: a user with subordinate ids 100000-165535
# (/etc/subuid, /etc/subgid; the host's /etc is read-only here, so /etc
# gets an overlay of the guest's own), HOME owned by it, and a cgroup of
# its own with the pids and memory controllers (what systemd delegates to
# a user's slice). Sets UNPRIV_* for as_user and in_userns.
unpriv_user() {
	UNPRIV_UID=$1 UNPRIV_NAME=$2 UNPRIV_HOME=$3 UNPRIV_CG=/sys/fs/cgroup/$2 UNPRIV_SCOPES=0
	mkdir -p /tmp/etc-up /tmp/etc-work
	mount -t overlay overlay -o lowerdir=/etc,upperdir=/tmp/etc-up,workdir=/tmp/etc-work /etc ||
		die "overlay over /etc"
	! getent passwd "$1" >/dev/null || die "uid $1 exists on this host: pick another"
	echo "$2:x:$1:$1::$3:/bin/sh" >> /etc/passwd
	echo "$2:x:$1:" >> /etc/group
	echo "$2:100000:65536" > /etc/subuid
	echo "$2:100000:65536" > /etc/subgid
	[ -u "$(command -v newuidmap)" ] || die "newuidmap missing or not setuid (package uidmap)"
	mkdir -p "$3/.config/lxc"
	cat > "$3/.config/lxc/default.conf" <<-CONF
	lxc.net.0.type = empty
	lxc.idmap = u 0 100000 65536
	lxc.idmap = g 0 100000 65536
	CONF
	chown -R "$1:$1" "$3"
	mkdir "$UNPRIV_CG"
	echo "+pids +memory" > /sys/fs/cgroup/cgroup.subtree_control
	chown -R "$1:$1" "$UNPRIV_CG"
	mkdir -p "/run/user/$1" && chown "$1:$1" "/run/user/$1"
}

# in_cgroup CG CMD...: run CMD in cgroup CG, made if missing, as a service
# manager starts each unit in a cgroup of its own. Tools that make
# subgroups of the cgroup they run in (systemd-nspawn --keep-unit makes
# payload/ and supervisor/ and removes them at exit) must not share one.
in_cgroup() {
	local cg=$1
	shift
	mkdir -p "$cg" || die "cgroup $cg"
	# shellcheck disable=SC2016
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

# rm_cgroup CG: remove CG and whatever subgroups a tool left in it.
rm_cgroup() {
	[ ! -d "$1" ] || find "$1" -depth -type d -exec rmdir {} + || die "rmdir $1"
}

# as_user CMD...: run CMD as the unpriv_user in a new leaf cgroup of its
# own (as `systemd-run --user --scope` would; root moves it there: the user
# may not write the root cgroup's cgroup.procs). lxc-start's monitor moves
# itself out into the container's cgroups, so the leaf does not stand in
# the way of their controllers.
as_user() {
	local scope=$UNPRIV_CG/scope.$BASHPID.$((++UNPRIV_SCOPES))
	mkdir "$scope" && chown "$UNPRIV_UID:$UNPRIV_UID" "$scope/cgroup.procs" || die "cgroup $scope"
	in_cgroup "$scope" setpriv --reuid="$UNPRIV_UID" --regid="$UNPRIV_UID" --clear-groups \
		env HOME="$UNPRIV_HOME" USER="$UNPRIV_NAME" LOGNAME="$UNPRIV_NAME" \
		XDG_RUNTIME_DIR="/run/user/$UNPRIV_UID" "$@"
}

# in_userns CMD...: CMD as root of the user's id range (lxc-usernsexec,
# which complains that there is no tty to open: quiet unless CMD fails).
in_userns() {
	as_user lxc-usernsexec -m b:0:100000:65536 -- "$@" 2>/tmp/userns.err ||
		{ grep -v opentty /tmp/userns.err >&2; return 1; }
}

# --- container fleets ------------------------------------------------------

# busybox_rootfs DIR MIB SEED: a container image in DIR: busybox (as sh),
# an os-release (systemd-nspawn refuses a tree without one), four data
# files of MIB MiB in /srv/shared (seeds SEED-1..4) and /bin/fleet-read,
# the workload: print the md5 of the data files' concatenation.
busybox_rootfs() {
	local r=$1 j
	mkdir -p "$r/bin" "$r/etc" "$r/usr/lib" "$r/srv/shared"
	cp /bin/busybox "$r/bin/busybox"
	ln -s busybox "$r/bin/sh"
	printf 'ID=tcbusybox\nNAME="TotalCOW busybox"\n' > "$r/usr/lib/os-release"
	printf '#!/bin/sh\nbusybox cat /srv/shared/data* | busybox md5sum\n' > "$r/bin/fleet-read"
	chmod +x "$r/bin/fleet-read"
	for j in 1 2 3 4; do make_file "$r/srv/shared/data$j" "$2" "$3-$j"; done
}

# fleet_checks N TC_PC TC_RD PLAIN_PC SHARED MMAPS PAGES: what every
# engine's fleet test asserts of N containers reading PAGES pages of data
# and running busybox: one copy for the fleet with TotalCOW (page cache
# and device reads TC_PC, TC_RD <= 1.2x one container; SHARED pages
# shared; busybox mapped from the template MMAPS >= N times), N copies
# without it (PLAIN_PC >= 0.9 N).
fleet_checks() {
	local n=$1 tc_pc=$2 tc_rd=$3 p_pc=$4 shared=$5 mm=$6 pages=$7
	[ "$(echo "$tc_pc <= 1.2" | bc)" = 1 ] || die "totalcow fleet page cache ${tc_pc}x"
	[ "$(echo "$tc_rd <= 1.2" | bc)" = 1 ] || die "totalcow fleet device reads ${tc_rd}x"
	[ "$(echo "$p_pc >= $n * 0.9" | bc)" = 1 ] || die "plain fleet page cache only ${p_pc}x"
	[ "$shared" -ge $(( (n - 1) * pages )) ] || die "only $shared pages shared"
	[ "$mm" -ge "$n" ] || die "only $mm private mappings of busybox mapped the template"
}
