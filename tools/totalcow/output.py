# SPDX-License-Identifier: GPL-2.0-only
"""What commands print: a listing as text lines or, with --json, as JSON;
the tool's one-line messages ("totalcowctl: ..."); sizes in MiB, of
sectors and of the kernel's pages."""

import json
import sys

from . import features
from .errors import EX_OK


def listing(a, data, lines):
    """Print data as JSON when the command was given --json, else the text
    lines that lines(data) yields, one a line."""
    if getattr(a, "json", False):
        print(json.dumps(data, indent=1))
    else:
        for line in lines(data):
            print(line)
    return EX_OK


def say(what, err=True):
    """A message of the tool's, on stderr (or, err=False, stdout: a hook's
    report, which LXC logs)."""
    print(f"totalcowctl: {what}", file=sys.stderr if err else sys.stdout)


def note(what):
    say(f"note: {what}")


def sectors_mib(sectors):
    return f"{sectors * 512 / 2**20:.1f}"


def pages_mib(pages):
    """pages of the kernel's page size, in MiB."""
    return f"{pages * features.page_size() / 2**20:.1f}"
