# SPDX-License-Identifier: GPL-2.0-only
"""totalcowctl as a package: one concern per module (see cli.py for the
manual)."""
