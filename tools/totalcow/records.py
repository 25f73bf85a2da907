# SPDX-License-Identifier: GPL-2.0-only
"""The state directory, $TOTALCOW_STATE_DIR (default /var/lib/totalcow):
one JSON record per template (templates/NAME.json: its device, paths and
ranges, which refresh and the dm-only route go by) and per container
template (containers/NAME.json), and the lock that hooks and commands
that change groups take."""

import fcntl
import json
import os
from contextlib import contextmanager

from . import config
from .errors import EX_NOENT, Fail


class Store:
    """The records of one kind, a directory of NAME.json files."""

    def __init__(self, kind, missing):
        self.kind = kind
        self.missing = missing  # what load() of an absent record says

    def dir(self):
        return os.path.join(config.STATE, self.kind)

    def path(self, name):
        return os.path.join(self.dir(), name + ".json")

    def exists(self, name):
        return os.path.exists(self.path(name))

    def load(self, name):
        try:
            with open(self.path(name)) as f:
                return json.load(f)
        except FileNotFoundError:
            raise Fail(self.missing.format(name=name, path=self.path(name), state=config.STATE),
                       EX_NOENT)

    def save(self, name, record):
        """Write the record whole or not at all: a command killed while
        writing leaves the old record (or none), never half of one."""
        os.makedirs(self.dir(), exist_ok=True)
        path = self.path(name)
        tmp = os.path.join(self.dir(), f".{name}.json.{os.getpid()}")  # not *.json
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def delete(self, name):
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass

    def items(self):
        """[(name, record)] of every record, by name."""
        d, out = self.dir(), []
        if os.path.isdir(d):
            for fn in sorted(os.listdir(d)):
                if fn.endswith(".json"):  # not a save's temporary file
                    with open(os.path.join(d, fn)) as f:
                        out.append((fn[:-len(".json")], json.load(f)))
        return out


def device_of(record):
    """The device (rdev) a template's record names ("MAJOR:MINOR")."""
    return os.makedev(*map(int, record["device"].split(":")))


TEMPLATES = Store("templates", "no record of template {name} in {state}")
CONTAINERS = Store("containers", "{name} is not a template (no {path})")


@contextmanager
def lock():
    """Serializes hooks and commands that change groups (lxc-copy and
    lxc-destroy may run in parallel)."""
    os.makedirs(config.STATE, exist_ok=True)
    fd = os.open(os.path.join(config.STATE, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
