"""The committed message inventory (tools/message_inventory.tsv) matches the installed torch, and is classified.

A torch upgrade that adds, changes or removes a ``raise`` or warning in the modules of process-based
parallelism fails :func:`test_every_site_is_in_the_inventory` with the list of keys; ``python -m
tools.message_inventory --update`` adds them (keeping every existing class), and
:func:`test_every_site_is_classified` then lists those its rules could not decide, for review in the
source. The CPython rows are checked only on the Python the file was made with (its header's
``python``: 3.11 now); the library rows (strings of torch's shared libraries) are read again only
when the libraries' sizes differ from the header's, since ``strings`` over 1 GB takes half a minute.
torch is located, not imported.
"""

from __future__ import annotations

import ast

import pytest

from helpers.catalog import entries
from tools import message_inventory as inv

HEADER, ROWS = inv.read_inventory()
SITE_PACKAGES = inv.torch_site_packages()
SAME_PYTHON = HEADER["python"] == inv.python_version()
SAME_BUILD = HEADER["torch"] == inv.torch_version(SITE_PACKAGES)
IDS = {e.id for e in entries()}


def _checked(source: str) -> bool:
    return source != "cpython" or SAME_PYTHON


@pytest.fixture(scope="module")
def current_keys() -> set[str]:
    sites, _ = inv.python_sites(SITE_PACKAGES)
    if not SAME_BUILD or inv.library_fingerprint(SITE_PACKAGES) == HEADER["libraries"]:
        # another build (CI's +cpu against the recorded +cu132) has other libraries: their rows are
        # the recorded build's, like the CPython rows are the recorded Python's; the same libraries: rows stand
        sites += [inv._site_from_row(row) for row in ROWS.values() if row["source"] == "library"]
    else:
        sites += inv.library_sites(SITE_PACKAGES)
    return {s.key for s in sites if _checked(s.source)}


def test_every_site_is_in_the_inventory(current_keys: set[str]) -> None:
    recorded = {k for k, row in ROWS.items() if _checked(row["source"])}
    new, gone = sorted(current_keys - recorded), sorted(recorded - current_keys)
    assert not new and not gone, (
        f"torch {inv.torch_version(SITE_PACKAGES)} / Python {inv.python_version()} differ from the inventory "
        f"(torch {HEADER['torch']}, Python {HEADER['python']}): run `python -m tools.message_inventory --update`, "
        f"then classify what it leaves unclassified.\n"
        + "".join(f"  new:  {k}\n" for k in new)
        + "".join(f"  gone: {k}\n" for k in gone)
    )


def test_every_site_is_classified() -> None:
    bad = []
    for key, row in ROWS.items():
        klass = row["class"]
        ok = klass in inv.CLASSES or (klass.startswith("explained:") and klass.split(":", 1)[1] in IDS)
        if not ok or not row["decided_by"].startswith(("rule:", "review:")):
            bad.append(f"  {klass or '?':20} {key}")
    assert not bad, (
        f"{len(bad)} sites without a valid class (a catalog entry's id for explained):\n" + "\n".join(bad)
    )


def test_the_file_round_trips(tmp_path) -> None:
    header, rows = inv.read_inventory()
    sites = [inv._site_from_row(row) for row in rows.values()]
    copy = tmp_path / "inventory.tsv"
    inv.write_inventory(header, sites, copy)
    assert copy.read_text(encoding="utf-8") == inv.INVENTORY.read_text(encoding="utf-8")
    assert any("\n" in row["message"] for row in rows.values())  # a multi-line message survives


def test_python_version_is_recorded() -> None:
    # the CPython rows are those of one Python: say which, so another Python skips them knowingly
    assert HEADER["python"].count(".") == 1 and HEADER["torch"]
    if not SAME_PYTHON:
        pytest.skip(f"CPython rows are of Python {HEADER['python']}; this is {inv.python_version()}")


def test_a_new_raise_is_a_new_key_and_moved_code_is_not() -> None:
    source = "def f(x):\n    if x:\n        raise ValueError(f'bad {x}: use y')\n"
    moved = "\n\n# a comment\n" + source
    added = source + "    raise RuntimeError('worker %d died' % x)\n"

    def keys(text: str) -> set[tuple]:
        found, _ = inv.scan_tree(ast.parse(text))
        return {(kind, qual, type_, inv.normalise(msg)) for kind, qual, type_, _line, msg in found}

    assert keys(moved) == keys(source)
    assert keys(added) - keys(source) == {("raise", "f", "RuntimeError", "worker-_-died")}


def test_messages_are_rendered_as_templates() -> None:
    tree = ast.parse(
        "class C:\n"
        "    def m(self, n):\n"
        "        raise RuntimeError('a ' + f'{n} b')\n"
        "        raise ValueError('x %s y' % n)\n"
        "        raise TypeError(msg)\n"
        "        raise KeyError\n"
        "        warnings.warn(f'w {n}', FutureWarning)\n"
        "        logger.warning('l %s', n)\n"
        "        raise\n"
        "        raise err\n"
    )
    found, skipped = inv.scan_tree(tree)
    assert [(k, q, t, m) for k, q, t, _, m in found] == [
        ("raise", "C.m", "RuntimeError", "a {n} b"),
        ("raise", "C.m", "ValueError", "x %s y"),
        ("raise", "C.m", "TypeError", "<built elsewhere: msg>"),
        ("raise", "C.m", "KeyError", ""),
        ("warn", "C.m", "FutureWarning", "w {n}"),
        ("log", "C.m", "log.warning", "l %s"),
    ]
    assert skipped == 2  # the bare re-raise and `raise err` print a message made elsewhere


def test_rules_classify_by_the_catalog_and_by_words() -> None:
    rows = inv._index_rows()

    def site(message: str, type_: str = "RuntimeError") -> inv.Site:
        return inv.Site("k", "torch", "a", "raise", type_, "m", "f", "1", message)

    assert inv.classify(site("process {i} terminated with signal {name}"), rows)[0] == "explained:oom_killed"
    assert inv.classify(site("x", "AssertionError"), rows) == ("internal", "rule:assertion")
    assert inv.classify(site("world_size must be positive"), rows)[0] == "self-explanatory"
    assert inv.classify(site("Connection to the agent was lost"), rows) == ("", "")
