#!/bin/bash
# The modelled hard disk (bench/scenarios/lib-stack.sh, disk_model) charges
# its bandwidth limit per request of at most 64 KiB, not per bio: io.max
# charges a bio whole before any of it reaches the disk, so a large bio
# would wait for all of its bytes and then be written in one burst, and
# the time of a write would depend on how large the file system's bios
# are. A 1 MiB O_DIRECT read through the model must reach the disk as 16
# bios of 64 KiB (io.stat of the model's cgroup counts each bio the disk
# gets); with the bio charged whole it was 9 (the bio and the pieces the
# disk's 127 KiB request limit cut it into, as io.stat counts them).
set -euo pipefail
. "$TOTALCOW_TOP/tests/vm/lib.sh"
. "$TOTALCOW_TOP/bench/scenarios/lib-stack.sh"

io_stat() { # FIELD: the model cgroup's FIELD (rios, rbytes ...) for $DISK0
	awk -v d="$(cat /sys/block/$DISK0/dev)" -v f="$1" '$1 == d {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) v = kv[2] }
	} END { print v + 0 }' /sys/fs/cgroup/disk-model/io.stat
}

lower=$(disk_model "$DISK0" 1 400)
ios0=$(io_stat rios) bytes0=$(io_stat rbytes)
dd if="$lower" of=/dev/null bs=1M count=1 skip=3 iflag=direct status=none
ios=$(($(io_stat rios) - ios0)) bytes=$(($(io_stat rbytes) - bytes0))
echo "1 MiB read: $ios bios, $bytes bytes at the disk"
[ "$bytes" = $((1 << 20)) ] || die "the disk was charged $bytes bytes for a 1 MiB read"
[ "$ios" = 16 ] || die "the disk got $ios bios for a 1 MiB read, not 16 of 64 KiB"
disk_model_off "$DISK0"
[ ! -e /dev/mapper/$DISK0-split ] && [ ! -e /dev/mapper/$DISK0-delay ] ||
	die "disk_model_off left devices behind"
echo "disk model: requests of 64 KiB"
