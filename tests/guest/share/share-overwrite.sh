#!/bin/bash
# Writes into pages a member aliases (mm-patches/0010): a buffered write
# that covers a whole page breaks its alias without copying the template's
# page (cow_breaks, no cow_copies); a page a write covers in part, and a
# write through a shared mapping, still get the copy, so that no partial
# write reads the disk. After every kind of write, after fsync and after
# drop_caches the member reads back exactly what was written over the
# template's bytes, and the template and another member are unchanged.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
ctl() { "$TOTALCOW_TOP/tools/totalcowctl" "$@"; }
mnt=/mnt/btrfs
stats=/sys/kernel/mm/totalcow/groups/ow/stats

tc_btrfs tc /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/template
make_file $mnt/template/file 8 overwrite-template
btrfs property set $mnt/template ro true
btrfs -q subvolume snapshot $mnt/template $mnt/c1
btrfs -q subvolume snapshot $mnt/template $mnt/c2
btrfs -q subvolume snapshot $mnt/template $mnt/c3
sync
ctl group create ow $mnt/template || die "group create"
ctl group add ow $mnt/c1 $mnt/c2 $mnt/c3 || die "group add"
drop_caches
want=$(sha256sum < $mnt/template/file)
for c in c1 c2 c3; do
	[ "$(sha256sum < $mnt/$c/file)" = "$want" ] || die "$c read back wrong"
done
stat_of() { awk -v k="$1" '$1 == k { print $2 }' $stats; }
cat $stats
[ "$(stat_of aliases_proven)" -ge 6144 ] || die "c1, c2 and c3 are not aliased"
[ -n "$(stat_of cow_copies)" ] || die "no cow_copies counter"

# expect WHAT BREAKS COPIES: the counters moved by exactly that much
# since the last call.
b0=$(stat_of cow_breaks) c0=$(stat_of cow_copies)
expect() {
	local b c
	b=$(stat_of cow_breaks) c=$(stat_of cow_copies)
	echo "overwrite: $1: cow_breaks +$((b - b0)), cow_copies +$((c - c0))"
	[ $((b - b0)) = "$2" ] && [ $((c - c0)) = "$3" ] ||
		die "$1: want cow_breaks +$2, cow_copies +$3"
	b0=$b c0=$c
}

# Each write goes to c1 and to /tmp/model (a plain copy on tmpfs), from
# one process: the offsets and bytes are the same.
cp $mnt/template/file /tmp/model
write_at() { # WHAT OFFSET LENGTH (random bytes, one pwrite)
	python3 - "$mnt/c1/file" /tmp/model "$2" "$3" <<'PY' || die "$1: write"
import os, sys
data = os.urandom(int(sys.argv[4]))
for path in sys.argv[1:3]:
    fd = os.open(path, os.O_WRONLY)
    assert os.pwrite(fd, data, int(sys.argv[3])) == len(data)
    os.close(fd)
PY
}
page=4096
write_at "1 MiB, aligned" $((2 << 20)) $((1 << 20))
expect "1 MiB, aligned" 256 0
write_at "one whole page" $(((6 << 20) + 2 * page)) $page
expect "one whole page" 1 0
write_at "100 bytes inside a page" $(((4 << 20) + 10)) 100
expect "100 bytes inside a page" 1 1
# Pages 1280 (from byte 100), 1281 (whole), 1282 (to byte 99).
write_at "two pages from inside a page" $(((5 << 20) + 100)) $((2 * page))
expect "two pages from inside a page" 3 2
write_at "the end of a page to the start of the next" $(((7 << 20) - 10)) 20
expect "the end of a page to the start of the next" 2 2

# A write through a shared mapping: the fault breaks the alias with a copy.
python3 - $mnt/c1/file /tmp/model $((3 << 20)) <<'PY' || die "mmap write"
import mmap, sys
off = int(sys.argv[3])
for path in sys.argv[1:3]:
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        m[off + 7:off + 12] = b"MMAP!"
        m.flush()
PY
expect "a shared mapping" 1 1

check() { # WHEN
	cmp $mnt/c1/file /tmp/model || die "$1: c1 differs from its model"
	for f in $mnt/template/file $mnt/c2/file; do
		[ "$(sha256sum < $f)" = "$want" ] || die "$1: $f changed"
	done
}
check "before fsync"
sync
check "after fsync"
drop_caches
check "after drop_caches"
echo "overwrite: every write read back right"

# An adversary's whole-page writes into c3's aliased pages from a buffer
# whose second half another thread keeps unmapping (mprotect PROT_NONE):
# a copy that faults part way into a folio left not uptodate (no copy of
# the template's page) is undone and retried by btrfs, which reads the
# page first. Each page must read back as what pwrite() said it wrote
# over the template's bytes, before and after drop_caches: never zeroes,
# never a half-copied page that was not reported. (In UML's one CPU the
# mprotect rarely lands between btrfs's fault-in and its copy: the line
# printed says how often a write faulted or was short; 0 means the retry
# path was not reached in this run and only the outcome was checked.)
python3 - $mnt/c3/file $mnt/template/file /tmp/c3-model <<'PY' || die "adversarial overwrite"
import ctypes, errno, mmap, os, sys, threading
P = 4096
libc = ctypes.CDLL(None, use_errno=True)
path, tmpl, model = sys.argv[1:4]
buf = mmap.mmap(-1, 2 * P)
buf[:] = b"\x5a" * (2 * P)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
stop = threading.Event()
def toggle():
    while not stop.is_set():
        libc.mprotect(ctypes.c_void_p(addr + P), P, 0)
        libc.mprotect(ctypes.c_void_p(addr + P), P, 3)
t = threading.Thread(target=toggle)
t.start()
with open(tmpl, "rb") as f:
    want = bytearray(f.read())
fd = os.open(path, os.O_WRONLY)
src = memoryview(buf)[P // 2:P // 2 + P]
short = faults = 0
for pg in range(1024):
    try:
        n = os.pwrite(fd, src, pg * P)
    except OSError as e:
        assert e.errno == errno.EFAULT, e
        n, faults = 0, faults + 1
    short += 0 < n < P
    want[pg * P:pg * P + n] = b"\x5a" * n
stop.set()
t.join()
os.close(fd)
with open(model, "wb") as f:
    f.write(want)
print(f"overwrite: adversarial: 1024 whole-page writes, {faults} faulted, {short} short")
PY
cmp $mnt/c3/file /tmp/c3-model || die "adversarial overwrite: c3 differs from what pwrite reported"
drop_caches
cmp $mnt/c3/file /tmp/c3-model || die "adversarial overwrite: c3 differs after drop_caches"
ctl group del ow || die "group del"
check "after the group's deletion"
