# shellcheck shell=bash
# Which Debian kernel each of our names means, and apt access to its
# packages without installing anything: sourced by tests/vm/fetch-headers
# (headers for the out-of-tree build) and tests/vm/fetch-stock-kernel
# (the kernel image the stock lane boots).
#
# The names (one kernel release each, looked up when called):
#   6.1          Debian 12's default kernel: the newest
#                linux-headers-6.1.0-<N>-amd64 in the host's apt lists
#   6.12         the installed linux-source-6.12's version (bookworm-security):
#                the kernel the test kernels come from
#   6.12-trixie  Debian 13's 6.12: the newest 6.12.<y>+deb13 in trixie and
#                trixie-security
#   newest       the newest <release>-amd64 in Debian 13's trixie-backports
#
# Debian 13's packages come through a private apt setup under
# $bdir/headers/apt (its own sources, lists, cache and an empty dpkg
# status; the host's apt configuration is not touched; the lists are
# refreshed when a day old). Needs $bdir and die().
: "${bdir:?tests/vm/debian-kernels.sh needs bdir, the build directory}"

DEBIAN_KERNEL_NAMES="6.1 6.12 6.12-trixie newest"

# The private apt setup for Debian 13: its own sources, lists, cache and
# an empty dpkg status, so that neither the host's installed packages nor
# its pins or sources enter into it. Sets APT_OPTS.
apt_private() {
	local d=$bdir/headers/apt suite stale=0
	mkdir -p "$d/sources.list.d" "$d/lists/partial" "$d/cache" "$d/empty"
	# trixie-security carries trixie's current 6.12 (a trixie machine
	# with security updates runs it), trixie-backports the newest kernel.
	cat > "$d/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-backports
Components: main
Architectures: amd64
Targets: Packages
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
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
	for suite in trixie trixie-backports trixie-security; do
		[ -n "$(find "$d/lists" -maxdepth 1 -name "*_dists_${suite}_main_binary-amd64_Packages*" -mmin -1440)" ] ||
			stale=1
	done
	[ $stale = 1 ] || return 0
	if ! apt-get "${APT_OPTS[@]}" update -q >/dev/null; then
		for suite in trixie trixie-backports trixie-security; do
			[ -n "$(find "$d/lists" -maxdepth 1 -name "*_dists_${suite}_main_binary-amd64_Packages*")" ] ||
				die "apt-get update of the private Debian 13 lists failed (no $suite list)"
		done
		echo "${0##*/}: WARNING: cannot refresh the Debian 13 lists; using the old ones" >&2
	fi
}

# The Version of package $1 that apt would download (its candidate).
candidate() {
	apt-cache "${APT_OPTS[@]}" show --no-all-versions "$1" 2>/dev/null |
		sed -n 's/^Version: //p'
}

# The newest package matching the extended regex $1 that apt knows.
newest_package() {
	apt-cache "${APT_OPTS[@]}" search --names-only "$1" | awk '{ print $1 }' | sort -V | tail -n 1
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
		[ -n "$pkg" ] || die "no linux-headers-6.1.0-*-amd64 in the host's apt lists (apt-get update)"
		;;
	6.12-trixie)
		apt_private
		pkg=$(newest_package '^linux-headers-6\.12\.[0-9]+\+deb13-amd64$')
		[ -n "$pkg" ] || die "no linux-headers-6.12.*+deb13-amd64 in trixie or trixie-security"
		;;
	newest)
		apt_private
		pkg=$(newest_package '^linux-headers-[0-9][0-9.]*\+deb[0-9]+-amd64$')
		[ -n "$pkg" ] || die "no linux-headers-*-amd64 in trixie-backports"
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
# extended regex $3, all of version $2 (one kernel build's packages).
with_depends() {
	local dep
	echo "$1=$2"
	for dep in $(apt-cache "${APT_OPTS[@]}" show "$1=$2" |
		     sed -n 's/^Depends: //p' | tr ',|' '\n' | awk '{ print $1 }' |
		     grep -E "$3" | sort -u); do
		echo "$dep=$2"
	done
}
