"""Template registration: /sys/kernel/mm/totalcow and tools/totalcowctl, in
the debug UML kernel."""

import re

import pytest

from vmrun import run_vm


def passed(r):
    assert r.status == 0, r.explain()
    return r


def test_translation_agrees_with_btrfs_map_logical():
    """single, DUP, RAID1 over two devices, compressed, inline, sparse and
    preallocated files; a file system on another device is refused. This
    checks the tool's arithmetic against btrfs-progs on stock btrfs, so it
    runs in the base kernel (6 minutes under the debug kernel, 1 here); the
    sysfs layer it writes to is exercised under the debug kernel below."""
    r = passed(run_vm("tests/guest/tool/totalcowctl-translation.sh", disks=("2G", "2G"),
                      debug=False))
    for profile in ("single", "dup", "raid1", "compressed"):
        assert re.search(rf"^{profile}: \d+ ranges, same as btrfs-map-logical$",
                         r.console, re.M), profile


@pytest.mark.slow
def test_register_read_balance_refresh_deregister_and_bad_input():
    r = passed(run_vm("tests/guest/tool/totalcowctl-snapshots.sh", disks=("2G",)))
    ratios = dict(re.findall(r"^(registered|after balance|after refresh|deregistered): .*?"
                             r"([\d.]+)x", r.console, re.M))
    assert float(ratios["registered"]) <= 1.01, ratios
    assert float(ratios["after refresh"]) <= 1.01, ratios
    assert float(ratios["after balance"]) > 7.5, ratios
    assert float(ratios["deregistered"]) > 7.9, ratios


def test_totalcowctl_refresh_status_and_exit_codes_as_documented():
    """Refresh on a RAID1 file system uses the device recorded at add; a
    refresh whose registration fails leaves the template's old ranges and
    no staging template; status works without the sysfs layer (DKMS) and
    refuses non-root with exit 5; a device node btrfs names that is gone is
    a clear refusal; exit codes and symlinked paths as documented."""
    r = passed(run_vm("tests/guest/tool/totalcowctl-admin.sh", disks=("1G", "1G"),
                      debug=False))
    assert "totalcowctl admin: all as documented" in r.console, r.explain()


def test_templates_without_the_sysfs_layer_go_by_dmsetup_messages():
    """On a stock kernel (DKMS: the target without the sysfs layer)
    template add, list, refresh and del send the ranges with dmsetup
    messages and say so: the target then whitelists exactly what --dry-run
    prints, a snapshot's second read hits its cache, a refresh after a
    rewrite leaves the new ranges, a refresh after a table reload
    registers the template again, and del removes it."""
    r = passed(run_vm("tests/guest/tool/totalcowctl-dm-only.sh", disks=("1G",), debug=False))
    assert "totalcowctl dm-only: add, list, refresh and del through dmsetup messages" \
        in r.console, r.explain()
