#!/bin/bash
# Guest side of tests/deb/test-kernel-package: the kernel booted is the
# one the linux-image package installed in a Debian 12 root; run
# tests/deb/installed-demo inside that root, with its own userspace
# (totalcowctl, btrfs-progs and dmsetup from packages).
#
#   installed-demo.sh ROOT KERNELRELEASE [MIB]
#
# ROOT is the root's directory on the host (read-only here, over 9p); the
# demo runs in a writable overlay of it (upper on tmpfs) with /proc, /sys
# and /dev, on the first scratch disk.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
root=$1 krel=$2 mib=${3:-64}
[ -d "$root/usr/bin" ] || die "no Debian root at '$root'"
[ "$(uname -r)" = "$krel" ] || die "booted $(uname -r), not the packaged $krel"
[ -f "$root/boot/vmlinuz-$krel" ] || die "the root has no /boot/vmlinuz-$krel"
echo "installed-demo.sh: booted $krel from the root's linux-image package"
view=/tmp/installed
mkdir -p /tmp/ovl/upper /tmp/ovl/work $view
mount -t overlay installed -o "lowerdir=$root,upperdir=/tmp/ovl/upper,workdir=/tmp/ovl/work" $view ||
	die "overlay over $root"
mount -t proc proc $view/proc
mount --rbind /sys $view/sys
mount --rbind /dev $view/dev
mount -t tmpfs tmpfs $view/tmp
install -m 755 "$TOTALCOW_TOP/tests/deb/installed-demo" $view/usr/local/sbin/installed-demo
rc=0
# No udev here: dmsetup makes its nodes itself (as tests/vm/guest-init says).
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DM_DISABLE_UDEV=1 \
	chroot $view /usr/local/sbin/installed-demo "/dev/$DISK0" "$mib" || rc=$?
umount -R $view/dev $view/sys 2>/dev/null || true
[ $rc = 0 ] || die "the demo in the installed root exited $rc"
