# SPDX-License-Identifier: GPL-2.0-only
"""The command groups, one module each: each adds its commands to the
parser (register(sub)) and holds what they do. A command that needs
another's work calls its function (template.add(), group.create()), not
its command line."""

from . import container, extents, group, status, template

# The order of the manual's SYNOPSIS and of `totalcowctl --help`.
GROUPS = (template, group, extents, status, container)
