"""Page-cache counters for the guest scripts in Python (the shell ones
use tests/vm/lib.sh): read from the kernel, never estimated."""

import os

PAGE = 4096


def page_cache():
    """Bytes of file-backed page cache (tmpfs and shmem excluded)."""
    v = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, n = line.split()
            v[k] = int(n)
    return (v["nr_file_pages"] - v["nr_shmem"]) * PAGE


def drop_caches():
    """Write back, then drop the page cache, dentries and inodes."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
