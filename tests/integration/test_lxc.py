"""LXC fleets (docs/lxc.md): `lxc-copy -s` clones of a registered template
join its page-cache sharing group (privileged: through LXC hooks;
unprivileged: by lineage at their first read), and leave it when
destroyed, in the debug UML kernel."""

import re

import pytest

from vmrun import run_vm

pytestmark = pytest.mark.slow  # minutes each: make check runs it, check-quick not


def test_busybox_clones_join_share_and_leave():
    """8 busybox clones of a template made with `totalcowctl container
    template` are group members right after lxc-copy; a lost group (reboot)
    is made again at lxc-start; running, they read the shared data and map
    busybox with one copy in the page cache (<= 1.2x one clone) and one
    read of the device; destroy takes each out of the group (groups/remove:
    the others keep their shared pages), and the
    template's destroy removes the group; 8 clones of an unregistered
    template with the same hooks run as plain LXC (8x); refusals change
    nothing."""
    r = run_vm("tests/guest/fleet/lxc-fleet.sh", "8", disks=("2G",))
    assert r.status == 0, r.explain()
    assert re.search(r"^lxc-fleet: 8 clones joined group bb at lxc-copy$", r.console, re.M), \
        r.explain()
    m = re.search(r"^lxc-fleet: totalcow: 8 clones, page cache ([\d.]+)x one clone, "
                  r"device reads ([\d.]+)x, (\d+) pages shared, (\d+) mappings", r.console, re.M)
    assert m, r.explain()
    assert float(m.group(1)) <= 1.2 and float(m.group(2)) <= 1.2, m.group(0)
    assert int(m.group(4)) >= 8, m.group(0)
    m = re.search(r"^lxc-fleet: unregistered template: 8 clones, page cache ([\d.]+)x "
                  r"one clone, device reads ([\d.]+)x", r.console, re.M)
    assert m and float(m.group(1)) >= 7.2 and float(m.group(2)) >= 7.2, r.explain()
    assert re.search(r"^lxc-fleet: c8 left by (groups/remove|rebuilding the group), "
                     r"pages shared \d+ -> \d+$", r.console, re.M), r.explain()
    assert "lxc-fleet: all checks passed" in r.console, r.explain()


def test_unprivileged_clones_join_by_lineage_and_share():
    """Unprivileged LXC: a user with subordinate ids and a delegated cgroup
    makes a busybox container and 8 `lxc-copy -s` clones without privilege
    (no hook can join them: they would run in the user namespace); root's
    `container template` turns automatic membership on for it, and the
    user's clones share its page cache and disk reads at their first read
    (<= 1.2x one clone) where clones of an unregistered twin do not (>= 7.2x);
    a write stays in its clone, a destroyed clone leaves, `container
    restore` brings the group back."""
    r = run_vm("tests/guest/fleet/lxc-unprivileged.sh", "8", disks=("2G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^lxc-unpriv: totalcow: 8 unprivileged clones, page cache ([\d.]+)x one "
                  r"clone, device reads ([\d.]+)x, (\d+) pages shared, (\d+) mappings",
                  r.console, re.M)
    assert m, r.explain()
    assert float(m.group(1)) <= 1.2 and float(m.group(2)) <= 1.2, m.group(0)
    assert int(m.group(4)) >= 8, m.group(0)
    m = re.search(r"^lxc-unpriv: unregistered template: 8 unprivileged clones, page cache "
                  r"([\d.]+)x one clone, device reads ([\d.]+)x", r.console, re.M)
    assert m and float(m.group(1)) >= 7.2 and float(m.group(2)) >= 7.2, r.explain()
    assert "lxc-unpriv: all checks passed" in r.console, r.explain()
