"""systemd-nspawn fleets (docs/nspawn.md): containers cloned from a
read-only image in /var/lib/machines join its page-cache sharing group by
lineage (automatic membership), in the debug UML kernel."""

import re

import pytest

from vmrun import run_vm

pytestmark = pytest.mark.slow  # a minute or more: make check runs it, check-quick not


def test_nspawn_clones_of_a_readonly_image_share():
    """An image imported read-only with systemd-import (what `machinectl
    import-tar --read-only` runs) and registered with `totalcowctl template
    add` and `group create --auto`; 8 containers made with `systemd-nspawn
    --register=no --template=`, started at once, read its data and run its
    busybox with one copy in the page cache and one disk read (<= 1.2x one
    container), again when started a second time; 8 clones of an
    unregistered twin image: >= 7.2x. A write stays in its container;
    ephemeral containers (-x) join and leave; a deleted clone leaves."""
    r = run_vm("tests/guest/fleet/nspawn-fleet.sh", "8", disks=("2G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^nspawn-fleet: totalcow: 8 containers, page cache ([\d.]+)x one "
                  r"container, device reads ([\d.]+)x, (\d+) pages shared, (\d+) mappings",
                  r.console, re.M)
    assert m, r.explain()
    assert float(m.group(1)) <= 1.2 and float(m.group(2)) <= 1.2, m.group(0)
    assert int(m.group(4)) >= 8, m.group(0)
    m = re.search(r"^nspawn-fleet: unregistered image: 8 containers, page cache ([\d.]+)x "
                  r"one container, device reads ([\d.]+)x", r.console, re.M)
    assert m and float(m.group(1)) >= 7.2 and float(m.group(2)) >= 7.2, r.explain()
    assert "nspawn-fleet: 2 ephemeral containers joined and left" in r.console, r.explain()
    assert "nspawn-fleet: all checks passed" in r.console, r.explain()
