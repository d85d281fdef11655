"""Every notebook keeps every rule of ``tests/notebook_rules.py``; CONTRIBUTING.md lists those rules.

The checks that are more than a comparison are shown failing here on small notebooks built in memory
(``probe``), so that a rule that can no longer fail is noticed.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.source import show_source, source_text
from tests import notebook_rules
from tests.notebook_rules import RULES, SHOWN_LINES, contributing_list
from tools.notebook_model import ROOT, notebooks, parse

v4 = nbformat.v4
HEADER = (
    "# 99 · Probe\n\n- **Prerequisites:** none.\n- **Needs:** CPU only; wraps\n  onto two lines.\n"
    "- **Reading time:** about 1 min\n- **Run time:** about 1 s."
)
IMPORTS = (
    "from helpers import source\nfrom helpers.source import show_source\nimport torch.multiprocessing as mp"
)


def probe(*cells, folder: Path = ROOT / "notebooks"):
    """A notebook of these cells (strings starting with ``#`` or ``md:`` are markdown), as parsed."""
    made = [
        c
        if not isinstance(c, str)
        else v4.new_markdown_cell(c.removeprefix("md:"))
        if c.startswith(("#", "md:"))
        else v4.new_code_cell(c)
        for c in cells
    ]
    notebook = v4.new_notebook(cells=made)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return parse(notebook, folder / "99_probe.ipynb")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
@pytest.mark.parametrize("nb", notebooks(), ids=lambda nb: nb.name)
def test_the_notebook_keeps_the_rule(nb, rule):
    problems = rule.check(nb)
    assert not problems, f"{nb.name} breaks {rule.id} ({rule.statement}):\n" + "\n".join(problems)


def test_there_is_a_series_and_one_rule_per_id():
    assert len(notebooks()) >= 10 and notebooks()[0].number == "00"
    assert len({rule.id for rule in RULES}) == len(RULES)


def test_contributing_lists_the_rules_as_the_table_states_them():
    page = (ROOT / "CONTRIBUTING.md").read_text()
    listed = re.search(r"<!-- rules: .*? -->\n(.*?)\n<!-- end of rules -->", page, re.S)
    assert listed, "CONTRIBUTING.md has no <!-- rules: ... --> ... <!-- end of rules --> block"
    assert listed[1] == contributing_list(), "paste the output of `python -m tests.notebook_rules`"


# --- the model ---------------------------------------------------------------------------------------


def test_the_model_reads_header_sections_ids_and_parts():
    nb = probe(
        HEADER,
        "## Setup",
        'md:<a id="start-here"></a>\n## 1. Start `mp.spawn`, once\n\n### 1a. Why\n\n'
        "```bash\n# not a heading\n```",
        "x = 1",
        "## Appendix: depth\n\n```mermaid\nflowchart LR\n  A --> B\n```",
    )
    assert nb.number == "99" and nb.header["Needs"] == "CPU only; wraps onto two lines."
    assert [(s.id, s.number, s.level, s.anchored, s.appendix) for s in nb.sections] == [
        ("setup", "", 2, False, False),
        ("start-here", "1", 2, True, False),
        ("why", "1a", 3, False, False),
        ("appendix-depth", "", 2, False, True),
    ]
    assert [c.index for c in nb.sections[1].cells] == [2, 3] and len(nb.main_path) == 4
    assert list(nb.appendices) == ["Appendix: depth"] and [d.main_path for d in nb.diagrams] == [False]


def test_appendices_and_listings_are_counted_the_way_they_read():
    nb = probe(
        "# 99 · Probe\n\n- **Reading time:** about 1 min\n" + "word " * 190,
        "from helpers.source import show_source\nshow_source(show_source)",
        'md:<a id="appendix-depth"></a>\n## Appendix: depth\n\n' + "word " * 400,  # the anchor is not read
    )
    listed = len([line for line in source_text(show_source).splitlines() if line.strip()])
    assert nb.reading_time.main == pytest.approx((190 + 10) / 200 + (2 + listed) / 15)
    assert nb.reading_time.appendices == {"Appendix: depth": pytest.approx(403 / 200)}
    assert listed < len(source_text(show_source, docstring=True).splitlines())


# --- rules that can fail in more ways than one comparison ------------------------------------------


def test_the_section_rule_finds_gaps_twins_order_and_hidden_headings():
    anchored = {"a": "## 1. A", "c": "## 3. C", "exercises": "## Exercises", "summary": "## Summary"}
    cells = [f'md:<a id="{id_}"></a>\n{heading}' for id_, heading in anchored.items()]
    nb = probe(HEADER, *cells, "## 1. A", "x = 1\n# ## 4. D")
    assert notebook_rules.sections(nb) == [
        "sections ['1', '3', '1']: 3 after 1",
        "sections ['1', '3', '1']: 1 after 3",
        "two sections have the id 'a'",
        "no `<a id>` line above 'A'",
        "'## Summary' comes after '## Exercises'",
        "a heading hides in a code cell (use a markdown cell): code cell 0: # ## 4. D",
    ]


def test_the_reading_time_rule_wants_the_header_to_match():
    nb = probe(HEADER.replace("about 1 min", "about 3 min"), "## 1. A\n\nword word")
    assert notebook_rules.reading_time(nb) == ["the header must say '**Reading time:** about 1 min'"]
    assert notebook_rules.header(probe("# 98 · Wrong number")) == [
        "opens with '# 98 · Wrong number'",
        "the opening cell has no '- **Prerequisites:**' line",
        "the opening cell has no '- **Needs:**' line",
        "the opening cell has no '- **Run time:**' line",
    ]
    assert notebook_rules.header(probe(v4.new_code_cell(HEADER)))[0] == "opens with ''"  # not a markdown cell


def test_the_diagram_rule_wants_a_valid_diagram_on_the_main_path():
    diagram = '```mermaid\nsequenceDiagram\n  Parent->>Child: "fork()"\n```'
    assert notebook_rules.diagram(probe(HEADER, f"## 1. How\n\n{diagram}\n\nText after.")) == []
    assert notebook_rules.diagram(probe(HEADER, f"## Appendix: later\n\n{diagram}")) == [
        "no ```mermaid block in a markdown cell of the main path (before the first Appendix)"
    ]
    assert notebook_rules.diagram(probe(HEADER, "md:```python\nx = 1\n```")) != []  # not a diagram
    wrong = notebook_rules.diagram(
        probe(HEADER, "md:" + diagram, "md:```mermaid\nflowchrt LR\n  A --> B\n```")
    )
    assert wrong and "'flowchrt'" in wrong[0]


def test_the_shown_rule_finds_an_unshown_worker_and_accepts_a_shown_one():
    nb = probe(
        IMPORTS,
        "ctx = mp.get_context('spawn')\np = ctx.Process(target=source.show_source, args=(print,))",
        "show_source(source.show_source)",
        "p = ctx.Process(target=source.show_source, args=(print,))",
    )
    assert notebook_rules.shown_before_started(nb) == [
        "code cell 1: helpers.source.show_source runs before show_source shows it"
    ]
    assert notebook_rules.short_listings(nb) == []


def test_the_shown_rule_rejects_hidden_launches_and_long_listings():
    from helpers.launch import check_importable

    nb = probe(
        "from helpers import launch\nfrom helpers.source import show_source",
        "show_source(launch.check_importable)",
    )
    assert "plain API" in notebook_rules.shown_before_started(nb)[0]
    lines = len(source_text(check_importable).splitlines())
    expected = (
        [f"helpers.launch.check_importable: {lines} lines shown (at most 25)"] if lines > SHOWN_LINES else []
    )
    assert notebook_rules.short_listings(nb) == expected


def test_the_shown_rule_finds_an_unshown_module_entry_in_a_command_line():
    nb = probe(
        IMPORTS + "\nimport sys",
        "command = [sys.executable, '-m', 'torch.distributed.run', '-m', 'helpers.ddp', '--epochs', '1']",
        "from helpers import ddp\nshow_source(ddp.main)",
        "command = [sys.executable, '-m', 'helpers.ddp', '--snapshot', 's.pt']",
    )
    assert notebook_rules.shown_before_started(nb) == [
        "code cell 1: helpers.ddp.main (python -m helpers.ddp) runs before show_source shows it",
        "no code cell starts a process with the plain API "
        "(['DataLoader', 'Pool', 'Process', 'spawn', 'start_processes'])",
    ]


def test_the_guard_rule_wants_linux_only_names_guarded_and_a_skip_line_elsewhere(monkeypatch):
    guarded = "from helpers.processes import linux_only\nif linux_only('/dev/shm'):\n    print(footprint)"
    assert notebook_rules.linux_guarded(probe(guarded, "show_source(sh.fd_limit_probe)")) == []
    silent = guarded.replace("linux_only('/dev/shm')", "linux_only('/dev/shm') or True")
    assert notebook_rules.linux_guarded(probe("x = 1", "print(footprint)", silent)) == [
        "code cell 1: Linux-only code outside `if linux_only(...)`: print(footprint)",
        "code cell 2: Linux-only code outside `if linux_only(...)`: if linux_only('/dev/shm') or True:",
    ]
    monkeypatch.setattr(notebook_rules, "linux_only", lambda what: False)  # a guard that skips silently
    assert notebook_rules.linux_guarded(probe(guarded)) == [
        "code cell 0 on darwin prints [], not a skip line",
        "code cell 0 on win32 prints [], not a skip line",
    ]


def patterns_in(tmp_path: Path, monkeypatch) -> Path:
    """A ``patterns`` folder of the test's own, where ``pattern_path`` names are looked up."""
    monkeypatch.setattr("tools.notebook_model.data_folder", lambda kind: tmp_path / kind)
    (tmp_path / "patterns").mkdir()
    return tmp_path / "patterns"


def test_the_pattern_rule_wants_the_pattern_shown_and_run_on_the_main_path(tmp_path, monkeypatch):
    (patterns_in(tmp_path, monkeypatch) / "99_probe.py").write_text("print('done')\n")
    folder = tmp_path / "notebooks"
    show = (
        'from helpers.source import show_script\nPATTERN = pattern_path("99_probe.py")\nshow_script(PATTERN)'
    )
    run = "done = subprocess.run([sys.executable, PATTERN, 'spawn'], capture_output=True, timeout=120)"
    assert notebook_rules.pattern(probe(show, run, folder=folder)) == []
    assert notebook_rules.pattern(probe("## Appendix: the pattern", show, run, folder=folder)) == [
        'no code cell of the main path calls pattern_path("99_*.py") (a pattern file of patterns/)'
    ]
    assert notebook_rules.pattern(probe(show, folder=folder)) == [
        'no code cell of the main path runs pattern_path("99_*.py") with subprocess.run'
    ]
    renamed = [c.replace("99_probe", "99_other") for c in (show, run)]
    assert notebook_rules.pattern(probe(*renamed, folder=folder)) == ["patterns/99_other.py does not exist"]
    # The old idiom, a path relative to the notebook, no longer counts: copied elsewhere it breaks.
    relative = show.replace('pattern_path("99_probe.py")', '"../patterns/99_probe.py"')
    assert notebook_rules.pattern(probe(relative, run, folder=folder)) == [
        'no code cell of the main path calls pattern_path("99_*.py") (a pattern file of patterns/)'
    ]


def test_the_taught_rule_wants_each_call_in_the_pattern_and_on_the_main_path(tmp_path, monkeypatch):
    (patterns_in(tmp_path, monkeypatch) / "99_probe.py").write_text(
        "q = ctx.Queue()\nq.put(None)\nctx.get_context('spawn')\n"
    )
    monkeypatch.setitem(
        notebook_rules.TAUGHT, "99", ["get_context", "exitcode", "share_memory_", ".put(None)"]
    )
    nb = probe(
        "md:`mp.get_context(method)`, then `q.put(None)` ends the stream.",
        'PATTERN = pattern_path("99_probe.py")',
        "## Appendix: exit codes\n\n`child.exitcode` says how it ended.",
        folder=tmp_path / "notebooks",
    )
    assert notebook_rules.pattern_teaches(nb) == [
        "99_probe.py does not contain `exitcode`, which 99_probe.ipynb teaches",
        "99_probe.ipynb's main path never names `exitcode`",
        "99_probe.py does not contain `share_memory_`, which 99_probe.ipynb teaches",
        "99_probe.ipynb's main path never names `share_memory_`",
    ]
    # Names, attributes, keyword arguments, imports and strings all count as contained:
    used = notebook_rules.names_used(
        ast.parse("import multiprocessing as mp\nq = mp.Queue(maxsize=1)\nq.put('x')")
    )
    assert {"q", "Queue", "maxsize", "multiprocessing", "mp", "x"} <= used


def test_the_notebooks_that_read_the_default_are_found_and_a_limited_doctor_call_is_not_one():
    found = {nb.path.name[:2] for nb in notebooks() if notebook_rules.reads_default(nb)}
    assert {"00", "04"} <= found and not {"05", "10"} & found  # 05 names its method; 10 asks for three checks
    doctor = "from helpers.doctor import check\n"
    limited = probe(doctor + 'check(only=["master port", "memory"], master_port=0)')
    assert not notebook_rules.reads_default(limited)
    for call in ('check(only=["default start method"])', "check()", "check(only=NAMES)"):
        assert notebook_rules.reads_default(probe(doctor + call)), call
    assert notebook_rules.reads_default(probe("import multiprocessing\nmultiprocessing.get_start_method()"))


ASKS_FOR_THE_DEFAULT = {"get_start_method", "get_all_start_methods", "default_start_method", "get_context"}


def calls_made_by(name: str) -> set[str]:
    """The functions that doctor check ``name`` called, in this thread and any it started."""
    import threading

    from helpers.doctor import check

    called = set()

    def profile(frame, event, arg):
        if event == "call":
            called.add(frame.f_code.co_name)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        (finding,) = check(only=[name], master_port=0, shm_need=1 << 20, processes=2, mem_need=1 << 20)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert finding.name == name
    return called


def test_the_doctor_checks_said_to_read_no_default_ask_for_no_start_method():
    assert calls_made_by("default start method") & ASKS_FOR_THE_DEFAULT  # the trace sees it
    for name in sorted(notebook_rules.DOCTOR_CHECKS_WITHOUT_DEFAULT):
        assert not calls_made_by(name) & ASKS_FOR_THE_DEFAULT, name
