#!/bin/bash
# Readers in I/O cgroups of their own share the fills of template blocks,
# and a throttled cgroup stalls nobody (docs/dm-totalcow.rst,
# "I/O cgroups"). A cold 16 MiB whitelisted range of the raw device, reads
# delayed 10 ms below the target so that readers overlap, every reader an
# O_DIRECT dd of 128 KiB reads in a cgroup of its own (siblings, as
# container engines make them):
#   1. N = 2, 8, 16 readers at once read the range from the disk once
#      (<= 1.01x, counted from /sys/block/$DISK0/stat), every byte right;
#   2. with io.max on the totalcow device for one of them (where engines
#      put a container's limit) the others finish, the range still read
#      once, before the throttled one has read a tenth of it;
#   3. with io.max below the target (on its origin) for a reader that
#      claims the whole range in one read, the others still wait for its
#      fills, which are charged to the fleet's cgroup and not held by that
#      limit: they finish within the time the limit would take for a
#      tenth of the range, the range read once;
#   4. a fill charged to a cgroup that is neither the reader's nor an
#      ancestor of it, held back by that cgroup's io.max, is not waited
#      for: the reader reads the origin and finishes in that time too.
# Old code (readers waited only within their own cgroup) read the range
# 1.3-2x in 1-3; waiting for every fill whatever held it stalls 3 and 4.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow dm-delay

mib=16
cg=/sys/fs/cgroup
devnum() { dmsetup info -c --noheadings -o major,minor "$1" | tr -d ' '; }
# in_cgroup CGROUP CMD...: CMD in cgroup CGROUP (under /sys/fs/cgroup), in
# the background; $! is its pid.
in_cgroup() {
	local dir=$cg/$1; shift
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$dir" "$@" &
}
# reader CGROUP OUT: the whole range in 128 KiB O_DIRECT reads, into OUT.
reader() {
	in_cgroup "$1" dd if=/dev/mapper/tc of="$2" bs=128K count=$((mib * 8)) \
		iflag=direct status=none
}
# limit CGROUP DEV RBPS: io.max of CGROUP for reads of DEV (dm name).
limit() { echo "$(devnum "$2") rbps=$3" > "$cg/$1/io.max"; }
# times_read SECTORS: how many times SECTORS is the range, two decimals.
times_read() { awk -v s="$1" -v m=$mib 'BEGIN { printf "%.2f", s / (m * 2048) }'; }
# once SECTORS WHAT: the range was read from the disk at most 1.01x.
once() {
	[ "$1" -le $((mib * 2048 * 101 / 100)) ] ||
		die "$2 read the range $(times_read "$1")x from the disk"
}
# fresh: the target over the delayed disk, its range whitelisted, nothing
# cached, and its fleet's cgroup starting anew (fleet_cgroup auto). The
# devices stay until the VM ends: 6.12 leaks the io.max state of a disk
# that had a limit once when the disk goes (del_gendisk clears the
# policy's bit before blk_throtl_exit looks at it), which kmemleak reports.
fresh() {
	if [ ! -e /dev/mapper/tc ]; then
		tc_create tc /dev/mapper/slow cache_size 64
		dmsetup message tc 0 whitelist_add raw 0 $((mib << 11))
		return
	fi
	dmsetup message tc 0 drop_cache
	dmsetup message tc 0 fleet_cgroup auto
	[ "$(tc_stat tc fleet) $(tc_stat tc fleet_mode)" = "0 auto" ] ||
		die "the fleet's cgroup did not start anew: $(dmsetup status tc)"
}
# claim_then_time CLAIMER READER...: a reader in cgroup CLAIMER claims the
# whole range in one O_DIRECT read (all its fills in flight at once; its
# pid in $claimer), then, half a second later, readers in the cgroups
# READER... (reader i+1 in the i-th) read the range at once: the seconds
# they took in $took.
claim_then_time() {
	local start i=2 pids=()
	in_cgroup "$1" dd if=/dev/mapper/tc of=/tmp/got.1 bs=${mib}M count=1 \
		iflag=direct status=none
	claimer=$!
	shift
	sleep 0.5
	now_us start
	for c in "$@"; do
		reader "$c" /tmp/got.$i
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	took=$(elapsed_s "$start")
}
# lift CGROUP DEV PID N WHAT: lift CGROUP's io.max on DEV, wait for PID,
# the sectors read from the disk since $before into $read_sectors; readers
# 1..N must have read the range right (WHAT for the message).
lift() {
	local i
	limit "$1" "$2" max
	wait "$3"
	read_sectors=$(($(sectors_read "$DISK0") - before))
	for i in $(seq "$4"); do
		cmp /tmp/raw /tmp/got.$i || die "reader $i got wrong bytes ($5)"
	done
}
# elapsed_s START_US: seconds since START_US, two decimals.
elapsed_s() {
	local now
	now_us now
	awk -v d=$((now - $1)) 'BEGIN { printf "%.2f", d / 1e6 }'
}

make_file /tmp/raw $mib cgroups-raw
dd if=/tmp/raw of=/dev/$DISK0 bs=1M oflag=direct status=none
sectors=$(blockdev --getsz /dev/$DISK0)
dmsetup create slow --table "0 $sectors delay /dev/$DISK0 0 10"

grep -qw io $cg/cgroup.subtree_control || echo +io > $cg/cgroup.subtree_control
mkdir -p $cg/fleet
echo +io > $cg/fleet/cgroup.subtree_control

# 1. N readers, N cgroups.
for n in 2 8 16; do
	fresh
	for i in $(seq "$n"); do mkdir -p $cg/fleet/r$i; done
	before=$(sectors_read "$DISK0")
	waited=$(tc_stat tc waited)
	pids=()
	for i in $(seq "$n"); do
		reader fleet/r$i /tmp/got.$i
		pids+=($!)
	done
	wait "${pids[@]}"
	read_sectors=$(($(sectors_read "$DISK0") - before))
	for i in $(seq "$n"); do
		cmp /tmp/raw /tmp/got.$i || die "reader $i of $n got wrong bytes"
	done
	echo "cgroups: $n readers in $n cgroups read the range $(times_read "$read_sectors")x" \
		"from the disk, waited for $(($(tc_stat tc waited) - waited)) blocks"
	once "$read_sectors" "$n readers in $n cgroups"
	rm -f /tmp/got.*
done

# 2. io.max on the totalcow device for one reader: it is held before the
# target, the others share and finish before it has read a tenth.
fresh
rbps=$((128 << 10))
limit fleet/r1 tc $rbps
before=$(sectors_read "$DISK0")
reader fleet/r1 /tmp/got.1
throttled=$!
pids=()
for i in 2 3 4; do
	reader fleet/r$i /tmp/got.$i
	pids+=($!)
done
wait "${pids[@]}"
# What it has written (dd writes each 128 KiB block once it has read it).
done_bytes=$(stat -c %s /tmp/got.1)
kill -0 $throttled 2>/dev/null || done_bytes=gone
lift fleet/r1 tc $throttled 4 "io.max on the totalcow device"
echo "cgroups: io.max $rbps B/s on the totalcow device for one of 4 readers: the" \
	"other 3 were done when it had read $done_bytes bytes; the range read" \
	"$(times_read "$read_sectors")x from the disk"
[ "$done_bytes" != gone ] || die "the throttled reader finished before the others"
[ "$done_bytes" -lt $(((mib << 20) / 10)) ] ||
	die "the throttled reader had read $done_bytes bytes when the others were done"
once "$read_sectors" "4 readers, one throttled on the totalcow device,"
rm -f /tmp/got.*

# 3. io.max on the origin for a reader that claims the whole range at once:
# its fills are the fleet's, and its limit does not hold them.
fresh
rbps=$((64 << 10))
bound_s=$(((mib << 20) / 10 / rbps))
limit fleet/r1 slow $rbps
before=$(sectors_read "$DISK0")
claim_then_time fleet/r1 fleet/r2 fleet/r3 fleet/r4
lift fleet/r1 slow $claimer 4 "io.max on the origin"
echo "cgroups: io.max $rbps B/s on the origin for the reader that claimed the" \
	"range: the other 3 took ${took} s (a tenth at that rate: $bound_s s); the" \
	"range read $(times_read "$read_sectors")x from the disk"
awk -v t="$took" -v b="$bound_s" 'BEGIN { exit !(t < b) }' ||
	die "the others waited for fills held by another cgroup's io.max"
once "$read_sectors" "4 readers, the first throttled on the origin,"
rm -f /tmp/got.*

# 4. A fill charged to another subtree's cgroup (the fleet's cgroup starts
# as the parent of the first reader's: other/x here), held back by that
# cgroup's io.max, is not waited for by a reader outside it.
fresh
mkdir -p $cg/other/x/r
echo +io > $cg/other/cgroup.subtree_control
echo +io > $cg/other/x/cgroup.subtree_control
limit other/x slow $rbps
misses=$(tc_stat tc misses) before=$(sectors_read "$DISK0")
claim_then_time other/x/r fleet/r2
lift other/x slow $claimer 2 "a fill of another subtree"
echo "cgroups: a reader outside the cgroup of fills held by its io.max took" \
	"${took} s (a tenth at that rate: $bound_s s), with" \
	"$(($(tc_stat tc misses) - misses)) misses"
awk -v t="$took" -v b="$bound_s" 'BEGIN { exit !(t < b) }' ||
	die "a reader waited for fills held by a cgroup that is not its ancestor"
rm -f /tmp/got.*

echo "cgroups: passed"
