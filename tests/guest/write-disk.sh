#!/bin/bash
# Runner self-test: the scratch disks are attached in order with the sizes
# asked for, and files written to the working directory reach the host.
set -e
blockdev --getsize64 /dev/ubda > disk-sizes
blockdev --getsize64 /dev/ubdb >> disk-sizes
echo "guest was here" > from-guest.txt
