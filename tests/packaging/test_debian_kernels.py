"""Which Debian kernel each of the stock lane's names means
(tests/vm/debian-kernels.sh), against a fake apt-cache: a release counts
only once its linux-image is published at its headers' version. Debian
uploads the signed image after the build it signs, so new headers can be
in the lists for days without it (6.1.0-57 on 2026-11-28: `make check`
then failed to download the image of the release it had built for).
And what the pin files (mm-patches/PIN, mm-patches/7.3/PIN) say."""

import os
import subprocess

import pytest

from vmrun import TOP

# A stand-in for apt-cache with two commands: `search --names-only RE`
# lists the packages of $FAKE_APT (one "name|version|depends" per line)
# whose name matches RE; `show [--no-all-versions] NAME[=VERSION]` prints
# the newest such package's version and depends (lines come newest first).
FAKE_APT_CACHE = r"""#!/bin/bash
while [ "${1#-}" != "$1" ]; do
	case $1 in -o) shift 2 ;; *) shift ;; esac
done
cmd=$1; shift
case $cmd in
search)
	[ "$1" = --names-only ] && shift
	awk -F'|' -v re="$1" '$1 ~ re { print $1 " - a package" }' "$FAKE_APT" ;;
show)
	[ "$1" = --no-all-versions ] && shift
	awk -F'|' -v p="${1%%=*}" -v v="${1#*=}" -v pinned="${1//[^=]/}" '
		$1 == p && (pinned == "" || $2 == v) && !done {
			print "Package: " $1; print "Version: " $2
			if ($3 != "") print "Depends: " $3
			done = 1
		}' "$FAKE_APT" ;;
esac
"""


def shell(tmp_path, packages, script):
    """Run SCRIPT after sourcing debian-kernels.sh, with PACKAGES (name ->
    version, or (version, depends); newest first) in the fake apt lists."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    fake = bindir / "apt-cache"
    fake.write_text(FAKE_APT_CACHE)
    fake.chmod(0o755)
    lists = tmp_path / "packages"
    rows = []
    for p, v in packages:
        v, deps = (v, "") if isinstance(v, str) else v
        rows.append(f"{p}|{v}|{deps}\n")
    lists.write_text("".join(rows))
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_APT=str(lists),
               bdir=str(tmp_path / "build"))
    r = subprocess.run(["bash", "-c", 'die() { echo "die: $*"; exit 1; }\n'
                        f". {TOP}/tests/vm/debian-kernels.sh\n" + script],
                       capture_output=True, text=True, env=env)
    return r.returncode, r.stdout.strip()


def resolve(tmp_path, packages, name="6.1"):
    """RELEASE and VER that resolve_kernel NAME gives."""
    return shell(tmp_path, list(packages.items()),
                 f'resolve_kernel {name}\necho "$RELEASE $VER"\n')


@pytest.mark.parametrize("packages, expected", [
    pytest.param({
        "linux-headers-6.1.0-56-amd64": "6.1.192-2",
        "linux-image-6.1.0-56-amd64": "6.1.192-2",
        "linux-headers-6.1.0-57-amd64": "6.1.192-3",
        "linux-image-6.1.0-57-amd64-unsigned": "6.1.192-3",
    }, "6.1.0-56-amd64 6.1.192-2", id="newest_headers_without_their_image_yet_are_passed_over"),
    # Sorted as versions, not as text: 6.1.0-100 is newer than 6.1.0-57.
    pytest.param({
        "linux-headers-6.1.0-57-amd64": "6.1.192-3",
        "linux-image-6.1.0-57-amd64": "6.1.192-3",
        "linux-headers-6.1.0-100-amd64": "6.1.250-1",
        "linux-image-6.1.0-100-amd64": "6.1.250-1",
    }, "6.1.0-100-amd64 6.1.250-1", id="newest_headers_with_their_image_are_chosen"),
    pytest.param({
        "linux-headers-6.1.0-56-amd64": "6.1.192-2",
        "linux-image-6.1.0-56-amd64": "6.1.192-1",
    }, None, id="an_image_of_another_version_does_not_count"),
])
def test_the_6_1_kernel_is_the_newest_with_its_image(tmp_path, packages, expected):
    rc, out = resolve(tmp_path, packages)
    if expected is None:
        assert rc == 1 and "with its linux-image" in out, out
    else:
        assert (rc, out) == (0, expected)


HEADERS_56 = ("6.1.192-2", "linux-headers-6.1.0-56-common (= 6.1.192-2), "
              "linux-kbuild-6.1 (>= 6.1.192-2), linux-compiler-gcc-12-x86")


def depends(tmp_path, packages):
    rc, out = shell(tmp_path, packages, "with_depends linux-headers-6.1.0-56-amd64 6.1.192-2 "
                    "'^linux-(headers|kbuild)-'\n")
    return rc, out.splitlines()


def test_a_build_takes_its_pinned_packages_and_the_newest_of_the_others(tmp_path):
    # The archive keeps only the newest linux-kbuild-6.1 (2026-11-28).
    rc, out = depends(tmp_path, [
        ("linux-headers-6.1.0-56-amd64", HEADERS_56),
        ("linux-headers-6.1.0-56-common", "6.1.192-2"),
        ("linux-kbuild-6.1", "6.1.192-3"),
        ("linux-compiler-gcc-12-x86", "6.1.192-3"),
    ])
    assert rc == 0, out
    assert out == ["linux-headers-6.1.0-56-amd64=6.1.192-2",
                   "linux-headers-6.1.0-56-common=6.1.192-2",
                   "linux-kbuild-6.1=6.1.192-3"]


def test_a_dependency_too_old_for_its_constraint_is_refused(tmp_path):
    rc, out = depends(tmp_path, [
        ("linux-headers-6.1.0-56-amd64", HEADERS_56),
        ("linux-headers-6.1.0-56-common", "6.1.192-2"),
        ("linux-kbuild-6.1", "6.1.176-1"),
    ])
    assert rc == 1 and "needs linux-kbuild-6.1 (>= 6.1.192-2)" in out[-1], out


def pin_file(path):
    """PIN_PKG, PIN_VER and the 6.12 kernel release ("-" for none) that
    read_pin and pin_release make of the PIN file PATH (mm-patches/PIN's
    format); neither looks at apt."""
    r = subprocess.run(["bash", "-c", 'die() { echo "die: $*"; exit 1; }\n'
                        f". {TOP}/tests/vm/debian-kernels.sh\nread_pin {path}\n"
                        'echo "$PIN_PKG $PIN_VER $(pin_release "$PIN_VER" || echo -)"\n'],
                       capture_output=True, text=True, env=dict(os.environ, bdir="/nonexistent"))
    return r.returncode, r.stdout.strip()


def pin(tmp_path, text):
    f = tmp_path / "PIN"
    f.write_text(text)
    return pin_file(f)


@pytest.mark.parametrize("text, expected", [
    pytest.param("linux-source-6.12 6.12.118-1\n",
                 "linux-source-6.12 6.12.118-1 6.12.118+deb13-amd64", id="debian_13"),
    pytest.param("# moved by make repin\n\nlinux-source-6.12 6.12.115-2\n",
                 "linux-source-6.12 6.12.115-2 6.12.115+deb13-amd64", id="comments_skipped"),
    # Debian 12's and a backport's versions have no packages in the
    # private lists of Debian 13: no release for them.
    pytest.param("linux-source-6.12 6.12.117-1~deb12u1\n",
                 "linux-source-6.12 6.12.117-1~deb12u1 -", id="debian_12_has_no_release"),
    pytest.param("linux-source-7.3 7.3.4-1~bpo13+1\n",
                 "linux-source-7.3 7.3.4-1~bpo13+1 -", id="7.3_backport"),
])
def test_a_pin_names_a_package_and_its_version(tmp_path, text, expected):
    assert pin(tmp_path, text) == (0, expected)


@pytest.mark.parametrize("text", [
    "linux-source-6.12\n", "6.12.118-1\n", "linux-image-6.12 6.12.118-1\n",
    "linux-source-6.12 6.12.118-1 extra\n", "",
])
def test_a_malformed_pin_is_refused(tmp_path, text):
    rc, out = pin(tmp_path, text)
    assert rc == 1 and "not \"linux-source-<X.Y> <version>\"" in out, out


def test_the_committed_pins_parse():
    # The 6.12 pin is a Debian 13 version (the stock lane's "6.12" and
    # deb-kernel-debian need its kernel release); the 7.3 pin a package.
    for path, release in (("mm-patches/PIN", True), ("mm-patches/7.3/PIN", False)):
        rc, out = pin_file(os.path.join(TOP, path))
        assert rc == 0, out
        pkg, ver, rel = out.split()
        assert pkg.startswith("linux-source-") and ver
        assert (rel != "-") == release, out

