#!/bin/bash
# LXC fleets (docs/lxc.md): clones made with `lxc-copy -s` from a busybox
# container that `totalcowctl container template` registered join its
# page-cache sharing group through LXC hooks, share its pages when they
# run, and leave the group when destroyed; clones of a template that is not
# registered (same hooks in their config) run as plain LXC containers.
#
#   lxc-fleet.sh [N]     N clones per fleet (default 8)
#
# Prints "lxc-fleet: ..." summary lines; counts come from the kernel
# (/proc/vmstat, /sys/block/$DISK0/stat, groups/<g>/stats).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
n=${1:-8}
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
lxcpath=/var/lib/lxc
groups=/sys/kernel/mm/totalcow/groups
data_mib=8	# per data file; 4 files

tc_create tc /dev/$DISK0 cache_size 100%
mkfs.btrfs -q -f -K /dev/mapper/tc
mount /dev/mapper/tc $lxcpath
echo "lxc.net.0.type = empty" > /tmp/net.conf

# Two identical busybox containers with shared data: "bb" becomes the
# template; "plain" is never registered but carries the same hooks (as
# when an admin puts them in /etc/lxc/default.conf).
for t in bb plain; do
	lxc-create -q -n $t -t busybox -B btrfs -f /tmp/net.conf || die "lxc-create $t"
	mkdir -p $lxcpath/$t/rootfs/srv/shared
	for j in 1 2 3 4; do
		make_file $lxcpath/$t/rootfs/srv/shared/data$j $data_mib "lxc-$j"
	done
	# The workload run in every clone: read the shared files, print a sum.
	printf '#!/bin/sh\ncat /srv/shared/data* | md5sum\n' > $lxcpath/$t/rootfs/bin/fleet-read
	chmod +x $lxcpath/$t/rootfs/bin/fleet-read
done
exe=$(readlink -f "$TOTALCOW_TOP/tools/totalcowctl")
printf 'lxc.hook.%s = %s container hook\n' clone "$exe" pre-start "$exe" destroy "$exe" \
	>> $lxcpath/plain/config
btrfs property set $lxcpath/plain/rootfs ro true
want=$(cat $lxcpath/bb/rootfs/srv/shared/data* | md5sum)
one=$(( 4 * (data_mib << 20) + $(stat -c %s $lxcpath/bb/rootfs/bin/busybox) ))

# --- refusals change nothing ---------------------------------------------
rc=0; ctl container template nosuch 2>/tmp/err || rc=$?
[ $rc = 3 ] || die "template of a missing container: exit $rc $(cat /tmp/err)"
lxc-create -q -n bb2 -t busybox -B btrfs -f /tmp/net.conf || die "lxc-create bb2"
cp /tmp/net.conf /tmp/bb2.config.orig; cp $lxcpath/bb2/config /tmp/bb2.config.orig
lxc-start -n bb2 || die "lxc-start bb2"
rc=0; ctl container template bb2 2>/tmp/err || rc=$?
[ $rc = 6 ] && grep -q "running" /tmp/err || die "running container: exit $rc $(cat /tmp/err)"
lxc-stop -k -n bb2
ctl template add bb2 $lxcpath/bb2/rootfs/bin/busybox -q >/dev/null || die "template add bb2"
rc=0; ctl container template bb2 2>/tmp/err || rc=$?
[ $rc = 1 ] && grep -q "dm template named bb2 exists" /tmp/err || die "name clash: exit $rc $(cat /tmp/err)"
btrfs subvolume show $lxcpath/bb2/rootfs | grep -q 'Flags:.*readonly' && die "a refusal left bb2 read-only"
cmp -s $lxcpath/bb2/config /tmp/bb2.config.orig || die "a refusal changed bb2's config"
[ ! -e $groups/bb2 ] || die "a refusal left a group"
ctl template del bb2
# A failure half-way (the group cannot be created after the subvolume was
# made read-only and its extents registered) undoes every step.
mkdir -p /tmp/fake/templates /tmp/fake/groups
ln -s /dev/full /tmp/fake/groups/create	# every write fails (ENOSPC)
touch /tmp/fake/templates/register /tmp/fake/templates/add_extents /tmp/fake/templates/deregister
rc=0; TOTALCOW_SYSFS=/tmp/fake ctl container template bb2 >/dev/null 2>/tmp/err || rc=$?
[ $rc = 1 ] && grep -q "No space left" /tmp/err || die "failed group create: exit $rc $(cat /tmp/err)"
grep -q "^bb2 " /tmp/fake/templates/add_extents || die "the half-way test never registered extents: $(cat /tmp/err)"
[ "$(cat /tmp/fake/templates/deregister)" = bb2 ] || die "registered extents not undone"
btrfs subvolume show $lxcpath/bb2/rootfs | grep -q 'Flags:.*readonly' && die "read-only flag not undone"
cmp -s $lxcpath/bb2/config /tmp/bb2.config.orig || die "a failure changed bb2's config"
[ -z "$(ctl container list)" ] || die "a failure left a record: $(ctl container list)"
lxc-destroy -q -n bb2 || die "lxc-destroy bb2"

# --- the template --------------------------------------------------------
ctl container template bb || die "container template bb"
btrfs subvolume show $lxcpath/bb/rootfs | grep -q 'Flags:.*readonly' || die "bb not read-only"
[ -d $groups/bb ] || die "no group bb"
[ -d /sys/kernel/mm/totalcow/templates/bb ] || die "bb's extents not whitelisted"
grep -q "^lxc.hook.clone = .*container hook" $lxcpath/bb/config || die "no clone hook in bb's config"
rc=0; ctl container template bb 2>/tmp/err || rc=$?
[ $rc = 1 ] || die "templating twice: exit $rc"
ctl container list
dmsetup message tc 0 admit second

# --- clones join by themselves -------------------------------------------
for i in $(seq 1 "$n"); do
	lxc-copy -s -n bb -N c$i >/tmp/copy.out 2>&1 || { cat /tmp/copy.out; die "lxc-copy c$i"; }
	lxc-copy -s -n plain -N p$i >/tmp/copy.out 2>&1 || { cat /tmp/copy.out; die "lxc-copy p$i"; }
done
members() { sort < $groups/bb/members | tr '\n' ' '; }
expect=$(for i in $(seq 1 "$n"); do echo $lxcpath/c$i/rootfs; done | sort | tr '\n' ' ')
[ "$(members)" = "$expect" ] || die "members after lxc-copy: $(members)"
for g in $groups/*/; do
	grep -q "/p[0-9]*/rootfs" "$g/members" && die "a clone of the unregistered template joined $g"
done
# A clone of a clone is a snapshot of c1, not of the template: plain LXC.
lxc-copy -s -n c1 -N cc >/tmp/copy.out 2>&1 || { cat /tmp/copy.out; die "lxc-copy cc"; }
grep -q "/cc/rootfs" $groups/bb/members && die "a clone of a clone joined"
lxc-start -n cc && lxc-attach -n cc -- /bin/fleet-read >/dev/null && lxc-stop -k -n cc ||
	die "the clone of a clone does not run"
lxc-destroy -q -n cc || die "lxc-destroy cc"
[ "$(members)" = "$expect" ] || die "members after cc: $(members)"
echo "lxc-fleet: $n clones joined group bb at lxc-copy"

# A reboot loses the kernel's groups and whitelists: pre-start makes them
# again from the record and the clones join again.
ctl group del bb
ctl template del bb
[ ! -e $groups/bb ] || die "group bb still there"

stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/bb/stats; }
# run_fleet PREFIX: start N clones, run the workload in each, stop them.
# Sets pc (page-cache growth), rd (bytes read from $DISK0).
run_fleet() {
	local p=$1 i pc0 rd0 out
	drop_caches
	# Warm LXC's own files (from the host, over hostfs) with a container
	# outside both fleets, so that the growth below is the fleet's.
	lxc-start -n warm && lxc-attach -n warm -- /bin/true && lxc-stop -k -n warm
	pc0=$(page_cache_bytes) rd0=$(sectors_read "$DISK0")
	for i in $(seq 1 "$n"); do
		lxc-start -n $p$i || die "lxc-start $p$i"
	done
	for i in $(seq 1 "$n"); do
		out=$(lxc-attach -n $p$i -- /bin/fleet-read) || die "lxc-attach $p$i"
		[ "$out" = "$want" ] || die "$p$i read '$out', want '$want'"
	done
	pc=$(( $(page_cache_bytes) - pc0 )) rd=$(( ($(sectors_read "$DISK0") - rd0) * 512 ))
	for i in $(seq 1 "$n"); do
		[ "$(lxc-info -n $p$i -s -H)" = RUNNING ] || die "$p$i is not running"
		lxc-stop -k -n $p$i || die "lxc-stop $p$i"
	done
}
lxc-copy -s -n plain -N warm >/dev/null 2>&1 || die "lxc-copy warm"
ratio() { echo "scale=2; $1 / $one" | bc; }

run_fleet c
[ -d $groups/bb ] || die "pre-start did not create group bb again"
[ -d /sys/kernel/mm/totalcow/templates/bb ] || die "pre-start did not whitelist bb again"
[ "$(members)" = "$expect" ] || die "members after lxc-start: $(members)"
tc_pc=$(ratio $pc) tc_rd=$(ratio $rd)
cat $groups/bb/stats
shared=$(stat_of pages_shared) mm=$(stat_of mmaps_shared)
echo "lxc-fleet: totalcow: $n clones, page cache ${tc_pc}x one clone, device reads ${tc_rd}x, $shared pages shared, $mm mappings of the template"

run_fleet p
p_pc=$(ratio $pc) p_rd=$(ratio $rd)
echo "lxc-fleet: unregistered template: $n clones, page cache ${p_pc}x one clone, device reads ${p_rd}x"

# One copy for the whole fleet (the data and busybox; plus metadata), n
# copies without TotalCOW.
pages=$(( 4 * (data_mib << 20) / 4096 ))
fleet_checks "$n" "$tc_pc" "$tc_rd" "$p_pc" "$shared" "$mm" "$pages"

# --- destroy: members leave ----------------------------------------------
# The clones' data in the page cache again, shared (the plain fleet's run
# dropped the caches).
for i in $(seq 1 "$n"); do
	lxc-start -n c$i && out=$(lxc-attach -n c$i -- /bin/fleet-read) && lxc-stop -k -n c$i ||
		die "c$i again"
	[ "$out" = "$want" ] || die "c$i read '$out' again"
done
before=$(stat_of pages_shared)
[ "$before" -ge $(( n * pages )) ] || die "only $before pages shared before destroy"
lxc-destroy -q -n c$n || die "lxc-destroy c$n"
expect=$(for i in $(seq 1 $((n - 1))); do echo $lxcpath/c$i/rootfs; done | sort | tr '\n' ' ')
[ "$(members)" = "$expect" ] || die "members after destroying c$n: $(members)"
after=$(stat_of pages_shared)
if [ -e $groups/remove ]; then
	# groups/remove: the other members keep their aliases.
	[ "$after" -ge $(( (n - 1) * pages )) ] || die "pages shared $before -> $after after c$n left"
	echo "lxc-fleet: c$n left by groups/remove, pages shared $before -> $after"
else
	echo "lxc-fleet: c$n left by rebuilding the group, pages shared $before -> $after"
fi
# The others share again (after a rebuild) or still (after a remove).
drop_caches
lxc-start -n c1 && lxc-start -n c2 || die "restart"
for i in 1 2; do
	[ "$(lxc-attach -n c$i -- /bin/fleet-read)" = "$want" ] || die "c$i after destroy"
done
lxc-stop -k -n c1; lxc-stop -k -n c2
[ "$(stat_of pages_shared)" -ge "$pages" ] || die "no sharing after c$n left: $(stat_of pages_shared)"
for i in $(seq 1 $((n - 1))); do lxc-destroy -q -n c$i || die "lxc-destroy c$i"; done
[ -z "$(cat $groups/bb/members)" ] || die "members left: $(members)"
for i in $(seq 1 "$n"); do lxc-destroy -q -n p$i || die "lxc-destroy p$i"; done
lxc-destroy -q -n warm
# Destroying the template itself removes its group and whitelist.
lxc-destroy -q -n bb || die "lxc-destroy bb"
[ ! -e $groups/bb ] || die "group bb outlived its template"
[ ! -e /sys/kernel/mm/totalcow/templates/bb ] || die "bb still whitelisted"
[ -z "$(ctl container list)" ] || die "records left: $(ctl container list)"
lxc-destroy -q -n plain
umount $lxcpath
echo "lxc-fleet: all checks passed"
