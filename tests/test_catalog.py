"""The catalog of messages: well formed, complete against the inventory, and true on the installed torch.

Every reproduction runs from one interpreter with torch imported (:mod:`tests.reproduction_server`):
it must print its entry's message, and ``explain`` must name that entry first for what it printed; the
fixed version must run clean without it. Tracebacks copied from real reports
(``tests/data/tracebacks/<entry id>.<n>.txt``, the report's address on their first line) must find
their entry first too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import catalog
from helpers.catalog import AREAS, entries
from helpers.error_index import CASES
from helpers.explain import matches, report
from tests.test_links import anchors
from tools import message_inventory as inv

ROOT = Path(__file__).resolve().parent.parent
TRACEBACKS = sorted((ROOT / "tests" / "data" / "tracebacks").glob("*.txt"))
REPRODUCIBLE = [e for e in entries() if e.reproduction]
FIXED = [e for e in entries() if e.fixed]
_, ROWS = inv.read_inventory()
CANNOT_RUN_HERE = 77  # a reproduction's exit code when the machine refuses what it needs (a user namespace)


def test_entries_are_well_formed() -> None:
    problems = []
    ids = [e.id for e in entries()]
    problems += [f"duplicate id {i}" for i in {i for i in ids if ids.count(i) > 1}]
    for e in entries():
        if not re.fullmatch(r"[a-z0-9_]+", e.id):
            problems.append(f"{e.id}: an id is lower_case_with_underscores")
        if not e.search(e.message):
            problems.append(f"{e.id}: its pattern does not match its own message")
        if not (e.cause.strip() and e.fix.strip()):
            problems.append(f"{e.id}: cause and fix are both needed")
        if bool(e.reproduction) == bool(e.read_from):
            problems.append(f"{e.id}: a reproduction, or read_from saying why not and where it was read")
        if e.fixed and not e.reproduction:
            problems.append(f"{e.id}: a fixed version without a reproduction")
        if e.case and (e.case not in CASES or "#" not in e.teaches):
            problems.append(f"{e.id}: case {e.case!r} needs a CASES key and a section in teaches")
        notebook, _, anchor = e.teaches.partition("#")
        if e.teaches and (
            not (ROOT / "notebooks" / notebook).exists()
            or anchor not in anchors(ROOT / "notebooks" / notebook)
        ):
            problems.append(f"{e.id}: teaches {e.teaches}: no such notebook section")
        if e.reproduction and 'if __name__ == "__main__":' not in e.reproduction:
            problems.append(f"{e.id}: a reproduction is a script with the main guard")
    assert not problems, "\n".join(problems)
    assert {e.area for e in entries()} <= set(AREAS)


def test_every_site_that_needs_an_entry_has_one() -> None:
    known = {e.id for e in entries()}
    listed = {key: e.id for e in entries() for key in e.sites}
    problems = [f"  needs-entry  {key}" for key, row in ROWS.items() if row["class"] == "needs-entry"]
    for key, row in ROWS.items():
        klass = row["class"]
        if klass.startswith("explained:") and klass.split(":", 1)[1] not in known:
            problems.append(f"  {klass}: no such entry  {key}")
        if key in listed and klass != f"explained:{listed[key]}":
            problems.append(f"  {key}: listed by {listed[key]} but classed {klass}")
    problems += [
        f"  {e.id} lists {key}: not in the inventory" for e in entries() for key in e.sites if key not in ROWS
    ]
    assert not problems, (
        f"{len(problems)} problems (python -m tools.message_inventory --update):\n" + "\n".join(problems)
    )


@pytest.fixture(scope="module")
def server(long_lived_processes):
    if not hasattr(os, "fork"):
        pytest.skip("the reproduction server forks")
    from tests.reproduction_server import ReproductionServer

    with ReproductionServer() as running:
        long_lived_processes[running.pid] = False  # its children are killed with their group after each run
        yield running
        del long_lived_processes[running.pid]


@pytest.mark.parametrize("e", REPRODUCIBLE, ids=lambda e: e.id)
def test_the_reproduction_prints_the_message(server, e: catalog.Entry) -> None:
    output, code = server.run(e.reproduction, timeout=90, name=e.id)
    if code == CANNOT_RUN_HERE:
        pytest.skip(f"{e.id}: this machine cannot run it: {output.strip()[-300:]}")
    assert e.search(output), f"{e.id}: the message is not in what the reproduction printed:\n{output[-3000:]}"
    assert matches(output)[0].id == e.id, f"explain names another entry first:\n{report(output)}"


@pytest.mark.parametrize("e", FIXED, ids=lambda e: e.id)
def test_the_fix_makes_the_message_go_away(server, e: catalog.Entry) -> None:
    output, code = server.run(e.fixed, timeout=90, name=e.id + "_fixed")
    assert code == 0 and not e.search(output), (
        f"{e.id}: the fixed script (exit {code}) printed:\n{output[-3000:]}"
    )


@pytest.mark.parametrize("path", TRACEBACKS, ids=lambda p: p.name)
def test_a_real_traceback_finds_its_entry_first(path: Path) -> None:
    source, _, text = path.read_text().partition("\n")
    assert source.startswith("# source: http"), (
        f"{path.name}: the first line names the report it was copied from"
    )
    expected = path.name.split(".")[0]
    found = [e.id for e in matches(text)]
    assert found and found[0] == expected, f"{path.name}: explain found {found[:3]}"


def test_nothing_matched_says_what_it_looked_at() -> None:
    text = "Traceback (most recent call last):\n  File 'x.py', line 1\nZeroDivisionError: division by zero\n"
    assert matches(text) == []
    said = report(text)
    assert "No catalog entry matches" in said and "ZeroDivisionError: division by zero" in said


def test_the_module_is_callable(capsys) -> None:
    import helpers.explain

    helpers.explain("RuntimeError: context has already been set")
    assert capsys.readouterr().out.startswith("1. start_method_set_twice")
