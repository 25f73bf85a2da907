"""bench/readme: the generated sections of bench/README.md, README.md and
docs/test-harness.md are the committed results' tables and summaries,
byte for byte; a stale or missing source is reported. README.md stays a
short front page: the demo's table is its only generated section (the
goals' summary is in bench/README.md, the last CI run in
docs/test-harness.md)."""

import importlib.machinery
import importlib.util
import os
import subprocess

from vmrun import TOP

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


def sources(path):
    with open(os.path.join(TOP, path)) as f:
        return readme.SECTION.findall(f.read())


def test_each_generated_section_is_where_its_reader_looks():
    assert [m[1] for m in sources("README.md")] == ["bench/results/demo.md"]
    assert [m[1] for m in sources("docs/test-harness.md")] == ["../bench/results/ci-time.md"]
    bench = [m[1] for m in sources("bench/README.md")]
    assert bench.index("results/status.md") < bench.index("results/goals.md")
    names = {os.path.relpath(p, TOP) for p in readme.READMES}
    assert names == {"README.md", "bench/README.md", "docs/test-harness.md"}


def test_the_front_page_stays_short():
    with open(os.path.join(TOP, "README.md")) as f:
        words = len(f.read().split())
    assert words <= 1300, f"README.md has {words} words; details belong in docs/"
