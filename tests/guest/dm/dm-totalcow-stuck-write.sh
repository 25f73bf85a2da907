#!/bin/bash
# A write stuck below one totalcow device (its origin, a dm-linear device,
# is suspended) must not hang anything but the whitelist changes of that
# device, and those only until they are killed: a whitelist_add (message
# and sysfs add_extents) waits for the stuck write, the resume of another
# totalcow device and other sysfs calls go on meanwhile (reads of the
# waiting template's own files too), SIGKILL ends the
# waits, and the killed adds change nothing. Once the origin resumes, the
# adds work.
#
# The sysfs layer (/sys/kernel/mm/totalcow) is built into our kernels
# only: on a stock kernel with the DKMS module the sysfs cases are skipped,
# and said so, and the other device's add is a message instead.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow

tpl=/sys/kernel/mm/totalcow/templates
sysfs=1
if [ ! -d $tpl ]; then
	sysfs=0
	echo "stuck-write: SKIPPED: sysfs add_extents, register and deregister: no $tpl" \
		"(dm-totalcow.ko without the sysfs layer, $(uname -r))"
fi
devnum() { dmsetup info -c --noheadings -o major,minor "$1" | tr -d ' '; }
# gone PID...: all of them exit within 10 s.
gone() {
	local i pid
	for i in $(seq 100); do
		for pid in "$@"; do
			kill -0 "$pid" 2>/dev/null && continue 2
		done
		return 0
	done
	return 1
}
# alive_after PID: still running after 1 s.
alive_after() { sleep 1; kill -0 "$1" 2>/dev/null; }

sectors=$(blockdev --getsz /dev/$DISK0)
dmsetup create lower --table "0 $sectors linear /dev/$DISK0 0"
tc_create tc /dev/mapper/lower cache_size 16
tc_create tc2 /dev/$DISK1 cache_size 16
if [ $sysfs = 1 ]; then
	echo "stuck $(devnum tc)" > $tpl/register
	echo "other $(devnum tc2)" > $tpl/register
fi

dmsetup suspend lower
dd if=/dev/zero of=/dev/mapper/tc bs=4k count=1 oflag=direct status=none &
ddpid=$!
alive_after $ddpid || die "the write did not get stuck"

dmsetup message tc 0 whitelist_add stuck 0 64 2>/dev/null &
msgpid=$!
waiters=("$msgpid")
if [ $sysfs = 1 ]; then
	sh -c "echo 'stuck 64 64' > $tpl/add_extents" 2>/dev/null &
	sysfspid=$!
	waiters+=("$sysfspid")
fi
alive_after $msgpid || die "whitelist_add did not wait for the write in flight"
[ $sysfs = 0 ] || kill -0 $sysfspid || die "add_extents did not wait for the write in flight"

# Everything else goes on.
timeout 20 dmsetup suspend tc2 || die "suspend of another totalcow device hung"
timeout 20 dmsetup resume tc2 || die "resume of another totalcow device hung"
if [ $sysfs = 1 ]; then
	timeout 20 sh -c "echo 'other 0 64' > $tpl/add_extents" || die "sysfs add on another device hung"
	timeout 20 cat $tpl/other/nr_extents > /dev/null || die "sysfs read hung"
	# Reads of the waiting template's own files do not wait for its add
	# (before, they took the whitelist mutex the add holds).
	timeout 20 cat $tpl/stuck/nr_extents $tpl/stuck/sectors $tpl/stuck/extents > /dev/null ||
		die "a read of the waiting template's files hung"
	timeout 20 sh -c "echo 'third $(devnum tc2)' > $tpl/register" || die "sysfs register hung"
	timeout 20 sh -c "echo third > $tpl/deregister" || die "sysfs deregister hung"
else
	timeout 20 dmsetup message tc2 0 whitelist_add other 0 64 || die "whitelist_add on another device hung"
fi
[ "$(tc_stat tc2 extents)" = 1 ] || die "the add on the other device did not apply"

# The waits end on SIGKILL and change nothing.
kill -KILL "${waiters[@]}"
gone "${waiters[@]}" || die "whitelist_add waits are not killable"
wait "${waiters[@]}" || true
dmesg | grep -q "interrupted while waiting for writes in flight; nothing changed" ||
	die "no message for the interrupted whitelist_add"
[ "$(tc_stat tc extents)" = 0 ] || die "a killed whitelist_add left ranges behind"
[ "$(tc_stat tc templates)" = 0 ] || die "a killed whitelist_add left a template behind"
[ $sysfs = 0 ] || [ "$(cat $tpl/stuck/nr_extents)" = 0 ] || die "a killed add_extents left ranges behind"

dmsetup resume lower
wait $ddpid || die "the stuck write failed"
timeout 20 dmsetup message tc 0 whitelist_add stuck 0 64 || die "whitelist_add after the write"
if [ $sysfs = 1 ]; then
	timeout 20 sh -c "echo 'stuck 64 64' > $tpl/add_extents" || die "add_extents after the write"
	[ "$(tc_stat tc extents)" = 1 ] && [ "$(tc_stat tc sectors)" = 128 ] ||
		die "adds after the write did not apply"
	echo stuck > $tpl/deregister
	echo other > $tpl/deregister
else
	[ "$(tc_stat tc extents)" = 1 ] && [ "$(tc_stat tc sectors)" = 64 ] ||
		die "the add after the write did not apply"
fi
dmsetup remove tc
dmsetup remove tc2
dmsetup remove lower
if [ $sysfs = 1 ]; then
	echo "dm-totalcow stuck write: other devices and sysfs went on; killed adds changed nothing"
else
	echo "dm-totalcow stuck write: other devices went on (sysfs cases skipped); killed adds changed nothing"
fi
