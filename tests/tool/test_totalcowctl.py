"""tools/totalcowctl on the host, without a TotalCOW kernel: the command
line (exit codes, help and usage errors as docs say, through a symlink
too), the package's pure parts (dmsetup status lines of every target
version, chunk lookup, lineage, names, the progress line), and the
template commands' dm-only route (no sysfs layer: dmsetup messages)
against a fake dmsetup that keeps a whitelist as the target does. The VM
tests (tests/guest/tool/totalcowctl-*.sh) run it against real btrfs and sysfs."""

import io
import json
import os
import re
import subprocess
import sys

import pytest

from totalcow import (btrfs, cli, commands, config, dmsetup, features, lxc, output,
                      records, sysfs, walker)
from totalcow.errors import EX_FAIL, EX_NOENT, EX_NOTTC, EX_OK, EX_USAGE, Fail
from vmrun import TOP

CTL = os.path.join(TOP, "tools", "totalcowctl")


def ctl(*args, exe=CTL, tmp_path=None):
    env = dict(os.environ, TOTALCOW_SYSFS="/nonexistent/sysfs",
               TOTALCOW_STATE_DIR=str(tmp_path or "/nonexistent/state"))
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env)


SUBCOMMANDS = [("template", "add"), ("template", "del"), ("template", "list"),
               ("template", "refresh"), ("group", "create"), ("group", "auto"), ("group", "add"),
               ("group", "del"), ("group", "list"), ("extents", "enable"),
               ("extents", "disable"), ("extents", "list"), ("status",),
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
    (("template", "list"), EX_OK),  # without the sysfs layer: what is recorded
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
    v13 = status_line("e", 1, 2, 3, 4, 5, 6, "7/8", 9, 10, 11, 12, 13, 14, 4242, "pinned")
    bad = status_line("d", 1, 2, 3)
    got = dmsetup.parse_status("\n".join((v10, v11, v12, bad, v13)))
    assert [d["name"] for d in got] == ["a", "b", "c", "e"]
    a, b, c, e = got
    assert (a["hits"], a["templates"], a["waited"], a["requeued"], a["readahead"]) == \
        (1, 11, 0, 0, 0)
    assert (b["waited"], b["requeued"], b["readahead"]) == (12, 13, 0)
    assert (c["cached_blocks"], c["capacity_blocks"], c["readahead"]) == (7, 8, 14)
    assert (c["fleet_cgroup"], c["fleet_mode"]) == (0, "auto")
    assert (e["readahead"], e["fleet_cgroup"], e["fleet_mode"]) == (14, 4242, "pinned")


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


# A fake dmsetup for the dm-only route: it logs its arguments, answers
# `status --target totalcow` for the devices in $FAKE_DM/devices, and keeps
# each device's templates as the target does (docs/dm-totalcow.rst,
# Messages: whitelist_add merges and creates; whitelist_del of ranges not
# all registered, or of an unknown template, fails with ENOENT and changes
# nothing; a template left empty is gone), as sets of sectors. After each
# message it logs the whitelist; message number $FAKE_DM/fail_at fails
# with EINVAL, and a non-empty $FAKE_DM/status_fail is what status prints
# on stderr before failing.
FAKE_DMSETUP = """#!%s
import json, os, sys
d = os.environ["FAKE_DM"]
args = sys.argv[1:]
def load(name, default):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return default
def save(name, value):
    with open(os.path.join(d, name), "w") as f:
        json.dump(value, f)
with open(os.path.join(d, "log"), "a") as f:
    f.write(" ".join(args) + "\\n")
if args[:1] == ["status"]:
    fail = load("status_fail", "")
    if fail:
        sys.stderr.write(fail)
        sys.exit(1)
    for name in load("devices", []):
        print(name + ": 0 131072 totalcow 0 0 0 0 0 0 0/256 0 0 0 0 0 0")
    sys.exit(0)
assert args[0] == "message" and args[2] == "0", args
dev, verb, tag, nums = args[1], args[3], args[4], [int(x) for x in args[5:]]
count = load("count", 0) + 1
save("count", count)
def refuse(why):
    sys.stderr.write("device-mapper: message ioctl on %%s  failed: %%s\\nCommand failed.\\n"
                     %% (dev, why))
    sys.exit(1)
if count == load("fail_at", 0):
    refuse("Invalid argument")
wl = load("wl", {})
tags = wl.setdefault(dev, {})
have = set(tags.get(tag, []))
sectors = {s for i in range(0, len(nums), 2) for s in range(nums[i], nums[i] + nums[i + 1])}
if verb == "whitelist_add":
    have |= sectors
elif verb == "whitelist_del":
    if tag not in tags or not sectors <= have:
        refuse("No such file or directory")
    have = have - sectors if nums else set()
else:
    refuse("Invalid argument")
if have:
    tags[tag] = sorted(have)
else:
    tags.pop(tag, None)
save("wl", wl)
with open(os.path.join(d, "history"), "a") as f:
    f.write(json.dumps(sorted(tags.get(tag, []))) + "\\n")
""" % sys.executable

NO_DM = ("/dev/mapper/control: open failed: No such device\n"
         "Failure to communicate with kernel device-mapper driver.\n"
         "Check that device-mapper is available in the kernel.\n"
         "Command failed.\n")


@pytest.fixture
def fake_dm(tmp_path, monkeypatch):
    """A fake dmsetup first on PATH, its state in the returned directory."""
    d = tmp_path / "fake-dm"
    d.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "dmsetup"
    exe.write_text(FAKE_DMSETUP)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DM", str(d))
    return d


RDEV = os.makedev(254, 0)
PLAIN_RDEV = os.makedev(8, 16)


class FakeWalker:
    """Walker without btrfs: each path's ranges come from RANGES; the
    device is the --device given, else RDEV."""
    RANGES = {}
    RDEV = RDEV

    def __init__(self, device_rdev, quiet):
        self.rdev = device_rdev if device_rdev is not None else FakeWalker.RDEV
        self.files, self.notes, self.by_tree, self.ranges = 0, {}, False, []

    def walk(self, path):
        self.ranges += FakeWalker.RANGES[path]
        self.files += 1

    def merged(self):
        w = walker.Walker(self.rdev, True)
        w.ranges = self.ranges
        return w.merged()


@pytest.fixture
def dm_host(tmp_path, monkeypatch, fake_dm):
    """A stock kernel with dm-totalcow from DKMS: no sysfs layer, the
    totalcow device tc (254:0) and a plain disk (8:16), template paths
    that walk to FakeWalker.RANGES."""
    monkeypatch.setattr(config, "SYSFS", str(tmp_path / "no-sysfs"))
    monkeypatch.setattr(config, "STATE", str(tmp_path / "state"))
    block = tmp_path / "sys-dev-block"
    for dev, name in (("254:0", "tc"), ("254:1", "crypt")):
        (block / dev / "dm").mkdir(parents=True)
        (block / dev / "dm" / "name").write_text(name + "\n")
    (block / "8:16").mkdir(parents=True)
    monkeypatch.setattr(dmsetup, "SYS_DEV_BLOCK", str(block), raising=False)
    (fake_dm / "devices").write_text('["tc"]')
    monkeypatch.setattr(commands.template, "Walker", FakeWalker)
    monkeypatch.setattr(FakeWalker, "RANGES", {})
    monkeypatch.setattr(FakeWalker, "RDEV", RDEV)
    tree = tmp_path / "srv-debian"
    tree.mkdir()
    return {"tree": str(tree), "state": tmp_path / "state", "dm": fake_dm}


def whitelist(fake, tag, dev="tc"):
    try:
        wl = json.loads((fake / "wl").read_text())
    except FileNotFoundError:
        return set()
    return set(wl.get(dev, {}).get(tag, []))


def sectors(ranges):
    return {s for start, n in ranges for s in range(start, start + n)}


def messages(fake):
    try:
        log = (fake / "log").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [line.split() for line in log if line.startswith("message ")]


def run(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_shows_dmsetups_own_reason(tmp_path, fake_dm):
    """A host without device-mapper: dmsetup says why, not "Command failed"."""
    (fake_dm / "status_fail").write_text(json.dumps(NO_DM))
    r = ctl("status", tmp_path=tmp_path)  # fake_dm's PATH and FAKE_DM are in os.environ
    assert r.returncode != EX_OK
    assert "/dev/mapper/control: open failed: No such device" in r.stderr, r.stderr
    assert "Check that device-mapper is available in the kernel" in r.stderr
    assert "Command failed" not in r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args,said", [
    ((), "totalcowctl: missing command (choose from template, group, extents, status, "
         "container)"),
    (("foo",), "totalcowctl: invalid command 'foo' "
               "(choose from template, group, extents, status, container)"),
    (("template", "foo"), "totalcowctl template: invalid command 'foo' "
                          "(choose from add, del, list, refresh)"),
    (("group",), "totalcowctl group: missing command "
                 "(choose from create, auto, add, del, list)"),
    (("container", "bar"), "totalcowctl container: invalid command 'bar' (choose from "
                           "template, untemplate, join, leave, list, restore, hook)"),
    (("group", "auto", "g", "maybe"), "totalcowctl group auto: invalid state 'maybe' "
                                      "(choose from on, off)"),
    (("template", "add"), "totalcowctl template add: the following arguments are "
                          "required: NAME, PATH"),
])
def test_usage_errors_speak_the_manuals_words(args, said, tmp_path):
    r = ctl(*args, tmp_path=tmp_path)
    assert r.returncode == EX_USAGE
    assert said in r.stderr.splitlines(), r.stderr
    assert not re.search(r"argument [a-z]|cmd|invalid choice", r.stderr), r.stderr


@pytest.mark.parametrize("args", [("group", "add", "g", "/tmp"), ("group", "del", "g"),
                                  ("group", "auto", "g", "on")])
def test_group_commands_say_the_sharing_layer_is_missing(args, tmp_path):
    r = ctl(*args, tmp_path=tmp_path)
    assert r.returncode == EX_NOTTC, r.stderr
    assert r.stderr == ("totalcowctl: page-cache sharing is not in this kernel "
                        "(/nonexistent/sysfs/groups is absent): groups need the TotalCOW "
                        "kernel (mm-patches/ and module/share/, see README.md); dm-totalcow "
                        "alone, as from DKMS, has none\n")


def test_dry_run_warns_when_no_totalcow_device_is_under_the_fs(dm_host, capsys):
    FakeWalker.RANGES[dm_host["tree"]] = [(100, 8), (300, 8)]
    for rdev, warning in ((PLAIN_RDEV, "8:16 is not a device-mapper device"),
                          (os.makedev(254, 1), "crypt (254:1) has no totalcow target"),
                          (RDEV, None)):  # tc: the ranges have somewhere to go
        FakeWalker.RDEV = rdev
        code, out, err = run(capsys, "template", "add", "debian", dm_host["tree"],
                             "--dry-run")
        assert code == EX_OK
        assert out == "100 8\n300 8\n"
        assert err == ("" if warning is None else
                       "totalcowctl: warning: no totalcow device under this file system "
                       f"({warning}): these ranges would have nowhere to go\n")
    assert messages(dm_host["dm"]) == []


def test_template_add_list_refresh_del_without_the_sysfs_layer(dm_host, capsys, monkeypatch):
    tree, fake = dm_host["tree"], dm_host["dm"]
    monkeypatch.setattr(dmsetup, "MESSAGE_BATCH", 14, raising=False)  # 2 ranges
    old = [(100, 8), (200, 8), (300, 8), (400, 8)]
    FakeWalker.RANGES[tree] = old
    code, out, err = run(capsys, "template", "add", "debian", tree)
    assert code == EX_OK, err
    assert out.startswith("template debian: 1 files, 4 extents, 0.0 MiB on 254:0\n")
    assert err == ("totalcowctl: " + config.SYSFS + " is absent (dm-totalcow "
                   "without the sysfs layer, as from DKMS): sending the ranges with dmsetup "
                   "message tc 0 whitelist_add\n")
    assert messages(fake) == [
        ["message", "tc", "0", "whitelist_add", "debian", "100", "8", "200", "8"],
        ["message", "tc", "0", "whitelist_add", "debian", "300", "8", "400", "8"]]
    assert whitelist(fake, "debian") == sectors(old)

    code, out, err = run(capsys, "template", "list")
    assert code == EX_OK
    assert out == "debian\t254:0\t4 extents\t0.0 MiB\n"
    assert "dm-totalcow without the sysfs layer" in err and "recorded" in err
    assert len(err.splitlines()) == 1
    code, out, err = run(capsys, "template", "list", "--json")
    assert json.loads(out) == [{"name": "debian", "device": "254:0", "extents": 4,
                                "sectors": 32, "paths": [tree], "recorded": True}]

    # A balance moved 200 and 400: refresh adds the new ranges first and
    # then deletes the stale ones, so the ranges that stay the template's
    # are whitelisted at every step.
    new = [(100, 8), (300, 8), (500, 8), (600, 8)]
    FakeWalker.RANGES[tree] = new
    (fake / "log").unlink()
    (fake / "history").unlink()
    code, out, err = run(capsys, "template", "refresh", "debian")
    assert code == EX_OK, err
    assert "whitelist_add, then whitelist_del of the 2 stale ones" in err
    assert len(err.splitlines()) == 1
    assert messages(fake) == [
        ["message", "tc", "0", "whitelist_add", "debian", "100", "8", "300", "8"],
        ["message", "tc", "0", "whitelist_add", "debian", "500", "8", "600", "8"],
        ["message", "tc", "0", "whitelist_del", "debian", "200", "8", "400", "8"]]
    for step in (fake / "history").read_text().splitlines():
        assert set(json.loads(step)) >= sectors(new) & sectors(old)
    assert whitelist(fake, "debian") == sectors(new)
    code, out, err = run(capsys, "template", "list")
    assert out == "debian\t254:0\t4 extents\t0.0 MiB\n"

    code, out, err = run(capsys, "template", "del", "debian")
    assert code == EX_OK, err
    assert err.endswith("removing it with dmsetup message tc 0 whitelist_del debian\n")
    assert len(err.splitlines()) == 1
    assert messages(fake)[-1] == ["message", "tc", "0", "whitelist_del", "debian"]
    assert whitelist(fake, "debian") == set()
    assert not os.path.exists(dm_host["state"] / "templates" / "debian.json")
    code, out, err = run(capsys, "template", "list")
    assert (code, out) == (EX_OK, "")


def test_dm_only_add_that_fails_midway_takes_back_what_it_sent(dm_host, capsys, monkeypatch):
    tree, fake = dm_host["tree"], dm_host["dm"]
    monkeypatch.setattr(dmsetup, "MESSAGE_BATCH", 14, raising=False)
    FakeWalker.RANGES[tree] = [(100, 8), (200, 8), (300, 8), (400, 8), (500, 8)]
    (fake / "fail_at").write_text("2")
    code, out, err = run(capsys, "template", "add", "debian", tree)
    assert code == EX_FAIL
    assert ("totalcowctl: dmsetup message tc 0 whitelist_add debian (2 ranges): "
            "device-mapper: message ioctl on tc  failed: Invalid argument\n") in err
    assert [m[3] for m in messages(fake)] == ["whitelist_add", "whitelist_add",
                                              "whitelist_del"]
    assert messages(fake)[2][4:] == ["debian", "100", "8", "200", "8"]
    assert whitelist(fake, "debian") == set()
    assert not os.path.exists(dm_host["state"] / "templates" / "debian.json")


def test_dm_only_add_of_a_recorded_template_and_of_a_plain_disk_are_refused(dm_host, capsys):
    tree, fake = dm_host["tree"], dm_host["dm"]
    FakeWalker.RANGES[tree] = [(100, 8)]
    assert run(capsys, "template", "add", "debian", tree)[0] == EX_OK
    code, out, err = run(capsys, "template", "add", "debian", tree)
    assert code == EX_FAIL
    assert "template refresh debian registers it again" in err
    assert len(messages(fake)) == 1

    code, out, err = run(capsys, "template", "add", "other", tree, "--device", "/dev/null")
    assert code == EX_USAGE  # not a block device
    FakeWalker.RDEV = PLAIN_RDEV
    code, out, err = run(capsys, "template", "add", "other", tree)
    assert code == EX_NOTTC
    assert "8:16 is not a device-mapper device" in err
    assert len(messages(fake)) == 1


def test_dm_only_refresh_that_fails_midway_leaves_the_old_ranges(dm_host, capsys, monkeypatch):
    tree, fake = dm_host["tree"], dm_host["dm"]
    monkeypatch.setattr(dmsetup, "MESSAGE_BATCH", 14, raising=False)
    old = [(100, 8), (200, 8), (300, 8), (400, 8)]
    FakeWalker.RANGES[tree] = old
    assert run(capsys, "template", "add", "debian", tree)[0] == EX_OK
    record = (dm_host["state"] / "templates" / "debian.json").read_text()
    # adds 100+300 (300 new), 500+600, then deletes 200+400 (the 5th message fails)
    FakeWalker.RANGES[tree] = [(100, 12), (300, 8), (500, 8), (600, 8)]
    (fake / "fail_at").write_text("5")
    code, out, err = run(capsys, "template", "refresh", "debian")
    assert code == EX_FAIL
    assert "whitelist_del debian (2 ranges): device-mapper: message ioctl on tc  failed: " \
        "Invalid argument" in err
    assert whitelist(fake, "debian") == sectors(old)
    assert (dm_host["state"] / "templates" / "debian.json").read_text() == record


def test_dm_only_refresh_registers_again_what_a_reboot_forgot(dm_host, capsys):
    tree, fake = dm_host["tree"], dm_host["dm"]
    FakeWalker.RANGES[tree] = [(100, 8), (200, 8)]
    assert run(capsys, "template", "add", "debian", tree)[0] == EX_OK
    (fake / "wl").unlink()  # the table was reloaded
    FakeWalker.RANGES[tree] = [(100, 8), (300, 8)]
    code, out, err = run(capsys, "template", "refresh", "debian")
    assert code == EX_OK, err
    assert whitelist(fake, "debian") == sectors([(100, 8), (300, 8)])
    assert "1 of the 1 stale ranges recorded for template debian are left alone" in err

    (fake / "wl").unlink()
    code, out, err = run(capsys, "template", "del", "debian")
    assert code == EX_OK
    assert "template debian was not registered on tc" in err
    assert not os.path.exists(dm_host["state"] / "templates" / "debian.json")
    code, out, err = run(capsys, "template", "del", "debian")
    assert code == EX_NOENT
    assert "no record of template debian" in err

    # A record without ranges (an older totalcowctl's): refresh could not
    # take back a failure exactly, so it refuses and sends nothing.
    os.makedirs(dm_host["state"] / "templates", exist_ok=True)
    (dm_host["state"] / "templates" / "old.json").write_text(
        json.dumps({"device": "254:0", "paths": [tree]}))
    sent = len(messages(fake))
    code, out, err = run(capsys, "template", "refresh", "old")
    assert code == EX_FAIL
    assert "has no ranges" in err and "template del old, then template add it again" in err
    assert len(messages(fake)) == sent


def test_dmsetup_ranges_arithmetic():
    assert dmsetup.subtract([(0, 10), (20, 10)], [(5, 20)]) == [(0, 5), (25, 5)]
    assert dmsetup.subtract([(0, 10)], []) == [(0, 10)]
    assert dmsetup.subtract([(0, 10)], [(0, 10)]) == []
    assert dmsetup.subtract([(0, 10), (12, 2)], [(2, 2), (6, 1), (13, 5)]) == \
        [(0, 2), (4, 2), (7, 3), (12, 1)]
    dmsetup.MESSAGE_BATCH, saved = 12, dmsetup.MESSAGE_BATCH
    try:
        assert dmsetup.batches([(1, 2), (3, 4), (100, 200)]) == [[(1, 2), (3, 4)], [(100, 200)]]
    finally:
        dmsetup.MESSAGE_BATCH = saved


def test_module_version_is_the_dkms_package_version():
    dm = os.path.join(TOP, "module", "dm")
    with open(os.path.join(dm, "dkms.conf")) as f:
        package = re.search(r'^PACKAGE_VERSION="([^"]+)"$', f.read(), re.M)
    with open(os.path.join(dm, "dm-totalcow-target.c")) as f:
        module = re.findall(r'^MODULE_VERSION\("([^"]+)"\);$', f.read(), re.M)
    assert package and module == [package.group(1)]


# extents: subvolumes in sharing scopes (tools/totalcow/commands/extents.py)

@pytest.fixture
def fake_extents(tmp_path, monkeypatch):
    """A sysfs extents/ directory whose enable and disable record what is
    written, and fail for paths listed in `refuse` with the errno given."""
    base = tmp_path / "sysfs"
    (base / "extents").mkdir(parents=True)
    (base / "extents" / "scopes").write_text(
        "e75ad9e5-6a78-4656-a494-a2eebb892d3d default pages 4096 compressed_pages 1024 "
        "reads 4096 read_failures 0 invalidations 3 aliased 8192 resolved 9000 mmaps_shared 2 "
        "mmaps_private 1 "
        "subvolumes 5 257 followed 300 301\n"
        "e75ad9e5-6a78-4656-a494-a2eebb892d3d tenant-b pages 0 compressed_pages 0 "
        "reads 0 read_failures 1 invalidations 0 aliased 0 resolved 0 mmaps_shared 0 "
        "mmaps_private 0 subvolumes 258 followed\n")
    monkeypatch.setattr(config, "SYSFS", str(base))
    state = {"written": [], "refuse": {}}
    real_open = open

    def fake_open(path, mode="r", *args, **kw):
        path = str(path)
        name = os.path.basename(path)
        if path.startswith(str(base / "extents")) and name in ("enable", "disable") \
                and "w" in mode:
            class W:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

                def write(self, data):
                    scope, p = data.decode().rstrip("\n").split(" ", 1)
                    if (name, p) in state["refuse"]:
                        e = state["refuse"][(name, p)]
                        raise OSError(e, os.strerror(e))
                    state["written"].append((name, scope, p))
                    return len(data)
            return W()
        return real_open(path, mode, *args, **kw)
    monkeypatch.setattr("builtins.open", fake_open)
    return state


def test_extents_enable_writes_each_subvolume_path_to_the_scope(fake_extents, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b with space"
    a.mkdir()
    b.mkdir()
    assert cli.main(["extents", "enable", "--scope", "tenant-a", str(a), str(b)]) == EX_OK
    assert fake_extents["written"] == [("enable", "tenant-a", str(a)),
                                       ("enable", "tenant-a", str(b))]
    assert cli.main(["extents", "disable", str(a)]) == EX_OK
    assert fake_extents["written"][-1] == ("disable", "default", str(a))


def test_extents_enable_is_all_or_nothing(fake_extents, tmp_path, capsys):
    import errno
    a, b, c = (tmp_path / n for n in "abc")
    for d in (a, b, c):
        d.mkdir()
    fake_extents["refuse"][("enable", str(c))] = errno.EEXIST
    assert cli.main(["extents", "enable", str(a), str(b), str(c)]) == EX_FAIL
    # a and b were enabled, then disabled again, last first.
    assert fake_extents["written"] == [("enable", "default", str(a)),
                                       ("enable", "default", str(b)),
                                       ("disable", "default", str(b)),
                                       ("disable", "default", str(a))]
    err = capsys.readouterr().err
    assert f"extents enable default {c}: its subvolume is in a scope already" in err


@pytest.mark.parametrize("errno_name,code,said", [
    ("EOPNOTSUPP", EX_NOTTC, "its file system cannot share extents"),
    ("EBUSY", EX_FAIL, "its subvolume holds a group's template"),
    ("EPERM", 5, "Operation not permitted"),
    ("EINVAL", EX_FAIL, "Invalid argument"),
])
def test_extents_refusals_keep_the_kernels_reason(fake_extents, tmp_path, capsys,
                                                  errno_name, code, said):
    import errno
    fake_extents["refuse"][("enable", str(tmp_path))] = getattr(errno, errno_name)
    assert cli.main(["extents", "enable", str(tmp_path)]) == code
    assert said in capsys.readouterr().err


def test_extents_disable_of_a_subvolume_not_in_the_scope(fake_extents, tmp_path, capsys):
    import errno
    fake_extents["refuse"][("disable", str(tmp_path))] = errno.ENOENT
    assert cli.main(["extents", "disable", "--scope", "x", str(tmp_path)]) == EX_NOENT
    assert "its subvolume is not in scope x" in capsys.readouterr().err


def test_extents_list_reads_the_kernels_scopes(fake_extents, capsys):
    assert cli.main(["extents", "list", "--json"]) == EX_OK
    ss = json.loads(capsys.readouterr().out)
    assert [(s["scope"], s["subvolumes"], s["followed"], s["pages"], s["compressed_pages"],
             s["aliased"]) for s in ss] == \
        [("default", [5, 257], [300, 301], 4096, 1024, 8192), ("tenant-b", [258], [], 0, 0, 0)]
    assert cli.main(["extents", "list"]) == EX_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split("\t")[1:5] == ["default", "subvolumes 5,257", "followed 300,301",
                                       "16.0 MiB cached"]
    assert out[1].split("\t")[3] == "followed -"


@pytest.mark.parametrize("args,code,said", [
    (("extents", "enable", "/tmp"), EX_NOTTC, "shared extents are not in this kernel "
     "(/nonexistent/sysfs/extents is absent)"),
    (("extents", "list"), EX_NOTTC, "shared extents are not in this kernel"),
    (("extents", "enable", "/nonexistent"), EX_NOENT, "/nonexistent: no such file or directory"),
    (("extents", "enable", "--scope", "a/b", "/tmp"), EX_USAGE, "invalid scope name"),
    (("extents", "enable", "--scope", "x" * 33, "/tmp"), EX_USAGE, "invalid scope name"),
    (("extents", "enable"), EX_USAGE, "the following arguments are required: PATH"),
])
def test_extents_errors_as_documented(args, code, said, tmp_path):
    r = ctl(*args, tmp_path=tmp_path)
    assert r.returncode == code, r.stderr
    assert said in r.stderr, r.stderr

# The page size is the kernel's.

PAGE_SIZES = (4096, 16384, 65536)


def kernel_page_size(monkeypatch, page):
    """A kernel whose pages are page bytes (as arm64's and ppc64's may be)."""
    real = os.sysconf
    monkeypatch.setattr(features.os, "sysconf",
                        lambda name: page if name == "SC_PAGE_SIZE" else real(name))


@pytest.fixture
def fake_sysfs(tmp_path, monkeypatch):
    """An empty directory as /sys/kernel/mm/totalcow, a state directory."""
    base = tmp_path / "sysfs"
    base.mkdir()
    monkeypatch.setattr(config, "SYSFS", str(base))
    monkeypatch.setattr(config, "STATE", str(tmp_path / "state"))
    return base


def fake_group(base, name, pages_shared):
    d = base / "groups" / name
    d.mkdir(parents=True)
    (d / "template").write_text("/srv/t\n")
    (d / "members").write_text("/srv/m1\n/srv/m2\n")
    (d / "stats").write_text(f"pages_shared {pages_shared}\npolicy_bytes 0\nfiles_bound 3\n")
    (d / "auto").write_text("0\n")
    (d / "auto_members").write_text("")


@pytest.mark.parametrize("page", PAGE_SIZES)
def test_page_counts_are_shown_in_the_kernels_page_size(page, fake_sysfs, fake_dm, monkeypatch,
                                                       capsys):
    """Groups' pages_shared, scopes' pages and dm-totalcow's blocks (pages,
    TC_BLOCK_SIZE) are counts of the kernel's pages, not of 4 KiB."""
    kernel_page_size(monkeypatch, page)
    assert features.page_size() == page
    mib = lambda pages: f"{pages * page / 2**20:.1f} MiB"  # noqa: E731
    fake_group(fake_sysfs, "g", 256)
    code, out, _ = run(capsys, "group", "list")
    assert code == EX_OK
    assert out == f"g\t/srv/t\t2 members\t{mib(256)} shared\t3 files\n"
    assert mib(256) == {4096: "1.0 MiB", 16384: "4.0 MiB", 65536: "16.0 MiB"}[page]

    (fake_sysfs / "extents").mkdir()
    (fake_sysfs / "extents" / "scopes").write_text(
        "e75ad9e5 default pages 4096 aliased 10 read_failures 0 subvolumes 5 followed\n")
    code, out, _ = run(capsys, "extents", "list")
    assert out.split("\t")[4] == f"{mib(4096)} cached"

    (fake_dm / "devices").write_text('["tc"]')  # 0 of 256 blocks cached
    code, out, _ = run(capsys, "status")
    assert code == EX_OK
    assert out.startswith(f"tc: 0.0/{mib(256)} cached, hit rate 0.0%")

    records.CONTAINERS.save("ct", {"name": "ct", "lxcpath": "/l", "rootfs": "/srv/t",
                                   "uuid": "u", "group": "g", "dm": False, "hooks": True,
                                   "auto": False})
    code, out, _ = run(capsys, "container", "list")
    assert out == f"ct\t/srv/t\tgroup g\t2 members\t{mib(256)} shared\tdm no\n"


@pytest.mark.parametrize("page", PAGE_SIZES)
def test_add_extents_writes_are_each_less_than_one_of_the_kernels_pages(page, monkeypatch):
    """sysfs passes a store one page at most: every add_extents write fits
    in one, and fills it (on 64 KiB pages, 16 times fewer writes)."""
    kernel_page_size(monkeypatch, page)
    writes = []
    monkeypatch.setattr(sysfs, "write", lambda rel, text, *a, **kw: writes.append((rel, text)))
    ranges = [(10**9 + 100 * i, 8) for i in range(20000)]
    sysfs.register("debian", RDEV, ranges)
    assert writes[0] == ("templates/register", "debian 254:0\n")
    adds = [text for rel, text in writes[1:] if rel == "templates/add_extents"]
    assert len(adds) == len(writes) - 1
    assert all(text.startswith("debian ") and text.endswith("\n") for text in adds)
    assert all(len(text.encode()) < page for text in adds)
    assert all(len(text.encode()) > page - 20 for text in adds[:-1])
    words = [int(w) for text in adds for w in text.split()[1:]]
    assert list(zip(words[::2], words[1::2])) == ranges


# Bugs the unification fixed.

def test_a_sysfs_file_the_kernel_lacks_is_never_created(fake_sysfs):
    """A write opens the file as it is: on a kernel that predates it, it
    says so (exit 4), where creating it would have failed with EACCES in
    sysfs (or, in a test's directory, made a file)."""
    (fake_sysfs / "groups" / "g").mkdir(parents=True)
    with pytest.raises(Fail) as e:
        sysfs.group_write("remove", "g /srv/m\n")
    assert (e.value.code, str(e.value)) == \
        (EX_NOTTC, f"{fake_sysfs}/groups/remove is missing: the kernel predates it")
    with pytest.raises(Fail) as e:
        sysfs.group_set_auto("g", True)
    assert e.value.code == EX_NOTTC and "predates automatic membership" in str(e.value)
    with pytest.raises(Fail) as e:
        sysfs.group_set_auto("h", True)
    assert (e.value.code, str(e.value)) == (EX_NOENT, "no group 'h'")
    assert sorted(p.name for p in (fake_sysfs / "groups").rglob("*")) == ["g"]
    with pytest.raises(Fail) as e:
        sysfs.template_write("register", "t 254:0\n")
    assert (e.value.code, str(e.value)) == \
        (EX_NOTTC, f"{fake_sysfs} is missing: is the kernel built with TOTALCOW_SYSFS?")
    assert not (fake_sysfs / "templates").exists()

def test_records_are_written_whole_and_listed_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "STATE", str(tmp_path))
    store = records.TEMPLATES
    store.save(".dot", {"device": "254:0"})  # a valid template name
    store.save("b", {"device": "254:1"})
    assert store.items() == [(".dot", {"device": "254:0"}), ("b", {"device": "254:1"})]
    # A save that fails half way (JSON cannot write an object) leaves the
    # old record as it was, and no temporary file.
    with pytest.raises(TypeError):
        store.save("b", {"device": "254:2", "paths": [object()]})
    assert store.load("b") == {"device": "254:1"}
    assert sorted(os.listdir(tmp_path / "templates")) == [".dot.json", "b.json"]
    assert records.device_of(store.load("b")) == os.makedev(254, 1)
    store.delete("b")
    store.delete("b")
    assert [n for n, _ in store.items()] == [".dot"]
    with pytest.raises(Fail) as e:
        store.load("b")
    assert (e.value.code, str(e.value)) == (EX_NOENT, f"no record of template b in {tmp_path}")
    with pytest.raises(Fail) as e:
        records.CONTAINERS.load("ct")
    assert str(e.value) == f"ct is not a template (no {tmp_path}/containers/ct.json)"


# One of each: one sysfs writer with one errno map, one feature probe, one
# output module; command groups that register their own commands and call
# each other's functions, not their command lines.

@pytest.mark.parametrize("err,code", [
    ("ENOENT", EX_NOENT), ("EPERM", 5), ("EACCES", 5), ("ENODEV", EX_NOTTC),
    ("EOPNOTSUPP", EX_NOTTC), ("EINVAL", EX_FAIL), ("ENOSPC", EX_FAIL), ("EXDEV", EX_FAIL),
])
def test_every_sysfs_write_maps_the_kernels_errno_to_one_exit_code(err, code, fake_sysfs,
                                                                   monkeypatch):
    import errno
    e = getattr(errno, err)

    class Refusing:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(e, os.strerror(e))
    monkeypatch.setattr(sysfs, "open", lambda *a, **kw: Refusing(), raising=False)
    (fake_sysfs / "extents").mkdir()
    for write in (lambda: sysfs.template_write("register", "t 254:0\n"),
                  lambda: sysfs.group_write("create", "g /srv/t\n"),
                  lambda: sysfs.group_set_auto("g", True),
                  lambda: sysfs.extents_write("enable", "default", "/srv/t")):
        with pytest.raises(Fail) as refused:
            write()
        assert refused.value.code == code == sysfs.exit_code(e), str(refused.value)
    assert sysfs.EXIT_CODES.get(e, EX_FAIL) == code

def test_one_probe_tells_each_layer_and_what_it_needs(fake_sysfs):
    layers = (features.TEMPLATES, features.GROUPS, features.GROUP_REMOVE, features.EXTENTS)
    assert not any(features.has(f) for f in layers)
    for f, says in ((features.TEMPLATES, "is the kernel built with TOTALCOW_SYSFS?"),
                    (features.GROUPS, "page-cache sharing is not in this kernel"),
                    (features.EXTENTS, "shared extents are not in this kernel"),
                    (features.GROUP_REMOVE, "groups/remove is missing: the kernel predates it")):
        with pytest.raises(Fail) as e:
            features.need(f)
        assert e.value.code == EX_NOTTC and says in str(e.value)
    (fake_sysfs / "groups").mkdir()
    assert features.has(features.GROUPS) and not features.has(features.GROUP_REMOVE)
    (fake_sysfs / "groups" / "remove").write_text("")
    assert features.has(features.GROUP_REMOVE)

def test_each_command_group_registers_its_own_commands():
    from totalcow import args
    for module in commands.GROUPS:
        ap = args.Parser(prog="totalcowctl")
        sub = args.subcommands(ap, "cmd")
        module.register(sub)
        assert list(sub.choices) == [module.__name__.rsplit(".", 1)[1]]
    top = [a for a in cli.parser()._actions if a.dest == "cmd"][0]
    assert list(top.choices) == ["template", "group", "extents", "status", "container"]

def test_no_command_calls_another_through_a_hand_built_namespace():
    package = os.path.join(TOP, "tools", "totalcow")
    for d, _, files in os.walk(package):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f)) as src:
                    assert "Namespace(" not in src.read(), os.path.join(d, f)

def test_a_container_template_is_registered_again_through_template_add(fake_sysfs,
                                                                      monkeypatch, capsys):
    """restore and the hooks recreate a recorded template's dm registration
    with the function template add runs, not with its command line."""
    fake_group(fake_sysfs, "ct", 0)
    (fake_sysfs / "templates").mkdir()
    calls = []
    monkeypatch.setattr(commands.template, "add",
                        lambda *a, **kw: calls.append((a, kw)) or EX_OK)
    rec = {"name": "ct", "rootfs": "/srv/ct", "group": "ct", "dm": True, "auto": False}
    assert commands.container.ensure_template(rec) == ["dm template"]
    assert calls == [(("ct", ["/srv/ct"]), {"quiet": True})]

def test_listings_are_text_or_json(capsys):
    class A:
        json = False
    assert output.listing(A, [1, 2], lambda xs: (f"n {x}" for x in xs)) == EX_OK
    assert capsys.readouterr().out == "n 1\nn 2\n"
    A.json = True
    output.listing(A, [1, 2], None)
    assert json.loads(capsys.readouterr().out) == [1, 2]
    assert output.sectors_mib(2048) == "1.0"
