# SPDX-License-Identifier: GPL-2.0-only
"""The command line's parts that every command group uses: the parser
class (usage errors in the manual's words, exit 2), a group's
subcommands, the arguments several commands share, and the rule for the
names that become kernel names."""

import argparse
import sys

from .errors import EX_USAGE


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(EX_USAGE)

    def _check_value(self, action, value):
        # argparse would name the argument by its internal name ("argument
        # cmd: invalid choice: ..."); say what the manual calls it.
        if action.choices is not None and value not in action.choices:
            what = "command" if isinstance(action, argparse._SubParsersAction) else action.dest
            raise argparse.ArgumentError(
                None, f"invalid {what} '{value}' (choose from {', '.join(action.choices)})")


def subcommands(parser, dest):
    """The subcommands of parser, not required by argparse (which would say
    "the following arguments are required: cmd"): cli.main() says which are
    missing in the manual's words."""
    sub = parser.add_subparsers(dest=dest, metavar="COMMAND", parser_class=Parser)
    parser.set_defaults(func=None, need_command=(parser, sub))
    return sub


HELP_TEMPLATE = "the template's name (1-64 of [A-Za-z0-9._:+-])"
HELP_GROUP = "the group's name (1-64 of [A-Za-z0-9._:+-])"
HELP_LXCPATH = "the LXC container directory (default: lxc-config lxc.lxcpath)"
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+-")


def kernel_name(p, help):
    """The NAME argument of a command whose name becomes a kernel name (a
    template's, a group's): cli.main() checks it with valid_name()."""
    p.add_argument("name", metavar="NAME", help=help)
    p.set_defaults(kernel_name=True)


def valid_name(name):
    return 0 < len(name) <= 64 and name not in (".", "..") and set(name) <= NAME_CHARS


def json_flag(p):
    p.add_argument("--json", action="store_true", help="machine-readable output")


def quiet_flag(p):
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on the terminal")
