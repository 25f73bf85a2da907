import os

# The longest runs first: tests/vm/slow-first.txt (written by
# `tests/vm/vm-cost --slow-first` from a run's VM cost log) says why and
# in what order. An entry is an xdist group (its tests by their mark) or
# the start of a node id (a module, a test); the tests it does not name
# keep their order after these.
SLOW_FIRST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm", "slow-first.txt")


def read_slow_first(path=SLOW_FIRST_FILE):
    """The entries of PATH in order: one a line, with "#" comments."""
    with open(path) as f:
        return [e for e in (line.split("#", 1)[0].strip() for line in f) if e]


SLOW_FIRST = read_slow_first()


def slow_rank(item):
    """Where ITEM goes: the index of the first SLOW_FIRST entry that names
    it (an xdist group by its mark), else after all of them."""
    groups = {m.args[0] for m in item.iter_markers("xdist_group") if m.args}
    for i, entry in enumerate(SLOW_FIRST):
        if entry in groups or item.nodeid.startswith(entry):
            return i
    return len(SLOW_FIRST)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=slow_rank)   # stable: the rest keep their order
