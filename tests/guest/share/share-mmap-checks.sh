#!/bin/bash
# Every check a private mapping of a member gets sees the member, the file
# the process opened, although the mapping maps the template's pages
# (mm-patches/0021). Before, vm_mmap_pgoff() gave do_mmap() the template's
# backing file: noexec was the template mount's (so the policy refused to
# share wherever the two mounts disagreed), the VM_MAY* flags that
# mprotect() is held to came from it, mmap() touched the template's atime
# instead of the member's, and no LSM heard that the mapping maps a
# backing file (security_mmap_backing_file()).
#  1. A member on a noexec mount (a bind mount of it, as a container's
#     /var may be): its PROT_READ private mapping maps the template
#     (mmaps_shared +1; before, +0: refused), PROT_EXEC is refused (EPERM)
#     and so is a later mprotect(PROT_EXEC) of the shared mapping
#     (EACCES), as for a plain file on that mount.
#  2. The template on a noexec mount, the member on an exec one: the
#     member's PROT_EXEC private mapping maps the template (before: it was
#     refused, mmaps_private), and mprotect(PROT_EXEC) of a PROT_READ one
#     succeeds.
#  3. mmap() updates the member's atime (strictatime), as it updates a
#     plain file's; before, the member's stayed (the template's was
#     "touched", on a read-only subvolume).
# The bytes every mapping shows are the template's.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
groups=/sys/kernel/mm/totalcow/groups
mnt=/mnt/btrfs
btrfs_mount /dev/$DISK0 $mnt
mount -o remount,strictatime $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 1 checks
btrfs property set $mnt/T ro true
for m in A B C; do btrfs -q subvolume snapshot $mnt/T $mnt/$m; done
btrfs -q subvolume create $mnt/plain
cp $mnt/T/f $mnt/plain/f
sync
echo "g $mnt/T" > $groups/create || die "group"
for m in A B C; do echo "g $mnt/$m" > $groups/add || die "group add $m"; done
mkdir -p /mnt/noexec /mnt/tnoexec
mount --bind $mnt /mnt/noexec && mount -o remount,bind,noexec /mnt/noexec || die "noexec bind"
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $groups/g/stats; }

# map FILE PROT [mprotect PROT]: map FILE privately, print "mmap ok" or
# "mmap <errno name>", then "mprotect ok|<errno name>", and check the bytes.
map() {
	python3 - "$@" <<'PY'
import ctypes, errno, mmap, os, sys
path, prot = sys.argv[1], sys.argv[2]
P = {"r": mmap.PROT_READ, "rx": mmap.PROT_READ | mmap.PROT_EXEC}
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
size = os.path.getsize(path)
fd = os.open(path, os.O_RDONLY)
addr = libc.mmap(None, size, P[prot], mmap.MAP_PRIVATE, fd, 0)
if addr in (None, ctypes.c_void_p(-1).value):
    print("mmap", errno.errorcode[ctypes.get_errno()])
    sys.exit(0)
print("mmap ok")
want = open(sys.argv[3], "rb").read()
if ctypes.string_at(addr, size) != want:
    sys.exit("the mapping shows other bytes than the template's")
if len(sys.argv) > 4:
    r = libc.mprotect(addr, size, P[sys.argv[4]])
    print("mprotect", "ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
PY
}

# 1. The member on a noexec mount.
s0=$(stat_of mmaps_shared)
got=$(map /mnt/noexec/A/f r $mnt/T/f rx) || die "map: $got"
s1=$(stat_of mmaps_shared)
echo "checks: noexec member, PROT_READ: $(echo $got | tr '\n' ' ')(mmaps_shared +$((s1 - s0)))"
[ "$got" = "mmap ok
mprotect EACCES" ] || die "noexec member: want mmap ok, mprotect EACCES"
[ $((s1 - s0)) = 1 ] || die "the noexec member's mapping does not map the template"
got=$(map /mnt/noexec/A/f rx $mnt/T/f) || die "map: $got"
echo "checks: noexec member, PROT_EXEC: $got"
[ "$got" = "mmap EPERM" ] || die "noexec member: PROT_EXEC was not refused"
plain=$(map /mnt/noexec/plain/f r $mnt/T/f rx)
[ "$plain" = "mmap ok
mprotect EACCES" ] || die "a plain file on the noexec mount: $plain"

# 2. The template on a noexec mount (the group's template path is there).
echo g > $groups/delete
echo "g /mnt/noexec/T" > $groups/create || die "group on noexec"
for m in A B C; do echo "g $mnt/$m" > $groups/add || die "group add $m"; done
s0=$(stat_of mmaps_shared)
got=$(map $mnt/B/f rx $mnt/T/f) || die "map: $got"
got2=$(map $mnt/B/f r $mnt/T/f rx) || die "map: $got2"
s1=$(stat_of mmaps_shared)
echo "checks: noexec template, exec member: $(echo $got $got2 | tr '\n' ' ')(mmaps_shared +$((s1 - s0)))"
[ "$got" = "mmap ok" ] && [ "$got2" = "mmap ok
mprotect ok" ] || die "exec member of a noexec template: want mmap ok, mprotect ok"
[ $((s1 - s0)) = 2 ] || die "the exec member's mappings do not map the template"

# 3. atime: the member's moves, as a plain file's does.
for f in $mnt/C/f $mnt/plain/f; do
	touch -a -d 2020-01-01 $f
	a0=$(stat -c %X $f)
	map $f r $mnt/T/f > /dev/null || die "map $f"
	a1=$(stat -c %X $f)
	echo "checks: mmap() of $f: atime $( [ $a1 != $a0 ] && echo moved || echo stayed)"
	[ "$a1" != "$a0" ] || die "mmap() of $f left its atime"
done
echo g > $groups/delete
umount /mnt/noexec
umount $mnt
echo "checks: passed"
