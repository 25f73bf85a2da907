#!/bin/bash
# Reads of /sys/kernel/mm/totalcow change nothing. A
# monitoring agent polls these files; before, a read of extents/scopes
# pruned deleted subvolumes and freed the scopes they left empty, and a
# read of groups/<g>/auto_members unbound the files of deleted members.
#
# File system A holds state that only a prune changes: group g (auto on)
# whose automatic members C1-C3 are deleted, one per round, while a file
# of each is held open and bound (its aliases count in pages_shared), and
# scope "still", whose enabled image was disabled so that only its
# followed snapshots F1-F3 hold it, deleted the same way; template tA on
# A's totalcow device. Each round snapshots A's state (the files of g and
# its counters, the scope's counters, tA's files), deletes Ci and Fi
# (which leave the lists of live subvolumes at once), then reads every readable file under /sys/kernel/mm/totalcow twice,
# while another process changes file system B (snapshots that join a
# group and follow a scope, groups/add and remove, extents enable and
# disable, templates register and deregister, subvolume deletes), and
# compares A's state after each pass with the snapshot: equal, every
# round. The kernel's own pruning is held off meanwhile
# (totalcow.prune_interval_ms); let go at the end, it unbinds the deleted
# members' open files and frees the scope, with no write.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
T=/sys/kernel/mm/totalcow
param=/sys/module/totalcow/parameters/prune_interval_ms
a=/mnt/a b=/mnt/b
rounds=3

# The kernel's pruning waits until we let it go (no such knob before).
[ -w $param ] && echo 3600000 > $param

tc_btrfs tca /dev/$DISK0 $a
tc_btrfs tcb /dev/$DISK1 $b
dev_of() { local d; d=$(stat -Lc '%t:%T' "$1"); echo "$((16#${d%:*})):$((16#${d#*:}))"; }
ranges_of() { "$TOTALCOW_TOP/tests/vm/fiemap-ranges" "$@" | tr '\n' ' '; }

# A: a group with auto members, a scope held by followed snapshots only.
btrfs -q subvolume create $a/T
make_file $a/T/f 4 tmpl
btrfs property set $a/T ro true
btrfs -q subvolume create $a/I
make_file $a/I/f 4 image
sync
echo "g $a/T" > $T/groups/create || die "groups/create g"
echo 1 > $T/groups/g/auto
echo "still $a/I" > $T/extents/enable || die "extents/enable still"
for i in $(seq $rounds); do
	btrfs -q subvolume snapshot $a/T $a/C$i
	btrfs -q subvolume snapshot $a/I $a/F$i
done
sync
drop_caches
for i in $(seq $rounds); do
	cat $a/T/f $a/C$i/f $a/I/f $a/F$i/f > /dev/null
done
echo "still $a/I" > $T/extents/disable || die "extents/disable still"
echo "tA $(dev_of /dev/mapper/tca)" > $T/templates/register || die "register tA"
echo "tA $(ranges_of /dev/mapper/tca $a/T/f)" > $T/templates/add_extents || die "add_extents tA"
[ "$(awk '{ print $1 }' $T/groups/g/auto_members | wc -l)" = $rounds ] ||
	die "C1-C$rounds did not join: $(cat $T/groups/g/auto_members)"
[ "$(awk '$2 == "still" { for (i = 1; i <= NF; i++) if ($i == "followed") print NF - i }' $T/extents/scopes)" = $rounds ] ||
	die "F1-F$rounds did not follow: $(cat $T/extents/scopes)"
# Ci's and Fi's files stay open, bound (aliases in pages_shared), once deleted.
exec 3< $a/C1/f 4< $a/C2/f 5< $a/C3/f 6< $a/F1/f 7< $a/F2/f 8< $a/F3/f
shared0=$(awk '$1 == "pages_shared" { print $2 }' $T/groups/g/stats)
[ "$shared0" -ge 1000 ] || die "pages_shared $shared0 before the rounds"

# A's state, which no change on B can touch: g's files and counters, the
# scope's counters, tA's files. (The lists of subvolumes show the live
# ones: a deleted member or snapshot leaves them at its deletion, and the
# state it holds, counted here, at the kernel's next prune.)
state() {
	local f
	for f in template members auto stats; do
		echo "== g/$f"; cat $T/groups/g/$f
	done
	echo "== scope still"; awk '$2 == "still" { sub(/ subvolumes .*/, ""); print }' $T/extents/scopes
	for f in device nr_extents sectors extents; do
		echo "== tA/$f"; cat $T/templates/tA/$f
	done
}

# B: a group, a scope and templates that another process keeps changing.
btrfs -q subvolume create $b/T
make_file $b/T/f 1 tmplb
btrfs property set $b/T ro true
btrfs -q subvolume create $b/I
make_file $b/I/f 1 imageb
btrfs -q subvolume create $b/E
sync
echo "h $b/T" > $T/groups/create || die "groups/create h"
echo 1 > $T/groups/h/auto
echo "churn $b/I" > $T/extents/enable || die "extents/enable churn"
devb=$(dev_of /dev/mapper/tcb) rangesb=$(ranges_of /dev/mapper/tcb $b/T/f)
changer() {
	local i=0 ops=0
	while [ ! -e /tmp/stop ]; do
		i=$((i + 1))
		btrfs -q subvolume snapshot $b/T $b/c$i
		btrfs -q subvolume snapshot $b/I $b/f$i
		cat $b/c$i/f $b/f$i/f > /dev/null		# joins h, follows churn
		echo "h $b/c$i" > $T/groups/add		# adopts the automatic member
		echo "h $b/c$i" > $T/groups/remove
		cat $b/c$i/f > /dev/null
		echo "tB$i $devb" > $T/templates/register
		echo "tB$i $rangesb" > $T/templates/add_extents
		echo "churn2 $b/E" > $T/extents/enable
		echo "churn2 $b/E" > $T/extents/disable
		echo "tB$i" > $T/templates/deregister
		if [ $i -gt 1 ]; then
			btrfs -q subvolume delete $b/c$((i - 1)) $b/f$((i - 1))
		fi
		ops=$((ops + 12))
		echo $ops > /tmp/changes
	done
}
rm -f /tmp/stop /tmp/changes
changer > /tmp/changer.log 2>&1 &
cpid=$!

# Every readable file, twice, with the shell's own reads (no exec each).
# B's files may go while listed.
read_all() {
	local f n=0 text
	while read -r f; do
		{ read -r -d '' text < "$f"; } 2> /dev/null || true
		{ read -r -d '' text < "$f"; } 2> /dev/null || true
		n=$((n + 1))
	done < <(find $T -type f -perm -u=r)
	echo $n
}
files=0 longest=0
for i in $(seq $rounds); do
	s0=$(state)
	btrfs -q subvolume delete $a/C$i $a/F$i
	sync
	for pass in 1 2; do
		now_us t0
		files=$(read_all)
		now_us t1
		[ $((t1 - t0)) -le $longest ] || longest=$((t1 - t0))
		s=$(state)
		if [ "$s" != "$s0" ]; then
			diff <(echo "$s0") <(echo "$s") || true
			die "round $i, pass $pass: reading the files changed A's state (above: before the reads, after)"
		fi
	done
done
touch /tmp/stop
wait $cpid || die "the changer failed: $(tail -5 /tmp/changer.log)"
echo "sysfs-reads: $rounds rounds, $files files read twice each pass (the longest pass $(us_ms $longest) ms), $(cat /tmp/changes) changes on B meanwhile: A's state unchanged by every read"

# Let the kernel prune: C1-C3 leave g, their open files unbound (their
# aliases leave pages_shared); "still" goes with F1-F3. No write, no read
# of anything but g's stats and scopes.
now_us t0
echo 100 > $param
for _ in $(seq 100); do
	[ "$(awk '$1 == "pages_shared" { print $2 }' $T/groups/g/stats)" = 0 ] &&
		! grep -q " still " $T/extents/scopes && break
	sleep 0.1
done
now_us t1
[ "$(awk '$1 == "pages_shared" { print $2 }' $T/groups/g/stats)" = 0 ] ||
	die "the deleted members' files are still bound: $(cat $T/groups/g/stats)"
if grep -q " still " $T/extents/scopes; then die "scope still outlived its snapshots: $(cat $T/extents/scopes)"; fi
echo "sysfs-reads: the kernel pruned the deleted members and snapshots itself in $(us_ms $((t1 - t0))) ms (pages_shared $shared0 -> 0)"
exec 3<&- 4<&- 5<&- 6<&- 7<&- 8<&-
echo tA > $T/templates/deregister
echo g > $T/groups/delete
echo h > $T/groups/delete
echo "churn $b/I" > $T/extents/disable
umount $a
umount $b
echo "sysfs-reads: passed"
