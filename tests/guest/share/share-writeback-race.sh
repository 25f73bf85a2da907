#!/bin/bash
# Writeback and a page drop racing the read-miss proof:
# tc_alias_proven() reads a member page's extent map while the page is a
# dirty folio (its extent map still the template's), and stores aliases
# into the slots empty at the end of the walk. If the page is written back
# and dropped in between, its slot is empty then and becomes an alias of
# the template's page: read() gives the template's bytes, and the next
# small write copies them to disk over the user's.
#
# Root makes an --auto group of a read-only template T (a 1 MiB file whose
# pages are extents of their own: the proof walks one extent map per page)
# and gives uid 1000 a clone C1; from then on everything is unprivileged
# (tests/guest/share/share-writeback-race.py): each try the user snapshots C1
# (the snapshot joins at its first read), overwrites page 0, reads pages
# 1.. from a SCHED_IDLE thread while the main thread writes page 0 back and
# drops it after a delay that varies across tries, then checks what read()
# and the disk hold, and deletes the snapshot (user_subvol_rm_allowed).
# The group's stats and auto_members are 0400: root opens them and the
# user's workload reads them through the inherited descriptors.
#
#   share-writeback-race.sh [TRIES [MIB [LAYOUT [MAX_DELAY_US]]]]
#
# TRIES default 320; MIB, the template file's size, default 1; LAYOUT
# frag (default) or plain (the template written in one go); MAX_DELAY_US
# default 1000 (the delays spread over at least the time A's read takes).
# The workload ends with "writeback-race: N tries, W wrong reads, L lost
# writes, P pages proven" and fails if W or L > 0, if P == 0, if a
# snapshot did not join or if the writeback never began inside the read;
# then root checks the group's counters agree and the template is intact.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
tries=${1:-320}
mib=${2:-1}
layout=${3:-frag}
max_delay_us=${4:-1000}
[ "$tries" -ge 1 ] || die "TRIES must be at least 1"
case $layout in frag|plain) ;; *) die "LAYOUT is frag or plain";; esac
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
user=(setpriv --reuid=1000 --regid=1000 --clear-groups)
py=$TOTALCOW_TOP/tests/guest/share/share-writeback-race.py

mkfs.btrfs -q -f -K /dev/$DISK0 >/dev/null 2>&1 || die "mkfs.btrfs"
mkdir -p $mnt && mount -o user_subvol_rm_allowed /dev/$DISK0 $mnt || die "mount"
btrfs -q subvolume create $mnt/T
mkdir $mnt/T/d
python3 "$py" template $mnt/T/d/f "$mib" "$layout" || die "cannot write the template"
btrfs property set $mnt/T ro true
"$TOTALCOW_TOP/tools/totalcowctl" group create g $mnt/T --auto || die "totalcowctl group create --auto"
mkdir $mnt/home && chown 1000:1000 $mnt/home
btrfs -q subvolume snapshot $mnt/T $mnt/home/C1
chown 1000:1000 $mnt/home/C1 $mnt/home/C1/d $mnt/home/C1/d/f
sync
tsum=$(sha256sum < $mnt/T/d/f)
echo "writeback-race: template $mib MiB $layout, $(filefrag $mnt/T/d/f | sed 's/.*: //'), $(uname -r) $(uname -v)"

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }
proven0=$(stat_of aliases_proven) joined0=$(stat_of members_joined) copies0=$(stat_of cow_copies)
stale0=$(stat_of proofs_stale)	# empty before the fix counted them
now_us t0
rc=0
exec 3<$groups/g/stats 4<$groups/g/auto_members
"${user[@]}" python3 "$py" race $mnt "$tries" "$max_delay_us" 3 4 | tee /tmp/race.out || rc=$?
exec 3<&- 4<&-
now_us t1
proven=$(( $(stat_of aliases_proven) - proven0 )) joined=$(( $(stat_of members_joined) - joined0 ))
stale="(no such counter)"
[ -z "$stale0" ] || stale=+$(( $(stat_of proofs_stale) - stale0 ))
echo "writeback-race: $(us_ms $((t1 - t0))) ms; group stats: aliases_proven +$proven," \
	"members_joined +$joined, cow_copies +$(( $(stat_of cow_copies) - copies0 ))," \
	"proofs_stale $stale," \
	"auto_members now $(wc -l < $groups/g/auto_members)"
[ "$rc" = 0 ] || die "share-writeback-race.py failed"
# The workload's count, read through root's descriptor, is the group's
# (with its calibration tries'): nothing else read a member.
said=$(sed -n 's/^writeback-race: .* \([0-9]*\) pages proven$/\1/p' /tmp/race.out)
calib=$(sed -n 's/.*(and the calibration \([0-9]*\) pages).*/\1/p' /tmp/race.out)
[ "$((said + calib))" = "$proven" ] ||
	die "the workload counted $said + $calib pages proven, the group $proven"
[ "$joined" -ge "$tries" ] || die "only $joined snapshots joined in $tries tries"
[ "$(sha256sum < $mnt/T/d/f)" = "$tsum" ] || die "the template changed"
echo g > $groups/delete || die "groups/delete"
umount $mnt
echo "writeback-race: passed"
