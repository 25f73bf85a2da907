#!/bin/bash
# The backing-file route (docs/design/sharing-in-the-file-system.md,
# route A), on a kernel with mm-patches/7.3: a file of a snapshot bound to
# the identical file of its source reads and maps the source's page
# cache, with no mm hook; anything that changes it unbinds it first, and
# its private mappings then follow it as on a stock kernel.
#   1. read through the binding: no disk read, no page cache of its own
#   2. the same bytes
#   3. the template is write-denied while bound
#   4. a private mapping of the bound file follows write() (after it the
#      file's own pages) and keeps its own copy
#   5. a truncation unbinds: SIGBUS past the new end
#   6. refusals: a file that differs, a file open for writing
. "$TOTALCOW_TOP/tests/vm/lib.sh"
. "$TOTALCOW_TOP/tests/guest/share/read-counted.sh"
mnt=/mnt/btrfs
py="python3 $TOTALCOW_TOP/tests/guest/share/share-backing-file.py"
btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/T
make_file $mnt/T/f 8 backing
make_file $mnt/T/g 1 backing-g
btrfs -q subvolume snapshot $mnt/T $mnt/M
make_file $mnt/T/other 8 other
sync

# 1. Bound, the member reads the template's pages.
$py bind $mnt/M/f $mnt/T/f || die "bind"
# Page cache only: a binding lives as long as the member's inode (the
# prototype binds by ioctl; the policy binds again at open).
sync
read_counted $mnt/M/f $mnt/T/f
echo "read: member read $READ_BYTES bytes from the disk, own cache $OWN_PAGES pages"
[ "$READ_BYTES" -lt 32768 ] || die "the bound member read the disk"
[ "$OWN_PAGES" = 0 ] || die "the bound member has a page cache of its own"
# 2. The same bytes.
[ "$SUM" = "$(sha256sum < $mnt/T/f | cut -d' ' -f1)" ] || die "different bytes"
echo "bytes: same"
# 3. Write-denied.
if ( : >> $mnt/T/f ) 2>/dev/null; then die "the template was writable"; fi
echo "template: write-denied"

# 4. A private mapping follows write(), which unbinds first.
$py follows $mnt/M/f || die "the private mapping did not follow"
own=$($py cached $mnt/M/f)
[ "$own" -gt 0 ] || die "unbound, the member has no page cache of its own"
( : >> $mnt/T/f ) 2>/dev/null || die "the template stayed write-denied"
echo "unbound: the template is writable again"

# 5. A truncation unbinds too.
$py bind $mnt/M/g $mnt/T/g || die "bind g"
$py sigbus $mnt/M/g || die "no SIGBUS after truncate"

# 6. Refusals.
out=$($py bind $mnt/M/f $mnt/T/other || true)
echo "refused, different: $out"
[ "$out" = "bind: Invalid or incomplete multibyte or wide character" ] || die "bound a different file"
exec 9>> $mnt/M/g
out=$($py bind $mnt/M/g $mnt/T/g || true)
exec 9>&-
echo "refused, open for writing: $out"
[ "$out" = "bind: Text file busy" ] || die "bound a file open for writing"
umount $mnt
echo "backing-file: passed"
