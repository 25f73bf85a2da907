#!/bin/bash
# totalcowctl + /sys/kernel/mm/totalcow end to end: register a template
# directory, read it through 8 snapshots (device reads <= 1.01x), move its
# extents with a balance (stale: reads go to the disk, data stays right),
# refresh (<= 1.01x again), deregister (reads go to the disk again), and
# bad input of every kind: clear errors, exit codes, nothing changes.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
sys=/sys/kernel/mm/totalcow/templates
mnt=/mnt/btrfs
mkdir -p $mnt

tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc >/dev/null 2>&1
mount /dev/mapper/tc $mnt
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/usr/lib $mnt/template/etc
make_file $mnt/template/usr/lib/libbig.so 96 lib
for i in $(seq 1 200); do head -c $((i * 97)) /dev/urandom > $mnt/template/usr/lib/mod$i.py; done
for i in $(seq 1 50); do echo "setting $i" > $mnt/template/etc/conf$i; done
btrfs property set $mnt/template ro true
for i in $(seq 1 8); do btrfs -q subvolume snapshot $mnt/template $mnt/c$i; done
sync
bytes=$(du -sb --apparent-size $mnt/template | cut -f1)
sums() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
sums $mnt/template > /tmp/want

read_all() { # -> sectors read from $DISK0 while reading the 8 snapshots
	drop_caches
	local r0 r1 i
	r0=$(sectors_read "$DISK0")
	for i in $(seq 1 8); do
		sums $mnt/c$i | cmp - /tmp/want || die "snapshot c$i read back wrong"
	done
	r1=$(sectors_read "$DISK0")
	echo $((r1 - r0))
}
ratio() { echo "scale=3; $1 * 512 / $bytes" | bc; }
within() { [ "$(echo "$(ratio "$1") <= $2" | bc)" = 1 ]; }

ctl template add base $mnt/template -q || die "template add failed"
[ "$(cat $sys/nr_templates)" = 1 ] || die "nr_templates"
[ "$(cat $sys/base/device)" = "$(dmsetup info -c --noheadings -o major,minor tc | tr -d ' ')" ] ||
	die "template device"
ctl template list > /tmp/list
grep -q "^base" /tmp/list || die "template list"
ctl status --json | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["templates"][0]["name"] == "base" and s["devices"][0]["templates"] == 1' ||
	die "status --json"
[ "$(wc -l < $sys/base/extents)" = "$(cat $sys/base/nr_extents)" ] || die "extents listing"

reads=$(read_all)
echo "registered: 8 snapshots of $bytes bytes read $((reads * 512)) bytes ($(ratio "$reads")x)"
within "$reads" 1.01 || die "registered: device reads $(ratio "$reads")x > 1.01x"

# A balance moves every data extent: the registered ranges are stale.
btrfs balance start -d --full-balance $mnt >/dev/null 2>&1 || die "balance failed"
sync
reads=$(read_all)
echo "after balance: $(ratio "$reads")x (stale ranges; data must still be right)"
within "$reads" 7.5 && die "balance did not move the extents (reads $(ratio "$reads")x)"
ctl template refresh base -q || die "refresh failed"
reads=$(read_all)
echo "after refresh: $(ratio "$reads")x"
within "$reads" 1.01 || die "refresh: device reads $(ratio "$reads")x > 1.01x"

# Deregistered: every snapshot reads from the disk again.
ctl template del base || die "template del failed"
[ "$(cat $sys/nr_templates)" = 0 ] && [ "$(tc_stat tc extents)" = 0 ] || die "del left ranges"
reads=$(read_all)
echo "deregistered: $(ratio "$reads")x"
within "$reads" 7.9 && die "deregistered: only $(ratio "$reads")x read from the disk"

# Bad input: clear errors, documented exit codes, nothing changes.
ctl template add base $mnt/template -q || die "re-add failed"
before=$(dmsetup status tc)
expect() { # STATUS CMD...: run totalcowctl, want exit STATUS and a message
	local want=$1 rc=0; shift
	ctl "$@" > /tmp/out 2> /tmp/err || rc=$?
	[ "$rc" = "$want" ] || die "totalcowctl $*: exit $rc, want $want ($(cat /tmp/err))"
	[ "$want" = 0 ] || [ -s /tmp/err ] || die "totalcowctl $*: no message"
	echo "totalcowctl $*: exit $rc: $(head -n 1 /tmp/err)"
}
expect 2 template
expect 2 template frobnicate x
expect 2 template add
expect 2 template add base
expect 2 "template" "add" "bad/name" $mnt/template
expect 3 template add other /nonexistent
expect 4 template add other /etc/hostname
expect 1 template add base $mnt/template -q
expect 3 template del nosuch
expect 3 template refresh nosuch
[ "$(dmsetup status tc)" = "$before" ] || die "bad input changed the target"

# Unprivileged callers: the tool and the sysfs files refuse.
rc=0; setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$TOTALCOW_TOP/tools/totalcowctl" template add other $mnt/template -q 2>/tmp/err || rc=$?
[ "$rc" = 5 ] || die "unprivileged add: exit $rc ($(cat /tmp/err))"
if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo x 254:0 > $sys/register" 2>/dev/null; then
	die "unprivileged sysfs write accepted"
fi

# Malformed sysfs writes: -EINVAL / -ENOENT / -EEXIST, nothing changes.
dev=$(cat $sys/base/device)
sysw() { # ERRNO-TEXT FILE TEXT
	local out
	out=$( (printf '%s\n' "$3" > "$sys/$2") 2>&1) && die "sysfs $2 '$3' accepted"
	case "$out" in *"$1"*) ;; *) die "sysfs $2 '$3': '$out', want '$1'" ;; esac
}
sysw "Invalid argument" register "onlyname"
sysw "Invalid argument" register "x 254"
sysw "Invalid argument" register "x 254:0 extra"
sysw "Invalid argument" register "bad/name $dev"
sysw "File exists" register "base $dev"
sysw "No such device" register "y 7:7"
sysw "Invalid argument" add_extents "base"
sysw "Invalid argument" add_extents "base 0"
sysw "Invalid argument" add_extents "base 0 0"
sysw "Invalid argument" add_extents "base x 8"
sysw "Invalid argument" add_extents "base 0 8 16 99999999999999"
sysw "No such file or directory" add_extents "nosuch 0 8"
sysw "Invalid argument" deregister ""
sysw "No such file or directory" deregister "nosuch"
[ "$(dmsetup status tc)" = "$before" ] || die "malformed sysfs writes changed the target"
[ "$(cat $sys/nr_templates)" = 1 ] || die "malformed sysfs writes changed the templates"

ctl template del base
umount $mnt
dmsetup remove tc
echo "totalcowctl snapshots: all checks passed"
