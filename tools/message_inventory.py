"""The inventory of the messages torch's process-based parallelism can print, read from its source.

Lists every ``raise`` and every ``warnings.warn`` / ``logger.warning`` / ``logger.error`` (and
``log.``, ``logging.``, ``.exception``, ``.critical``) call in the installed torch's modules for
process-based parallelism and in this interpreter's ``multiprocessing`` package (:data:`AREAS`), and
the messages of the C++ layers (gloo, TCPStore, DDP's reducer, CUDA IPC, NCCL's watchdog,
ProcessGroup, the shm manager) read with ``strings`` from torch's shared libraries
(:data:`LIBRARY_KEYWORDS`). Each site gets a stable key (file relative to its package root,
enclosing function, exception or warning type, a short normalised message; no line number, so an
upgrade that only moves code changes nothing) and a class:

- ``explained:<id>``: the catalog entry ``<id>`` (:mod:`helpers.catalog`) lists the site in its
  ``sites``, or its message matches the site's;
- ``self-explanatory``: the message names its own fix (what to call, set or pass, or what is valid);
- ``internal``: a user cannot reach it (an invariant, "should not happen", an abstract method);
- ``needs-entry``: a user can reach it and it does not name its fix (the catalog's to-do list).

Each row records what decided it: ``rule:<name>`` (the rules in :func:`classify`) or
``review:<note>`` (read in the source by hand). ``--update`` keeps every existing row's class.

    python -m tools.message_inventory                 # summary of the installed torch against the file
    python -m tools.message_inventory --update        # regenerate, keep classes; new undecided rows: '?'
    python -m tools.message_inventory --update --fallback   # ... and undecided rows become needs-entry
    python -m tools.message_inventory --diff OTHER_SITE_PACKAGES  # sites that differ from another torch

The file is ``tools/message_inventory.tsv`` (maintainer data beside the tool that writes it: tools/
is not in the wheel nor the sdist). Its CPython rows are those of the Python it was made with
(header ``python``); ``tests/test_message_inventory.py`` checks them only on that Python.
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = Path(__file__).resolve().with_suffix(".tsv")

TORCH_AREAS: dict[str, tuple[str, ...]] = {
    # area: paths relative to site-packages; a folder means every .py under it
    "multiprocessing": ("torch/multiprocessing",),
    "dataloader": (
        "torch/utils/data/dataloader.py",
        "torch/utils/data/_utils",
        "torch/utils/data/distributed.py",  # DistributedSampler: one per rank, the c10d world
    ),
    "c10d": (
        "torch/distributed/distributed_c10d.py",
        "torch/distributed/rendezvous.py",
        "torch/distributed/constants.py",
        "torch/distributed/utils.py",
        "torch/distributed/__init__.py",
        "torch/distributed/device_mesh.py",
    ),
    "elastic": (
        "torch/distributed/elastic/rendezvous",
        "torch/distributed/elastic/agent",
        "torch/distributed/elastic/multiprocessing",
        "torch/distributed/elastic/utils",
        "torch/distributed/run.py",
        "torch/distributed/launcher",
    ),
    "ddp": (
        "torch/nn/parallel/distributed.py",
        "torch/distributed/algorithms/join.py",
        "torch/distributed/optim/zero_redundancy_optimizer.py",
    ),
    "fsdp2": ("torch/distributed/fsdp/_fully_shard",),
    "checkpoint": (
        "torch/distributed/checkpoint/state_dict_saver.py",
        "torch/distributed/checkpoint/state_dict_loader.py",
        "torch/distributed/checkpoint/state_dict.py",
    ),
}
CPYTHON_MODULES = (
    "context popen_fork popen_spawn_posix popen_forkserver popen_spawn_win32 spawn forkserver pool "
    "managers queues synchronize resource_tracker shared_memory connection reduction process util"
).split()
LIBRARIES = ("libtorch_cpu.so", "libtorch_python.so", "libc10.so", "libtorch_cuda.so", "libc10_cuda.so")
# A library string is kept when it reads like a message (letters and spaces, 4+ words) and names one
# of the C++ layers of process-based parallelism. Case-sensitive words, then case-insensitive phrases.
LIBRARY_KEYWORDS = re.compile(
    r"ProcessGroup|TCPStore|FileStore|PrefixStore|\bStore\b|Gloo|\bgloo\b|NCCL|Reducer|\breducer\b"
    r"|DistributedDataParallel|\bDDP\b|\[Rank\b|\b[Rr]anks? (?:\d|%|\{)|(?:my|global|local|peer|src|dst) rank"
    r"|world[_ ]size|collective|CUDA IPC|CudaIPC|\bIPC\b|pidfd|\bshm\b|libshm|shared memory|watchdog|Watchdog"
    r"|rendezvous|\bc10d\b|monitoredBarrier|(?i:\bstore (?:key|get|set|wait|timeout|server|client))"
    r"|DataLoader worker|forked subprocess|multiprocessing|another process|EADDRINUSE|address already in use"
    r"|[Cc]onnection (?:closed|reset|refused)|by peer|[Ss]ocket|clients joined|write to file <"
    r"|No backend type associated|Tensors must be CUDA"
)
MESSAGE_LIKE = re.compile(r"^[A-Za-z\[(%{'\"`<-][^\x00-\x08\x0e-\x1f]{18,}$")
SOURCE_LINE = re.compile(
    r"\.(cpp|h|hpp|cu|cc|py)\b|^/|::\w+\(|\bvoid\b|\bconst\b.*&|std::|at::|c10::|__|->|Tensor\("
)
# ... but not a tensor's rank (shape checks of operators and ONNX docs share the word)
TENSOR_RANK = re.compile(
    r"\b(?:have|has|of|same|input|tensor|must be|with|the) rank\b|\branks? \d+ (?:tensor|or)|\brank\(|rank >="
    r"|rank q|-rank|rank-\d|\brank \d\b(?! *[:\]])|\brank (?:of|one|two|must|should)",
    re.I,
)
ERROR_WORDS = re.compile(
    r"error|fail|timed? ?out|invalid|unable|cannot|n.t |could not|not |abort|exception|mismatch|expect|detected"
    r"|wrong|bad |unknown|missing|already|too |exceed|lost|closed|refused|reset|hang|terminat|crash|kill|fatal"
    r"|unsupported|must|only",
    re.I,
)

CLASSES = ("self-explanatory", "internal", "needs-entry")
FIELDS = (
    "key",
    "source",
    "area",
    "kind",
    "type",
    "module",
    "function",
    "line",
    "class",
    "decided_by",
    "message",
)


@dataclass
class Site:
    key: str
    source: str  # torch | cpython | library
    area: str
    kind: str  # raise | warn | log | library
    type: str
    module: str
    function: str
    line: str
    message: str
    klass: str = ""
    decided_by: str = ""


# ---------------------------------------------------------------- locating the sources


def torch_site_packages() -> Path:
    """The site-packages folder of the installed torch, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations))).parent


def torch_version(site_packages: Path) -> str:
    text = (site_packages / "torch" / "version.py").read_text()
    return re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text).group(1)


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def source_files(site_packages: Path) -> list[tuple[str, str, Path, Path]]:
    """``(source, area, package root, file)`` for every file scanned."""
    found = []
    for area, paths in TORCH_AREAS.items():
        for rel in paths:
            path = site_packages / rel
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
            found += [("torch", area, site_packages, f) for f in files]
    mp_dir = Path(importlib.util.find_spec("multiprocessing").origin).parent
    for name in CPYTHON_MODULES:
        if (mp_dir / f"{name}.py").exists():
            found.append(("cpython", "cpython-multiprocessing", mp_dir.parent, mp_dir / f"{name}.py"))
    return found


# ---------------------------------------------------------------- messages from the syntax tree


def _assignments(function: ast.AST) -> dict[str, list[tuple[int, ast.AST, bool]]]:
    """``{name: [(line, value, augmented)]}`` of the simple assignments in a function, in source order."""
    found: dict[str, list[tuple[int, ast.AST, bool]]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, []).append((node.lineno, node.value, False))
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(node.op, ast.Add)
        ):
            found.setdefault(node.target.id, []).append((node.lineno, node.value, True))
    return {name: sorted(values, key=lambda v: v[0]) for name, values in found.items()}


def render(node: ast.AST | None, assigns: dict | None = None, line: int = 0) -> str:
    """A message expression as a template: literals as written, ``{expr}`` for what is computed.

    A name assigned in the same function before ``line`` (``msg = "..."``, then ``msg += "..."``) is
    resolved to what was assigned last (and added to it since).
    """
    if node is None:
        return ""
    if isinstance(node, ast.Name) and assigns and node.id in assigns:
        before = [(ln, value, aug) for ln, value, aug in assigns[node.id] if ln < line]
        start = max((i for i, (_, _, aug) in enumerate(before) if not aug), default=None)
        if start is not None:
            return "".join(render(value) for _, value, _ in before[start:])
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return render(node.left) + render(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        return str(node.left.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    ):
        return str(node.func.value.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and isinstance(node.func.value, ast.Constant)
    ):
        return "{" + ast.unparse(node) + "}"
    return "<built elsewhere: " + ast.unparse(node)[:80] + ">"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    return ast.unparse(node)


LOG_RECEIVERS = {"logger", "log", "_logger", "LOG", "logging", "_log"}
LOG_METHODS = {"warning", "warn", "error", "exception", "critical"}


def _class_like(name: str) -> bool:
    last = name.split(".")[-1]
    return last[:1].isupper() or last.lstrip("_")[:1].isupper()


def scan_tree(tree: ast.Module) -> tuple[list[tuple[str, str, str, int, str]], int]:
    """``([(kind, qualname, type, line, message)], re-raises skipped)`` for one module."""
    sites: list[tuple[str, str, str, int, str]] = []
    skipped = 0

    def visit(node: ast.AST, stack: list[str], assigns: dict) -> None:
        nonlocal skipped
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, [*stack, child.name], _assignments(child))
                continue
            if isinstance(child, ast.ClassDef):
                visit(child, [*stack, child.name], {})
                continue
            qual = ".".join(stack) or "<module>"
            if isinstance(child, ast.Raise):
                exc = child.exc
                if exc is None:
                    skipped += 1  # a bare re-raise prints the caught exception's own message
                elif isinstance(exc, ast.Call):
                    type_ = _dotted(exc.func)
                    args = exc.args or [kw.value for kw in exc.keywords if kw.arg in ("msg", "message")]
                    msg = render(args[0], assigns, child.lineno) if args else ""
                    sites.append(("raise", qual, type_, child.lineno, msg))
                elif isinstance(exc, ast.Name | ast.Attribute) and _class_like(_dotted(exc)):
                    sites.append(("raise", qual, _dotted(exc), child.lineno, ""))
                else:
                    skipped += 1  # `raise err`: an exception made elsewhere (its own site) re-raised
            elif isinstance(child, ast.Call):
                func = child.func
                name = _dotted(func)
                if name.endswith("._log_and_throw") and len(child.args) >= 2:  # DDP: logs, then raises
                    msg = render(child.args[1], assigns, child.lineno)
                    sites.append(("raise", qual, _dotted(child.args[0]), child.lineno, msg))
                elif name in ("warnings.warn", "warn", "warnings.warn_explicit"):
                    category = child.args[1] if len(child.args) > 1 else None
                    for kw in child.keywords:
                        if kw.arg == "category":
                            category = kw.value
                    type_ = _dotted(category) if category is not None else "UserWarning"
                    msg = render(child.args[0], assigns, child.lineno) if child.args else ""
                    sites.append(("warn", qual, type_, child.lineno, msg))
                elif (
                    isinstance(func, ast.Attribute)
                    and func.attr in LOG_METHODS
                    and isinstance(func.value, ast.Name)
                    and func.value.id in LOG_RECEIVERS
                ):
                    msg = render(child.args[0], assigns, child.lineno) if child.args else ""
                    sites.append(("log", qual, f"log.{func.attr}", child.lineno, msg))
            visit(child, stack, assigns)

    visit(tree, [], {})
    return sites, skipped


def normalise(message: str, width: int = 60) -> str:
    """The key's message part: placeholders as ``_``, lower case, non-alphanumerics squeezed."""
    text = re.sub(r"<built elsewhere: ([^>]*)>", r"built:\1", message)
    text = re.sub(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrifxXegc]|%\([^)]*\)[sdrif]", "_", text)
    text = re.sub(r"[^a-z0-9_]+", " ", text.lower()).strip()
    return re.sub(r"\s+", "-", text)[:width] or "-"


def python_sites(site_packages: Path) -> tuple[list[Site], Counter]:
    sites: list[Site] = []
    skipped: Counter = Counter()
    for source, area, root, path in source_files(site_packages):
        rel = path.relative_to(root).as_posix()
        module = rel[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        found, n_skipped = scan_tree(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        skipped[area] += n_skipped
        for kind, qual, type_, line, msg in found:
            key = f"{rel}::{qual}::{type_}::{normalise(msg)}"
            sites.append(Site(key, source, area, kind, type_, module, qual, str(line), msg))
    return _unique(sites), skipped


def _unique(sites: list[Site]) -> list[Site]:
    seen: Counter = Counter()
    for site in sites:
        seen[site.key] += 1
        if seen[site.key] > 1:  # the same message twice in one function: numbered in source order
            site.key += f"#{seen[site.key]}"
    return sites


# ---------------------------------------------------------------- messages from the libraries


def library_sites(site_packages: Path) -> list[Site]:
    sites: list[Site] = []
    for lib in LIBRARIES:
        path = site_packages / "torch" / "lib" / lib
        if not path.exists():
            continue
        out = subprocess.run(["strings", "-n", "20", str(path)], capture_output=True, text=True, check=True)
        kept = set()
        for line in out.stdout.splitlines():
            text = line.strip()
            if (
                len(text.split()) >= 4
                and MESSAGE_LIKE.match(text)
                and LIBRARY_KEYWORDS.search(text)
                and not TENSOR_RANK.search(text)
                and not SOURCE_LINE.search(text)
                and sum(c.isalpha() or c == " " for c in text) >= 0.8 * len(text)
            ):
                kept.add(text)
        for text in sorted(kept):
            key = f"torch/lib/{lib}::{normalise(text, 100)}"
            sites.append(Site(key, "library", "library", "library", "", lib, "", "", text))
    return _unique(sites)


def _public(version: str) -> str:
    """``2.15.0+cu132`` -> ``2.15.0``: the release, whatever the build."""
    return version.split("+")[0]


def _site_from_row(row: dict[str, str]) -> Site:
    names = ("key", "source", "area", "kind", "type", "module", "function", "line", "message")
    site = Site(*(row[n] for n in names))
    site.klass, site.decided_by = row["class"], row["decided_by"]
    return site


def library_fingerprint(site_packages: Path) -> str:
    sizes = []
    for lib in LIBRARIES:
        path = site_packages / "torch" / "lib" / lib
        if path.exists():
            sizes.append(f"{lib}={path.stat().st_size}")
    return " ".join(sizes)


# ---------------------------------------------------------------- classification rules


def _literal(message: str) -> str:
    text = re.sub(
        r"<built elsewhere: [^>]*>|\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrifxXegc]|%\([^)]*\)[sdrif]",
        "\x00",
        message,
    )
    return re.sub(r"\s+", " ", text).lower()


def _index_rows() -> list[tuple[str, str]]:
    """(normalised message, entry id) of every catalog entry (:mod:`helpers.catalog`: plain data)."""
    sys.path.insert(0, str(ROOT))
    try:
        from helpers.catalog import entries
    finally:
        sys.path.remove(str(ROOT))
    rows = []
    for entry in entries():
        text = re.sub(r"^[\w.]+(Error|Exception|Warning|Quit): ", "", entry.message)
        rows.append((re.sub(r"\s+", " ", text).lower(), entry.id))
    return rows


def catalog_sites() -> dict[str, str]:
    """The inventory key -> entry id that the catalog's entries list in ``sites``."""
    sys.path.insert(0, str(ROOT))
    try:
        from helpers.catalog import entries
    finally:
        sys.path.remove(str(ROOT))
    return {key: entry.id for entry in entries() for key in entry.sites}


def match_index(message: str, rows: list[tuple[str, str]]) -> str | None:
    """The id of the first catalog entry whose message this site prints, or None.

    A site matches a row when every literal fragment of its template (6+ characters) occurs in the
    row's message, and they add up to 15+ characters; or when the row's message occurs in it.
    """
    literal = _literal(message)
    fragments = [f.strip() for f in literal.split("\x00") if len(f.strip()) >= 6]
    for row, case in rows:
        if fragments and sum(map(len, fragments)) >= 15 and all(f in row for f in fragments):
            return case
        if len(row) >= 15 and row in literal:
            return case
    return None


INTERNAL_WORDS = re.compile(
    r"should not happen|should never happen|shouldn't happen|internal error|this is a bug|unreachable"
    r"|please report|please file|invariant|sanity check|unexpected state|not be reached|impossible",
    re.I,
)
FIX_WORDS = re.compile(
    r"\b(please|instead|make sure|ensure|consider|try (?:to|setting|using|passing|calling)|you (?:can|may|must|should|need)"
    r"|use (?:the|a|an|`|')|set (?:the|`|')|pass (?:the|a|`|')|call (?:the|`|')|to (?:enable|disable|fix|avoid)"
    r"|must (?:be|have|not|call|pass|specify)|should (?:be|have|not)|expected .{0,40}\b(?:got|but)|is not supported"
    r"|are not supported|not supported|only supports?|requires?|is required|cannot be|can only|needs? to be"
    r"|deprecated|will be removed|is ignored|ignoring|has been renamed|is renamed|if you|mutually exclusive|no need"
    r"|needs? (?:num|a|an|the|to)|got an empty)\b",
    re.I,
)


# Names the violated constraint precisely enough that the fix is its negation ("cannot X without Y",
# "rank parameter missing", "rank 5 is out of range 0..3", "already registered"): judged self-explanatory.
STATES_CONSTRAINT = re.compile(
    r"\b(cannot|can't|can not|not allowed|does not support|doesn't support|do not support|missing|out of range"
    r"|out of bounds|is not part of|already (?:registered|exists|initialized|been)|duplicate|twice|at least|at most"
    r"|mutually|only (?:one|supported|works|available)|not (?:a valid|valid|one of)|valid (?:values|options|\w+ are)"
    r"|unknown \w+ '|unsupported)\b",
    re.I,
)


# A docstring of a bound C++ function is not a message; nor do users reach the experimental APIs
# (reconfigure/shrink/revoke, symmetric memory windows, fake and lazy process groups, flight recorder).
LIBRARY_DOCSTRING = re.compile(
    r"``|:class:|:func:|:meth:|^\w+ \((?:int|str|bool|float|timedelta|list)[^)]*\):"
    r"|\((?:bool|int|str|float|timedelta|list)[^)]*optional\)|Default(?:s)? (?:is|to)\b"
)
LIBRARY_PLUMBING = re.compile(
    r"reconfigure|[Ss]hrink|commAbort|commRevoke|[Ss]ymmetric|\bsymm\b|Window|FakeProcessGroup|LazyBackend"
    r"|FlightRecorder|Flight Recorder|dyno|\bCFT\b|MALFORMED|Float4|NVSHMEM|TorchComms|torchcomms"
)


def classify(site: Site, rows: list[tuple[str, str]]) -> tuple[str, str]:
    """``(class, rule)`` by the written rules, or ``("", "")`` when they leave it to a reviewer."""
    case = match_index(site.message, rows)
    if case:
        return f"explained:{case}", "rule:catalog-match"
    if site.type.split(".")[-1] in (
        "StopIteration",
        "StopAsyncIteration",
        "KeyboardInterrupt",
        "GeneratorExit",
    ):
        return "internal", "rule:control-flow"
    if site.type.endswith("AssertionError") and site.source != "cpython":
        return "internal", "rule:assertion"
    if INTERNAL_WORDS.search(site.message):
        return "internal", "rule:should-not-happen"
    if site.type.endswith("NotImplementedError") and (
        not site.message or re.search(r"subclass|abstract|override|implement", site.message, re.I)
    ):
        return "internal", "rule:abstract-method"
    if (
        site.kind == "log"
        and site.type in ("log.exception", "log.error")
        and site.message.startswith("<built")
    ):
        return "needs-entry", "rule:log-of-caught-error"
    if site.source == "library" and LIBRARY_DOCSTRING.search(site.message):
        return "internal", "rule:library-docstring"
    if FIX_WORDS.search(site.message):
        return "self-explanatory", "rule:names-fix-or-requirement"
    if STATES_CONSTRAINT.search(site.message) and site.source != "library":
        return "self-explanatory", "rule:states-the-violated-constraint"
    if site.source == "library":
        if LIBRARY_PLUMBING.search(site.message):
            return "internal", "rule:library-experimental-api"
        if not ERROR_WORDS.search(site.message):
            return "internal", "rule:library-not-an-error"
    return "", ""


# ---------------------------------------------------------------- the file


def read_inventory(path: Path = INVENTORY) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    header: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    body = []
    for line in lines:
        if line.startswith("# ") and ": " in line and not body:
            name, value = line[2:].split(": ", 1)
            header[name] = value
        else:
            body.append(line)
    reader = csv.DictReader(body, delimiter="\t", quoting=csv.QUOTE_NONE)
    rows = {}
    for row in reader:
        row = {name: _uncell(value) for name, value in row.items()}
        rows[row["key"]] = row
    return header, rows


def _uncell(text: str) -> str:
    escapes = {"\\\\": "\\", "\\t": "\t", "\\n": "\n", "\\r": "\r"}
    return re.sub(r"\\[\\tnr]", lambda m: escapes[m.group(0)], text)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_inventory(header: dict[str, str], sites: list[Site], path: Path = INVENTORY) -> None:
    lines = [f"# {name}: {value}" for name, value in header.items()]
    lines.append("\t".join(FIELDS))
    order = {"torch": 0, "cpython": 1, "library": 2}
    for s in sorted(sites, key=lambda s: (order[s.source], s.key)):
        values = (
            s.key,
            s.source,
            s.area,
            s.kind,
            s.type,
            s.module,
            s.function,
            s.line,
            s.klass,
            s.decided_by,
            s.message,
        )
        lines.append("\t".join(_cell(v) for v in values))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def current_sites(site_packages: Path, with_libraries: bool = True) -> tuple[list[Site], Counter]:
    sites, skipped = python_sites(site_packages)
    if with_libraries:
        sites += library_sites(site_packages)
    return sites, skipped


def summary(rows: list[dict[str, str]]) -> str:
    out = []
    by_area = Counter(r["area"] for r in rows)
    by_kind = Counter(r["kind"] for r in rows)
    by_class = Counter(r["class"].split(":")[0] or "?" for r in rows)
    by_rule = Counter(
        r["decided_by"]
        if r["decided_by"].startswith("rule:")
        else "review (by hand)"
        if r["decided_by"]
        else "undecided"
        for r in rows
    )
    out.append(f"{len(rows)} sites")
    for title, counter in (
        ("area", by_area),
        ("kind", by_kind),
        ("class", by_class),
        ("decided by", by_rule),
    ):
        out.append(f"  by {title}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()))
    cross = Counter((r["area"], r["class"].split(":")[0] or "?") for r in rows)
    for area in by_area:
        out.append(
            f"    {area}: " + ", ".join(f"{c} {n}" for (a, c), n in sorted(cross.items()) if a == area)
        )
    return "\n".join(out)


def update(fallback: bool, reclassify: bool = False) -> None:
    site_packages = torch_site_packages()
    started = time.perf_counter()
    old_header, old = read_inventory() if INVENTORY.exists() else ({}, {})
    version = torch_version(site_packages)
    other_build = old_header.get("torch", version) != version and _public(old_header["torch"]) == _public(
        version
    )
    sites, skipped = current_sites(site_packages, with_libraries=not other_build)
    fingerprint = library_fingerprint(site_packages)
    if (
        other_build
    ):  # e.g. +cpu against +cu132: same Python source; keep the libraries' rows of the recorded build
        print(
            f"note: torch {version} is another build of {old_header['torch']}: library rows kept as recorded"
        )
        sites += [_site_from_row(row) for row in old.values() if row["source"] == "library"]
        version, fingerprint = old_header["torch"], old_header["libraries"]
    same_python = old_header.get("python", python_version()) == python_version()
    rows, listed = _index_rows(), catalog_sites()
    new = []
    for site in sites:
        if site.key in listed:  # an entry that names the site explains it, whatever was decided before
            site.klass, site.decided_by = f"explained:{listed[site.key]}", "rule:catalog-sites"
            continue
        kept = site.key in old and old[site.key]["class"]
        if kept and (not reclassify or old[site.key]["decided_by"].startswith("review:")):
            site.klass, site.decided_by = old[site.key]["class"], old[site.key]["decided_by"]
        else:
            site.klass, site.decided_by = classify(site, rows)
            if not site.klass and fallback:
                site.klass, site.decided_by = "needs-entry", "rule:fallback-unreviewed"
            if site.key not in old:
                new.append(site)
    if not same_python:  # keep the other Python's CPython rows out: the file holds one Python's
        print(f"note: the file was made with Python {old_header['python']}; its CPython rows are replaced")
    header = {
        "torch": version,
        "python": python_version(),
        "libraries": fingerprint,
        "skipped re-raises": " ".join(f"{a}={n}" for a, n in sorted(skipped.items())),
        "made by": "python -m tools.message_inventory --update (classes kept by key; see the tool's docstring)",
    }
    write_inventory(header, sites)
    gone = set(old) - {s.key for s in sites}
    print(f"{len(sites)} sites, {len(new)} new, {len(gone)} gone, in {time.perf_counter() - started:.1f} s")
    for site in new:
        print(f"  new  {site.klass or '?':20} {site.key}")
    for key in sorted(gone):
        print(f"  gone {old[key]['class']:20} {key}")
    undecided = [s for s in sites if not s.klass]
    if undecided:
        print(
            f"{len(undecided)} sites unclassified ('?'): review them in the source and set class and decided_by"
        )


def diff(other: Path) -> None:
    here, _ = python_sites(torch_site_packages())
    there, _ = python_sites(other)
    a = {s.key for s in here if s.source == "torch"}
    b = {s.key for s in there if s.source == "torch"}
    print(f"torch sites: here {len(a)}, {other}: {len(b)}; only here {len(a - b)}, only there {len(b - a)}")
    for key in sorted(a - b):
        print("  +", key)
    for key in sorted(b - a):
        print("  -", key)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="regenerate the file, keeping existing classes")
    parser.add_argument(
        "--fallback", action="store_true", help="with --update: undecided sites become needs-entry"
    )
    parser.add_argument(
        "--reclassify", action="store_true", help="with --update: rows decided by a rule again"
    )
    parser.add_argument(
        "--diff", type=Path, metavar="SITE_PACKAGES", help="compare with another torch's source"
    )
    args = parser.parse_args(argv)
    if args.diff:
        diff(args.diff)
    elif args.update:
        update(args.fallback, args.reclassify)
    else:
        _, rows = read_inventory()
        print(summary(list(rows.values())))


if __name__ == "__main__":
    main()
