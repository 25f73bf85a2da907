"""tools/totalcowctl on the host, without a TotalCOW kernel: the command
line (exit codes and help as docs say, through a symlink too) and the
package's pure parts (dmsetup status lines of every target version, chunk
lookup, lineage, names, the progress line). The VM tests
(tests/guest/totalcowctl-*.sh) run it against real btrfs and sysfs."""

import io
import os
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTL = os.path.join(TOP, "tools", "totalcowctl")
sys.path.insert(0, os.path.join(TOP, "tools"))

from totalcow import btrfs, cli, dmsetup, lxc, sysfs, walker  # noqa: E402
from totalcow.errors import EX_NOENT, EX_NOTTC, EX_OK, EX_USAGE  # noqa: E402


def ctl(*args, exe=CTL, tmp_path=None):
    env = dict(os.environ, TOTALCOW_SYSFS="/nonexistent/sysfs",
               TOTALCOW_STATE_DIR=str(tmp_path or "/nonexistent/state"))
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env)


SUBCOMMANDS = [("template", "add"), ("template", "del"), ("template", "list"),
               ("template", "refresh"), ("group", "create"), ("group", "add"),
               ("group", "del"), ("group", "list"), ("status",),
               ("container", "template"), ("container", "untemplate"),
               ("container", "join"), ("container", "leave"), ("container", "list"),
               ("container", "restore"), ("container", "hook")]


def test_help_is_the_manual_and_every_subcommand_has_it():
    r = ctl("--help")
    assert r.returncode == EX_OK
    for section in ("SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS"):
        assert section in r.stdout
    for sub in SUBCOMMANDS:
        r = ctl(*sub, "--help")
        assert r.returncode == EX_OK, (sub, r.stderr)
        assert r.stdout.startswith("usage: totalcowctl " + " ".join(sub)), sub


@pytest.mark.parametrize("args,code", [
    ((), EX_USAGE),
    (("template", "add"), EX_USAGE),
    (("template", "add", "bad/name", "/tmp"), EX_USAGE),
    (("template", "add", "a" * 65, "/tmp"), EX_USAGE),
    (("template", "add", "x:refresh", "/tmp"), EX_USAGE),
    (("template", "add", "ok", "/nonexistent"), EX_NOENT),
    (("template", "add", "ok", "/proc", "--dry-run"), EX_NOTTC),
    (("template", "add", "ok", "/tmp", "--device", "/nonexistent"), EX_NOENT),
    (("template", "list"), EX_NOTTC),
    (("group", "create", "g", "/nonexistent"), EX_NOENT),
    (("container", "hook"), EX_USAGE),
    (("container", "hook", "nosuch", "lxc", "clone"), EX_OK),
])
def test_exit_codes_as_documented(args, code, tmp_path):
    r = ctl(*args, tmp_path=tmp_path)
    assert r.returncode == code, (args, r.stdout, r.stderr)
    if code not in (EX_OK,):
        assert "totalcowctl" in r.stderr


def test_runs_through_a_symlink_from_anywhere(tmp_path):
    link = tmp_path / "totalcowctl"
    link.symlink_to(CTL)
    r = ctl("template", "add", "ok", "/nonexistent", exe=str(link), tmp_path=tmp_path)
    assert r.returncode == EX_NOENT, r.stderr
    assert not any(p.name == "__pycache__" for p in (tmp_path).iterdir())


def status_line(name, *counters):
    return f"{name}: 0 131072 totalcow " + " ".join(str(c) for c in counters)


def test_dmsetup_status_of_every_target_version():
    v10 = status_line("a", 1, 2, 3, 4, 5, 6, "7/8", 9, 10, 11)
    v11 = status_line("b", 1, 2, 3, 4, 5, 6, "7/8", 9, 10, 11, 12, 13)
    v12 = status_line("c", 1, 2, 3, 4, 5, 6, "7/8", 9, 10, 11, 12, 13, 14)
    bad = status_line("d", 1, 2, 3)
    got = dmsetup.parse_status("\n".join((v10, v11, v12, bad)))
    assert [d["name"] for d in got] == ["a", "b", "c"]
    a, b, c = got
    assert (a["hits"], a["templates"], a["waited"], a["requeued"], a["readahead"]) == \
        (1, 11, 0, 0, 0)
    assert (b["waited"], b["requeued"], b["readahead"]) == (12, 13, 0)
    assert (c["cached_blocks"], c["capacity_blocks"], c["readahead"]) == (7, 8, 14)


def test_find_chunk_maps_each_logical_address_to_its_chunk():
    chunks = [(0, 100, 0, []), (100, 50, 0, []), (1000, 10, 0, [])]
    assert btrfs.find_chunk(chunks, 0) == chunks[0]
    assert btrfs.find_chunk(chunks, 99) == chunks[0]
    assert btrfs.find_chunk(chunks, 100) == chunks[1]
    assert btrfs.find_chunk(chunks, 149) == chunks[1]
    assert btrfs.find_chunk(chunks, 150) is None
    assert btrfs.find_chunk(chunks, 1009) == chunks[2]
    assert btrfs.find_chunk(chunks, 1010) is None
    assert btrfs.find_chunk([], 5) is None


def test_walker_registers_every_copy_on_the_device_and_refuses_stripes():
    w = walker.Walker(device_rdev=42, quiet=True)
    devs = {1: ("/dev/a", 42), 2: ("/dev/b", 43)}
    raid1 = [(0, 1 << 20, btrfs.BG_DATA | btrfs.BG_RAID1, [(1, 4096), (2, 8192)])]
    w.add_logical("f", devs, raid1, 512, 1024)
    assert w.ranges == [((4096 + 512) // 512, 2)]
    assert w.notes == {"copies on other devices not cached": 1}
    w.add_logical("f", devs, raid1, 1536, 1024)   # adjacent: merged
    w.add_logical("f", devs, raid1, 8192, 512)    # apart: its own range
    assert w.merged() == [[9, 4], [24, 1]]
    raid0 = [(0, 1 << 20, btrfs.BG_DATA | btrfs.BG_RAID0, [(1, 0)])]
    with pytest.raises(Exception, match="striped"):
        walker.Walker(42, True).add_logical("g", devs, raid0, 0, 4096)


def test_lineage_rule_matches_the_kernels():
    t = {"UUID": "u-t", "Received UUID": "-"}
    assert btrfs.snapshot_of({"Parent UUID": "u-t"}, t)
    assert not btrfs.snapshot_of({"Parent UUID": "-"}, t)
    assert not btrfs.snapshot_of({"Parent UUID": "u-other"}, t)
    received = {"UUID": "u-r", "Received UUID": "u-sent"}
    assert btrfs.snapshot_of({"Parent UUID": "u-sent"}, received)
    assert not btrfs.snapshot_of({"Parent UUID": "-"}, {"UUID": "-", "Received UUID": "-"})


def test_names_and_the_reserved_staging_suffix():
    assert cli.valid_name("debian-12.x:1+b_")
    for bad in ("", ".", "..", "a/b", "a b", "x" * 65, "é"):
        assert not cli.valid_name(bad), bad
    long = "n" * 64
    assert sysfs.staging_name("t") == "t" + sysfs.STAGING_SUFFIX
    assert len(sysfs.staging_name(long)) == 64
    assert sysfs.staging_name(long).endswith(sysfs.STAGING_SUFFIX)


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_for_walks_over_a_second_on_a_terminal(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(walker.time, "monotonic", lambda: now[0])
    term = FakeTerminal()
    monkeypatch.setattr(walker.sys, "stderr", term)
    w = walker.Walker(0, quiet=False)
    w.files = 10
    w.progress()
    now[0] += 0.5
    w.progress()
    w.progress(final=True)
    assert term.getvalue() == "", "a walk under a second draws nothing"

    w = walker.Walker(0, quiet=False)
    now[0] += 1.5
    w.files = 300
    w.progress()
    now[0] += 0.1
    w.progress()  # too soon after the last line
    now[0] += 0.2
    w.files = 600
    w.progress(final=True)
    lines = term.getvalue().split("\r")[1:]
    assert len(lines) == 2 and lines[0].startswith("totalcowctl: 300 files")
    assert lines[1] == "totalcowctl: 600 files, 0 extent items, 0 extents\n"

    quiet = walker.Walker(0, quiet=True)
    now[0] += 5
    quiet.progress()
    quiet.progress(final=True)
    assert term.getvalue().count("\r") == 2

    monkeypatch.setattr(walker.sys, "stderr", io.StringIO())  # not a terminal
    w = walker.Walker(0, quiet=False)
    now[0] += 5
    w.progress()
    assert walker.sys.stderr.getvalue() == ""


def test_an_idmapped_container_is_unprivileged(tmp_path):
    """container template turns on automatic membership (and adds no hooks)
    exactly for containers whose config maps ids: their hooks cannot join."""
    conf = tmp_path / "config"
    conf.write_text("lxc.include = /usr/share/lxc/config/common.conf\n"
                    "# lxc.idmap = u 0 100000 65536\n"
                    "lxc.rootfs.path = btrfs:/var/lib/lxc/c/rootfs\n")
    assert not lxc.unprivileged(str(conf))
    conf.write_text(conf.read_text() + "lxc.idmap = u 0 100000 65536\n"
                    "lxc.idmap= g 0 100000 65536\n")
    assert lxc.unprivileged(str(conf))
