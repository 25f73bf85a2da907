# shellcheck shell=bash
# Sourced by the 7.3 sharing scripts (tests/guest/share/share-*.sh).
#
# read_counted MEMBER SOURCE: drop the page cache, read SOURCE (the shared
# pages are then cached), then read MEMBER and count what that read cost.
# Sets READ_BYTES (bytes read from $DISK0 by the member's read), OWN_PAGES
# (pages in the member's own page cache afterwards: cachestat) and SUM
# (the member's sha256).
read_counted() {
	local rd0 rd1
	echo 1 > /proc/sys/vm/drop_caches
	cat "$2" > /dev/null
	rd0=$(sectors_read "$DISK0")
	SUM=$(sha256sum < "$1" | cut -d' ' -f1)
	rd1=$(sectors_read "$DISK0")
	READ_BYTES=$(((rd1 - rd0) * 512))
	OWN_PAGES=$(python3 "$TOTALCOW_TOP/tests/guest/share/share-backing-file.py" cached "$1")
}
