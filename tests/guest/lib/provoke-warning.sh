#!/bin/bash
# Runner self-test: make the kernel WARN (lkdtm) and still exit 0; the
# runner must notice the splat in the kernel log and fail the run.
set -e
echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT
exit 0
