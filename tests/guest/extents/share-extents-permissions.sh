#!/bin/bash
# An unprivileged user cannot make its file share pages with a file it
# cannot read (docs/design/scopes.md, "Who may make a file
# share"). A subvolume in a sharing scope holds a root-only secret and a
# world-readable public file, both read (their canonical pages in memory),
# and a directory of user nobody's with its own file and subvolume.
# share-extents-permissions.py, as nobody, tries every route to the
# secret's extent (FICLONE, FICLONERANGE, FIDEDUPERANGE through O_PATH
# descriptors, into files it may only read, a forged received UUID) and
# the legitimate ones (a file it can read): the first must be refused, the
# second must work. Then no file of nobody's holds the secret's bytes,
# each holds what it may, before and after drop_caches.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
x=/sys/kernel/mm/totalcow/extents
mnt=/mnt/btrfs
sum() { sha256sum < "$1" | cut -d' ' -f1; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

btrfs_mount /dev/$DISK0 $mnt
btrfs -q subvolume create $mnt/tenant
make_file $mnt/tenant/secret 4 secret
chmod 0600 $mnt/tenant/secret
make_file $mnt/tenant/public 4 public
chmod 0644 $mnt/tenant/public
mkdir $mnt/tenant/u
chown 65534:65534 $mnt/tenant/u
as_nobody bash -c "
	. '$TOTALCOW_TOP/tests/vm/lib.sh'
	make_file $mnt/tenant/u/mine 4 mine
	btrfs -q subvolume create $mnt/tenant/u/sv
	make_file $mnt/tenant/u/sv/file 4 sv
" || die "nobody could not write its own files"
sync
echo "default $mnt/tenant" > $x/enable
echo "default $mnt/tenant/u/sv" > $x/enable
secret=$(sum $mnt/tenant/secret) public=$(sum $mnt/tenant/public)
svsum=$(sum $mnt/tenant/u/sv/file)
uuid=$(btrfs subvolume show $mnt/tenant | awk '$1 == "UUID:" { print $2 }')
drop_caches
cat $mnt/tenant/secret $mnt/tenant/public > /dev/null
cat $mnt/tenant/u/sv/file > /dev/null

as_nobody python3 "$TOTALCOW_TOP/tests/guest/extents/share-extents-permissions.py" \
	$mnt/tenant/u $mnt/tenant/secret $mnt/tenant/public "$uuid" | tee /tmp/attempts ||
	die "an attack was not refused, or a legitimate share failed"
grep -c "^attempt" /tmp/attempts | grep -qx 10 || die "not every attempt ran"

check() {
	local f
	for f in $mnt/tenant/u/mine $mnt/tenant/u/copy; do
		[ "$(sum $f)" = "$public" ] || die "$f does not hold the public file's bytes ($1)"
	done
	[ "$(sum $mnt/tenant/u/sv/file)" = "$svsum" ] || die "sv/file changed ($1)"
	[ "$(sum $mnt/tenant/secret)" = "$secret" ] || die "the secret changed ($1)"
	for f in $(find $mnt/tenant/u -type f); do
		[ "$(sum "$f")" != "$secret" ] || die "$f holds the secret's bytes ($1)"
		as_nobody cat "$f" | cmp -s - "$f" || die "nobody reads $f differently from root ($1)"
	done
}
check "shared"
sync
drop_caches
as_nobody cat $mnt/tenant/u/mine $mnt/tenant/u/copy $mnt/tenant/u/sv/file > /dev/null
check "after drop_caches"
echo "permissions: $(grep -c refused /tmp/attempts) attempts refused, the legitimate shares done"
umount $mnt
