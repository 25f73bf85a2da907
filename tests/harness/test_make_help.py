"""`make help` lists every target of the Makefile with what it does,
made from the `##` comment on the target's own line, so that a target
cannot be added without saying what it is for."""

import os
import re
import subprocess

from vmrun import TOP
RULE = re.compile(r"^([a-z][a-z0-9_.-]*):(?!=)", re.M)


def help_rows():
    out = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=TOP,
                         capture_output=True, text=True, check=True).stdout
    return dict(m.groups() for m in re.finditer(r"^  ([a-z][a-z0-9_.-]*) {2,}(\S.*)$", out, re.M))


def test_every_target_says_what_it_does():
    with open(os.path.join(TOP, "Makefile")) as f:
        targets = set(RULE.findall(f.read()))
    rows = help_rows()
    assert targets, "no targets found in the Makefile"
    assert sorted(targets - set(rows)) == [], "targets without a ## comment on their line"
    assert sorted(set(rows) - targets) == []
    assert all(len(d) > 10 for d in rows.values())


def test_the_readme_names_make_help_not_a_target_table():
    with open(os.path.join(TOP, "README.md")) as f:
        text = f.read()
    assert "make help" in text
    assert "| target | what it does |" not in text
