# shellcheck shell=bash
# Which Debian kernel each of our names means, and apt access to its
# packages without installing anything: sourced by tests/vm/fetch-headers
# (headers for the out-of-tree build), tests/vm/fetch-stock-kernel
# (the kernel image the stock lane boots), and for the pinned Linux
# sources by tests/vm/prepare-tree, tests/vm/series-applies and
# tests/vm/repin.
#
# The names (one kernel release each, looked up when called):
#   6.1          Debian 12's default kernel: the newest
#                linux-headers-6.1.0-<N>-amd64 in the host's apt lists
#                whose linux-image is there too
#   6.12         the pinned 6.12 (mm-patches/PIN: Debian 13's linux-source-6.12
#                at one version, from trixie or trixie-security): the
#                kernel the test kernels come from
#   6.12-trixie  Debian 13's 6.12: the newest 6.12.<y>+deb13 in trixie and
#                trixie-security
#   newest       the newest <release>-amd64 in Debian 13's trixie-backports
#
# "Newest" counts only releases whose linux-image package (the signed one)
# is published at the headers' version. Debian uploads the signed image
# separately, after the build it signs, so the headers of a new release
# can be in the lists for days before its image: on 2026-11-28
# bookworm-security had linux-headers-6.1.0-57-amd64 6.1.192-3 but only
# its -unsigned image, and linux-image-amd64 still named 6.1.0-56. A
# machine installs a release when its signed image comes, so that is
# when it becomes the one we test.
#
# Debian 13's packages come through a private apt setup under
# $bdir/headers/apt (its own sources, lists, cache and an empty dpkg
# status; the host's apt configuration is not touched; the lists are
# refreshed when a day old). Needs $bdir and die().
: "${bdir:?tests/vm/debian-kernels.sh needs bdir, the build directory}"
DEBIAN_KERNELS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

DEBIAN_KERNEL_NAMES="6.1 6.12 6.12-trixie newest"

# The private apt setup for Debian 13: its own sources, lists, cache and
# an empty dpkg status, so that neither the host's installed packages nor
# its pins or sources enter into it. Sets APT_OPTS. With arguments, one
# of its own for other suites: apt_private NAME "SUITES" "SECURITY_SUITES"
# (under $bdir/headers/apt-NAME; tests/vm/series-applies reads
# bookworm-security's this way, with lists of its own).
apt_private() {
	local d=$bdir/headers/apt${1:+-$1} suite stale=0
	local suites=${2:-trixie trixie-backports} security=${3:-trixie-security}
	mkdir -p "$d/sources.list.d" "$d/lists/partial" "$d/cache" "$d/empty"
	# trixie-security carries trixie's current 6.12 (a trixie machine
	# with security updates runs it), trixie-backports the newest kernel.
	cat > "$d/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suites
Components: main
Architectures: amd64
Targets: Packages
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $security
Components: main
Architectures: amd64
Targets: Packages
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	: > "$d/status"
	APT_OPTS=(-o Dir::Etc::SourceList=/dev/null
		  -o Dir::Etc::SourceParts="$d/sources.list.d"
		  -o Dir::Etc::Preferences=/dev/null
		  -o Dir::Etc::PreferencesParts="$d/empty"
		  -o Dir::State::Lists="$d/lists"
		  -o Dir::State::status="$d/status"
		  -o Dir::Cache="$d/cache"
		  -o APT::Architecture=amd64
		  -o Acquire::Languages=none
		  -o APT::Sandbox::User=root)
	for suite in $suites $security; do
		[ -n "$(find "$d/lists" -maxdepth 1 -name "*_dists_${suite}_main_binary-amd64_Packages*" -mmin -1440)" ] ||
			stale=1
	done
	[ $stale = 1 ] || return 0
	if ! apt-get "${APT_OPTS[@]}" update -q >/dev/null; then
		for suite in $suites $security; do
			[ -n "$(find "$d/lists" -maxdepth 1 -name "*_dists_${suite}_main_binary-amd64_Packages*")" ] ||
				die "apt-get update of the private lists failed (no $suite list)"
		done
		echo "${0##*/}: WARNING: cannot refresh the private lists ($suites $security); using the old ones" >&2
	fi
}

# The Version of package $1 that apt would download (its candidate).
candidate() {
	apt-cache "${APT_OPTS[@]}" show --no-all-versions "$1" 2>/dev/null |
		sed -n 's/^Version: //p'
}

# The newest linux-headers-<release> package matching the extended regex
# $1 that apt knows and whose linux-image-<release> apt has at the same
# version (see above: the signed image comes later than the headers).
newest_package() {
	local pkg ver
	for pkg in $(apt-cache "${APT_OPTS[@]}" search --names-only "$1" | awk '{ print $1 }' | sort -rV); do
		ver=$(candidate "$pkg")
		[ -n "$ver" ] || continue
		if [ "$(candidate "linux-image-${pkg#linux-headers-}")" = "$ver" ]; then
			echo "$pkg"
			return
		fi
	done
}

# Sets RELEASE (the kernel release, uname -r), VER (the version of its
# packages) and APT_OPTS for kernel name $1.
resolve_kernel() {
	local pkg=""
	APT_OPTS=()
	case "$1" in
	6.12)
		read_pin "$DEBIAN_KERNELS_TOP/mm-patches/PIN"
		RELEASE=$(pin_release "$PIN_VER") ||
			die "mm-patches/PIN: $PIN_VER is not a Debian 13 version of 6.12 (6.12.<y>-<n>)"
		VER=$PIN_VER
		apt_private
		apt-cache "${APT_OPTS[@]}" show "linux-headers-$RELEASE=$VER" >/dev/null 2>&1 ||
			die "no linux-headers-$RELEASE $VER (mm-patches/PIN) in trixie or trixie-security (make repin)"
		;;
	6.1)
		pkg=$(newest_package '^linux-headers-6\.1\.0-[0-9]+-amd64$')
		[ -n "$pkg" ] || die "no linux-headers-6.1.0-*-amd64 with its linux-image in the host's apt lists (apt-get update)"
		;;
	6.12-trixie)
		apt_private
		pkg=$(newest_package '^linux-headers-6\.12\.[0-9]+\+deb13-amd64$')
		[ -n "$pkg" ] || die "no linux-headers-6.12.*+deb13-amd64 with its linux-image in trixie or trixie-security"
		;;
	newest)
		apt_private
		pkg=$(newest_package '^linux-headers-[0-9][0-9.]*\+deb[0-9]+-amd64$')
		[ -n "$pkg" ] || die "no linux-headers-*-amd64 with its linux-image in trixie-backports"
		;;
	*)
		die "unknown kernel '$1' (one of: $DEBIAN_KERNEL_NAMES)"
		;;
	esac
	if [ -n "$pkg" ]; then
		RELEASE=${pkg#linux-headers-}
		VER=$(candidate "$pkg")
	fi
	[ -n "$VER" ] || die "no version of linux-headers-$RELEASE in the apt lists"
}

# read_pin FILE: the package and version a PIN file names (mm-patches/PIN,
# mm-patches/7.3/PIN: one line "linux-source-<X.Y> <Debian version>";
# blank lines and lines starting with # are skipped), in PIN_PKG and PIN_VER.
read_pin() {
	local line
	PIN_PKG="" PIN_VER=""
	[ -f "$1" ] || die "no $1"
	while read -r line; do
		case "$line" in ''|\#*) continue ;; esac
		read -r PIN_PKG PIN_VER line <<< "$line"
		break
	done < "$1"
	[[ $PIN_PKG =~ ^linux-source-[0-9]+\.[0-9]+$ ]] && [ -n "$PIN_VER" ] && [ -z "$line" ] ||
		die "$1: not \"linux-source-<X.Y> <version>\""
}

# pin_release VERSION: the kernel release (uname -r of Debian's amd64
# image) of a Debian 13 linux-source-6.12 version: 6.12.118-1 ->
# 6.12.118+deb13-amd64. Fails for any other (6.12.117-1~deb12u1 is
# Debian 12's, whose packages the private lists do not have).
pin_release() {
	[[ $1 =~ ^(6\.12\.[0-9]+)-[0-9]+$ ]] || return 1
	echo "${BASH_REMATCH[1]}+deb13-amd64"
}

# source_tarball PKG VER [WHAT]: sets TARBALL to the Linux tarball of
# package PKG (linux-source-<X.Y>) at version VER, unpacked from its .deb
# (never installed) into $bdir/src/PKG-VER once and kept there (150-250
# MB, with the package's Debian changelog in usr/share/doc/). The .deb comes through the apt lists
# APT_OPTS names if it is set (apt_private ... first), else Debian 13's
# private ones; WHAT, for the error message, says where VER came from.
source_tarball() {
	local pkg=$1 ver=$2 what=${3:-$1 $2} src=$bdir/src/$1-$2
	TARBALL=$(ls "$src"/usr/src/"$pkg".tar.* 2>/dev/null | head -n 1 || true)
	[ -z "$TARBALL" ] || return 0
	[ -v APT_OPTS ] || apt_private
	apt-cache "${APT_OPTS[@]}" show "$pkg=$ver" >/dev/null 2>&1 ||
		die "no $pkg $ver in the apt lists ($what)"
	echo "${0##*/}: downloading $pkg $ver (about 150 MB, never installed) into $src" >&2
	rm -rf "$src" && mkdir -p "$src/deb"
	download "$src/deb" "$pkg=$ver"
	dpkg-deb -x "$src"/deb/"$pkg"_*.deb "$src"
	rm -rf "$src/deb"
	TARBALL=$(ls "$src"/usr/src/"$pkg".tar.* 2>/dev/null | head -n 1 || true)
	[ -n "$TARBALL" ] || die "$pkg $ver has no /usr/src/$pkg.tar.*"
}

# apt-get download "$@" into directory $1, quietly; once more after an
# apt-get update of the host's lists if that fails (private lists are
# fresh already).
download() {
	local dir=$1
	shift
	if ! (cd "$dir" && apt-get "${APT_OPTS[@]}" download -q "$@" >/dev/null 2>&1); then
		[ ${#APT_OPTS[@]} -eq 0 ] || die "cannot download $*"
		apt-get update -q >/dev/null
		(cd "$dir" && apt-get download -q "$@" >/dev/null 2>&1) ||
			die "cannot download $*"
	fi
}

# The packages of $1=$2 and those it depends on whose names match the
# extended regex $3: one kernel build's packages. A dependency pinned
# with "=" is taken at that version; any other is taken at the version
# apt would download, which must satisfy the constraint. Packages whose
# name carries no ABI (linux-kbuild-6.1) keep only their newest version
# in the archive: linux-headers-6.1.0-56-amd64 6.1.192-2 needs
# linux-kbuild-6.1 (>= 6.1.192-2), and once 6.1.192-3 was uploaded
# 6.1.192-2 of it could no longer be downloaded.
with_depends() {
	local name op ver have
	echo "$1=$2"
	while read -r name op ver; do
		[[ $name =~ $3 ]] || continue
		if [ "$op" = "=" ]; then
			echo "$name=$ver"
			continue
		fi
		have=$(candidate "$name")
		[ -n "$have" ] || die "no version of $name (a dependency of $1=$2) in the apt lists"
		[ -z "$op" ] || dpkg --compare-versions "$have" "$op" "$ver" ||
			die "$1=$2 needs $name ($op $ver); the apt lists have $have"
		echo "$name=$have"
	done < <(apt-cache "${APT_OPTS[@]}" show "$1=$2" |
		 sed -n 's/^Depends: //p' | tr ',|' '\n' |
		 sed -E 's/^ *([^ ]+)( *\(([<>=]+) *([^)]+)\))?.*$/\1 \3 \4/' | sort -u)
}
