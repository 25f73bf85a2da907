#!/usr/bin/env python3
"""Map FILE MAP_PRIVATE, fork, and let the child hold the mapping: the
parent unmaps, writes READY and exits; the child waits for GO, then
writes "ok" to RESULT if the mapping still shows WANT (sha256), or what
it shows instead, and exits.

    share-hold-mapping.py FILE READY GO RESULT WANT
"""
import hashlib
import mmap
import os
import sys
import time

path, ready, go, result, want = sys.argv[1:6]
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
os.close(fd)
if hashlib.sha256(m[:]).hexdigest() != want:
    sys.exit("the mapping does not show the file's data")
if os.fork() == 0:
    while not os.path.exists(go):
        time.sleep(0.05)
    got = hashlib.sha256(m[:]).hexdigest()
    with open(result, "w") as f:
        f.write("ok\n" if got == want else f"changed: {got}\n")
    os._exit(0)
m.close()
with open(ready, "w") as f:
    f.write("mapped\n")
