#!/bin/bash
# A private mapping of a file in a sharing scope never suffers for what is
# not its own (tc_clone_make(), tc_clone_reap(); docs/design/mapped-files.md, "Who
# waits for whom"):
#
# 1. Its own limits. A clone counts against the mapper's file-size
#    limit, as any reflink does: a mapper under a smaller one (ulimit -f
#    0, as sandboxes set) makes none and maps the file itself, or maps a
#    clone made already. Failed before 2026-12-02: the clone's making sent
#    the mapper SIGXFSZ, and 5 of 5 runs of busybox from a scope under
#    `ulimit -f 0` were killed (exit 153); stock runs them.
# 2. Another file system's freeze. File system X holds 1024 unused
#    clones (the cap of idle ones); an admin freezes X; a process on file
#    system Y maps and unmaps a file, which makes one clone too many idle:
#    X's oldest is to be deleted, a transaction of X that waits for the
#    thaw. Y's munmap() must not wait for it (within 1 s), nor Y's
#    unmount (done within 20 s with X still frozen; python alone takes
#    4 s to start on a loaded x86-64 debug guest).
#    Failed before 2026-12-02: that munmap() deleted X's clone itself and
#    slept until the thaw.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
X=/mnt/x Y=/mnt/y
nobody=65534
field() { awk -v f="$1" '{for (i = 1; i < NF; i++) if ($i == f) s += $(i + 1)} END {print s + 0}' $x/scopes; }
py=$TOTALCOW_TOP/tests/guest/extents/share-extents-mmap-isolation.py

btrfs_mount /dev/$DISK0 $X
btrfs_mount /dev/$DISK1 $Y
btrfs -q subvolume create $X/w
btrfs -q subvolume create $Y/w
cp /bin/busybox $X/w/busybox
chmod 755 $X/w/busybox
sync
echo "default $X/w" > $x/enable
echo "default $Y/w" > $x/enable

# 1. ulimit -f 0: first with no clone of busybox, then with one.
limited() { setpriv --reuid=$nobody --regid=$nobody --clear-groups \
	bash -c 'ulimit -f 0; exec "$0" true' $X/w/busybox; }
p0=$(field mmaps_private)
rc=0
limited || rc=$?
p1=$(field mmaps_private) s1=$(field mmaps_shared)
echo "limits: busybox under ulimit -f 0 with no clone: exit $rc, mmaps_private +$((p1 - p0))"
[ $rc = 0 ] || die "busybox from a scope under ulimit -f 0 exited $rc"
[ $((p1 - p0)) -ge 1 ] || die "the limited mapper did not map busybox itself"
setpriv --reuid=$nobody --regid=$nobody --clear-groups $X/w/busybox true || die "busybox, unlimited"
s2=$(field mmaps_shared)
[ $((s2 - s1)) -ge 1 ] || die "the unlimited run did not map a clone"
ran=0
for i in 1 2 3 4 5; do limited && ran=$((ran + 1)); done
s3=$(field mmaps_shared)
echo "limits: 5 runs under ulimit -f 0 with a clone: $ran ran, mmaps_shared +$((s3 - s2))"
[ $ran = 5 ] || die "$((5 - ran)) of 5 limited runs from a scope failed"
[ $((s3 - s2)) -ge 5 ] || die "the limited runs did not map the clone made already"

# 2. X's 1024 idle clones, X frozen, Y's mapper.
mkdir -p $X/w/many
# One process for the 1024 files: an exec costs 0.7 s on the x86-64 debug
# guest under TCG.
python3 -c 'import os, sys
for i in range(1, 1025):
    with open(os.path.join(sys.argv[1], str(i)), "wb") as f:
        f.write(os.urandom(16384))' $X/w/many
sync
python3 $py map $X/w/many/* > /tmp/x.log || die "mapping X's files: $(cat /tmp/x.log)"
echo "freeze: X: $(cat /tmp/x.log)"
head -c 65536 /dev/urandom > $Y/w/lib
sync
fsfreeze -f $X || die "fsfreeze"
t=$(date +%s.%N)
python3 $py map $Y/w/lib > /tmp/y.log 2>&1 &
mapper=$!
for i in $(seq 1 200); do kill -0 $mapper 2>/dev/null || break; sleep 0.1; done
mapped=$(echo "$(date +%s.%N) - $t" | bc)
done_in_time=yes
kill -0 $mapper 2>/dev/null && done_in_time=no
# Y's unmount, with X still frozen.
umount_y=no
if [ $done_in_time = yes ]; then
	t=$(date +%s.%N)
	umount $Y & u=$!
	for i in $(seq 1 200); do kill -0 $u 2>/dev/null || break; sleep 0.1; done
	kill -0 $u 2>/dev/null || { wait $u && umount_y=yes; }
	umounted=$(echo "$(date +%s.%N) - $t" | bc)
fi
fsfreeze -u $X || die "thaw"
[ $umount_y = yes ] || wait
wait $mapper || die "Y's mapper: $(cat /tmp/y.log)"
echo "freeze: Y's mapper with X frozen: $(cat /tmp/y.log), exited within 20 s: $done_in_time ($mapped s);" \
	"Y unmounted before the thaw: $umount_y (${umounted:-?} s)"
[ $done_in_time = yes ] || die "Y's munmap() waited for X's thaw"
munmap=$(sed -n 's/.*longest munmap \([0-9.]*\) s/\1/p' /tmp/y.log)
[ "$(echo "$munmap < 1" | bc)" = 1 ] || die "Y's munmap() took 1 s or more with X frozen"
[ $umount_y = yes ] || die "Y's unmount waited for X's thaw"
# Thawed: the doomed clone of X goes, and X unmounts with no orphan left.
umount $X || die "umount X"
orphans=$(btrfs inspect-internal dump-tree /dev/$DISK0 | grep -c "ORPHAN_ITEM" || true)
[ "$orphans" = 0 ] || die "$orphans orphan items left on X"
echo "share-extents-mmap-isolation: all checks passed"
