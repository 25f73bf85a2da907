# SPDX-License-Identifier: GPL-2.0-only
"""Templates without the sysfs layer (dm-totalcow from DKMS on a stock
kernel): their ranges go to the target with `dmsetup message <dev> 0
whitelist_add|whitelist_del <name> <start> <length>...` (docs/
dm-totalcow.rst, Messages). The target can neither list its templates nor
show their ranges, so the records in $TOTALCOW_STATE_DIR/templates (the
device, the paths and, since this route, the ranges) are what list,
refresh and del go by."""

from . import config, output, records
from .dmsetup import (MessageFailed, batches, message, subtract, totalcow_device, totalcow_name,
                      words)
from .errors import Fail


def say(what):
    """The one line that tells the admin which route a command took."""
    output.say(f"{config.SYSFS} is absent (dm-totalcow without the sysfs layer, as from "
               f"DKMS): {what}")


class Sent:
    """The messages one command has sent, to take back if a later one
    fails: the command then leaves the template as it found it."""

    def __init__(self, dev, name):
        self.dev, self.name, self.undo_list = dev, name, []

    def send(self, verb, ranges, undo):
        """Send verb with ranges; undo is what takes it back: the ranges
        to delete again (for an add: only those the template did not have
        already) or to add again (for a delete)."""
        message(self.dev, verb, self.name, *words(ranges))
        back = "whitelist_del" if verb == "whitelist_add" else "whitelist_add"
        self.undo_list.append((back, undo))

    def undo_and_raise(self, error):
        """Take back everything sent, newest first; raise error, or, if a
        step of the undo fails too, an error that says so."""
        failed = []
        for verb, ranges in reversed(self.undo_list):
            for b in batches(ranges):
                try:
                    message(self.dev, verb, self.name, *words(b))
                except Fail as e:
                    failed.append(str(e))
        self.undo_list = []
        if failed:
            raise Fail(f"{error}; undoing what was sent failed too ({failed[0]}): template "
                       f"{self.name} on {self.dev} may be left half changed (template del "
                       f"{self.name} removes it)", error.code)
        raise error


def add(name, rdev, ranges):
    """Register new template name's ranges on totalcow device rdev, all or
    nothing."""
    dev = totalcow_device(rdev)
    say(f"sending the ranges with dmsetup message {dev} 0 whitelist_add")
    sent = Sent(dev, name)
    try:
        for b in batches(ranges):
            sent.send("whitelist_add", b, undo=b)
    except Fail as e:
        sent.undo_and_raise(e)


def replace(name, rdev, old, new):
    """Give template name the ranges new instead of old (its recorded
    ranges), all or nothing.

    Add first, then delete: every range of new is added (the target merges
    ranges the template has already), then the stale ones (old minus new)
    are deleted. So the template holds every range that is still its own
    at every moment; it holds stale ones a little longer, which only
    costs cache. Sending all of new, not just new minus old, registers the
    template again where the target has forgotten it (a table reload or a
    reboot), which the target cannot be asked about. A stale range the
    target does not have (forgotten, so nothing to delete) is not an
    error: it is counted and the command says so. Any other failure takes
    back what was sent: deletes by adding again, adds by deleting what
    old did not have."""
    dev = totalcow_device(rdev)
    old = [tuple(r) for r in old]
    stale = subtract(old, new)
    say(f"sending the ranges with dmsetup message {dev} 0 whitelist_add, then "
        f"whitelist_del of the {len(stale)} stale ones")
    sent = Sent(dev, name)
    missing = 0
    try:
        for b in batches(new):
            sent.send("whitelist_add", b, undo=subtract(b, old))
        for b in batches(stale):
            try:
                sent.send("whitelist_del", b, undo=b)
            except MessageFailed as e:
                if not e.enoent:
                    raise
                missing += len(b)
    except Fail as e:
        sent.undo_and_raise(e)
    if missing:
        output.note(f"{missing} of the {len(stale)} stale ranges recorded for template "
                    f"{name} are left alone: {dev} refused to delete them as not all "
                    "registered (a table reload or a reboot forgets templates); any that are "
                    f"stay whitelisted, which only wastes cache, until template del {name}")


def delete(name, rec):
    """Remove template name (its record rec) from its recorded device."""
    rdev = records.device_of(rec)
    dev, why = totalcow_name(rdev)
    if why:
        output.note(f"{why} (any more): template {name} went with its table; its record is "
                    "removed")
        return
    say(f"removing it with dmsetup message {dev} 0 whitelist_del {name}")
    try:
        message(dev, "whitelist_del", name)
    except MessageFailed as e:
        if not e.enoent:
            raise
        output.note(f"template {name} was not registered on {dev} (a table reload or a "
                    "reboot forgets templates); its record is removed")


def recorded():
    """The templates recorded in the state directory, as `template list`
    shows them (extents and sectors None for a record without ranges)."""
    out = []
    for name, rec in records.TEMPLATES.items():
        ranges = rec.get("ranges")
        out.append({"name": name, "device": rec["device"],
                    "extents": None if ranges is None else len(ranges),
                    "sectors": None if ranges is None else sum(n for _, n in ranges),
                    "paths": rec.get("paths", []), "recorded": True})
    return out

