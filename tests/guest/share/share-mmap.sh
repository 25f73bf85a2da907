#!/bin/bash
# Private mappings of member files (mm-patches/0003, tc_mmap_file): 8
# snapshots of a template map one copy of a data file and of an
# executable; /proc/PID/maps names the member; private writes stay private;
# a changed member, or one open for writing, keeps mappings of its own;
# the documented MAP_PRIVATE semantics hold; a randomized run checks every
# mapped byte against a model (tests/guest/share/share-mmap.py).
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
mib=${1:-64}
ops=${2:-3000}
n=8

tc_btrfs tc /dev/$DISK0 $mnt cache_size 100%
btrfs -q subvolume create $mnt/template
mkdir -p $mnt/template/data $mnt/template/bin
make_file $mnt/template/data/file "$mib" mmap
make_file $mnt/template/data/small 1 small
cp /bin/busybox $mnt/template/bin/busybox
btrfs property set $mnt/template ro true
for i in $(seq 1 $n); do btrfs -q subvolume snapshot $mnt/template $mnt/c$i; done
sync
ctl template add base $mnt/template -q || die "template add"
ctl group create fleet $mnt/template || die "group create"
ctl group add fleet $(for i in $(seq 1 $n); do echo $mnt/c$i; done) || die "group add"

python3 "$TOTALCOW_TOP/tests/guest/share/share-mmap.py" $mnt $n "$ops" || die "share-mmap.py"
cat $groups/fleet/stats

# Group deletion leaves live private mappings right; umount works after.
python3 - $mnt <<'PY' || die "mapping across group deletion"
import mmap, os, sys
mnt = sys.argv[1]
stats = "/sys/kernel/mm/totalcow/groups/fleet/stats"
shared = lambda: int(dict(l.split() for l in open(stats))["mmaps_shared"])
want = open(f"{mnt}/template/data/file", "rb").read()
n = shared()
fd = os.open(f"{mnt}/c6/data/file", os.O_RDONLY)    # unchanged: maps the template
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
assert shared() == n + 1, "c6's mapping is not the template's"
with open("/sys/kernel/mm/totalcow/groups/delete", "w") as f:
    f.write("fleet")
assert not os.path.exists("/sys/kernel/mm/totalcow/groups/fleet")
assert m[:] == want, "private mapping changed by group deletion"
m.close()
os.close(fd)
PY
for i in 1 6 8; do
	cmp $mnt/template/data/file $mnt/c$i/data/file || die "c$i differs after deletion"
done
umount $mnt
echo "share-mmap: all checks passed"
