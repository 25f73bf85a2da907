#!/bin/bash
# Unprivileged LXC fleets (docs/lxc.md): a user with
# subordinate ids (/etc/subuid, newuidmap) and a delegated cgroup makes a
# busybox container, fills it through lxc-usernsexec, and clones it with
# `lxc-copy -s`, all without privilege. Root registers the template once
# (`totalcowctl container template`, which sees lxc.idmap and turns on
# automatic membership instead of hooks, which would run in the user
# namespace without the privilege to join). The user's clones share its
# page cache and disk reads like privileged ones; clones of an
# unregistered twin do not. Writes stay private, a destroyed clone leaves
# the group, `container restore` brings the group back after a "reboot".
#
#   lxc-unprivileged.sh [N]     N clones per fleet (default 8)
#
# Prints "lxc-unpriv: ..." lines; counts come from the kernel.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
n=${1:-8}
[ "$n" -ge 4 ] || die "N must be at least 4"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
data_mib=8	# per data file; 4 files
uid=1500 name=tcuser
top=/mnt/fleet
home=$top/home/$name
lxcpath=$home/.local/share/lxc

tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc
# Unprivileged lxc-destroy deletes its btrfs subvolumes with
# BTRFS_IOC_SNAP_DESTROY, which needs user_subvol_rm_allowed (docs/lxc.md).
mkdir -p $top && mount -o user_subvol_rm_allowed /dev/mapper/tc $top
unpriv_user $uid $name $home

# --- the user's containers -----------------------------------------------
mkdir -p /tmp/fleet-data
for j in 1 2 3 4; do make_file /tmp/fleet-data/data$j $data_mib "lxc-$j"; done
printf '#!/bin/sh\ncat /srv/shared/data* | md5sum\n' > /tmp/fleet-data/fleet-read
chmod 644 /tmp/fleet-data/*
for t in bb plain; do
	as_user lxc-create -q -n $t -t busybox -B btrfs >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; die "user lxc-create $t"; }
	# Root in the container's id range writes into its rootfs.
	in_userns sh -c \
		"mkdir -p $lxcpath/$t/rootfs/srv/shared &&
		 cp /tmp/fleet-data/data* $lxcpath/$t/rootfs/srv/shared/ &&
		 cp /tmp/fleet-data/fleet-read $lxcpath/$t/rootfs/bin/ &&
		 chmod +x $lxcpath/$t/rootfs/bin/fleet-read" || die "lxc-usernsexec into $t"
done
[ "$(stat -c %u $lxcpath/bb/rootfs/srv/shared/data1)" = 100000 ] ||
	die "data not owned by the container's root"
want=$(cat /tmp/fleet-data/data* | md5sum)
one=$(( 4 * (data_mib << 20) + $(stat -c %s $lxcpath/bb/rootfs/bin/busybox) ))
cp $lxcpath/bb/config /tmp/bb.config.orig

# --- root registers the template once --------------------------------------
ctl container template bb -P $lxcpath >/tmp/tmpl.out 2>&1 || { cat /tmp/tmpl.out; die "container template"; }
cat /tmp/tmpl.out
grep -q "(auto); unprivileged container: no hooks" /tmp/tmpl.out || die "no auto for an unprivileged container"
[ "$(cat $groups/bb/auto)" = 1 ] || die "group bb is not auto"
cmp -s $lxcpath/bb/config /tmp/bb.config.orig || die "hooks were added to an unprivileged container"
btrfs subvolume show $lxcpath/bb/rootfs | grep -q 'Flags:.*readonly' || die "bb not read-only"
dmsetup message tc 0 admit second
# The user cannot make its registered template writable again.
if in_userns btrfs property set $lxcpath/bb/rootfs ro false 2>/dev/null; then
	die "the user made its registered template writable"
fi

# --- the user clones, no hook, no privilege ----------------------------------
for i in $(seq 1 "$n"); do
	for t in bb:c plain:p; do
		as_user lxc-copy -s -n ${t%:*} -N ${t#*:}$i >/tmp/copy.out 2>&1 ||
			{ cat /tmp/copy.out; die "user lxc-copy ${t#*:}$i"; }
	done
done
as_user lxc-copy -s -n plain -N warm >/dev/null 2>&1 || die "lxc-copy warm"
[ -z "$(cat $groups/bb/members)" ] || die "something added members: $(cat $groups/bb/members)"
auto_paths() { awk '{ print $2 }' $groups/bb/auto_members | sort | tr '\n' ' '; }
rel=${lxcpath#$top}
expect=$(for i in $(seq 1 "$n"); do echo $rel/c$i/rootfs; done | sort | tr '\n' ' ')

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/bb/stats; }
# run_fleet PREFIX: the user starts N clones, runs the workload in each,
# stops them. Sets pc (page-cache growth), rd (bytes read from $DISK0).
run_fleet() {
	local p=$1 i pc0 rd0 out
	drop_caches
	as_user lxc-start -n warm && as_user lxc-attach -n warm -- /bin/true &&
		as_user lxc-stop -k -n warm || die "warm container"
	pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
	for i in $(seq 1 "$n"); do
		as_user lxc-start -n $p$i || die "user lxc-start $p$i"
	done
	for i in $(seq 1 "$n"); do
		out=$(as_user lxc-attach -n $p$i -- /bin/fleet-read) || die "user lxc-attach $p$i"
		[ "$out" = "$want" ] || die "$p$i read '$out', want '$want'"
	done
	pc=$(( $(page_cache_bytes) - pc0 )) rd=$(( ($(sectors_read "$DISK0") - rd0) * 512 ))
	for i in $(seq 1 "$n"); do
		[ "$(as_user lxc-info -n $p$i -s -H)" = RUNNING ] || die "$p$i is not running"
		as_user lxc-stop -k -n $p$i || die "user lxc-stop $p$i"
	done
}
ratio() { echo "scale=2; $1 / $one" | bc; }

run_fleet c
[ "$(auto_paths)" = "$expect" ] || die "automatic members: '$(auto_paths)', want '$expect'"
tc_pc=$(ratio $pc) tc_rd=$(ratio $rd)
cat $groups/bb/stats
shared=$(stat_of pages_shared) mm=$(stat_of mmaps_shared)
echo "lxc-unpriv: totalcow: $n unprivileged clones, page cache ${tc_pc}x one clone, device reads ${tc_rd}x, $shared pages shared, $mm mappings of the template"
ctl container list | grep -q "	$n members	" || die "container list: $(ctl container list)"
ctl container join c1 -P $lxcpath | grep -q "c1 is a member of group bb" ||
	die "container join does not see c1's automatic membership"

run_fleet p
p_pc=$(ratio $pc) p_rd=$(ratio $rd)
echo "lxc-unpriv: unregistered template: $n unprivileged clones, page cache ${p_pc}x one clone, device reads ${p_rd}x"
awk '{ print $2 }' $groups/bb/auto_members | grep -q "/p[0-9]*/rootfs" && die "a plain clone joined"

pages=$(( 4 * (data_mib << 20) / 4096 ))
fleet_checks "$n" "$tc_pc" "$tc_rd" "$p_pc" "$shared" "$mm" "$pages"

# --- a write in one clone stays in it ------------------------------------
as_user lxc-start -n c1 && as_user lxc-start -n c2 || die "start c1, c2"
as_user lxc-attach -n c1 -- sh -c \
	'echo scribble | dd of=/srv/shared/data2 bs=1 seek=5000 conv=notrunc 2>/dev/null' ||
	die "write in c1"
[ "$(as_user lxc-attach -n c2 -- /bin/fleet-read)" = "$want" ] || die "c1's write reached c2"
[ "$(as_user lxc-attach -n c1 -- /bin/fleet-read)" != "$want" ] || die "c1's write is lost"
[ "$(cat $lxcpath/bb/rootfs/srv/shared/data* | md5sum)" = "$want" ] || die "c1's write reached the template"
as_user lxc-stop -k -n c1; as_user lxc-stop -k -n c2
echo "lxc-unpriv: a write in c1 stays in c1"

# --- destroy: the clone leaves ---------------------------------------------
as_user lxc-destroy -n c$n >/tmp/destroy.out 2>&1 || { cat /tmp/destroy.out; die "user lxc-destroy c$n"; }
expect=$(for i in $(seq 1 $((n - 1))); do echo $rel/c$i/rootfs; done | sort | tr '\n' ' ')
[ "$(auto_paths)" = "$expect" ] || die "after destroying c$n: '$(auto_paths)'"
echo "lxc-unpriv: c$n left the group when the user destroyed it"

# --- "reboot": the kernel forgets, restore brings the group back -----------
ctl group del bb && ctl template del bb || die "forget bb"
ctl container restore | grep -q "container bb: group, dm template restored" || die "restore"
[ "$(cat $groups/bb/auto)" = 1 ] || die "restore lost auto"
[ -d /sys/kernel/mm/totalcow/templates/bb ] || die "restore lost the dm template"
# c1 holds its own write now: c2 and c3 read the template's data.
drop_caches
as_user lxc-start -n c2 && as_user lxc-start -n c3 || die "restart"
for i in 2 3; do
	[ "$(as_user lxc-attach -n c$i -- /bin/fleet-read)" = "$want" ] || die "c$i after restore"
done
as_user lxc-stop -k -n c2; as_user lxc-stop -k -n c3
[ "$(stat_of pages_shared)" -ge "$pages" ] || die "no sharing after restore: $(stat_of pages_shared)"
echo "lxc-unpriv: after restore c2 and c3 share $(stat_of pages_shared) pages"

for i in $(seq 1 $((n - 1))); do as_user lxc-destroy -q -n c$i || die "lxc-destroy c$i"; done
for i in $(seq 1 "$n"); do as_user lxc-destroy -q -n p$i || die "lxc-destroy p$i"; done
[ -z "$(cat $groups/bb/auto_members)" ] || die "members left: $(auto_paths)"
ctl container untemplate bb || die "untemplate"
umount $top
echo "lxc-unpriv: all checks passed"
