#!/bin/bash
# Runner self-test of the stock lane: dm-totalcow loads (as a module on a
# Debian kernel, where the kernel says it taints itself; built in on ours)
# and its target is there.
. "$TOTALCOW_TOP/tests/vm/lib.sh"
kernel_needs dm-totalcow
dmsetup targets | grep -w totalcow
