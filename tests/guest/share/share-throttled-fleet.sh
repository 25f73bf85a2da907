#!/bin/bash
# A reader never waits at another cgroup's throttled rate for a page it
# can read itself. A shared page (a template's page that a group's members
# alias, a scope's canonical page) is read once, by the reader that misses
# on it first, and the others that need it wait for that read. Before
# 2026-12-02 that read was charged to the first reader's I/O cgroup: a
# container under io.max 512 KiB/s that read 4 MiB of its member made
# another container's 4 KiB read of its own member at that offset wait
# 1-3 s (7 s at 128 KiB/s), where plain btrfs and the dm layer took 2 ms.
# Now such reads are charged to the fleet's cgroup (the closest common
# ancestor of the readers', as dm-totalcow's fills are), and a reader
# waits for a shared read only if it is charged to its own cgroup or an
# ancestor; otherwise it reads the page of its own file itself.
#  1. Group, the fleet's charge: the attacker (uid 1000, cgroup att,
#     io.max 512 KiB/s) reads 4 MiB of its member; the victim (uid 1001,
#     cgroup vic) reads 4 KiB at the same offset a second later. The
#     template's reads are not charged to att (io.stat: under 1 MiB read
#     in att; before, 4 MiB).
#  2. Group, a throttled fleet: the fleet is t1 (the attacker's parent,
#     io.max 128 bytes/s, as an admin would limit a tenant's subtree); the
#     attacker reads 4 KiB of its member (32 s), the victim, outside t1,
#     reads 4 KiB at the same offset and returns while the attacker's read
#     is in flight (before: it waited for it).
#  3. Group, a read nobody recorded: the attacker's private mapping of its
#     member maps the template's pages; its faults read them in t1, at
#     t1's rate (MADV_RANDOM: a page per fault). The victim's read of the
#     page being faulted returns while the fault is in flight.
#  4. Scope, the fleet's charge, as 1 with reflinked copies in a scope.
#  5. Scope, a throttled fleet, as 2 (t2).
# Each part's bytes are checked against the template's.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
cg=/sys/fs/cgroup
btrfs_mount /dev/$DISK0 $mnt
dev=$(cat /sys/block/$DISK0/dev)
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 16 fleet
btrfs property set $mnt/T ro true
for m in A V; do btrfs -q subvolume snapshot $mnt/T $mnt/$m; done
chown -R 1000 $mnt/A && chown -R 1001 $mnt/V
for s in S1 S2; do
	btrfs -q subvolume create $mnt/$s
	make_file $mnt/$s/f 16 "fleet-$s"
	cp --reflink=always $mnt/$s/f $mnt/$s/a
	cp --reflink=always $mnt/$s/f $mnt/$s/v
	chown 1000 $mnt/$s/a && chown 1001 $mnt/$s/v
done
sync
echo "s1 $mnt/S1" > $x/enable && echo "s2 $mnt/S2" > $x/enable || die "extents/enable"
echo +io > $cg/cgroup.subtree_control
mkdir $cg/att $cg/vic $cg/t1 $cg/t2
for t in t1 t2; do
	echo +io > $cg/$t/cgroup.subtree_control && mkdir $cg/$t/att $cg/$t/pre || die "cgroup $t"
done

sha() { sha256sum | cut -d' ' -f1; }
want() { dd if="$1" bs=4096 skip="$2" count="$3" status=none | sha; }
# rd CG UID FILE PAGE COUNT: COUNT pages at PAGE, buffered, as UID in CG
# (within $WITHIN seconds if set).
rd() {
	in_cgroup "$cg/$1" ${WITHIN:+timeout "$WITHIN"} setpriv --reuid="$2" --regid="$2" \
		--clear-groups dd if="$3" bs=4096 skip="$4" count="$5" status=none
}
# rbytes CG: bytes CG's bios read from the disk.
rbytes() {
	awk -v d="$dev" '$1 == d { for (i = 2; i <= NF; i++)
		if ($i ~ /^rbytes=/) print substr($i, 8) }' $cg/$1/io.stat | grep . || echo 0
}
limit() { echo "$dev rbps=$2" > $cg/$1/io.max || die "io.max $1"; }
# The private mappings of group $G's members that map the template.
mmaps_shared() {
	[ -n "${G:-}" ] || { echo 0; return; }
	awk '$1 == "mmaps_shared" { print $2 }' $groups/$G/stats
}
# Out of the page cache: FILE's data (its metadata stays).
dontneed() {
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}

# charge KIND ATTFILE VICFILE TEMPLATE: parts 1 and 4 (one 4 MiB read()).
charge() {
	local a0 a1 t0 t1 got
	# Metadata first, unthrottled: the extents proven, no page compared.
	rd att 1000 "$2" 0 1 > /dev/null && rd vic 1001 "$3" 0 1 > /dev/null ||
		die "$1: the first reads"
	limit att 524288
	a0=$(rbytes att)
	in_cgroup $cg/att setpriv --reuid=1000 --regid=1000 --clear-groups \
		dd if="$2" of=/tmp/att bs=4M skip=1 count=1 status=none &
	att=$!
	sleep 1
	now_us t0
	got=$(WITHIN=60 rd vic 1001 "$3" 1024 1 | sha) || got="none in 60 s"
	now_us t1
	wait $att || die "$1: the attacker's read failed"
	a1=$(rbytes att)
	limit att max
	echo "fleet: $1: the attacker's 4 MiB read at 512 KiB/s: its cgroup read $(((a1 - a0) / 1024)) KiB from the disk; the victim's 4 KiB read a second later took $(us_ms $((t1 - t0))) ms"
	[ "$got" = "$(want "$4" 1024 1)" ] || die "$1: the victim read wrong bytes"
	cmp /tmp/att <(dd if="$4" bs=4096 skip=1024 count=1024 status=none) ||
		die "$1: the attacker read wrong bytes"
	[ $((a1 - a0)) -lt $((1024 * 1024)) ] ||
		die "$1: the shared reads were charged to the attacker's cgroup ($((a1 - a0)) bytes)"
}

# throttled KIND CG ATTFILE VICFILE TEMPLATE PAGE[+N] WAIT [mmap]: parts
# 2, 3 and 5. The attacker reads the page at PAGE at 128 bytes/s (32 s per
# page of its window: a scope's miss reads 128 pages, each a bio of its
# own, the last of them N = 127 pages on), the victim the page N pages
# on, a second after the attacker started; the victim's read must return, and 2 s
# later the attacker's must still be in flight. Both files' metadata is
# read first, unthrottled, 128 pages before (a reader of a shared b-tree
# block waits for whoever reads it, with or without TotalCOW; a scope's
# file shares only extents whose maps are in memory), the victim's from
# within CG (a miss from outside would widen the fleet to the root). When the victim reads,
# the attacker waits for the shared reads at PAGE: on x86-64 its kernel
# stack has a function of the regular expression WAIT in it (the miss's
# wait for the template's or the canonical pages, or the fault of a
# private mapping, which maps the template's pages: the group's
# mmaps_shared counts it); a canonical read started (the scope's reads).
throttled() {
	local got still at=${6%+*} vat=$((${6/+/ + })) r0 m0 pid
	rm -f /tmp/started
	rd "$2/att" 1000 "$3" $((at - 128)) 1 > /dev/null &&
		rd "$2/pre" 1001 "$4" $((vat - 128)) 1 > /dev/null || die "$1: the first reads"
	limit "$2" 128
	r0=$(cat $x/scopes)
	m0=$(mmaps_shared)
	rm -f /tmp/att.pid
	if [ "${8:-}" = mmap ]; then
		in_cgroup "$cg/$2/att" sh -c 'echo $$ > /tmp/att.pid; exec "$@"' sh \
			setpriv --reuid=1000 --regid=1000 --clear-groups \
			python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_RANDOM)
at = int(sys.argv[2]) * 4096
open("/tmp/started", "w").close()
sys.stdout.buffer.write(m[at:at + 4096])' "$3" "$at" > /tmp/att &
	else
		in_cgroup "$cg/$2/att" sh -c 'echo $$ > /tmp/att.pid; > /tmp/started; exec "$@"' sh \
			setpriv --reuid=1000 --regid=1000 --clear-groups \
			dd if="$3" bs=4096 skip="$at" count=1 status=none > /tmp/att &
	fi
	att=$!
	for _ in $(seq 100); do [ -e /tmp/started ] && break; sleep 0.1; done
	[ -e /tmp/started ] || die "$1: the attacker did not start"
	sleep 1
	# Until the attacker waits for the shared pages (UML's /proc/PID/stack
	# has the host's switch only: there, the second above).
	pid=$(cat /tmp/att.pid)
	if [ "${TOTALCOW_LANE:-uml}" != uml ]; then
		for _ in $(seq 100); do
			grep -qE "$7" /proc/$pid/stack 2>/dev/null && break
			sleep 0.1
		done
		grep -qE "$7" /proc/$pid/stack ||
			die "$1: the attacker does not wait for the shared pages: $(cat /proc/$pid/stack)"
	fi
	kill -0 $att 2>/dev/null || die "$1: the attacker's read was not throttled (finished within a second)"
	if [ "${8:-}" = mmap ]; then
		[ "$(mmaps_shared)" -gt "$m0" ] || die "$1: the private mapping is not the template's"
	elif [ "$5" != $mnt/T/f ]; then
		[ "$(cat $x/scopes)" != "$r0" ] || die "$1: the attacker's read started no canonical read"
	fi
	got=$(WITHIN=60 rd vic 1001 "$4" "$vat" 1 | sha) || got="none in 60 s"
	sleep 2
	kill -0 $att 2>/dev/null && still=yes || still=no
	limit "$2" max
	wait $att || die "$1: the attacker's read failed"
	echo "fleet: $1: the victim's 4 KiB read returned while the attacker's throttled read was in flight (and stayed so 2 s longer): $still"
	[ "$got" = "$(want "$5" "$vat" 1)" ] || die "$1: the victim read wrong bytes"
	cmp /tmp/att <(dd if="$5" bs=4096 skip="$at" count=1 status=none) ||
		die "$1: the attacker read wrong bytes"
	[ $still = yes ] || die "$1: the victim waited for the attacker's throttled read"
}

# A fresh group (and so a fleet of its own) per part.
group() {
	G=$1
	echo "$1 $mnt/T" > $groups/create && echo "$1 $mnt/A" > $groups/add &&
		echo "$1 $mnt/V" > $groups/add || die "group $1"
}

group g1
dontneed $mnt/T/f
charge group $mnt/A/f $mnt/V/f $mnt/T/f
echo g1 > $groups/delete
group g2
dontneed $mnt/T/f
throttled group t1 $mnt/A/f $mnt/V/f $mnt/T/f 2560 "tc_(read|wait)_template"
dontneed $mnt/T/f
throttled "group, private mapping" t1 $mnt/A/f $mnt/V/f $mnt/T/f 3072 filemap_fault mmap
echo g2 > $groups/delete
G=
charge scope $mnt/S1/a $mnt/S1/v $mnt/S1/f
throttled scope t2 $mnt/S2/a $mnt/S2/v $mnt/S2/f 2560+127 "tc_extent_(read_miss|wait)"
for c in att vic t1/att t1/pre t1 t2/att t2/pre t2; do rmdir $cg/$c; done
umount $mnt
echo "fleet: passed"
