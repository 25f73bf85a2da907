"""What pip and make deb build, on the host, without installing them:
pip's wheel of totalcowctl (pyproject.toml) holds the package, the
totalcowctl entry point and the manual page, and runs from a prefix; the
two Debian packages hold what DKMS and a user need and nothing of the
in-tree kernel build; every version of the project is the same; and
dkms.conf takes the kernels the module is for. tests/packaging/test_packages.py
installs the Debian packages in a Debian 12 root."""

import configparser
import os
import re
import shutil
import subprocess
import tomllib
import zipfile

import pytest

# This and tests/packaging/test_packages.py may install the packaging tools
# (tests/vm/install-deb-deps): on one pytest-xdist worker, one apt at a time.
pytestmark = pytest.mark.xdist_group("deb")

from vmrun import TOP  # noqa: E402
DM = os.path.join(TOP, "module", "dm")
# Debian's python3, setuptools and wheel: pip's build needs no network
# (--no-build-isolation, --no-index).
PYTHON = "/usr/bin/python3"
PIP = [PYTHON, "-m", "pip", "--disable-pip-version-check", "--no-input"]


def project_version():
    with open(os.path.join(TOP, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["version"]


def dkms_conf(key):
    with open(os.path.join(DM, "dkms.conf")) as f:
        return re.search(rf'^{key}="([^"]*)"$', f.read(), re.M).group(1)


def need_build_tools():
    """The tools make deb and pip's build need: installed as the make
    targets do when root (tests/vm/install-deb-deps), else the test skips."""
    deps = os.path.join(TOP, "tests", "vm", "install-deb-deps")
    if subprocess.run([deps, "--check"], capture_output=True).returncode == 0:
        return
    if os.geteuid() != 0:
        pytest.skip("packaging tools missing (tests/vm/install-deb-deps as root)")
    r = subprocess.run([deps], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_version_is_the_same():
    changelog = os.path.join(TOP, "debian", "changelog")
    debian = subprocess.run(["dpkg-parsechangelog", "-l", changelog, "-S", "Version"],
                            capture_output=True, text=True, check=True).stdout.strip()
    upstream = re.sub(r"-[^-]+$", "", debian)  # a Debian revision, if any
    assert project_version() == dkms_conf("PACKAGE_VERSION") == upstream


@pytest.mark.parametrize("krel,builds", [
    ("6.1.0-56-amd64", True),           # Debian 12
    ("6.12.117+deb12-amd64", True),     # Debian 12 security, backports; Debian 13
    ("6.18.44-generic", True),
    ("7.3.4+deb13-amd64", True),        # Debian 13 backports
    ("10.0.1", True),
    ("6.0.19-amd64", False),
    ("5.10.0-30-amd64", False),
    ("4.19.0-27-amd64", False),
])
def test_dkms_builds_for_61_and_later(krel, builds):
    # dkms matches with bash's =~ (POSIX extended regular expressions).
    r = subprocess.run(["bash", "-c", '[[ $1 =~ $2 ]]', "-", krel,
                        dkms_conf("BUILD_EXCLUSIVE_KERNEL")])
    assert (r.returncode == 0) == builds, krel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """pip's wheel, built from a copy of what pyproject.toml names (a
    setuptools build writes build/ and an egg-info into its source tree)."""
    need_build_tools()
    src = tmp_path_factory.mktemp("src")
    shutil.copy(os.path.join(TOP, "pyproject.toml"), src)
    shutil.copytree(os.path.join(TOP, "tools", "totalcow"), src / "tools" / "totalcow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (src / "docs").mkdir()
    shutil.copy(os.path.join(TOP, "docs", "totalcowctl.8"), src / "docs")
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-w", str(out), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(out.glob("*.whl"))
    assert [w.name for w in wheels] == [f"totalcowctl-{project_version()}-py3-none-any.whl"]
    return wheels[0]


def package_modules():
    """Every module of the package, subpackages' too, as paths from the
    directory that holds totalcow/ ("totalcow/commands/template.py")."""
    tools = os.path.join(TOP, "tools")
    return {os.path.relpath(os.path.join(d, f), tools)
            for d, _, files in os.walk(os.path.join(tools, "totalcow"))
            for f in files if f.endswith(".py")}


def test_the_wheel_holds_the_package_the_entry_point_and_the_manual(wheel):
    version = project_version()
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = z.read(f"totalcowctl-{version}.dist-info/entry_points.txt").decode()
    modules = package_modules()
    assert "totalcow/commands/template.py" in modules
    assert modules <= names, sorted(modules - names)
    assert f"totalcowctl-{version}.data/data/share/man/man8/totalcowctl.8" in names
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert dict(scripts["console_scripts"]) == {"totalcowctl": "totalcow.cli:main"}


def test_pip_installs_a_totalcowctl_that_runs(wheel, tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run([*PIP, "install", "--no-deps", "--no-index", "--root-user-action=ignore",
                        "--prefix", str(prefix), str(wheel)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # Where in the prefix is the scheme's choice (Debian's adds local/).
    installed = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))
    [site] = [p for p in prefix.rglob("totalcow") if p.is_dir()]
    [script] = prefix.rglob("bin/totalcowctl")
    assert len(list(prefix.rglob("share/man/man8/totalcowctl.8"))) == 1, installed
    env = dict(os.environ, PYTHONPATH=str(site.parent), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "SYNOPSIS" in r.stdout and "EXIT STATUS" in r.stdout


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """{package: .deb} as make deb builds them (into a directory of this
    test's, so that a make deb's packages are left alone)."""
    need_build_tools()
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run([os.path.join(TOP, "tests", "deb", "build-packages"), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return {p.name.split("_")[0]: p for p in out.glob("*.deb")}


def deb_files(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    return {line.split()[5].removeprefix(".") for line in listing.splitlines()}


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True).stdout.strip()


def kbuild_sources():
    """The .c files of the module's objects (module/dm/Kbuild)."""
    with open(os.path.join(DM, "Kbuild")) as f:
        kbuild = f.read().replace("\\\n", " ")
    objects = re.search(r"^dm-totalcow-y\s*:=(.*)$", kbuild, re.M).group(1).split()
    return {o.removesuffix(".o") + ".c" for o in objects}


def test_the_dkms_package_holds_the_module_source_for_dkms(debs):
    deb = debs["dm-totalcow-dkms"]
    assert deb_field(deb, "Architecture") == "all"
    assert re.match(r"dkms\b", deb_field(deb, "Depends"))
    src = f"/usr/src/dm-totalcow-{dkms_conf('PACKAGE_VERSION')}/"
    files = deb_files(deb)
    headers = {f for f in os.listdir(DM) if f.endswith(".h")}
    assert {src + f for f in {"dkms.conf", "Kbuild"} | kbuild_sources() | headers} <= files
    in_tree_only = [f for f in files if f.endswith("_kunit.c") or f.endswith("Kconfig")]
    assert not in_tree_only
    # dkms.conf as it is in the tree (the version is not substituted).
    conf = subprocess.run(f"dpkg-deb --fsys-tarfile {deb} | tar -xO .{src}dkms.conf",
                          shell=True, capture_output=True, text=True, check=True).stdout
    with open(os.path.join(DM, "dkms.conf")) as f:
        assert conf == f.read()


def test_the_totalcowctl_package_holds_the_tool_and_its_manual(debs):
    deb = debs["totalcowctl"]
    assert deb_field(deb, "Architecture") == "all"
    depends = [d.strip().split()[0] for d in deb_field(deb, "Depends").split(",")]
    assert "dmsetup" in depends and any(d.startswith("python3") for d in depends)
    assert "btrfs-progs" in deb_field(deb, "Recommends")
    files = deb_files(deb)
    assert {"/usr/bin/totalcowctl", "/usr/share/man/man8/totalcowctl.8.gz"} <= files
    site = "/usr/lib/python3/dist-packages/"
    missing = {site + m for m in package_modules()} - files
    assert not missing, sorted(missing)
