# shellcheck shell=bash
# Which Debian kernel each of our names means, and apt access to its
# packages without installing anything: sourced by tests/vm/fetch-headers
# (headers for the out-of-tree build) and tests/vm/fetch-stock-kernel
# (the kernel image the stock lane boots).
#
# The names (one kernel release each, looked up when called):
#   6.1          Debian 12's default kernel: the newest
#                linux-headers-6.1.0-<N>-amd64 in the host's apt lists
#                whose linux-image is there too
#   6.12         the installed linux-source-6.12's version (bookworm-security):
#                the kernel the test kernels come from
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
		VER=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)
		[ -n "$VER" ] || die "linux-source-6.12 is not installed (make deps)"
		# 6.12.117-1~deb12u1 -> kernel release 6.12.117+deb12-amd64
		RELEASE=$(echo "$VER" | sed -E 's/^([0-9.]+)-.*~deb([0-9]+)u[0-9]+$/\1+deb\2-amd64/')
		[ "$RELEASE" != "$VER" ] || die "cannot derive the kernel release from $VER"
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
