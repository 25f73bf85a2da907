from vmrun import X86_LANE_GROUP

# The longest runs first. pytest-xdist (--dist loadgroup) hands work out
# in collection order, a unit at a time as workers free up, so a long run
# collected late keeps one worker busy after the others have finished:
# the longest-first order shortens that tail. Largest first, by host CPU
# seconds in the CI runs of 2026-11-27 and the session-49 runs
# (tests/vm/vm-cost): the x86-64 lane's queue (every QEMU test, one after
# another on one worker, about 1,400 s), then the UML runs of 150 s and
# more. An entry is a node id or its start (a module); the tests it does
# not name keep their order after these. Only the order changes: every
# test runs as before, and a module's tests stay together.
SLOW_FIRST = (
    X86_LANE_GROUP,
    "tests/integration/test_lxc.py::",
    "tests/integration/test_bench.py::",
    "tests/integration/test_registration.py::test_register_read_balance",
    "tests/integration/test_podman.py::",
    "tests/integration/test_dm_totalcow.py::test_memory_pressure_reclaims_the_cache",
    "tests/integration/test_dm_totalcow.py::test_raw_io_of_every_shape",
    "tests/integration/test_baseline.py::",
)


def slow_rank(item):
    """Where ITEM goes: the index of the first SLOW_FIRST entry that names
    it (the x86-64 lane's group by its mark), else after all of them."""
    groups = {m.args[0] for m in item.iter_markers("xdist_group") if m.args}
    for i, entry in enumerate(SLOW_FIRST):
        if entry in groups or item.nodeid.startswith(entry):
            return i
    return len(SLOW_FIRST)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=slow_rank)   # stable: the rest keep their order
