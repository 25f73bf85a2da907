# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl status: each totalcow device's counters (dmsetup status)
and, with the sysfs layer, its templates and the groups."""

from .. import config, features, output
from ..args import json_flag
from ..dmsetup import device_status
from ..features import TEMPLATES
from ..sysfs import groups, templates


def register(sub):
    p = sub.add_parser("status", help="cache statistics and templates")
    json_flag(p)
    p.set_defaults(func=cmd_status)


def cmd_status(a):
    devices = device_status()
    # Without the sysfs layer (the DKMS deployment) there are only the
    # target's counters: templates are the device's whitelist tags.
    layer = features.has(TEMPLATES)
    status = {"devices": devices, "templates": templates() if layer else [],
              "groups": groups(), "sysfs": layer}
    return output.listing(a, status, lines)


def lines(status):
    if not status["devices"]:
        yield "no totalcow devices"
    for d in status["devices"]:
        look = d["hits"] + d["misses"]
        # dm-totalcow's blocks are pages (TC_BLOCK_SIZE, docs/dm-totalcow.rst)
        yield (f"{d['name']}: {output.pages_mib(d['cached_blocks'])}/"
               f"{output.pages_mib(d['capacity_blocks'])} MiB cached, hit rate "
               f"{(100 * d['hits'] / look) if look else 0:.1f}% ({d['hits']} hits, "
               f"{d['misses']} misses, {d['waited']} waited for a fill), "
               f"{d['bypassed']} bypassed, "
               f"{d['invalidations']} invalidations, {d['templates']} templates")
    for t in status["templates"]:
        yield (f"  template {t['name']} on {t['device']}: {t['extents']} extents, "
               f"{output.sectors_mib(t['sectors'])} MiB")
    if not status["sysfs"]:
        yield (f"({config.SYSFS} is absent: dm-totalcow without the sysfs layer, as with "
               "DKMS; the template commands send dmsetup messages, template list shows what "
               "they recorded)")
