"""One read of a notebook: the plain object every notebook rule, test and tool looks at.

``read_notebook(path)`` parses one ``.ipynb`` file (``parse(nb, path)`` an nbformat notebook in
memory); ``notebooks()`` returns every ``notebooks/NN_*.ipynb`` of the series, read once per process.
A :class:`Notebook` holds its header fields, its cells, its sections (with their ids), its main path
and appendices, its reading time, the objects it displays with ``show_source``, the ``helpers``
workers it starts in other processes, the pattern script it shows and runs, its Mermaid diagrams and
the exercise it names. The rules over it are ``tests/notebook_rules.py``.

Reading time: markdown words / 200 + code lines / 15, in minutes (section anchor lines,
``<a id="..."></a>``, are not read and not counted). Code lines are the non-blank
lines of code cells plus the lines each ``show_source`` listing displays (docstrings left out unless
the call asks for them) and each ``show_script`` listing. The main path is every cell before the
first cell with an ``Appendix`` heading; each appendix is counted on its own.

``python -m tools.notebook_model`` prints every notebook's reading time.
"""

from __future__ import annotations

import ast
import importlib
import math
import re
import sys
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import nbformat

from helpers.resources import data_folder
from helpers.source import source_text

ROOT = Path(__file__).resolve().parent.parent
SERIES = ROOT / "notebooks"
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 15
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*$")
NUMBERED = re.compile(r"^(\d+[a-z]?)\.[ \t]+(.*)$")
ANCHOR = re.compile(r'^\s*<a\s+id="([^"]+)"\s*>\s*</a>\s*$')
FENCE = re.compile(r"^ {0,3}(```|~~~)")
MERMAID = re.compile(r"^ {0,3}```mermaid[ \t]*\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL)
FIELD = re.compile(r"^- \*\*([^*:]+):\*\*[ \t]*(.*)$")
PATTERN_NAME = re.compile(r"(\d\d)_\w+\.py")  # pattern_path("NN_x.py"): helpers.resources finds the file
SETUP_MARK = "# Setup: "  # the first code cell of every notebook (tools/setup_cell.py): not read, not counted
EXERCISE = re.compile(r"\bexercises/(ex\d\d_\w+\.py)")

# Calls that run their first argument (or fn=/target=/func=/worker_init_fn=) in another process.
LAUNCHERS = set(
    "spawn start_processes launch run_with_deadline spawn_with_deadline map map_async imap imap_unordered "
    "starmap starmap_async apply apply_async submit".split()
)
FUNCTION_KEYWORDS = ("fn", "target", "func", "worker_init_fn")
DATASET_TAKERS = {"DataLoader"}


def slug(title: str) -> str:
    """A section's id from its heading: lowercase, runs of other characters than a-z0-9 become ``-``.

    >>> slug("2. `mp.spawn` in one cell"), slug("Appendix: where the rendezvous listens")
    ('mp-spawn-in-one-cell', 'appendix-where-the-rendezvous-listens')
    """
    numbered = NUMBERED.match(title)
    return re.sub(r"[^a-z0-9]+", "-", (numbered[2] if numbered else title).lower()).strip("-")


def non_blank(text: str) -> int:
    """How many lines of ``text`` hold something other than whitespace."""
    return len([line for line in text.splitlines() if line.strip()])


def cell_tree(source: str) -> ast.Module:
    """A code cell's syntax tree, IPython magics and shell escapes (``%``, ``!``) left out."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def mermaid_blocks(markdown: str) -> list[str]:
    """The Mermaid diagrams (```` ```mermaid ```` fenced blocks) of a markdown text, in order.

    >>> mermaid_blocks("Text\\n\\n```mermaid\\nflowchart LR\\n  A --> B\\n```\\n")
    ['flowchart LR\\n  A --> B\\n']
    """
    return MERMAID.findall(markdown)


def headings(markdown: str) -> list[tuple[int, str, str | None]]:
    """``(level, title, anchor id or None)`` of each heading of a markdown text, fenced code left out."""
    found, fenced, previous = [], False, ""
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (heading := HEADING.match(line)):
            anchor = ANCHOR.match(previous)
            found.append((len(heading[1]), heading[2], anchor[1] if anchor else None))
        previous = line
    return found


def object_at(dotted: str) -> object | None:
    """The object a dotted path names (``helpers.ddp.train``), or None when it is not importable."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def dotted_name(node: ast.AST) -> str | None:
    """``torch.cuda.is_available`` for that expression; None for anything but a chain of names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def call_name(call: ast.Call) -> str:
    """The called name's last part: ``Process`` for ``ctx.Process(...)``."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class Scope:
    """Names a notebook bound to helpers objects, resolved to dotted paths (``helpers.ddp.train``)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def bind(self, node: ast.AST) -> None:
        """Record what an import of helpers, or ``x = helpers_callable(...)``, binds."""
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
            for alias in node.names:
                self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "helpers":
                    self.names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            # `dataset = data.Numbers(...)`: the variable stands for its helpers class.
            made = self.resolve(node.value.func)
            if made:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.names[target.id] = made

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted helpers path an expression stands for, or None."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):  # `Numbers(...)` given to a DataLoader: the class
            return self.resolve(node.func)
        return None


@dataclass(frozen=True)
class Cell:
    """One cell: its place among all cells and among code cells (None for markdown), kind, source."""

    index: int
    code_index: int | None
    kind: str
    source: str
    has_outputs: bool = False

    @cached_property
    def tree(self) -> ast.Module:
        """The code cell's syntax tree (magics left out); empty for markdown and code that does not parse."""
        try:
            return cell_tree(self.source) if self.kind == "code" else ast.Module(body=[], type_ignores=[])
        except SyntaxError:
            return ast.Module(body=[], type_ignores=[])

    @property
    def syntax_error(self) -> str | None:
        """Why a code cell does not parse as Python (magics left out), or None."""
        try:
            cell_tree(self.source) if self.kind == "code" else None
        except SyntaxError as error:
            return f"line {error.lineno}: {error.msg}"
        return None

    @property
    def headings(self) -> list[tuple[int, str, str | None]]:
        return headings(self.source) if self.kind == "markdown" else []


@dataclass(frozen=True)
class Section:
    """A ``##``/``###`` heading and the cells from its cell to the next heading as high or higher."""

    id: str
    level: int
    number: str  # "3", "2a"; "" for Setup, Summary, Appendix...
    title: str  # without the number
    cells: tuple[Cell, ...]
    appendix: bool
    anchored: bool  # the id comes from an `<a id="..."></a>` line above the heading


@dataclass(frozen=True)
class Shown:
    """A ``show_source(obj)`` call: what it names, where, and the object (None if not importable)."""

    name: str
    code_cell: int
    position: tuple[int, int, int] = field(repr=False)
    obj: object = field(repr=False, compare=False)
    docstring: bool = False

    @property
    def listing(self) -> str:
        """The text the call displays."""
        return source_text(self.obj, self.docstring) if self.obj is not None else ""


@dataclass(frozen=True)
class Started:
    """A helpers callable a code cell runs in another process (``command``: as ``python -m``)."""

    name: str
    code_cell: int
    position: tuple[int, int, int] = field(repr=False)
    obj: object = field(repr=False, compare=False)
    command: bool = False


@dataclass(frozen=True)
class PatternUse:
    """A ``pattern_path("NN_x.py")`` call on the main path, and whether the main path shows and runs it."""

    written: str
    path: Path
    shown: bool
    run: bool
    # How the main path runs it, in a cell that asserts the run's exit status is 0
    # (``subprocess.run([sys.executable, PATTERN, ...])``): "any" with no argument (the method is not
    # the pattern's to choose), a start method's name passed as a string, "FAST_METHOD" for a name
    # bound to ``FAST_METHOD`` (the platform's choice). A run with other arguments counts for nothing.
    run_methods: frozenset[str] = frozenset()

    @property
    def number(self) -> str:
        return PATTERN_NAME.fullmatch(self.written)[1]


@dataclass(frozen=True)
class Diagram:
    """A Mermaid block; ``kind`` is its first word (``flowchart``, ``sequenceDiagram``...)."""

    source: str
    main_path: bool

    @property
    def kind(self) -> str:
        return next((line.split()[0] for line in self.source.splitlines() if line.strip()), "")


@dataclass(frozen=True)
class ReadingTime:
    """Minutes to read a notebook's main path and each of its appendices."""

    main: float
    appendices: dict[str, float]

    @property
    def appendix_total(self) -> float:
        return sum(self.appendices.values())

    @property
    def header_minutes(self) -> int:
        """The figure the header states: the main path, rounded up."""
        return math.ceil(self.main)


@dataclass(frozen=True, eq=False)
class Notebook:
    """Everything the notebook rules read, from one parse of the file."""

    path: Path
    number: str
    title_line: str
    header: dict[str, str]
    kernel: str
    schema_error: str | None
    cells: tuple[Cell, ...]
    sections: tuple[Section, ...]
    main_path: tuple[Cell, ...]
    appendices: dict[str, tuple[Cell, ...]]
    reading_time: ReadingTime
    shown: tuple[Shown, ...]
    started: tuple[Started, ...]
    call_names: frozenset[str]
    pattern_uses: tuple[PatternUse, ...]
    diagrams: tuple[Diagram, ...]
    exercises: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def code_cells(self) -> list[Cell]:
        return [cell for cell in self.cells if cell.kind == "code"]


def _header(first: Cell) -> dict[str, str]:
    """``- **Field:** value`` lines of the opening cell (a value may wrap onto indented lines)."""
    fields, current = {}, None
    for line in first.source.splitlines() if first.kind == "markdown" else []:
        item = FIELD.match(line)
        if item:
            current = item[1].strip()
            fields[current] = item[2].strip()
        elif current and line.startswith(" ") and line.strip():
            fields[current] += " " + line.strip()
        else:
            current = None
    return fields


def _sections(cells: tuple[Cell, ...], first_appendix: int) -> tuple[Section, ...]:
    marks = [  # (cell index, level, title, anchor) of each ## and ### heading
        (cell.index, level, title, anchor)
        for cell in cells
        for level, title, anchor in cell.headings
        if level in (2, 3)
    ]
    sections = []
    for position, (index, level, title, anchor) in enumerate(marks):
        end = next((i for i, lvl, _, _ in marks[position + 1 :] if lvl <= level), len(cells))
        numbered = NUMBERED.match(title)
        sections.append(
            Section(
                id=anchor or slug(title),
                level=level,
                number=numbered[1] if numbered else "",
                title=numbered[2] if numbered else title,
                cells=cells[index : max(end, index + 1)],
                appendix=index >= first_appendix,
                anchored=anchor is not None,
            )
        )
    return tuple(sections)


def _appendix_title(cell: Cell) -> str | None:
    return next((title for _, title, _ in cell.headings if re.match(r"Appendix\b", title)), None)


def _parts(cells: tuple[Cell, ...]) -> tuple[tuple[Cell, ...], dict[str, tuple[Cell, ...]]]:
    """The main path (cells before the first with an Appendix heading) and each appendix's cells."""
    main, appendices, current = [], {}, None
    for cell in cells:
        current = _appendix_title(cell) or current
        if current is None:
            main.append(cell)
        else:
            appendices[current] = (*appendices.get(current, ()), cell)
    return tuple(main), appendices


def _walk(cell: Cell) -> list[ast.AST]:
    """A code cell's nodes in reading order (line, then column)."""
    nodes = ast.walk(cell.tree)
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def _handed_off(call: ast.Call) -> list[ast.AST]:
    """The expressions a call runs in another process (unresolved)."""
    name = call_name(call)
    handed = [kw.value for kw in call.keywords if kw.arg in FUNCTION_KEYWORDS]
    if name in LAUNCHERS and call.args:
        handed.append(call.args[0])
    if name in DATASET_TAKERS:
        handed += call.args[:1] + [kw.value for kw in call.keywords if kw.arg == "dataset"]
    return handed


def _module_entries(node: ast.AST) -> list[str]:
    """``"-m", "helpers.X"`` in a list, tuple or call arguments (a torchrun or python command line):
    that process runs ``helpers.X``'s ``main``."""
    if isinstance(node, ast.List | ast.Tuple):
        elements = node.elts
    else:
        elements = node.args if isinstance(node, ast.Call) else []
    return [
        f"{module.value}.main"
        for flag, module in zip(elements, elements[1:], strict=False)
        if isinstance(flag, ast.Constant)
        and flag.value == "-m"
        and isinstance(module, ast.Constant)
        and isinstance(module.value, str)
        and module.value.split(".")[0] == "helpers"
    ]


def _uses_in_cell(cell: Cell, scope: Scope, shown: list, started: list, calls: set) -> None:
    """Add one code cell's show_source calls, started workers and called names to the lists."""
    for node in _walk(cell):
        scope.bind(node)
        where = (cell.code_index, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        for dotted in _module_entries(node):
            started.append(Started(dotted, cell.code_index, where, object_at(dotted), command=True))
        if not isinstance(node, ast.Call):
            continue
        calls.add(call_name(node))
        if scope.resolve(node.func) == "helpers.source.show_source":
            if node.args:
                dotted = scope.resolve(node.args[0]) or dotted_name(node.args[0])
                docstring = any(k.arg == "docstring" and getattr(k.value, "value", 0) for k in node.keywords)
                obj = object_at(dotted) if dotted else None
                shown.append(
                    Shown(dotted or ast.unparse(node.args[0]), cell.code_index, where, obj, docstring)
                )
            continue
        for expression in _handed_off(node):
            dotted = scope.resolve(expression)
            obj = object_at(dotted) if dotted else None
            if obj is not None and callable(obj):
                started.append(Started(dotted, cell.code_index, where, obj))


def _string_constants(cells: list[Cell]) -> dict[str, str]:
    """``NAME = "text"`` assignments of the cells: the names a call may pass instead of the text."""
    return {
        target.id: node.value.value
        for cell in cells
        for node in ast.walk(cell.tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _pattern_name(node: ast.AST) -> str | None:
    """``"NN_x.py"`` when ``node`` is a ``pattern_path("NN_x.py")`` call, else None."""
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("pattern_path")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and PATTERN_NAME.fullmatch(node.args[0].value)
    ):
        return node.args[0].value
    return None


def _pattern_names(cells: list[Cell]) -> dict[str, str]:
    """``NAME = pattern_path("NN_x.py")`` assignments of the cells: each name and the pattern it holds."""
    return {
        target.id: name
        for cell in cells
        for node in ast.walk(cell.tree)
        if isinstance(node, ast.Assign) and (name := _pattern_name(node.value))
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _scripts_shown(cell: Cell, strings: dict[str, str], patterns: dict[str, str], folder: Path) -> list[Path]:
    """The files a code cell's ``show_script(...)`` calls display (those that exist): a pattern
    (``pattern_path(...)`` or a name holding one), or a path (a string or a name holding one)."""
    paths = []
    for node in ast.walk(cell.tree):
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith("show_script"):
            arg, name = node.args[0], getattr(node.args[0], "id", "")
            pattern = _pattern_name(arg) or patterns.get(name)
            path = data_folder("patterns") / pattern if pattern else None
            if path is None:
                text = arg.value if isinstance(arg, ast.Constant) else strings.get(name)
                path = folder / text if isinstance(text, str) else None
            if path is not None and path.is_file():
                paths.append(path)
    return paths


def _pattern_uses(main: tuple[Cell, ...]) -> tuple[PatternUse, ...]:
    code = [cell for cell in main if cell.kind == "code"]
    names = _pattern_names(code)
    calls = [node for cell in code for node in ast.walk(cell.tree) if isinstance(node, ast.Call)]
    uses = []
    for written in sorted({_pattern_name(node) for node in calls} - {None}):
        holders = {name for name, value in names.items() if value == written}

        def mentions(node: ast.AST, written=written, holders=holders) -> bool:
            return any(
                _pattern_name(n) == written or (isinstance(n, ast.Name) and n.id in holders)
                for n in ast.walk(node)
            )

        shown = any(
            ast.unparse(c.func).endswith("show_script") and c.args and mentions(c.args[0]) for c in calls
        )
        run = any(ast.unparse(c.func) == "subprocess.run" and mentions(c) for c in calls)
        methods = frozenset(
            method
            for cell in code
            if ASSERTS_EXIT_0.search(cell.source)
            for c in ast.walk(cell.tree)
            if isinstance(c, ast.Call) and ast.unparse(c.func) == "subprocess.run" and mentions(c)
            if (method := _method_passed(c, code))
        )
        uses.append(PatternUse(written, data_folder("patterns") / written, shown, run, methods))
    return tuple(uses)


ASSERTS_EXIT_0 = re.compile(r"^assert \w+\.returncode == 0\b", re.MULTILINE)


def _method_passed(run: ast.Call, code: list[Cell]) -> str | None:
    """What ``subprocess.run([sys.executable, PATTERN, *rest])`` passes as the start method: "any"
    (no argument), the string, "FAST_METHOD" (a name bound to ``...FAST_METHOD``), else None."""
    command = run.args[0] if run.args else None
    if not isinstance(command, ast.List) or len(command.elts) not in (2, 3):
        return None
    if len(command.elts) == 2:
        return "any"
    arg = command.elts[2]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    bound = {
        target.id: ast.unparse(node.value)
        for cell in code
        for node in ast.walk(cell.tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    name = getattr(arg, "id", None)
    if name is not None and bound.get(name, "").split(".")[-1] == "FAST_METHOD":
        return "FAST_METHOD"
    return None


def _reading_time(notebook_cells, main, appendices, shown, folder) -> ReadingTime:
    code = [cell for cell in notebook_cells if cell.kind == "code"]
    strings, patterns = _string_constants(code), _pattern_names(code)
    setup = code[0].index if code and code[0].source.startswith(SETUP_MARK) else None

    listed = {}  # code cell -> lines its show_source listings display
    for item in shown:
        listed[item.code_cell] = listed.get(item.code_cell, 0) + non_blank(item.listing)

    def minutes(cell: Cell) -> float:
        if cell.kind == "markdown":  # as rendered: the invisible <a id="..."></a> lines left out
            shown_text = "\n".join(line for line in cell.source.splitlines() if not ANCHOR.match(line))
            return len(shown_text.split()) / WORDS_PER_MINUTE
        if cell.index == setup:  # the same in every notebook: not part of the lesson
            return 0.0
        scripts = sum(non_blank(p.read_text()) for p in _scripts_shown(cell, strings, patterns, folder))
        return (non_blank(cell.source) + listed.get(cell.code_index, 0) + scripts) / CODE_LINES_PER_MINUTE

    return ReadingTime(
        main=sum(minutes(cell) for cell in main),
        appendices={title: sum(minutes(cell) for cell in part) for title, part in appendices.items()},
    )


def _cells(nb: nbformat.NotebookNode) -> tuple[Cell, ...]:
    cells, code_index = [], 0
    for index, cell in enumerate(nb.cells):
        is_code = cell.cell_type == "code"
        dirty = is_code and bool(cell.get("outputs") or cell.get("execution_count"))
        cells.append(Cell(index, code_index if is_code else None, cell.cell_type, cell.source, dirty))
        code_index += is_code
    return tuple(cells)


def parse(nb: nbformat.NotebookNode, path: Path) -> Notebook:
    """The :class:`Notebook` of an nbformat notebook that lives (or would live) at ``path``."""
    path = Path(path)
    try:
        nbformat.validate(nb)
        schema_error = None
    except nbformat.ValidationError as error:
        schema_error = str(error).splitlines()[0]
    cells = _cells(nb)
    main, appendices = _parts(cells)
    scope, shown, started, calls = Scope(), [], [], set()
    for cell in cells:
        if cell.kind == "code":
            _uses_in_cell(cell, scope, shown, started, calls)
    markdown = [cell for cell in cells if cell.kind == "markdown"]
    main_indexes = {cell.index for cell in main}
    return Notebook(
        path=path,
        number=path.name[:2],
        title_line=cells[0].source.splitlines()[0]
        if cells and cells[0].kind == "markdown" and cells[0].source
        else "",
        header=_header(cells[0]) if cells else {},
        kernel=nb.metadata.get("kernelspec", {}).get("name", ""),
        schema_error=schema_error,
        cells=cells,
        sections=_sections(cells, main[-1].index + 1 if main else 0),
        main_path=main,
        appendices=appendices,
        reading_time=_reading_time(cells, main, appendices, shown, path.parent),
        shown=tuple(shown),
        started=tuple(started),
        call_names=frozenset(calls),
        pattern_uses=_pattern_uses(main),
        diagrams=tuple(
            Diagram(block, cell.index in main_indexes)
            for cell in markdown
            for block in mermaid_blocks(cell.source)
        ),
        exercises=tuple(dict.fromkeys(m for cell in markdown for m in EXERCISE.findall(cell.source))),
    )


def read_notebook(path: Path) -> Notebook:
    """Read one ``.ipynb`` file."""
    return parse(nbformat.read(path, as_version=4), path)


@cache
def notebooks() -> tuple[Notebook, ...]:
    """Every notebook of the series (``notebooks/NN_*.ipynb``) in reading order, read once per process."""
    return tuple(read_notebook(path) for path in sorted(SERIES.glob("[0-9][0-9]_*.ipynb")))


def main() -> None:
    print(f"{'notebook':34} {'main path':>9} {'appendices':>10}")
    for notebook in notebooks():
        times = notebook.reading_time
        print(f"{notebook.name:34} {times.main:8.1f}m {times.appendix_total:9.1f}m")


if __name__ == "__main__":
    sys.exit(main())
