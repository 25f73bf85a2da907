"""docs/totalcowctl.8, the manual page pip and the Debian package install,
is what tools/totalcowctl-manpage makes of the manual in
tools/totalcow/cli.py and of the parser itself: current, with a section
for every command the parser has, and clean for groff."""

import os
import re
import shutil
import subprocess

import pytest

from vmrun import TOP
PAGE = os.path.join(TOP, "docs", "totalcowctl.8")
GENERATOR = os.path.join(TOP, "tools", "totalcowctl-manpage")


def test_the_committed_page_is_current():
    r = subprocess.run([GENERATOR, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_synopsis_and_the_parsers_commands_are_the_same():
    with open(PAGE) as f:
        page = f.read()
    synopsis = subprocess.run([os.path.join(TOP, "tools", "totalcowctl"), "--help"],
                              capture_output=True, text=True, check=True).stdout
    synopsis = synopsis.split("SYNOPSIS\n", 1)[1].split("\n\n", 1)[0]
    # The manual's synopsis lines: the command's words (lower case) come
    # before its arguments (NAME, [--json]); "join|leave" is two commands.
    manual = set()
    for line in synopsis.splitlines():
        words = []
        for word in line.split()[1:]:
            if not re.fullmatch(r"[a-z|]+", word):
                break
            words.append(word)
        manual.update(" ".join(words[:-1] + [last]) for last in words[-1].split("|"))
    assert manual == set(re.findall(r"^\.SS (.+)$", page, re.M))


@pytest.mark.skipif(not shutil.which("groff"), reason="no groff (groff-base)")
def test_groff_renders_it_without_a_warning():
    r = subprocess.run(["groff", "-man", "-ww", "-z", PAGE], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
