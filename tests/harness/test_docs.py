"""The documents stand on their own: no issue numbers or files outside
the repository that a reader cannot follow, every relative link (and
heading anchor) resolves, and the design index names every design file."""

import glob
import os
import re

from vmrun import TOP
# docs/ABI and the manual page have owners of their own.
DOCS = sorted({"README.md", "bench/README.md", "Makefile"}
              | {os.path.relpath(p, TOP) for p in glob.glob(os.path.join(TOP, "docs", "**", "*.md"),
                                                            recursive=True)}
              | {os.path.relpath(p, TOP) for p in glob.glob(os.path.join(TOP, "docs", "*.rst"))})
ISSUE = re.compile(r"\bissues? ?#?\d+", re.I)
OUTSIDE = re.compile(r"\.\./shared/|design[- ]brief", re.I)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def read(path):
    with open(os.path.join(TOP, path)) as f:
        return f.read()


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return s.replace(" ", "-")


def anchors(path):
    return {slug(m) for m in re.findall(r"^#+ (.*)$", read(path), re.M)}


def test_no_issue_numbers_or_outside_files():
    found = [f"{p}:{n}: {line.strip()}" for p in DOCS
             for n, line in enumerate(read(p).splitlines(), 1)
             if ISSUE.search(line) or OUTSIDE.search(line)]
    assert found == []


def test_relative_links_resolve():
    broken = []
    for p in DOCS:
        if not p.endswith(".md"):
            continue
        for target in LINK.findall(read(p)):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(TOP, os.path.dirname(p), path))
            if not os.path.exists(full):
                broken.append(f"{p}: {target}")
            elif anchor and full.endswith(".md") and anchor not in anchors(os.path.relpath(full, TOP)):
                broken.append(f"{p}: {target} (no such heading)")
    assert broken == []


def test_the_design_index_names_every_design_file():
    index = read("docs/design/README.md")
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(TOP, "docs", "design", "*.md")))
    assert [f for f in files if f != "README.md" and f"]({f})" not in index] == []
