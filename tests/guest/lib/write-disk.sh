#!/bin/bash
# Runner self-test: the scratch disks are attached in order with the sizes
# asked for, and files written to the working directory reach the host.
set -e
. "$TOTALCOW_TOP/tests/vm/lib.sh"
blockdev --getsize64 /dev/$DISK0 > disk-sizes
blockdev --getsize64 /dev/$DISK1 >> disk-sizes
echo "guest was here" > from-guest.txt
{ nproc; echo $DISK0 $DISK1; uname -v -r; } > guest-kernel
