#!/bin/bash
# Memory pressure reclaims the totalcow cache through its shrinker: with a
# cache allowed to grow to all of RAM and holding most of it, a tmpfs file
# nearly as large as RAM must still fit, and the data stays right.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow

mib=$1 pressure_mib=$2
openssl enc -aes-128-ctr -nosalt -pass pass:shrink -pbkdf2 -iter 1 \
	-in <(head -c $((mib << 20)) /dev/zero) -out /dev/$DISK0 2>/dev/null
want=$(head -c $((mib << 20)) /dev/$DISK0 | sha256sum)
blockdev --flushbufs /dev/$DISK0
tc_create tc /dev/$DISK0 cache_size 100%
dmsetup message tc 0 whitelist_add big 0 $((mib * 2048))
read_sum() { dd if=/dev/mapper/tc bs=1M count="$mib" iflag=direct status=none | sha256sum; }

slab_kib() { awk '$1 == "Slab:" { print $2 }' /proc/meminfo; }
slab0=$(slab_kib)
[ "$(read_sum)" = "$want" ] || die "first read wrong"
cached=$(tc_stat tc cached)
echo "cached after reading $mib MiB: $cached blocks"
[ "$cached" = $((mib * 256)) ] || die "expected the whole $mib MiB cached"
# Metadata: the kernel's slab memory grew by at most 64 bytes per block.
per_block=$(( ($(slab_kib) - slab0) * 1024 / cached ))
echo "slab growth per cached block: $per_block bytes"
[ "$per_block" -le 64 ] || die "$per_block bytes of metadata per cached block"
grep -E '^(MemTotal|MemFree|MemAvailable)' /proc/meminfo

# Fill tmpfs: only possible if the shrinker gives memory back.
mount -o remount,size=$((pressure_mib + 16))M /dev/shm
dd if=/dev/zero of=/dev/shm/pressure bs=1M count="$pressure_mib" status=none ||
	die "could not allocate $pressure_mib MiB under pressure"
after=$(tc_stat tc cached)
echo "cached under pressure: $after blocks, evictions $(tc_stat tc evictions)"
[ "$after" -lt "$cached" ] || die "the shrinker did not evict"
[ "$(tc_stat tc evictions)" -gt 0 ] || die "no evictions counted"
rm /dev/shm/pressure

[ "$(read_sum)" = "$want" ] || die "read after reclaim wrong"
[ "$(read_sum)" = "$want" ] || die "cached read after reclaim wrong"
dmsetup status tc
dmsetup remove tc
echo "dm-totalcow shrinker: reclaimed and right"
