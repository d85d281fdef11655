"""Every link of the repository resolves, and no reference names a section by its number.

Each ``## `` and ``### `` heading of a notebook carries an anchor on the line above it,
``<a id="keep-the-producer-alive"></a>``, and the rest of the series refers to the section by a
Markdown link to that id: ``[03 · Keep the producer alive](../notebooks/03_queues_and_pipes.ipynb#keep-the-producer-alive)``,
or from inside a notebook ``[section 5](#keep-the-producer-alive)``. Renumbering a section then breaks
nothing. This test reads the Markdown links (and bare ``NN_name.ipynb#id`` references) of
helpers/**/*.py, README.md, CONTRIBUTING.md, docs/*.md, exercises/, solutions/, coursework/,
patterns/, upstream/ and the markdown cells of notebooks/*.ipynb, and checks that the file exists
and, for ``#id``, that the notebook has that anchor. A link is relative to its file's folder, except
in helpers/**/*.py, where links are written as from ``helpers/`` (``../notebooks/...``, the same
from ``docs/API.md``, which shows the docstrings' first paragraphs). Web links are not fetched.
CHANGELOG.md is history and is not read.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import nbformat

from tools.notebook_model import notebooks, read_notebook

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    "helpers/**/*.py",
    "README.md",
    "CONTRIBUTING.md",
    "docs/*.md",
    "exercises/**/*",
    "solutions/**/*",
    "coursework/**/*",
    "patterns/**/*",
    "upstream/**/*",
)

# [text](target): the text may wrap over lines; an image ![..](..) is a link too.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BARE = re.compile(r"(?<![\w/(])(\d\d_\w+\.ipynb#[\w-]+)")  # a notebook section named outside a link
# A section named by its number: "03 §5", "notebook 03 section 5", "notebook 03, sections 2 and 3",
# "section 4 of notebook 03". Inside a notebook, "[section 4](#id)" is a link, and fine.
BY_NUMBER = re.compile(
    r"\b\d\d ?§ ?\w|\b[Nn]otebooks? \d\d,? \(?(?:§|[Ss]ections? \d)|\b[Ss]ections? \d+[a-z]? of notebook \d\d"
)


@cache
def anchors(notebook: Path) -> list[str]:
    """The section ids of a notebook, in order (``tools.notebook_model`` reads them)."""
    return [section.id for section in read_notebook(notebook).sections if section.anchored]


def texts() -> list[tuple[str, Path, str]]:
    """(label, the folder links are relative to, text) for every file and notebook cell that may
    hold a link."""
    found = []
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and path.suffix in (".py", ".md", ".txt"):
                base = ROOT / "helpers" if path.is_relative_to(ROOT / "helpers") else path.parent
                found.append((str(path.relative_to(ROOT)), base, path.read_text()))
    for notebook in notebooks():
        for cell in notebook.cells:
            if cell.kind == "markdown":
                found.append(
                    (f"notebooks/{notebook.name} cell {cell.index}", notebook.path.parent, cell.source)
                )
    return found


def shown(file: Path) -> Path:
    """A path as a message shows it: relative to the repository when inside it (CI's temporary
    directory is, under .venv/)."""
    return file.relative_to(ROOT) if file.is_relative_to(ROOT) else file


def broken(target: str, base: Path, own: Path | None = None) -> str | None:
    """Why the link ``target``, written in a file whose links are relative to ``base``, points
    nowhere; None when it resolves (or is a web or mail link, which this test does not fetch).
    ``own`` is the notebook a bare ``#id`` belongs to."""
    if re.match(r"[a-z]+:", target) or "{" in target:
        return None  # a web link, or a template in code (an f-string) that makes links
    path, _, fragment = target.partition("#")
    file = (base / path).resolve() if path else own
    if file is None:
        return f"{target}: a fragment with no notebook to look it up in"
    if not file.exists():
        return f"{target}: no file {shown(file)}"
    if fragment and file.suffix == ".ipynb" and fragment not in anchors(file):
        return f"{target}: {file.name} has no section with the id {fragment!r}"
    if fragment and file.suffix != ".ipynb":
        return None  # a Markdown file's heading: GitHub makes its own ids; not checked here
    return None


def problems_in(label: str, base: Path, text: str, own: Path | None = None) -> list[str]:
    """What is wrong with the links and section references of one text."""
    problems = [f"{label}: {why}" for target in LINK.findall(text) if (why := broken(target, base, own))]
    problems += [
        f"{label}: {why}" for target in BARE.findall(text) if (why := broken(target, ROOT / "notebooks"))
    ]
    for line_number, line in enumerate(text.splitlines(), 1):
        if BY_NUMBER.search(line):
            problems.append(f"{label}:{line_number}: names a section by its number: {line.strip()[:120]}")
    return problems


def all_problems() -> list[str]:
    problems = []
    for label, base, text in texts():
        own = ROOT / "notebooks" / label.split()[0].split("/")[1] if label.startswith("notebooks/") else None
        problems += problems_in(label, base, text, own)
    return problems


def test_every_link_resolves_and_no_section_is_named_by_its_number():
    problems = all_problems()
    assert not problems, "\n".join(problems)


def test_the_repository_has_links_to_check():
    links = [t for _, _, text in texts() for t in LINK.findall(text) if ".ipynb#" in t or t.startswith("#")]
    assert len(links) > 200


def test_the_check_finds_a_broken_link_a_missing_file_and_a_number(tmp_path):
    cells = ['<a id="start"></a>\n## 1. Start', '<a id="stop"></a>\n## 2. Stop', "## 3. No anchor"]
    notebook = tmp_path / "98_probe.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(c) for c in cells]), notebook
    )
    assert anchors(notebook) == ["start", "stop"]
    text = (
        "See [98 · Start](98_probe.ipynb#start), [98 · Stop](98_probe.ipynb#stopp),\n"
        "[97](97_gone.ipynb#start), [here](#stop), [there](#nowhere) and [web](https://pytorch.org).\n"
        "Also notebook 98 section 2, and 98 §1.\n"
    )
    assert problems_in("probe", tmp_path, text, own=notebook) == [
        "probe: 98_probe.ipynb#stopp: 98_probe.ipynb has no section with the id 'stopp'",
        f"probe: 97_gone.ipynb#start: no file {shown(tmp_path / '97_gone.ipynb')}",
        "probe: #nowhere: 98_probe.ipynb has no section with the id 'nowhere'",
        "probe:3: names a section by its number: Also notebook 98 section 2, and 98 §1.",
    ]


def test_a_link_from_helpers_resolves_from_the_helpers_folder():
    link = "../notebooks/03_queues_and_pipes.ipynb#keep-the-producer-alive"
    assert broken(link, ROOT / "helpers") is None
    assert broken(link, ROOT / "helpers" / "doctor") is not None  # not relative to the subpackage
