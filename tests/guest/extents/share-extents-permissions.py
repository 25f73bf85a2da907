#!/usr/bin/env python3
"""An unprivileged user tries to make its file share pages with a file it
cannot read (guest side of share-extents-permissions.sh; runs as that
user). Every route that makes two files share an extent checks access,
and identity is the extent, never a name or a UUID:

  clone-opath      FICLONE from the secret opened O_PATH (no read needed)
  clone-ro-dest    FICLONE into a file it may only read (opened O_RDONLY)
  range-opath      FICLONERANGE from the secret opened O_PATH
  dedupe-opath     FIDEDUPERANGE with the secret (O_PATH) as destination
  dedupe-src-opath FIDEDUPERANGE issued on the secret (O_PATH) itself
  dedupe-ro-dest   FIDEDUPERANGE into a readable file it does not own
  open-secret      open(2) of the secret for reading
  received-uuid    BTRFS_IOC_SET_RECEIVED_SUBVOL on its own subvolume,
                   naming the secret's subvolume's UUID (forged lineage;
                   refused or not, its files must read their own bytes)
and the legitimate ones, which must work and share:
  clone-readable   FICLONE from a file it can read, opened O_RDONLY
  dedupe-readable  FIDEDUPERANGE of its own copy against a readable file

  share-extents-permissions.py DIR SECRET PUBLIC SUBVOL_UUID

Prints one line per attempt: "attempt NAME: refused ERRNO" or "attempt
NAME: done"; exits 1 if an attack was not refused or a legitimate one
failed.
"""

import errno
import fcntl
import os
import struct
import sys
import uuid

FICLONE = 0x40049409
FICLONERANGE = 0x4020940D
FIDEDUPERANGE = 0xC0189436
BTRFS_IOC_SET_RECEIVED_SUBVOL = 0xC0C89425  # _IOWR(0x94, 37, 200 bytes)


def attempt(name, fn, want_refused):
    """Run one attempt; whether its outcome is the wanted one (None: either,
    what it leads to is checked by the caller)."""
    try:
        fn()
    except OSError as e:
        print(f"attempt {name}: refused {errno.errorcode.get(e.errno, e.errno)}")
        return want_refused is not False
    print(f"attempt {name}: done")
    return want_refused is not True


def dedupe(src_fd, dst_fd, length):
    """FIDEDUPERANGE of [0, length) of src_fd onto dst_fd at 0: raises the
    per-destination status as OSError, as the ioctl's own error."""
    arg = bytearray(struct.pack("QQHHI", 0, length, 1, 0, 0) +
                    struct.pack("qQQiI", dst_fd, 0, 0, 0, 0))
    fcntl.ioctl(src_fd, FIDEDUPERANGE, arg)
    status = struct.unpack_from("i", arg, 24 + 24)[0]
    if status < 0:
        raise OSError(-status, os.strerror(-status))
    if status == 1:  # FILE_DEDUPE_RANGE_DIFFERS
        raise OSError(errno.EILSEQ, "data differs")


def main():
    d, secret, public, subvol_uuid = sys.argv[1:5]
    ok = True
    mine = os.path.join(d, "mine")
    own = os.open(mine, os.O_RDWR)
    size = os.fstat(own).st_size

    ok &= attempt("open-secret", lambda: os.close(os.open(secret, os.O_RDONLY)), True)
    sp = os.open(secret, os.O_PATH)
    ok &= attempt("clone-opath", lambda: fcntl.ioctl(own, FICLONE, sp), True)
    ok &= attempt("range-opath", lambda: fcntl.ioctl(
        own, FICLONERANGE, struct.pack("qQQQ", sp, 0, 0, 0)), True)
    ok &= attempt("dedupe-opath", lambda: dedupe(own, sp, size), True)
    ok &= attempt("dedupe-src-opath", lambda: dedupe(sp, own, size), True)
    pub_ro = os.open(public, os.O_RDONLY)
    ok &= attempt("clone-ro-dest", lambda: fcntl.ioctl(pub_ro, FICLONE, own), True)
    # Its own copy of the public file's bytes, deduplicated onto the
    # public file: the destination is not its own, nor writable.
    copy = os.path.join(d, "copy")
    with open(public, "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
    cfd = os.open(copy, os.O_RDWR)
    os.fsync(cfd)
    ok &= attempt("dedupe-ro-dest", lambda: dedupe(cfd, pub_ro, size), True)

    # A subvolume of its own whose received UUID names the secret's.
    sv = os.path.join(d, "sv")
    args = bytearray(200)
    args[0:16] = uuid.UUID(subvol_uuid).bytes
    svfd = os.open(sv, os.O_RDONLY | os.O_DIRECTORY)
    ok &= attempt("received-uuid", lambda: fcntl.ioctl(svfd, BTRFS_IOC_SET_RECEIVED_SUBVOL,
                                                       args), None)

    # The legitimate routes: sharing with a file it can read.
    ok &= attempt("clone-readable", lambda: fcntl.ioctl(own, FICLONE, pub_ro), False)
    ok &= attempt("dedupe-readable", lambda: dedupe(pub_ro, cfd, size), False)
    for fd in (own, sp, pub_ro, cfd, svfd):
        os.close(fd)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
