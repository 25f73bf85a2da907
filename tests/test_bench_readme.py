"""bench/readme: the generated sections of bench/README.md and README.md
are the committed results' tables and status, byte for byte; a stale or
missing source is reported."""

import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "bench"))

import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402

_loader = importlib.machinery.SourceFileLoader("readme", os.path.join(TOP, "bench", "readme"))
readme = importlib.util.module_from_spec(importlib.util.spec_from_loader("readme", _loader))
_loader.exec_module(readme)

HEAD = "<!-- generated from results/{} by bench/readme: do not edit -->\n"
END = "<!-- end generated -->"


def test_the_committed_readme_is_current():
    r = subprocess.run([os.path.join(TOP, "bench", "readme"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_stale_section_is_rewritten_and_a_missing_source_named():
    with open(os.path.join(TOP, "bench", "results", "share-scale.md")) as f:
        body = f.read().replace("\n## ", "\n#### ")
    if body.startswith("## "):
        body = "##" + body
    text = ("intro\n" + HEAD.format("share-scale.md") + "typed by hand\n" + END
            + "\nmiddle\n" + HEAD.format("nosuch.md") + "old\n" + END + "\n")
    new, stale, missing = readme.render(text, os.path.join(TOP, "bench"))
    assert stale == ["results/share-scale.md"] and missing == ["results/nosuch.md"]
    assert new == ("intro\n" + HEAD.format("share-scale.md") + body + END
                   + "\nmiddle\n" + HEAD.format("nosuch.md") + "old\n" + END + "\n")
    again, stale, _ = readme.render(new, os.path.join(TOP, "bench"))
    assert again == new and stale == []
