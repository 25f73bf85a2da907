# SPDX-License-Identifier: GPL-2.0-only
"""Template paths to sector ranges on the totalcow device."""

import errno
import os
import stat
import sys
import time

from .btrfs import (BG_STRIPED, chunk_map, find_chunk, fs_devices, subvol_id, syncfs,
                    tree_file_extents)
from .errors import EX_NOTTC, EX_PERM, Fail
from .fiemap import (FIEMAP_EXTENT_DATA_INLINE, FIEMAP_EXTENT_DELALLOC, FIEMAP_EXTENT_ENCODED,
                     FIEMAP_EXTENT_UNKNOWN, FIEMAP_EXTENT_UNWRITTEN, file_extents)


PROGRESS_ITEMS = 4096  # file extent items between looks at the progress line


class Walker:
    """Collects the totalcow-device sector ranges of template files."""

    def __init__(self, device_rdev, quiet):
        self.rdev = device_rdev
        self.quiet = quiet or not sys.stderr.isatty()
        self.ranges = []
        self.files = self.extents = self.skipped = 0
        self.notes = {}
        self.fs = {}  # st_dev of a directory -> (devs, chunks)
        self.by_tree = False
        self.subvols = {}  # st_dev -> (tree id, fs, directory fd, inodes)
        self.cur_fs = self.last_chunk = None
        self.started = time.monotonic()
        self.last_progress = 0.0  # when the progress line was last drawn
        self.items = 0  # file extent items read from fs trees

    def note(self, what):
        self.notes[what] = self.notes.get(what, 0) + 1

    def progress(self, final=False):
        """A progress line on a terminal, for walks that take over a second:
        drawn at most 5 times a second, ended when the walk is."""
        if self.quiet:
            return
        now = time.monotonic()
        if final:
            if not self.last_progress:
                return  # never drawn: a short walk prints nothing
        elif now - self.started < 1.0 or now - self.last_progress < 0.2:
            return
        self.last_progress = now
        sys.stderr.write(f"\rtotalcowctl: {self.files} files, {self.items} extent items, "
                         f"{self.extents} extents" + ("\n" if final else ""))

    def fs_of(self, fd, st_dev):
        """The devices and chunk map of the file system of a directory."""
        if st_dev not in self.fs:
            try:
                devs = fs_devices(fd)
                chunks = chunk_map(fd)
            except OSError as e:
                if e.errno in (errno.ENOTTY, errno.EINVAL):
                    raise Fail("not on btrfs", EX_NOTTC)
                if e.errno == errno.EPERM:
                    raise Fail("reading the chunk tree needs root", EX_PERM)
                raise
            if self.rdev is None:
                if len(devs) != 1:
                    raise Fail("multi-device file system: give --device", EX_NOTTC)
                path, rdev = next(iter(devs.values()))
                if rdev is None:
                    raise Fail(f"btrfs names its device {path}, which does not exist "
                               "here: give --device", EX_NOTTC)
                self.rdev = rdev
            if self.rdev not in {r for _, r in devs.values()}:
                raise Fail(f"its file system is not on {devname(self.rdev)} "
                           "(btrfs must sit directly on the totalcow device)", EX_NOTTC)
            self.fs[st_dev] = (devs, chunks)
        if self.fs[st_dev] is not self.cur_fs:
            self.cur_fs, self.last_chunk = self.fs[st_dev], None
        return self.cur_fs

    def add_file(self, path, fd, fs):
        devs, chunks = fs
        for physical, length, flags in file_extents(fd):
            if flags & FIEMAP_EXTENT_DATA_INLINE:
                self.note("inline extents skipped")
                continue
            if flags & FIEMAP_EXTENT_UNWRITTEN:
                self.note("unwritten (preallocated) extents skipped")
                continue
            if flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC):
                self.note("extents without a disk address skipped")
                continue
            if flags & FIEMAP_EXTENT_ENCODED:
                self.note("compressed extents registered by logical length")
            self.add_logical(path, devs, chunks, physical, length)

    def add_logical(self, path, devs, chunks, logical, length):
        end = logical + length
        while logical < end:
            c = self.last_chunk
            if c is None or not c[0] <= logical < c[0] + c[1]:
                c = self.last_chunk = find_chunk(chunks, logical)
            if c is None:
                raise Fail(f"{path}: logical address {logical} is in no chunk")
            cstart, clen, ctype, stripes = c
            if ctype & BG_STRIPED:
                raise Fail(f"{path}: striped data profile (RAID0/10/5/6) is not supported",
                           EX_NOTTC)
            n = min(end, cstart + clen) - logical
            for devid, offset in stripes:
                if devs.get(devid, (None, None))[1] != self.rdev:
                    self.note("copies on other devices not cached")
                    continue
                phys = offset + (logical - cstart)
                first = phys // 512
                self.ranges.append((first, (phys + n + 511) // 512 - first))
                self.extents += 1
            logical += n

    def walk(self, path):
        """Register a file or a whole tree. Each directory is looked at once
        (its file system); files are opened once, for FIEMAP only."""
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            if self.by_tree:
                syncfs(path)  # what FIEMAP_FLAG_SYNC does per file
            self.walk_dir(path)
            self.read_trees()
        elif stat.S_ISREG(st.st_mode):
            dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                fs = self.fs_of(dfd, st.st_dev)
            finally:
                os.close(dfd)
            self.add_path(path, fs)
        else:
            raise Fail("not a regular file or directory", EX_NOTTC)
        self.progress(final=True)

    def walk_dir(self, path):
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            st_dev = os.fstat(dfd).st_dev
            fs = self.fs_of(dfd, st_dev)
            if self.by_tree:
                return self.walk_dir_tree(path, dfd, st_dev, fs)
        finally:
            os.close(dfd)
        subdirs = []
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                subdirs.append(e.path)
            elif e.is_file(follow_symlinks=False):
                self.add_path(e.path, fs)
            elif e.is_symlink():
                self.note("symbolic links skipped")
            else:
                self.note("special files skipped")
        for d in subdirs:
            self.walk_dir(d)

    def walk_dir_tree(self, path, dfd, st_dev, fs):
        """Collect the inode numbers of the regular files below path, per
        subvolume; their extents are read from the fs trees at the end."""
        if st_dev not in self.subvols:
            self.subvols[st_dev] = (subvol_id(dfd), fs, dfd_copy(dfd), set())
        inodes = self.subvols[st_dev][3]
        subdirs = []
        with os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    inodes.add(e.inode())
                    self.files += 1
                elif e.is_symlink():
                    self.note("symbolic links skipped")
                else:
                    self.note("special files skipped")
        self.progress()
        for d in sorted(subdirs):
            self.walk_dir(d)

    def read_trees(self):
        for tree, fs, fd, inodes in self.subvols.values():
            try:
                if not inodes:
                    continue
                devs, chunks = fs
                self.cur_fs, self.last_chunk = fs, None
                for ino, kind, logical, length in tree_file_extents(fd, tree, inodes):
                    self.items += 1
                    if not self.items % PROGRESS_ITEMS:
                        self.progress()
                    if kind == "inline":
                        self.note("inline extents skipped")
                    elif kind == "prealloc":
                        self.note("unwritten (preallocated) extents skipped")
                    else:
                        if kind == "compressed":
                            self.note("compressed extents registered by disk length")
                        self.add_logical(f"inode {ino}", devs, chunks, logical, length)
            finally:
                os.close(fd)
        self.subvols = {}

    def add_path(self, path, fs):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            self.add_file(path, fd, fs)
        finally:
            os.close(fd)
        self.files += 1
        self.progress()

    def merged(self):
        out = []
        for s, n in sorted(self.ranges):
            if out and s <= out[-1][0] + out[-1][1]:
                out[-1][1] = max(out[-1][0] + out[-1][1], s + n) - out[-1][0]
            else:
                out.append([s, n])
        return out


def dfd_copy(fd):
    return os.dup(fd)


def devname(rdev):
    return f"{os.major(rdev)}:{os.minor(rdev)}"
