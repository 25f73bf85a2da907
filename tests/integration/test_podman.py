"""Podman fleets on its btrfs storage driver (docs/podman.md): containers
of an image whose top layer is registered with automatic membership share
its page cache and disk reads, in the debug UML kernel."""

import re

import pytest

from vmrun import run_vm

pytestmark = pytest.mark.slow  # a minute or more: make check runs it, check-quick not


def test_podman_containers_of_a_registered_layer_share():
    """`podman import` (Debian's podman 4.3, --storage-driver btrfs): the
    image's top layer (`podman image mount`) made read-only and registered
    (`totalcowctl template add`, `group create --auto`); 8 containers
    (`--network none`) started at once read its data and run its busybox
    with one copy in the page cache and one disk read (<= 1.2x one
    container); 8 of an unregistered twin image: >= 7.2x. A write stays in
    its container; removed containers leave; `podman rmi` of the registered
    image fails without touching the layer, and finishes once unregistered."""
    r = run_vm("tests/guest/fleet/podman-fleet.sh", "8", disks=("2G",))
    assert r.status == 0, r.explain()
    m = re.search(r"^podman-fleet: totalcow: 8 containers, page cache ([\d.]+)x one "
                  r"container, device reads ([\d.]+)x, (\d+) pages shared, (\d+) mappings",
                  r.console, re.M)
    assert m, r.explain()
    assert float(m.group(1)) <= 1.2 and float(m.group(2)) <= 1.2, m.group(0)
    assert int(m.group(4)) >= 8, m.group(0)
    m = re.search(r"^podman-fleet: unregistered image: 8 containers, page cache ([\d.]+)x "
                  r"one container, device reads ([\d.]+)x", r.console, re.M)
    assert m and float(m.group(1)) >= 7.2 and float(m.group(2)) >= 7.2, r.explain()
    assert "podman-fleet: all checks passed" in r.console, r.explain()
