"""bench/readme: bench/README.md's generated sections are the committed
results' tables, byte for byte; a stale or missing source is reported."""

import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "bench"))

from importlib.machinery import SourceFileLoader  # noqa: E402

readme = SourceFileLoader("readme", os.path.join(TOP, "bench", "readme")).load_module()

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
    new, stale, missing = readme.render(text)
    assert stale == ["results/share-scale.md"] and missing == ["results/nosuch.md"]
    assert new == ("intro\n" + HEAD.format("share-scale.md") + body + END
                   + "\nmiddle\n" + HEAD.format("nosuch.md") + "old\n" + END + "\n")
    again, stale, _ = readme.render(new)
    assert again == new and stale == []
