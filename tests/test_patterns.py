"""The pattern scripts (``patterns/NN_topic.py``): each runs under every start method, stays short and
self-contained, bounds every wait, is listed in ``patterns/README.md``, and its notebook shows and runs it.

A pattern is what a learner copies into their own project, so it is checked as a file, not as a
notebook cell:

- it runs as a script, ``python patterns/NN_x.py METHOD`` from a temporary working directory, under
  each method of ``multiprocessing.get_all_start_methods()`` (once for those whose run the method
  does not change, ``ONE_METHOD``) that its notebook's own runs do not cover (:func:`notebook_runs`:
  the notebook runs it in the browser run with this platform's ``FAST_METHOD`` and in `make
  test-wheel` on the macOS path, with spawn, where it passes ``FAST_METHOD``), within 120 s, exits 0
  and prints at least one line;
- at most ``MAX_LINES`` lines (all of them: blank lines and comments count), a module docstring of at
  most 3 lines, the ``if __name__ == "__main__":`` guard;
- it imports only the standard library (``sys.stdlib_module_names``), ``torch`` and ``numpy``;
- bounded waits, read from the syntax tree (a pragmatic rule, not a proof): a ``.join()`` call must
  pass an argument (``p.join(5)``, ``p.join(timeout=5)``; ``", ".join(parts)`` passes one too), and
  a ``.get()`` call on a name that looks like a queue (``queue``, ``q``, ``results_queue``,
  ``q_in``, ``self.queue``...) must pass ``timeout=``, two positional arguments
  (``block, timeout``) or ``block=False``. ``Pool.join``, ``JoinableQueue.join`` and
  ``SimpleQueue.get`` cannot be bounded, so a pattern does not use them. Not checked: ``recv()``
  on a Pipe (bound it with ``poll(timeout)``) and ``mp.spawn(..., join=True)``; the 120 s run
  limit catches a hang there;
- one ending for a bounded join of a process, the same in every pattern (notebook 01 §1 teaches
  it): after ``p.join(timeout=...)``, ``if p.exitcode is None:`` (still running after its deadline)
  ``p.terminate()`` and ``p.join(timeout=...)`` again. A process join is a ``.join`` on a name with
  a ``timeout=`` or a number (``p.join(60)``); ``kill()`` or an ``is_alive()`` test is another
  ending, and fails the check;
- each pattern has its notebook's row in ``TAUGHT``, the calls that notebook teaches.

What the notebooks do with their pattern (show it, run it, teach what it contains) are the rules
``pattern`` and ``pattern-teaches`` of ``tests/notebook_rules.py``.
"""

from __future__ import annotations

import ast
import contextlib
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.launch import FAST_METHOD
from tests.notebook_rules import TAUGHT
from tests.reproduction_server import ReproductionServer
from tools.notebook_model import notebooks

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = sorted((ROOT / "patterns").glob("[0-9][0-9]_*.py"))
INDEX = ROOT / "patterns" / "README.md"
METHODS = multiprocessing.get_all_start_methods()
# A pattern fits in a learner's head: about 30 lines is the guideline (DESIGN.md), 40 the limit, so
# that a needed line (a bounded join's ending, a comment that says why) does not force a cut elsewhere.
MAX_LINES = 40
# Patterns whose run is the same whatever start method they are given: run once. mp.spawn always
# spawns (06 and 12 take no argument); torchrun starts a script's workers as plain subprocesses, whatever
# --start-method says (09). Three runs of each cost about 36 CPU-seconds for nothing.
ONE_METHOD = {"06_ddp_spawn.py", "09_torchrun_worker.py", "11_ddp_by_hand.py", "12_fsdp2_cpu.py"}
RUN_TIMEOUT = 120
ALLOWED_IMPORTS = set(sys.stdlib_module_names) | {"torch", "numpy"}
QUEUE_NAME = re.compile(r"(^|_)(q|queue|queues)(_|$)|queue$", re.IGNORECASE)


# --- the checks, as functions the probe tests below run on files of their own ----------------------


def _receiver_name(node: ast.AST) -> str:
    """The last identifier of what a method is called on: ``q`` for ``q.get``, ``queue`` for
    ``self.queue.get``, ``""`` for anything else (a call, a subscript, a literal)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _unbounded_waits(tree: ast.Module) -> list[str]:
    """``.join()`` without an argument and a queue's ``.get()`` without a timeout, with their line."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, keywords = node.func.attr, {k.arg: k.value for k in node.keywords}
        if method == "join" and not node.args and "timeout" not in keywords:
            found.append(f"line {node.lineno}: {ast.unparse(node)} waits forever (pass timeout=...)")
        elif method == "get" and QUEUE_NAME.search(_receiver_name(node.func.value)):
            block = keywords.get("block", node.args[0] if node.args else None)
            non_blocking = isinstance(block, ast.Constant) and block.value is False
            if "timeout" not in keywords and len(node.args) < 2 and not non_blocking:
                found.append(f"line {node.lineno}: {ast.unparse(node)} waits forever (pass timeout=...)")
    return found


def _is_process_join(node: ast.AST) -> bool:
    """``p.join(timeout=...)`` or ``p.join(60)`` on a name: a bounded join of a process (a string's
    ``", ".join(parts)`` and ``os.path.join(...)`` are not)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"):
        return False
    number = (
        len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and type(node.args[0].value) in (int, float)
    )
    return isinstance(node.func.value, ast.Name) and (
        number or any(k.arg == "timeout" for k in node.keywords)
    )


def _still_running_test(test: ast.AST) -> str | None:
    """The name ``p`` of an ``if`` test ``p.exitcode is None`` (alone or in an ``and``), else None."""
    for part in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]:
        if (
            isinstance(part, ast.Compare)
            and isinstance(part.left, ast.Attribute)
            and part.left.attr == "exitcode"
            and isinstance(part.left.value, ast.Name)
            and isinstance(part.ops[0], ast.Is)
            and isinstance(part.comparators[0], ast.Constant)
            and part.comparators[0].value is None
        ):
            return part.left.value.id
    return None


def unended_joins(tree: ast.Module) -> list[str]:
    """Bounded process joins not followed (later in the file) by the one ending: ``if p.exitcode is
    None:`` whose body calls ``p.terminate()`` and then a bounded ``p.join(...)``."""
    endings, inside = [], set()  # (name, line) of each ending; the joins inside the endings
    for node in ast.walk(tree):
        name = isinstance(node, ast.If) and _still_running_test(node.test)
        if not name:
            continue
        calls = [c for stmt in node.body for c in ast.walk(stmt) if isinstance(c, ast.Call)]
        on_name = [
            c for c in calls if isinstance(c.func, ast.Attribute) and ast.unparse(c.func.value) == name
        ]
        terminates = [c.lineno for c in on_name if c.func.attr == "terminate"]
        rejoins = [c for c in on_name if _is_process_join(c)]
        inside.update(id(c) for c in rejoins)
        if terminates and any(c.lineno > min(terminates) for c in rejoins):
            endings.append((name, node.lineno))
    found = []
    for node in ast.walk(tree):
        if _is_process_join(node) and id(node) not in inside:
            name = node.func.value.id
            if not any(n == name and line > node.lineno for n, line in endings):
                found.append(
                    f"line {node.lineno}: {ast.unparse(node)} is not followed by "
                    f"`if {name}.exitcode is None:` `{name}.terminate()` and `{name}.join(timeout=...)`"
                )
    return found


def _has_main_guard(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            names = {s.id for s in sides if isinstance(s, ast.Name)}
            values = {s.value for s in sides if isinstance(s, ast.Constant)}
            if names == {"__name__"} and values == {"__main__"}:
                return True
    return False


def _foreign_imports(tree: ast.Module) -> list[str]:
    """Imports of anything but the standard library, torch and numpy (relative imports included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = ["." * node.level + (node.module or "")] if node.level else [node.module or ""]
        else:
            continue
        found += [m for m in modules if m.split(".")[0] not in ALLOWED_IMPORTS]
    return found


def pattern_findings(path: Path) -> list[str]:
    """What a pattern file breaks of the static rules (module docstring); empty when it keeps them."""
    text = path.read_text()
    problems = []
    lines = len(text.splitlines())
    if lines > MAX_LINES:
        problems.append(f"{lines} lines (at most {MAX_LINES}, blank lines and comments included)")
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        return [*problems, f"does not parse: {error}"]
    docstring = ast.get_docstring(tree)
    if not docstring or len(docstring.splitlines()) > 3:
        problems.append("needs a module docstring of 1-3 lines: what it shows and how to run it")
    if not _has_main_guard(tree):
        problems.append('no `if __name__ == "__main__":` guard')
    foreign = _foreign_imports(tree)
    if foreign:
        problems.append(f"imports {foreign}: only the standard library, torch and numpy")
    return problems + _unbounded_waits(tree) + unended_joins(tree)


def run_pattern(path: Path, method: str, cwd: Path, server: ReproductionServer | None = None) -> str | None:
    """Run ``path`` as a script with ``method`` as its argument from ``cwd``; what went wrong, or None.

    The script leads a process group of its own: past the deadline, or when it ends, whatever of the
    group is left (its workers) is killed with it, so a stuck pattern leaves no orphans. With a
    ``server`` (:mod:`tests.reproduction_server`) it is forked from an interpreter that has torch
    imported already, and runs as ``python path method`` would (``__main__`` from its file, its
    ``argv``, its folder), without paying ``import torch`` again.
    """
    if server is not None:
        with tempfile.TemporaryDirectory(prefix="pattern-output-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            code = server.run_file(path, [method], cwd, out, err, RUN_TIMEOUT)
            stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        if code is None:
            return f"{method}: still running after {RUN_TIMEOUT} s"
        return _judged(method, code, stdout, stderr)
    command = [sys.executable, str(path), method]
    posix = hasattr(os, "killpg")
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with subprocess.Popen(command, cwd=cwd, start_new_session=posix, **pipes) as done:  # exit: waits
        try:
            stdout, stderr = done.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"{method}: still running after {RUN_TIMEOUT} s"
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if posix:
                    os.killpg(done.pid, signal.SIGKILL)
                else:
                    done.kill()
    return _judged(method, done.returncode, stdout, stderr)


def _judged(method: str, code: int, stdout: str, stderr: str) -> str | None:
    if code != 0:
        return f"{method}: exit code {code}\n{stdout[-2000:]}{stderr[-2000:]}"
    if not stdout.strip():
        return f"{method}: printed nothing on stdout (end with a line that says what it did)"
    return None


def notebook_runs(path: Path) -> set[str]:
    """The start methods its notebook's main path runs the pattern with, asserting exit status 0, in
    the two runs of every notebook in `.ci/run`: the browser run of `make test` (this platform's
    ``FAST_METHOD``) and `make test-wheel` (the macOS path: ``FAST_METHOD`` is spawn there). A run
    without an argument covers every method (:data:`ONE_METHOD`: the method is not the pattern's)."""
    uses = [
        use for nb in notebooks() for use in nb.pattern_uses if use.path == path and use.number == nb.number
    ]
    covered = set()
    for method in {m for use in uses for m in use.run_methods}:
        if method == "any":
            covered.update(METHODS)
        elif method == "FAST_METHOD":
            covered.update({FAST_METHOD, "spawn"})
        else:
            covered.add(method)
    return covered


def methods_left(path: Path) -> list[str]:
    """The start methods this test runs the pattern with: those its notebook's runs do not."""
    covered = notebook_runs(path)
    return [m for m in (["spawn"] if path.name in ONE_METHOD else METHODS) if m not in covered]


def run_under_every_method(
    path: Path, cwd: Path, server: ReproductionServer | None = None, methods: list[str] | None = None
) -> list[str]:
    """:func:`run_pattern` under each start method (once where the method changes nothing:
    :data:`ONE_METHOD`), or under ``methods``; the failures. Without a server the runs go in parallel."""
    if methods is None:
        methods = ["spawn"] if path.name in ONE_METHOD else METHODS
    if server is not None:  # one script at a time: the server forks them in turn
        results = [run_pattern(path, method, cwd, server) for method in methods]
    else:
        with ThreadPoolExecutor(len(methods)) as pool:
            results = list(pool.map(lambda method: run_pattern(path, method, cwd), methods))
    return [result for result in results if result]


def index_findings(index: Path, patterns: list[Path]) -> list[str]:
    """Pattern files missing from the index's table, and table entries with no file."""
    rows = [line for line in index.read_text().splitlines() if line.startswith("|")]
    listed = {name for row in rows for name in re.findall(r"\d\d_\w+\.py", row.split("|")[1])}
    present = {p.name for p in patterns}
    return [f"{name} is not in {index.name}'s table" for name in sorted(present - listed)] + [
        f"{index.name} lists {name}, which does not exist" for name in sorted(listed - present)
    ]


# --- the series --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(long_lived_processes):
    """One interpreter with torch imported that forks each pattern run (Linux and macOS); None
    elsewhere, where each run is a fresh interpreter."""
    if not hasattr(os, "fork"):
        yield None
        return
    with ReproductionServer() as running:
        long_lived_processes[running.pid] = False  # each run's process group is killed when it ends
        yield running
        del long_lived_processes[running.pid]


@pytest.mark.timeout(len(METHODS) * RUN_TIMEOUT + 30)
@pytest.mark.parametrize("path", [p for p in PATTERNS if methods_left(p)], ids=lambda p: p.name)
def test_the_pattern_runs_under_every_start_method_its_notebook_does_not(path, tmp_path, server):
    failures = run_under_every_method(path, tmp_path, server, methods_left(path))
    assert not failures, "\n".join(failures)
    assert not any(tmp_path.iterdir()), f"{path.name} left files in its working directory"


@pytest.mark.parametrize("path", PATTERNS, ids=lambda p: p.name)
def test_the_pattern_is_short_self_contained_and_bounded(path):
    problems = pattern_findings(path)
    assert not problems, f"{path.name}: {problems}"


def test_the_runs_a_notebook_makes_are_read_from_its_main_path():
    """What a notebook's pattern run covers, read from its cells: FAST_METHOD (02), a string (08), no
    argument (06), other arguments (14: nothing), a name bound to something else (01: nothing)."""
    runs = {path.name[:2]: notebook_runs(path) for path in PATTERNS}
    assert runs["02"] == {FAST_METHOD, "spawn"} and runs["08"] == {"spawn"} and runs["06"] == set(METHODS)
    assert runs["14"] == set() and runs["01"] == set()


def test_every_patterned_notebook_has_its_row_of_what_it_teaches():
    assert sorted(TAUGHT) == sorted(p.name[:2] for p in PATTERNS)


def test_the_index_lists_every_pattern_and_nothing_else():
    problems = index_findings(INDEX, PATTERNS)
    assert not problems, problems


# --- the checks, on probe files ------------------------------------------------------------------------

GOOD = '''"""Start one child with a context, get its answer through a queue.

Run: python 99_probe.py [fork|spawn|forkserver]
"""

import multiprocessing as mp
import sys


def square(x, queue):
    queue.put(x * x)


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    queue = ctx.Queue()
    child = ctx.Process(target=square, args=(7, queue))
    child.start()
    answer = queue.get(timeout=60)
    child.join(timeout=60)
    if child.exitcode is None:
        child.terminate()
        child.join(timeout=5)
    if child.exitcode != 0 or answer != 49:
        sys.exit(f"child exit code {child.exitcode}, answer {answer}")
    print(f"{method}: the child squared 7 -> {answer}")
'''


def _probe(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "99_probe.py"
    path.write_text(text)
    return path


def test_a_good_pattern_passes_every_check(tmp_path):
    # The probe uses the standard library's multiprocessing (torch.multiprocessing is a drop-in
    # wrapper of it): its three runs take 0.1-0.3 s each instead of a torch import each.
    path = _probe(tmp_path, GOOD)
    assert pattern_findings(path) == []
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    assert run_under_every_method(path, workdir) == []


def test_the_static_checks_find_each_broken_rule(tmp_path):
    broken = (
        GOOD.replace("import sys\n", "import sys\n\nfrom helpers import source\nimport pandas\n")
        .replace("queue.get(timeout=60)", "queue.get()")
        .replace("child.join(timeout=60)", "child.join()")
        .replace('if __name__ == "__main__":', "if True:")
    )
    problems = pattern_findings(_probe(tmp_path, broken + "\n" * 14))
    assert problems == [
        "44 lines (at most 40, blank lines and comments included)",
        'no `if __name__ == "__main__":` guard',
        "imports ['helpers', 'pandas']: only the standard library, torch and numpy",
        "line 23: queue.get() waits forever (pass timeout=...)",
        "line 24: child.join() waits forever (pass timeout=...)",
    ]
    assert pattern_findings(_probe(tmp_path, GOOD.replace('"""Start', '"""Start\n\n\n\n'))) == [
        "needs a module docstring of 1-3 lines: what it shows and how to run it"
    ]


def test_the_wait_rule_accepts_bounded_and_non_queue_calls():
    bounded = (
        "q.get(True, 5); results_queue.get(block=False); q_in.get(False); self.queue.get(timeout=1)\n"
        "p.join(5); ', '.join(parts); config.get('key'); os.path.join('a', 'b')"
    )
    assert _unbounded_waits(ast.parse(bounded)) == []
    unbounded = "q.get(); self.work_queue.get(True); queues[0].join(); t.join()"
    assert len(_unbounded_waits(ast.parse(unbounded))) == 4


def test_a_failing_or_silent_pattern_fails_the_run(tmp_path):
    failing = _probe(tmp_path, "import sys\nprint('trying')\nsys.exit('the child failed')\n")
    assert run_pattern(failing, "spawn", tmp_path).startswith("spawn: exit code 1\ntrying")
    silent = _probe(tmp_path, "x = 1\n")
    assert "printed nothing" in run_pattern(silent, "spawn", tmp_path)


def test_the_index_check_finds_missing_and_stale_entries(tmp_path):
    index = tmp_path / "README.md"
    index.write_text(
        "# Patterns\n\nSee 07_x.py in prose (not an entry).\n\n| file | what |\n|---|---|\n"
        "| [01_a.py](01_a.py) | a |\n| [02_gone.py](02_gone.py) | gone |\n"
    )
    files = [tmp_path / "01_a.py", tmp_path / "03_new.py"]
    assert index_findings(index, files) == [
        "03_new.py is not in README.md's table",
        "README.md lists 02_gone.py, which does not exist",
    ]


def test_the_join_ending_check_wants_terminate_then_a_bounded_join(tmp_path):
    ending = "    if child.exitcode is None:\n        child.terminate()\n        child.join(timeout=5)\n"
    assert ending in GOOD
    endings = {
        "nothing after the join": GOOD.replace(ending, ""),
        "kill() instead of terminate()": GOOD.replace("child.terminate()", "child.kill()"),
        "is_alive() instead of exitcode": GOOD.replace("child.exitcode is None:", "child.is_alive():"),
        "no join after terminate()": GOOD.replace(
            "        child.join(timeout=5)\n", "        print('stopped')\n"
        ),
        "the join before terminate()": GOOD.replace(
            "        child.terminate()\n        child.join(timeout=5)\n",
            "        child.join(timeout=5)\n        child.terminate()\n",
        ),
    }
    expected = [
        "line 21: child.join(timeout=60) is not followed by `if child.exitcode is None:` `child.terminate()` "
        "and `child.join(timeout=...)`"
    ]
    for why, text in endings.items():
        # first: the join left without its ending (an is_alive() block's own join is one more)
        assert pattern_findings(_probe(tmp_path, text))[:1] == expected, why
    # In loops, and in a `finally` whose test also skips a process that never started:
    loops = (
        "for p in procs:\n    p.join(timeout=60)\n"
        "for p in procs:\n    if p.pid is not None and p.exitcode is None:\n"
        "        p.terminate()\n        p.join(5)\n"
    )
    assert unended_joins(ast.parse(loops)) == []
    others = "p.join(60)\nx.join(timeout=1)\n', '.join(parts)\nos.path.join('a', 'b')\nsep.join(parts)\n"
    assert [f.split(":")[0] for f in unended_joins(ast.parse(others))] == ["line 1", "line 2"]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups (POSIX)")
def test_a_pattern_past_its_deadline_is_killed_with_its_workers(tmp_path, monkeypatch):
    import psutil

    pid_file = tmp_path / "worker.pid"
    hangs = (  # its worker holds no pipe of ours: only the process group finds it
        "import subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],\n"
        "                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(worker.pid))\n"
        "time.sleep(300)\n"
    )
    monkeypatch.setitem(globals(), "RUN_TIMEOUT", 5)
    assert run_pattern(_probe(tmp_path, hangs), "spawn", tmp_path) == "spawn: still running after 5 s"
    worker = psutil.Process(int(pid_file.read_text()))
    try:
        assert worker.wait(timeout=5) is None or not worker.is_running()  # killed, reaped by init
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()
