"""What every notebook of the series must satisfy: one table, ``RULES``, over ``tools.notebook_model``.

Each rule is an id, the one-line statement CONTRIBUTING.md lists, and a check: a function from a
:class:`~tools.notebook_model.Notebook` to the problems it finds (empty when the notebook keeps the
rule). ``tests/test_notebook_contract.py`` runs every rule on every notebook, and checks that
CONTRIBUTING.md lists the table as ``python -m tests.notebook_rules`` prints it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from unittest.mock import patch

from helpers import processes
from helpers.processes import linux_only
from helpers.source import source_text
from tools.notebook_model import ROOT, Notebook, notebooks
from tools.setup_cell import setup_cell as setup_cell_text

# The promise to a learner is a main path of about 20 minutes (DESIGN.md). The rule checks it with a
# margin, so that a wording fix or a needed sentence does not force a cut elsewhere; past 22 minutes
# depth moves to an appendix or the notebook splits. Appendices: depth for some learners, 15 in all.
MAIN_PATH_MINUTES = 22
APPENDIX_MINUTES = 15
READING_TIME = re.compile(r"about (\d+) min")
MEDIAN_CELL_LINES = 8
LONGEST_CELL_LINES = 25
DIAGRAM_TYPES = (
    "flowchart",
    "graph",
    "sequenceDiagram",
    "stateDiagram",
    "stateDiagram-v2",
    "classDiagram",
    "timeline",
    "gantt",
    "block-beta",
)
# The parent side is written with the plain API: each notebook starts processes itself at least once.
PLAIN_LAUNCHES = {"Process", "spawn", "start_processes", "DataLoader", "Pool"}
# A shown pattern fits in a learner's head: about 25 lines. The complete DDP training function of
# notebook 06 is the one named exception (issue "Show the code that runs (1 of 3)").
SHOWN_LINES = 25
LONGER_SHOWN = {"helpers.ddp.train": 42}
# Names that only work on Linux (helpers that read /proc or /dev/shm, the file_descriptor probes and
# their results, the pipe-capacity fcntl): used only under `if linux_only(...)`.
LINUX_ONLY = {
    "memory_region",
    "shared_memory_segments",
    "strategy_footprint",
    "fd_limit_probe",
    "torch_entries_of",
    "F_GETPIPE_SZ",
    "footprint",
    "probes",
}
OTHER_PLATFORMS = ("darwin", "win32")
SETUP_CELL = setup_cell_text()
# What each notebook's main path teaches, which its pattern must contain: identifiers (a name, an
# attribute, a keyword argument, an import, a string such as an environment variable's name) and
# calls written as their source's ending (``.put(None)``: the sentinel). Each is also checked to be
# named on the notebook's main path, so the table cannot drift from what the notebook teaches.
TAUGHT = {
    "01": ["get_context", "Process", "join", "exitcode", "terminate"],
    "02": ["share_memory_"],
    "03": ["Queue", "get", ".put(None)", "Event"],
    "04": ["set_device"],
    "05": ["share_memory"],
    "06": [
        "init_process_group",
        "DistributedDataParallel",
        "DistributedSampler",
        "set_epoch",
        "destroy_process_group",
    ],
    "07": ["get_worker_info", "generator", "persistent_workers"],
    "08": ["faulthandler"],
    "09": ["init_process_group", "LOCAL_RANK"],
    "10": ["Join"],
    "11": ["broadcast", "all_reduce", "world_size", "init_process_group", "destroy_process_group"],
    "12": ["init_device_mesh", "fully_shard", "to_local"],
    "13": ["share_memory_", "Lock", "clone"],
    "14": ["signal", "SIGHUP", "basicConfig"],
}


@dataclass(frozen=True)
class Rule:
    """One notebook rule: its id, what it demands in a line, and the check that finds what breaks it."""

    id: str
    statement: str
    check: Callable[[Notebook], list[str]]


def committed_clean(nb: Notebook) -> list[str]:
    problems = [
        f"cell {c.index} has outputs; clear them before committing" for c in nb.cells if c.has_outputs
    ]
    problems += [
        f"code cell {c.code_index} does not parse: {c.syntax_error}" for c in nb.code_cells if c.syntax_error
    ]
    if nb.schema_error:
        problems.append(f"not a valid nbformat 4 notebook: {nb.schema_error}")
    if nb.kernel != "python3":
        problems.append(f"kernel {nb.kernel!r}: use the environment's python3")
    return problems


def header(nb: Notebook) -> list[str]:
    problems = [] if nb.title_line.startswith(f"# {nb.number} · ") else [f"opens with {nb.title_line!r}"]
    fields = ("Prerequisites", "Needs", "Run time")
    return problems + [
        f"the opening cell has no '- **{name}:**' line" for name in fields if name not in nb.header
    ]


def reading_time(nb: Notebook) -> list[str]:
    times, problems = nb.reading_time, []
    if times.main > MAIN_PATH_MINUTES:
        problems.append(f"main path reads in {times.main:.1f} min (at most {MAIN_PATH_MINUTES})")
    if times.appendix_total > APPENDIX_MINUTES:
        problems.append(f"appendices read in {times.appendix_total:.1f} min (at most {APPENDIX_MINUTES})")
    stated = READING_TIME.match(nb.header.get("Reading time", ""))
    if stated is None or int(stated[1]) != times.header_minutes:
        problems.append(f"the header must say '**Reading time:** about {times.header_minutes} min'")
    return problems


def numbering_gaps(numbers: list[str]) -> list[str]:
    """Where ``numbers`` skips or repeats: sections run 1, 2, 3...; subsections 2a, 2b... under 2.

    >>> numbering_gaps(["1", "2", "2a", "2b", "3"]), numbering_gaps(["1", "3", "3b"])
    ([], ['3 after 1', '3b after 3'])
    """
    gaps, previous = [], "0"
    for number in numbers:
        section, letter = int(re.match(r"\d+", number)[0]), number[-1] if number[-1].isalpha() else ""
        last_section = int(re.match(r"\d+", previous)[0])
        last_letter = previous[-1] if previous[-1].isalpha() else ""
        expected = (
            section == last_section and letter == chr(ord(last_letter or "`") + 1)
            if letter
            else section == last_section + 1
        )
        if not expected:
            gaps.append(f"{number} after {previous}")
        previous = number
    return gaps


def sections(nb: Notebook) -> list[str]:
    numbers = [s.number for s in nb.sections if s.number]
    problems = [f"sections {numbers}: {gap}" for gap in numbering_gaps(numbers)]
    ids = [s.id for s in nb.sections]
    problems += [f"two sections have the id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    problems += [f"no `<a id>` line above '{s.title}'" for s in nb.sections if not s.anchored]
    titles = [s.title for s in nb.sections if s.level == 2 and not s.number]
    if "Summary" not in titles or "Exercises" not in titles:
        problems.append("no '## Summary' and '## Exercises' sections")
    elif titles.index("Summary") > titles.index("Exercises"):
        problems.append("'## Summary' comes after '## Exercises'")
    hidden = [
        f"code cell {cell.code_index}: {line.strip()}"
        for cell in nb.code_cells
        for line in cell.source.splitlines()
        if re.match(r"\s*#\s*#{1,6}\s", line)
    ]
    return problems + [f"a heading hides in a code cell (use a markdown cell): {h}" for h in hidden]


def short_cells(nb: Notebook) -> list[str]:
    lengths = sorted(len(cell.source.splitlines()) for cell in nb.code_cells) or [0]
    problems = []
    if statistics.median_high(lengths) > MEDIAN_CELL_LINES:
        problems.append(
            f"median code cell {statistics.median_high(lengths)} lines (at most {MEDIAN_CELL_LINES})"
        )
    longest = max(nb.code_cells, key=lambda c: len(c.source.splitlines()), default=None)
    if longest is not None and lengths[-1] > LONGEST_CELL_LINES:
        problems.append(
            f"code cell {longest.code_index}: {lengths[-1]} lines (at most {LONGEST_CELL_LINES}); split it"
        )
    return problems


# What takes the default start method when it is given none: a call of the module-level API of
# multiprocessing (or torch.multiprocessing) that makes a process or a context-bound object, a context
# asked for without a method, a DataLoader with workers and no `multiprocessing_context`. torch's
# `mp.spawn` and `mp.start_processes` spawn unless told otherwise, whatever the default.
DEFAULT_CONTEXT_CALLS = {
    "Process", "Pool", "Queue", "SimpleQueue", "JoinableQueue", "Lock", "RLock", "Semaphore",
    "BoundedSemaphore", "Event", "Condition", "Barrier", "Value", "Array", "Manager",
}  # fmt: skip
MP_MODULES = ("mp", "multiprocessing", "torch.multiprocessing")


def default_start_sites(source_tree: ast.Module) -> list[str]:
    """The calls in ``source_tree`` that would use the default start method (``names-start-method``).

    >>> default_start_sites(ast.parse("mp.get_context('fork').Process(); mp.Queue(); mp.get_context()"))
    ['mp.Queue()', 'mp.get_context()']
    >>> default_start_sites(ast.parse("DataLoader(d, num_workers=2); DataLoader(d)"))
    ['DataLoader(num_workers=...) without multiprocessing_context']
    """
    sites = []
    for node in ast.walk(source_tree):
        if not isinstance(node, ast.Call):
            continue
        func, keywords = node.func, {k.arg for k in node.keywords}
        name = ast.unparse(func)
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        attr = func.attr if isinstance(func, ast.Attribute) else name
        if owner in MP_MODULES and attr in DEFAULT_CONTEXT_CALLS:
            sites.append(f"{name}()")
        elif attr == "get_context" and not node.args and "method" not in keywords:
            sites.append(f"{name}()")
        elif attr == "DataLoader" and "num_workers" in keywords and "multiprocessing_context" not in keywords:
            workers = next(k.value for k in node.keywords if k.arg == "num_workers")
            if not (isinstance(workers, ast.Constant) and workers.value == 0):
                sites.append("DataLoader(num_workers=...) without multiprocessing_context")
    return sites


def names_start_method(nb: Notebook) -> list[str]:
    return [
        f"code cell {cell.code_index}: {site} takes the default start method: name one "
        "(mp.get_context(METHOD), start_method=, multiprocessing_context=)"
        for cell in nb.code_cells
        for site in default_start_sites(cell.tree)
    ]


def no_set_start_method(nb: Notebook) -> list[str]:
    return [
        f"code cell {cell.code_index} calls set_start_method, which fails when the cell is re-run: "
        "use mp.get_context(...)"
        for cell in nb.code_cells
        if "set_start_method(" in cell.source
    ]


def diagram(nb: Notebook) -> list[str]:
    problems = [
        f"a diagram starts with {d.kind!r}, not a diagram type ({', '.join(DIAGRAM_TYPES)})"
        for d in nb.diagrams
        if d.kind not in DIAGRAM_TYPES
    ]
    if not any(d.main_path for d in nb.diagrams):
        problems.insert(
            0, "no ```mermaid block in a markdown cell of the main path (before the first Appendix)"
        )
    return problems


def shown_before_started(nb: Notebook) -> list[str]:
    problems = []
    for start in nb.started:
        before = {id(s.obj) for s in nb.shown if s.obj is not None and s.position < start.position}
        wrapped = getattr(start.obj, "__wrapped__", None)
        if start.obj is None or (id(start.obj) not in before and id(wrapped) not in before):
            command = f" (python -m {start.name.rsplit('.', 1)[0]})" if start.command else ""
            problems.append(
                f"code cell {start.code_cell}: {start.name}{command} runs before show_source shows it"
            )
    if not nb.call_names & PLAIN_LAUNCHES:
        problems.append(f"no code cell starts a process with the plain API ({sorted(PLAIN_LAUNCHES)})")
    return problems


def short_listings(nb: Notebook) -> list[str]:
    problems = []
    for shown in nb.shown:
        if shown.obj is None or not shown.name.startswith("helpers."):
            continue
        lines = len(source_text(shown.obj).splitlines())  # as displayed: no docstring
        limit = LONGER_SHOWN.get(shown.name, SHOWN_LINES)
        if lines > limit:
            problems.append(f"{shown.name}: {lines} lines shown (at most {limit})")
    return problems


def _guarded(statement: ast.stmt) -> bool:
    test = statement.test if isinstance(statement, ast.If) else None
    return isinstance(test, ast.Call) and getattr(test.func, "id", None) == "linux_only"


def _shows_source(statement: ast.stmt) -> bool:
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and getattr(call.func, "id", None) == "show_source"


def _skip_lines(guards: list[ast.stmt], platform: str) -> list[str]:
    """What the guard statements print with the platform faked (their bodies do not run)."""
    real, sys.platform = sys.platform, platform
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()) as printed,
            patch.object(processes, "PLATFORM", platform),
        ):
            tree = ast.Module(body=guards, type_ignores=[])
            exec(compile(tree, "<guards>", "exec"), {"linux_only": linux_only})  # noqa: S102
    finally:
        sys.platform = real
    return printed.getvalue().splitlines()


def linux_guarded(nb: Notebook) -> list[str]:
    problems = []
    for cell in nb.code_cells:
        for statement in cell.tree.body:
            used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(statement) if isinstance(n, ast.Attribute)}
            if used & LINUX_ONLY and not (_guarded(statement) or _shows_source(statement)):
                line = ast.unparse(statement).splitlines()[0]
                problems.append(
                    f"code cell {cell.code_index}: Linux-only code outside `if linux_only(...)`: {line}"
                )
        guards = [statement for statement in cell.tree.body if _guarded(statement)]
        for platform in OTHER_PLATFORMS if guards else ():
            lines = _skip_lines(guards, platform)
            if not lines or not all(
                line.startswith("needs Linux (") and line.endswith(f"skipped on {platform}") for line in lines
            ):
                problems.append(f"code cell {cell.code_index} on {platform} prints {lines}, not a skip line")
    return problems


def pattern(nb: Notebook) -> list[str]:
    if nb.number == "00":
        return []
    mine = [use for use in nb.pattern_uses if use.number == nb.number]
    wanted = f'pattern_path("{nb.number}_*.py")'
    if not mine:
        return [f"no code cell of the main path calls {wanted} (a pattern file of patterns/)"]
    problems = [f"patterns/{use.written} does not exist" for use in mine if not use.path.is_file()]
    if not any(use.shown for use in mine):
        problems.append(f"the main path does not call show_script on {wanted}")
    if not any(use.run for use in mine):
        problems.append(f"no code cell of the main path runs {wanted} with subprocess.run")
    return problems


def setup_cell(nb: Notebook) -> list[str]:
    first = next((cell for cell in nb.cells if cell.kind == "code"), None)
    if first is not None and first.source == SETUP_CELL:
        return []
    return ["the first code cell is not the setup cell: run `python -m tools.setup_cell --write`"]


def names_used(tree: ast.Module) -> set[str]:
    """Every identifier a file uses: names, attributes, keyword arguments, imports, string constants."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.update({node.name, *node.name.split("."), node.asname or node.name})
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found


def pattern_teaches(nb: Notebook) -> list[str]:
    mine = [use.path for use in nb.pattern_uses if use.number == nb.number and use.path.is_file()]
    if nb.number not in TAUGHT or not mine:
        return [] if nb.number == "00" else [f"no row in TAUGHT or no pattern file for notebook {nb.number}"]
    tree = ast.parse(mine[0].read_text())
    used, calls = names_used(tree), [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    text = "\n".join(cell.source for cell in nb.main_path)
    problems = []
    for item in TAUGHT[nb.number]:
        contained = any(c.endswith(item) for c in calls) if item.startswith(".") else item in used
        if not contained:
            problems.append(f"{mine[0].name} does not contain `{item}`, which {nb.name} teaches")
        words = re.findall(r"\w+", item) if item.startswith(".") else [item]  # .put(None): put, None
        if not all(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) for word in words):
            problems.append(f"{nb.name}'s main path never names `{item}`")
    return problems


def exercise(nb: Notebook) -> list[str]:
    mine = [name for name in nb.exercises if name.startswith(f"ex{nb.number}_")]
    if not mine:
        return [f"names no programming exercise exercises/ex{nb.number}_*.py"]
    folders = ("exercises", "solutions", "helpers/checkers")
    problems = [
        f"{folder}/{mine[0]} does not exist" for folder in folders if not (ROOT / folder / mine[0]).is_file()
    ]
    if "start_exercise" not in nb.call_names:
        problems.append(
            f'the checker is not given the learner\'s file: check_ex{nb.number}(start_exercise("ex{nb.number}"))'
        )
    return problems


def listed(nb: Notebook) -> list[str]:
    overview = next((n for n in notebooks() if n.number == "00"), None)
    mapped = (
        re.findall(r"\]\((\d\d_\w+\.ipynb)\)", "\n".join(c.source for c in overview.cells))
        if overview
        else []
    )
    problems = [] if nb.name in mapped else [f"notebook 00's map does not link {nb.name}"]
    if nb.name not in (ROOT / "README.md").read_text():
        problems.append(f"README.md's notebook table does not name {nb.name}")
    if nb.number == "00":
        series = {n.name for n in notebooks()}
        problems += [
            f"the map links {name}, which is not in notebooks/" for name in sorted(set(mapped) - series)
        ]
    return problems


RULES = [
    Rule(
        "committed-clean",
        "valid nbformat 4, the `python3` kernel, committed without outputs",
        committed_clean,
    ),
    Rule(
        "setup-cell",
        "the first code cell is the setup cell of `tools/setup_cell.py` (`python -m tools.setup_cell --write`)",
        setup_cell,
    ),
    Rule(
        "header",
        "opens with `# NN · Title` and the **Prerequisites:**, **Needs:** and **Run time:** lines",
        header,
    ),
    Rule(
        "reading-time",
        f"main path reads in at most {MAIN_PATH_MINUTES} min, appendices in {APPENDIX_MINUTES}; "
        "the header's **Reading time:** says `about N min`, N the main path rounded up",
        reading_time,
    ),
    Rule(
        "sections",
        '`## N.` / `### Na.` numbered without gaps, each heading with its own `<a id="slug"></a>` line '
        "above it, `## Summary` then `## Exercises`, "
        "no heading inside a code cell",
        sections,
    ),
    Rule(
        "short-cells",
        f"median code cell at most {MEDIAN_CELL_LINES} lines, none over {LONGEST_CELL_LINES}",
        short_cells,
    ),
    Rule("get-context", "no `set_start_method` (use `mp.get_context(...)`)", no_set_start_method),
    Rule(
        "names-start-method",
        "every process, pool, queue, lock and DataLoader with workers names its start method "
        "(so only the cells that read the default need the forced start-method runs)",
        names_start_method,
    ),
    Rule(
        "diagram",
        "a Mermaid diagram of the mechanism on the main path; every diagram of a known type",
        diagram,
    ),
    Rule(
        "shown-before-started",
        "every `helpers` worker started in another process is shown with `show_source` first; "
        "at least one process started with the plain API",
        shown_before_started,
    ),
    Rule(
        "short-listings",
        f"every `helpers` object shown is at most {SHOWN_LINES} lines (without its docstring)",
        short_listings,
    ),
    Rule(
        "linux-guarded",
        "Linux-only names are used under `if linux_only(...)`, which prints a skip line elsewhere",
        linux_guarded,
    ),
    Rule(
        "pattern",
        'the main path shows `pattern_path("NN_*.py")` (a file of `patterns/`) with `show_script` and runs '
        "it with `subprocess.run`",
        pattern,
    ),
    Rule(
        "pattern-teaches",
        "the pattern contains, and the main path names, the notebook's row of `TAUGHT`",
        pattern_teaches,
    ),
    Rule(
        "exercise",
        "names `exercises/exNN_*.py`, which has a solution and a checker, and checks it with "
        '`check_exNN(start_exercise("exNN"))`',
        exercise,
    ),
    Rule("listed", "linked from notebook 00's map and named in README.md's table", listed),
]


def contributing_list() -> str:
    """The rules as CONTRIBUTING.md lists them: one ``- `id`: statement`` line each."""
    return "\n".join(f"- `{rule.id}`: {rule.statement}" for rule in RULES)


# The doctor's checks that never ask for a start method (tests/test_notebook_contract.py traces each
# one's calls): a doctor call whose ``only=[...]`` names nothing else reads no default.
DOCTOR_CHECKS_WITHOUT_DEFAULT = frozenset({"master port", "shared memory", "memory"})


def _doctor_call_reads_default(call: ast.Call) -> bool:
    only = next((k.value for k in call.keywords if k.arg == "only"), None)
    try:
        names = set(ast.literal_eval(only)) if isinstance(only, ast.List | ast.Tuple) else None
    except ValueError:  # a name among the literals: cannot tell, so it counts
        names = None
    return names is None or not names <= DOCTOR_CHECKS_WITHOUT_DEFAULT


def reads_default(nb: Notebook) -> bool:
    """Whether a code cell of ``nb`` reads the kernel's default start method: calls
    ``get_start_method()``, takes the first of ``get_all_start_methods()`` (the default, first from
    Python 3.13 on) or runs a doctor check that reports it (a ``check()`` of ``helpers.doctor`` not
    limited by ``only=`` to :data:`DOCTOR_CHECKS_WITHOUT_DEFAULT`). With ``names-start-method`` kept,
    these are the only notebooks whose run a forced default changes (``make test-forkserver``)."""
    doctor = False
    calls = []
    for cell in nb.code_cells:
        for node in ast.walk(cell.tree):
            called = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
            if called.endswith("get_start_method") or re.search(r"\bmethods\[0\]", ast.unparse(node)):
                return True
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers.doctor"):
                if {alias.name for alias in node.names} - {"check", "format_findings"}:
                    return True  # another entry point of the doctor: it may report the default
                doctor = True
            if called in ("check", "doctor.check"):
                calls.append(node)
    return doctor and any(_doctor_call_reads_default(call) for call in calls)


if __name__ == "__main__":
    if sys.argv[1:] == ["--reads-default"]:  # the Makefile's list for the forced start-method runs
        print(" ".join(str(nb.path.relative_to(ROOT)) for nb in notebooks() if reads_default(nb)))
    else:
        print(contributing_list())
