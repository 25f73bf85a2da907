# shellcheck shell=bash
# A throwaway Debian 12 root for the package tests (sourced by
# tests/deb/test-packages and tests/deb/test-kernel-package). Under
# <build-dir>/deb-root:
#   base/      debootstrap --variant=minbase bookworm, from the host's
#              Debian mirror (its apt sources' bookworm entry); made once
#   NAME/      a fresh copy of base for every run of a test, with the
#              host's /proc, /dev and /dev/pts; apt sources: the host's
#              bookworm suites (updates, security, backports: whichever
#              the host has)
#   lists/, archives/  apt's lists and downloaded packages, kept between
#              runs (the lists are refreshed when a day old)
#   logs-NAME/ (logs/ for the root "run") every step's log
# The caller defines die() and say(), then:
#   deb_root_open BUILD_DIR NAME   the directories, the lock (one test at a
#                                  time: they share base and apt's caches)
#   deb_root_fresh DEB...          a fresh copy of the base as $run, the
#                                  DEBs in its /tmp/debs
#   in_root CMD..., apt_step NAME ARGS..., installed PKG, remove_run
CODENAME=bookworm
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# "URI SUITE" for every deb entry of the host's apt sources whose suite is
# bookworm or bookworm-*, from one-line (.list) and deb822 (.sources) files.
host_suites() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			           print $i, $(i + 1) }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'function flush(  n, m, i, j, u, s) {
			if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
				n = split(uris, u); m = split(suites, s)
				for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
			}
			types = uris = suites = enabled = ""
		     }
		     /^[ \t]*#/ { next }
		     /^[ \t]*$/ { flush(); next }
		     { field = tolower($1); value = $0; sub(/^[^:]*:[ \t]*/, "", value) }
		     field == "types:" { types = value }
		     field == "uris:" { uris = value }
		     field == "suites:" { suites = value }
		     field == "enabled:" { enabled = value }
		     END { flush() }' "$f"
	done | awk -v c="$CODENAME" '$2 == c || index($2, c "-") == 1' | sort -u
}

# Everything mounted below run/, deepest first.
mounts_below_run() {
	findmnt -rn -o TARGET | awk -v r="$run" '$0 == r || index($0, r "/") == 1' | sort -r
}
unmount_run() {
	local m
	for m in $(mounts_below_run); do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}
remove_run() {
	unmount_run
	# Never remove a tree with the host's /dev or the caches still in it.
	[ -z "$(mounts_below_run)" ] || die "cannot unmount $(mounts_below_run | tr '\n' ' ')"
	rm -rf --one-file-system "$run"
}
trap unmount_run EXIT

# In the root, with a clean environment (the host's PATH may hold pyenv's
# python3, its locale may not exist there).
in_root() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive chroot "$run" "$@"
}

# In the root, with a clean environment (the host's PATH may hold pyenv's
# python3, its locale may not exist there).
in_root() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive chroot "$run" "$@"
}

deb_root_open() {
	[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot, mounts)"
	command -v debootstrap >/dev/null || die "no debootstrap (tests/vm/install-deb-deps)"
	# Without symlinks, as findmnt names mounts (a mount below the root
	# that went unnoticed would be removed with it).
	mkdir -p "$1/deb-root"
	top=$(cd "$1/deb-root" && pwd -P)
	base=$top/base
	run=$top/$2
	logs=$top/logs-$2
	[ "$2" != run ] || logs=$top/logs
	mkdir -p "$logs" "$top/lists" "$top/archives"
	exec 9> "$top/lock"
	flock 9
	rm -f "$logs"/*.log
	suites=$(host_suites)
	mirror=$(echo "$suites" | awk -v c="$CODENAME" '$2 == c { print $1; exit }')
	if [ -z "$mirror" ]; then
		mirror=http://deb.debian.org/debian
		suites=$(printf '%s\n' "$mirror $CODENAME" "$mirror $CODENAME-updates" \
			 "http://deb.debian.org/debian-security $CODENAME-security")
		say "the host has no $CODENAME apt source; using deb.debian.org"
	fi
	trap unmount_run EXIT
}

deb_root_fresh() {
	local t what
	# The base: made once (cold), then copied (warm).
	if [ -f "$base/.complete" ]; then
		say "base: $base (cached)"
	else
		t=$(now)
		rm -rf --one-file-system "$base"
		debootstrap --variant=minbase "$CODENAME" "$base" "$mirror" > "$logs/debootstrap.log" 2>&1 ||
			{ tail -n 30 "$logs/debootstrap.log"; die "debootstrap $CODENAME $mirror failed"; }
		rm -f "$base"/var/cache/apt/archives/*.deb
		# No daemon starts in the root (invoke-rc.d asks policy-rc.d).
		printf '#!/bin/sh\nexit 101\n' > "$base/usr/sbin/policy-rc.d"
		chmod +x "$base/usr/sbin/policy-rc.d"
		# A kernel image's postinst builds an initramfs: a minute of CPU for a
		# root that never boots, and not what is tested here.
		chroot "$base" dpkg-divert --local --rename --add /usr/sbin/update-initramfs > /dev/null
		ln -s /bin/true "$base/usr/sbin/update-initramfs"
		touch "$base/.complete"
		say "base: debootstrap --variant=minbase $CODENAME $mirror ($(since "$t") s, cold)"
	fi

	t=$(now)
	remove_run
	cp -a "$base" "$run"
	rm -f "$run/.complete" "$run/etc/apt/sources.list"
	{
		echo "$suites" | while read -r uri suite; do
			printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n\n' \
				"$uri" "$suite" "$KEYRING"
		done
	} > "$run/etc/apt/sources.list.d/debian.sources"
	# What the host's apt needs to reach its mirror (a proxy; a mirror whose
	# Release files are past their Valid-Until) applies in the root too.
	apt-config dump Acquire::http::Proxy Acquire::https::Proxy \
		Acquire::Check-Valid-Until Acquire::Check-Date > "$run/etc/apt/apt.conf.d/50host-acquire"
	mount -t proc proc "$run/proc"
	mount --bind /dev "$run/dev"
	mount --bind /dev/pts "$run/dev/pts"
	mount --bind "$top/lists" "$run/var/lib/apt/lists"
	mount --bind "$top/archives" "$run/var/cache/apt/archives"
	mkdir -p "$run/tmp/debs"
	cp "$@" "$run/tmp/debs/"
	chmod 755 "$run/tmp/debs"
	chmod 644 "$run"/tmp/debs/*.deb
	if ! cmp -s "$run/etc/apt/sources.list.d/debian.sources" "$top/lists.sources" ||
	   [ -z "$(find "$top/lists" -maxdepth 1 -name '*Release' -mmin -1440)" ]; then
		in_root apt-get update -q > "$logs/update.log" 2>&1 ||
			{ tail -n 30 "$logs/update.log"; die "apt-get update in the root failed"; }
		cp "$run/etc/apt/sources.list.d/debian.sources" "$top/lists.sources"
		what="apt lists refreshed"
	else
		what="apt lists less than a day old"
	fi
	say "root: a fresh copy of the base; suites: $(echo "$suites" | awk '{ print $2 }' | xargs)"
	say "      ($what; $(since "$t") s)"
}

# apt-get in the root, logged to logs/<name>.log; fails the test unless
# it exits 0.
apt_step() {
	local name=$1 rc=0 t
	shift
	t=$(now)
	in_root apt-get -y -q --no-install-recommends "$@" > "$logs/$name.log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 40 "$logs/$name.log"
		die "apt-get $* exited $rc ($logs/$name.log)"
	fi
	STEP_TIME=$(since "$t")
}

# The version of package $1 installed in the root.
installed() {
	in_root dpkg-query -W -f='${Version}' "$1"
}

