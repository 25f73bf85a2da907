# SPDX-License-Identifier: GPL-2.0-only
"""Where TotalCOW lives on this host (environment overrides)."""

import os


SYSFS = os.environ.get("TOTALCOW_SYSFS", "/sys/kernel/mm/totalcow")
STATE = os.environ.get("TOTALCOW_STATE_DIR", "/var/lib/totalcow")
