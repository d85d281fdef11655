"""`make html` (tools/build_site.py): a tiny fixture notebook is executed and rendered for real; the
real notebooks are rendered without executing them (they run under nbmake and in the browser test)."""

from __future__ import annotations

import doctest
import html
import importlib.util
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from tools.notebook_model import notebooks as series
from tools.notebook_model import parse

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("build_site", ROOT / "tools" / "build_site.py")
build_site = importlib.util.module_from_spec(_spec)
sys.modules["build_site"] = build_site  # dataclasses look their module up there
_spec.loader.exec_module(build_site)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.links.append(dict(attrs)["href"])


def _local_links(index: Path) -> list[str]:
    parser = _Links()
    parser.feed(index.read_text())
    return [link for link in parser.links if not re.match(r"[a-z]+:", link)]


@pytest.fixture
def fixture_notebook(tmp_path) -> Path:
    v4 = nbformat.v4
    nb = v4.new_notebook(
        cells=[
            v4.new_markdown_cell(
                "# 98 · Tiny fixture\n\nOne plot and one print.\n\n- **Prerequisites:** none"
            ),
            v4.new_code_cell(
                "import matplotlib.pyplot as plt\n\nplt.plot([1, 3, 2])\nplt.title('fixture plot');"
            ),
            v4.new_code_cell("print('hello from', 'the fixture')"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "src" / "98_fixture.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return path


@pytest.mark.timeout(180)
def test_build_executes_and_renders_a_browsable_site(fixture_notebook, tmp_path):
    before = fixture_notebook.read_bytes()
    out = tmp_path / "site"
    pages = build_site.build_site([fixture_notebook], out, timeout=120)
    assert [p.error for p in pages] == [None]
    index = out / "index.html"
    assert index.exists()
    links = _local_links(index)
    assert links == ["98_fixture.html"]
    assert all((out / link).is_file() for link in links)
    page = (out / "98_fixture.html").read_text()
    assert "98 · Tiny fixture" in page and "<title>98 · Tiny fixture</title>" in page
    assert re.search(r'<img[^>]+src="data:image/png;base64,', page), "the plot is embedded in the page"
    assert "hello from the fixture" in page, "outputs come from executing the notebook"
    assert fixture_notebook.read_bytes() == before, "the source notebook is never written"
    # A rebuild replaces the site; a folder the script did not make is refused.
    build_site.build_site([fixture_notebook], out, execute=False)
    stranger = tmp_path / "not-a-site"
    stranger.mkdir()
    (stranger / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_site.build_site([fixture_notebook], stranger, execute=False)


def test_a_mermaid_diagram_becomes_a_drawn_diagram_on_the_page(fixture_notebook, tmp_path):
    nb = nbformat.read(fixture_notebook, as_version=4)
    diagram = 'flowchart LR\n  P["parent: fork()"] --> C[child]'
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"## 1. How\n\n```mermaid\n{diagram}\n```\n"))
    nbformat.write(nb, fixture_notebook)
    build_site.build_site([fixture_notebook], tmp_path / "site", execute=False)
    page = (tmp_path / "site" / "98_fixture.html").read_text()
    # nbconvert's lab template: the block as Mermaid's input element (HTML-escaped; Mermaid reads
    # its text) and the module script that imports Mermaid and draws every such element.
    drawn = re.findall(r'<div class="jp-Mermaid"><pre class="mermaid">\n(.*?)</pre></div>', page, re.S)
    assert (
        [html.unescape(d).strip() for d in drawn]
        == [d.source.strip() for d in parse(nb, fixture_notebook).diagrams]
        == [diagram]
    )
    assert 'document.querySelectorAll(".jp-Mermaid > pre.mermaid")' in page
    assert re.search(r'import\("https://[^"]+/mermaid[^"]*\.mjs"\)', page), "the script loads Mermaid"
    assert "language-mermaid" not in page, "the diagram is not rendered as a code listing"


def test_a_failing_notebook_is_marked_and_fails_the_build(fixture_notebook, tmp_path):
    nb = nbformat.read(fixture_notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("raise ValueError('broken on purpose')"))
    nbformat.write(nb, fixture_notebook)
    code = build_site.main(["--out", str(tmp_path / "site"), "--timeout", "120", str(fixture_notebook)])
    assert code == 1
    index = (tmp_path / "site" / "index.html").read_text()
    assert "failed" in index and "broken on purpose" in index


def test_the_docstring_examples_run():
    assert doctest.testmod(build_site).failed == 0


def test_the_real_notebooks_each_get_a_page_and_an_index_entry(tmp_path):
    notebooks = build_site.discover_notebooks(ROOT / "notebooks")
    assert notebooks == [nb.path for nb in series()] and notebooks
    pages = build_site.build_site(notebooks, tmp_path / "site", execute=False)
    assert [p.filename for p in pages] == [f"{p.stem}.html" for p in notebooks]
    assert _local_links(tmp_path / "site" / "index.html") == [p.filename for p in pages]
    ids = {
        p.filename: set(re.findall(r'<a id="([^"]+)">', (tmp_path / "site" / p.filename).read_text()))
        for p in pages
    }
    for page in pages:
        assert page.title and page.title[:2].isdigit(), f"{page.source.name}: title {page.title!r}"
        assert page.title in (tmp_path / "site" / page.filename).read_text()
        for link in _local_links(tmp_path / "site" / page.filename):  # a section link lands on its anchor
            target, _, fragment = link.partition("#")
            if re.fullmatch(r"\d\d_\w+\.html", target or page.filename) and re.fullmatch(
                r"[a-z0-9-]+", fragment
            ):
                assert fragment in ids[target or page.filename], f"{page.filename}: {link}"
