"""What a target's module says without running it: the backends it names and the launchers it runs from a
``threading.Thread``, read from its syntax tree (the doctor never imports a target itself)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

__all__ = ["SourceFacts", "read_source_facts", "backend_names", "LAUNCHERS"]

# Calls that start a job's processes and install signal handlers only on the main thread (torchelastic's
# PContext.start) or rely on them: mp.spawn / start_processes, torchrun's elastic_launch and launch_agent.
LAUNCHERS = ("spawn", "start_processes", "elastic_launch", "launch_agent")
_GROUP_CALLS = ("init_process_group", "new_group")


@dataclasses.dataclass
class SourceFacts:
    """The backends a module names and its thread launches (``"line 12: Thread(target=main) runs
    mp.spawn"``)."""

    backends: set[str]
    thread_launches: list[str]


def backend_names(text: str | None) -> set[str]:
    """The backends of a backend string: ``"nccl"``, or per device ``"cpu:gloo,cuda:nccl"``.

    >>> sorted(backend_names("cpu:gloo,cuda:nccl")), backend_names(None)
    (['gloo', 'nccl'], set())
    """
    return {part.split(":")[-1].strip().lower() for part in (text or "").split(",") if part.strip()}


def _called(call: ast.Call) -> str | None:
    """The name a call calls: ``mp.spawn(...)`` -> spawn; ``elastic_launch(config, fn)(args)`` -> elastic_launch."""
    func = call.func
    if isinstance(func, ast.Call):
        return _called(func)
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _named(node: ast.AST) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _launching(tree: ast.Module) -> dict[str, str]:
    """The module's functions (methods included, by name) that run a launcher, directly or through
    another function of the module, with the launcher they reach."""
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    calls = {
        name: [_called(c) for c in ast.walk(fn) if isinstance(c, ast.Call)] for name, fn in functions.items()
    }
    found = {
        name: next(c for c in called if c in LAUNCHERS)
        for name, called in calls.items()
        if set(called) & set(LAUNCHERS)
    }
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            via = next((c for c in called if c in found and c != name), None)
            if name not in found and via:
                found[name], changed = f"{found[via]} (through {via}())", True
    return found


def _thread_targets(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, function) for each ``Thread(target=function)`` and each ``run`` of a Thread subclass."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "Thread":
            found += [
                (node.lineno, _named(k.value)) for k in node.keywords if k.arg == "target" and _named(k.value)
            ]
        elif isinstance(node, ast.ClassDef) and any(_named(base) == "Thread" for base in node.bases):
            found += [
                (f.lineno, "run") for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "run"
            ]
    return found


def _named_backends(tree: ast.Module) -> set[str]:
    """Backends named as string constants in init_process_group/new_group calls (backend= or first argument)."""
    names: set[str] = set()
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) in _GROUP_CALLS):
        values = [k.value for k in call.keywords if k.arg == "backend"]
        values += call.args[:1] if _called(call) == "init_process_group" else []
        names |= {
            b
            for v in values
            if isinstance(v, ast.Constant) and isinstance(v.value, str)
            for b in backend_names(v.value)
        }
    return names


def read_source_facts(path: str | Path) -> SourceFacts:
    """The backends the module at ``path`` names and the launchers it runs in threads.

    >>> import helpers.launch
    >>> read_source_facts(helpers.launch.__file__).thread_launches
    []
    """
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    launching = _launching(tree)
    launches = [
        f"line {line}: a Thread runs {name}(), which calls {launching[name]}"
        for line, name in _thread_targets(tree)
        if name in launching
    ]
    return SourceFacts(_named_backends(tree), launches)
