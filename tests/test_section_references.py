"""Every reference to a notebook section points to a section that exists.

A notebook's sections are its numbered markdown headings, ``## N. Title`` (and ``### Na. Title``
under them). A reference names a notebook by its two-digit number and one or more sections, in any
of the forms the repository uses:

    notebook 08 section 1      Notebook 08, section 1     notebook 01 (section 2)
    Notebook 07, sections 2 and 3      notebook 09 sections 1-3      08 §3      06 §1-7, 09 §1

``section 4 of notebook 03``, and, in a notebook's markdown, ``section 4`` for its own section 4
(a range ``1-3`` names each section in it). They are read from helpers/**/*.py (docstrings,
comments and strings), README.md, docs/*.md, exercises/, solutions/, coursework/ and the markdown
cells of notebooks/*.ipynb. CHANGELOG.md is history and is not read.

``helpers.doctor``'s "teaches" column names sections with their title as well, ``01 §1 Three ways
to start a process``; there the title must match too: the numbered heading, or a heading under
it, starts with the title (case, backticks and ``*`` ignored). A section without a number is named
by its title alone: ``00 §Your environment``, ``06 §Appendix: where the rendezvous listens``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {path.name[:2]: path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
SOURCES = ("helpers/**/*.py", "README.md", "docs/*.md", "exercises/**/*", "solutions/**/*", "coursework/**/*")

_NOT_A_NOTEBOOK = r"(?!\d*\s*§|\d*,?\s+sections?\b)"  # "06 §1-7, 09 §1": 09 starts a reference of its own
_ITEM = rf"{_NOT_A_NOTEBOOK}\d{{1,2}}[a-z]?\b"
_LIST = rf"{_ITEM}(?:\s*(?:-|–|,|and|&)\s*{_ITEM})*"
REFERENCE = re.compile(rf"\b(\d\d)(?:,\s*|\s+\(|\s+)(?:[Ss]ections?\s+|§\s?)({_LIST})")
SECTION_OF = re.compile(rf"\b[Ss]ections?\s+({_LIST}) of notebook (\d\d)\b")  # "section 4 of notebook 03"
OWN_SECTION = re.compile(rf"\b[Ss]ections?\s+({_LIST})")  # in a notebook: one of its own sections
HEADING = re.compile(r"^(#{2,3}) +(?:(\d+[a-z]?)\. +)?(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Reference:
    """One section named somewhere: where, which notebook, which section, and the title if given."""

    where: str
    notebook: str
    section: str
    title: str = ""

    def __str__(self) -> str:
        title = f" {self.title}" if self.title else ""
        return f"{self.where}: {self.notebook} §{self.section}{title}"


def _sections(listed: str) -> list[str]:
    """``"1-3 and 5b"`` -> ``["1", "2", "3", "5b"]``."""
    items, sections = re.findall(r"\d+[a-z]?|-|–", listed), []
    for index, item in enumerate(items):
        if item in "-–" and 0 < index < len(items) - 1:
            low, high = items[index - 1], items[index + 1]
            if low.isdigit() and high.isdigit():
                sections += [str(n) for n in range(int(low) + 1, int(high))]
        elif item not in "-–":
            sections.append(item)
    return sections


def references_in(text: str, where: str, own: str | None = None) -> list[Reference]:
    """The section references in ``text`` (``where`` labels them: a file and line); in the text of
    notebook ``own``, a section named without a notebook is one of its own.

    >>> [str(r) for r in references_in("Notebook 08, sections 3 and 5; 06 §1-2, 09 §1b.", "x")]
    ['x: 08 §3', 'x: 08 §5', 'x: 06 §1', 'x: 06 §2', 'x: 09 §1b']
    >>> [str(r) for r in references_in("notebook 01 (section 3); section 4 of notebook 03", "y")]
    ['y: 01 §3', 'y: 03 §4']
    >>> [str(r) for r in references_in("as in section 2, not notebook 05 section 1", "z", own="07")]
    ['z: 05 §1', 'z: 07 §2']
    """
    found = []
    for match in REFERENCE.finditer(text):
        found += [Reference(where, match[1], section) for section in _sections(match[2])]
    for match in SECTION_OF.finditer(text):
        found += [Reference(where, match[2], section) for section in _sections(match[1])]
    if own is not None:
        rest = SECTION_OF.sub("", REFERENCE.sub("", text))
        for match in OWN_SECTION.finditer(rest):
            found += [Reference(where, own, section) for section in _sections(match[1])]
    return found


def _texts() -> list[tuple[str, str, str | None]]:
    """(label, text, the notebook it belongs to) for every place a reference may sit."""
    texts = []
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and path.suffix in (".py", ".md", ".txt"):
                texts.append((str(path.relative_to(ROOT)), path.read_text(), None))
    for number, path in NOTEBOOKS.items():
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "markdown":
                texts.append((f"notebooks/{path.name} cell {index}", cell.source, number))
    return texts


def all_references() -> list[Reference]:
    """Every section reference of the repository, labelled with its file (or notebook cell) and line."""
    found = []
    for label, text, own in _texts():
        for number, line in enumerate(text.splitlines(), 1):
            found += references_in(line, f"{label}:{number}", own)
        # A reference wrapped over two lines ("Notebook 08,\n    section 1"): read the joined text
        # too, keep what the lines alone missed.
        joined = references_in(re.sub(r"\s*\n\s*", " ", text), label, own)
        seen = {(r.notebook, r.section) for r in found if r.where.startswith(f"{label}:")}
        found += [r for r in joined if (r.notebook, r.section) not in seen]
    return found


def doctor_references() -> list[Reference]:
    """The "teaches" entries of ``helpers.doctor`` (``01 §1 Three ways...; 04 §2 The CPU twin``)."""
    from helpers.doctor.findings import _ABOUT

    found = []
    for check, (_why, _fix, teaches, _prevents) in _ABOUT.items():
        for part in teaches.split(";"):
            match = re.fullmatch(r"\s*(\d\d) §(\d+[a-z]?)?\s*(.*?)\s*", part)
            assert match, f"helpers.doctor {check!r}: teaches {part!r} is not 'NN §N Title'"
            where = f"helpers/doctor/findings.py {check!r}"
            found.append(Reference(where, match[1], match[2] or "", match[3]))
    return found


def _plain(text: str) -> str:
    return re.sub(r"[`*]", "", text).strip().lower()


def sections_of(path: Path) -> dict[str, list[str]]:
    """``{section number: [its heading's title, the titles of the headings under it]}``, and under
    ``""`` the titles of the unnumbered headings (Setup, Appendix: ..., Summary)."""
    markdown = "\n".join(
        c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"
    )
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for level, number, title in HEADING.findall(markdown):
        if number:
            current = number if level == "##" else current
            sections.setdefault(number, []).append(_plain(title))
            if level == "###" and current and current != number:
                sections[current].append(_plain(title))
        elif level == "##":
            current = ""
            sections[""].append(_plain(title))
        else:
            sections.setdefault(current, []).append(_plain(title))
    return sections


def wrong(reference: Reference, sections: dict[str, dict[str, list[str]]]) -> str | None:
    """Why ``reference`` points nowhere, or None."""
    if reference.notebook not in sections:
        return f"{reference}: there is no notebook {reference.notebook}"
    mine = sections[reference.notebook]
    if reference.section and reference.section not in mine:
        numbers = ", ".join(n for n in mine if n)
        return f"{reference}: notebook {reference.notebook} has sections {numbers}"
    if reference.title:
        titles = mine[reference.section] if reference.section else [t for ts in mine.values() for t in ts]
        if not any(t.startswith(_plain(reference.title)) for t in titles):
            return f"{reference}: no such heading there ({'; '.join(titles)})"
    return None


@pytest.fixture(scope="module")
def findings() -> dict[str, list[str]]:
    """The wrong references, by the notebook they name."""
    sections = {number: sections_of(path) for number, path in NOTEBOOKS.items()}
    by_notebook: dict[str, list[str]] = {}
    for reference in all_references() + doctor_references():
        problem = wrong(reference, sections)
        if problem:
            by_notebook.setdefault(reference.notebook, []).append(problem)
    return by_notebook


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_every_reference_to_the_notebook_names_a_section_it_has(number, findings):
    problems = findings.get(number, [])
    assert not problems, "\n".join(problems)


def test_references_name_existing_notebooks(findings):
    assert not {n: p for n, p in findings.items() if n not in NOTEBOOKS}


def test_the_repository_has_references_to_check():
    assert len(all_references()) > 100 and len(doctor_references()) > 10


def test_the_check_finds_a_wrong_number_and_a_wrong_title(tmp_path):
    cells = [
        "# 98 · Probe",
        "## Setup",
        "## 1. Start\n\n### Why it matters",
        "## 2. Stop",
        "## Appendix: depth",
    ]
    path = tmp_path / "98_probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(c) for c in cells]), path)
    sections = {"98": sections_of(path)}
    text = "Notebook 98, sections 1-3; see 98 §2 and notebook 97 section 1."
    problems = [wrong(r, sections) for r in references_in(text, "probe")]
    assert problems == [
        None,
        None,
        "probe: 98 §3: notebook 98 has sections 1, 2",
        None,
        "probe: 97 §1: there is no notebook 97",
    ]
    assert wrong(Reference("d", "98", "1", "Why it `matters`"), sections) is None
    assert wrong(Reference("d", "98", "", "Appendix: depth"), sections) is None
    assert (
        wrong(Reference("d", "98", "2", "Start"), sections) == "d: 98 §2 Start: no such heading there (stop)"
    )
