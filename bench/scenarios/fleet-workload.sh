# shellcheck shell=bash
# The fleet benchmarks' workload (sourced by bench/scenarios/lxc-fleet and
# engine-fleet): every container's init reads apt's 48 MiB Packages list
# (md5, read()), runs `apt-cache policy` (mmaps the 34 MiB pkgcache.bin
# and libapt-pkg), then execs a python3 that imports ~110 standard modules
# (C extensions, libssl, libsqlite3 ...), does a little work in them,
# writes its report to /fleet-out/<hostname> and keeps running.

# fleet_workload ROOT: install the workload into the Debian rootfs ROOT
# (/usr/local/sbin/fleet-init, its python, the /fleet-out mount point).
# Results go to a host directory bind-mounted at /fleet-out, so the
# containers' file systems are only read.
fleet_workload() {
	mkdir -p "$1"/usr/local/lib/fleet "$1"/fleet-out
cat > "$1"/usr/local/sbin/fleet-init <<'SH'
#!/bin/sh
export PYTHONDONTWRITEBYTECODE=1 LC_ALL=C.UTF-8
me=$(cat /proc/sys/kernel/hostname)
data=$(md5sum < /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages)
apt=$(apt-cache policy python3 libc6 perl-base apt dpkg libssl3 2>&1 | md5sum)
exec python3 /usr/local/lib/fleet/imports.py "/fleet-out/$me" "data=${data%% *} apt=${apt%% *}"
SH
chmod +x "$1"/usr/local/sbin/fleet-init
cat > "$1"/usr/local/lib/fleet/imports.py <<'PY'
"""Import many standard modules (pure Python from .pyc, C extensions and the
libraries they link), report, and stay running like a service."""
import hashlib
import importlib
import os
import signal
import sys

MODULES = """abc argparse array ast asyncio base64 bisect bz2 calendar cmath codecs
collections colorsys compileall concurrent.futures configparser contextlib copy
csv ctypes dataclasses datetime decimal difflib dis email email.mime.text
email.parser enum filecmp fnmatch fractions ftplib functools getopt gettext glob
graphlib gzip hashlib heapq hmac html html.parser http.client http.cookies
http.server imaplib inspect io ipaddress itertools json locale logging
logging.handlers lzma mailbox mimetypes mmap multiprocessing netrc numbers
operator optparse pathlib pickle pickletools pkgutil platform plistlib poplib
pprint pydoc queue quopri random re reprlib resource sched secrets select
selectors shelve shlex shutil signal smtplib socket socketserver sqlite3 ssl stat
statistics string struct subprocess symtable tarfile tempfile textwrap threading
timeit tokenize tomllib trace traceback typing unicodedata unittest urllib.parse
urllib.request uuid warnings wave weakref xml.dom.minidom xml.etree.ElementTree
xml.sax zipapp zipfile zlib zoneinfo""".split()

h = hashlib.md5()
for name in MODULES:
    m = importlib.import_module(name)
    h.update(f"{name}:{len(dir(m))};".encode())
# Touch the C code: a little work in the extensions that were loaded.
import decimal, json, sqlite3, ssl, unicodedata  # noqa: E401
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(1000)])
h.update(str(db.execute("select sum(x) from t").fetchone()).encode())
h.update(str(decimal.Decimal(1) / decimal.Decimal(7)).encode())
h.update(json.dumps({"ssl": ssl.OPENSSL_VERSION, "u": unicodedata.name("a")}).encode())
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{sys.argv[2]} py={h.hexdigest()} modules={len(sys.modules)}\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    signal.pause()
PY
}

# fleet_want ROOT: the data part every report must start with.
fleet_want() {
	local d
	d=$(md5sum < "$1"/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages)
	echo "data=${d%% *}"
}

# fleet_wait OUT NAMES...: wait (up to 300 s) until every NAME has written
# OUT/NAME; check that each report starts with $FLEET_WANT and equals the
# first report ever ($FLEET_REF, set then). Sets ms from FLEET_T0 (ns).
fleet_wait() {
	local out=$1 c left rep; shift
	for _ in $(seq 1 6000); do
		left=0
		for c in "$@"; do [ -s "$out/$c" ] || left=1; done
		[ $left = 0 ] && break
		sleep 0.05
	done
	[ $left = 0 ] || die "not all of $* reported within 300 s"
	ms=$(( ($(date +%s%N) - FLEET_T0) / 1000000 ))
	for c in "$@"; do
		read -r rep < "$out/$c"
		[ "${rep%% *}" = "$FLEET_WANT" ] || die "$c read the data file wrong: $rep"
		[ -n "${FLEET_REF:-}" ] || FLEET_REF=$rep
		[ "$rep" = "$FLEET_REF" ] || die "$c reported '$rep', the first one '$FLEET_REF'"
	done
}

# fleet_io_controllers: the io, memory and pids controllers enabled in the
# root cgroup, as a systemd host with IO accounting has them: each
# container then gets an I/O cgroup of its own wherever its engine puts
# it (the case where dm-totalcow's waiting rule matters: docs/
# dm-totalcow.rst, "I/O cgroups").
fleet_io_controllers() {
	echo "+io +memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
}

# fleet_io_cgroups: how many I/O cgroups the running workload processes
# are in. A process's I/O is charged to its cgroup if the io controller is
# enabled there (io in cgroup.controllers), else to the nearest ancestor
# that has it.
fleet_io_cgroups() {
	local pid cg
	local -A seen=()
	for pid in $(pgrep -f /usr/local/lib/fleet/imports.py); do
		cg=$(awk -F: '$1 == 0 { print $3 }' "/proc/$pid/cgroup" 2>/dev/null) || continue
		[ -n "$cg" ] || continue
		while [ "$cg" != / ] && ! grep -qw io "/sys/fs/cgroup$cg/cgroup.controllers"; do
			cg=$(dirname "$cg")
		done
		seen[$cg]=1
	done
	echo ${#seen[@]}
}

# fleet_dm_template NAME PATH / fleet_dm_untemplate NAME: the dm layer
# alone, as on a stock kernel with dm-totalcow from DKMS: totalcowctl
# whitelists PATH's extents with dmsetup messages (its route when the
# sysfs layer is absent; TOTALCOW_SYSFS points it elsewhere), no group,
# `admit first` (docs/dm-totalcow.rst: the policy for the dm layer alone).
fleet_dm_template() {
	TOTALCOW_SYSFS=/run/no-totalcow-sysfs TOTALCOW_STATE_DIR=/run/totalcow-dm \
		"$TOTALCOW_TOP/tools/totalcowctl" template add "$1" "$2" -q 2>/tmp/dm-template.err ||
		die "dm-only template add $2: $(cat /tmp/dm-template.err)"
	grep -q whitelist_add /tmp/dm-template.err ||
		die "template add did not take the dmsetup route: $(cat /tmp/dm-template.err)"
	dmsetup message tc 0 admit first
}
fleet_dm_untemplate() {
	TOTALCOW_SYSFS=/run/no-totalcow-sysfs TOTALCOW_STATE_DIR=/run/totalcow-dm \
		"$TOTALCOW_TOP/tools/totalcowctl" template del "$1" 2>/dev/null ||
		die "dm-only template del $1"
	[ "$(tc_stat tc templates)" = 0 ] || die "whitelist not empty after template del"
}
