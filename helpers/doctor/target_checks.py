"""The doctor's checks of a launch target and of imports: always in a fresh interpreter, with a deadline."""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

from helpers.doctor.findings import DoctorError, Finding, finding

__all__ = ["target_checks_for"]  # helpers.doctor.check runs them

# --- Targets and imports: always in a fresh interpreter, with a deadline ---------------------------


def target_checks_for(
    target: str | Callable | None, imports: Sequence[str], timeout: float
) -> dict[str, Callable[[], Finding]]:
    """The checks of a launch target and of imports by name, each ready to run: none for a ``target``
    of None and no ``imports``. :func:`helpers.doctor.check` runs them (it documents the arguments).

    >>> runs = target_checks_for("helpers.debugging:sleep_for", ["json"], timeout=60.0)
    >>> [(name, run().status) for name, run in runs.items()]
    [('target importable', 'ok'), ('imports initialise CUDA', 'ok')]
    """
    runs: dict[str, Callable[[], Finding]] = {}
    if target is not None:
        runs["target importable"] = lambda: _check_target(target, timeout)
    if imports:
        runs["imports initialise CUDA"] = lambda: _check_imports(imports, timeout)
    return runs


_PROBE = """
import importlib, json, multiprocessing, os, pickle, sys, time
from multiprocessing.process import BaseProcess
sys.path[:0] = {path!r}
started = time.perf_counter()
info = {{"started": 0}}
multiprocessing.set_start_method({method!r}, force=True)  # as in a spawn child: set before the import
start = BaseProcess.start
def counted(self):
    info["started"] += 1
    start(self)
BaseProcess.start = counted  # every multiprocessing/torch.multiprocessing process, DataLoader workers too
try:
    module = importlib.import_module({module!r})
except ModuleNotFoundError as error:
    info["missing"] = error.name
except BaseException as error:
    info["import_error"] = f"{{type(error).__name__}}: {{error}}"
else:
    info["import_s"] = round(time.perf_counter() - started, 2)
    obj = missing = object()
    for number, part in enumerate({attribute!r}.split(".") if {attribute!r} else []):
        obj = getattr(module if number == 0 else obj, part, missing)
    if obj is missing and {attribute!r}:
        info["no_attribute"] = True
    elif {attribute!r}:
        info["qualname"] = getattr(obj, "__qualname__", repr(obj))
        info["callable"] = callable(obj)
        try:
            pickle.loads(pickle.dumps(obj))
        except Exception as error:
            info["pickle_error"] = f"{{type(error).__name__}}: {{error}}"
torch = sys.modules.get("torch")
info["cuda_initialised"] = bool(torch is not None and torch.cuda.is_initialized())
fds = os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []  # is_available() opens it:
info["cuda_driver"] = any(os.path.realpath("/proc/self/fd/" + fd) == "/dev/nvidia-uvm" for fd in fds)
print("DOCTOR-PROBE " + json.dumps(info))
"""


def _probe(module: str, attribute: str, timeout: float) -> dict:
    """Import ``module`` (and look up ``attribute``) in a fresh interpreter with this sys.path.

    The interpreter runs in a session of its own; whatever the import started (an unguarded
    script's workers) is killed with it, when it is done or when ``timeout`` passes.
    """
    method = mp.get_all_start_methods()[0]
    code = _PROBE.format(path=[p for p in sys.path if p], module=module, attribute=attribute, method=method)
    session = hasattr(os, "killpg")
    probe = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )
    try:
        out, err = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = None, ""
    finally:
        if session:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(probe.pid, signal.SIGKILL)
        probe.kill()
        probe.communicate()
    if out is None:
        return {"timed_out": timeout}
    for line in out.splitlines():
        if line.startswith("DOCTOR-PROBE "):
            return json.loads(line.removeprefix("DOCTOR-PROBE "))
    return {"import_error": (err.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]}


_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_<][\w<>]*(\.[A-Za-z_<][\w<>]*)*$")


def _parse_target(target: str) -> tuple[str, str]:
    if not isinstance(target, str) or not _TARGET.match(target.strip()):
        raise DoctorError(
            f"malformed target {target!r}: expected module:function, e.g. helpers.debugging:sleep_for"
        )
    module, _, attribute = target.strip().partition(":")
    return module, attribute


def _check_target(target: str | Callable, timeout: float) -> Finding:
    if callable(target) and not isinstance(target, str):
        decided = _check_callable_target(target)
        if decided is not None:
            return decided
        target = f"{target.__module__}:{target.__qualname__}"
    module, attribute = _parse_target(target)
    if module == "__main__":
        return finding(
            "target importable", "fail", f"{target}: defined in __main__, which a child cannot import"
        )
    info = _probe(module, attribute, timeout)
    missing = info.get("missing") or "\0"
    if module == missing or module.startswith(missing + "."):
        raise DoctorError(f"cannot import target {target!r}: no module named {info['missing']!r}")
    if info.get("no_attribute"):
        raise DoctorError(
            f"cannot import target {target!r}: module {module!r} has no attribute {attribute!r}"
        )
    failed = _import_failure(module, info, timeout)
    if failed is not None:
        return finding("target importable", "fail", failed)
    qualname = info["qualname"]
    if "<lambda>" in qualname or "<locals>" in qualname:
        problem = "a lambda" if "<lambda>" in qualname else "a nested function"
        return finding(
            "target importable", "fail", f"{target} is {problem} ({qualname}): it cannot be pickled by name"
        )
    if "pickle_error" in info:
        return finding("target importable", "fail", f"{target} does not pickle: {info['pickle_error']}")
    if not info["callable"]:
        return finding("target importable", "fail", f"{target} is not callable")
    cuda = "; importing it initialises CUDA" if info["cuda_initialised"] or info["cuda_driver"] else ""
    measured = f"{target} imports in a fresh interpreter in {info['import_s']} s and pickles by name{cuda}"
    return finding("target importable", "warn" if cuda else "ok", measured)


def _check_callable_target(target: Callable) -> Finding | None:
    """The finding for a function passed as an object: it fails when a child cannot import it by name,
    passes when it comes from a script's ``__main__``; None when its module is to be probed."""
    from helpers.launch import NotImportableError, check_importable

    try:
        check_importable(target, "spawn")
    except NotImportableError as error:
        return finding("target importable", "fail", str(error).split(". Fix:")[0])
    if target.__module__ == "__main__":  # check_importable passed: a script run as a file or with -m
        main = sys.modules["__main__"]
        where = getattr(main, "__file__", None) or main.__spec__.name
        measured = (
            f"{target.__qualname__} is defined in the script {where}, which a spawn child imports again"
        )
        return finding(
            "target importable", "ok", measured + " as __mp_main__ (keep its work under the guard)"
        )
    return None


def _import_failure(module: str, info: dict, timeout: float) -> str | None:
    """What went wrong when the probe imported ``module`` (timed out, raised, started processes), or None."""
    if "timed_out" in info:
        return f"importing {module} took over {timeout:.0f} s (work at import time?)"
    if "context has already been set" in info.get("import_error", ""):
        return (
            f"importing {module} calls set_start_method(), which fails in a spawn or forkserver child "
            "(its start method is set before it imports): call it under if __name__ == '__main__':"
        )
    if "import_error" in info or "missing" in info:
        error = info.get("import_error") or f"No module named {info['missing']!r}"
        return f"importing {module} in a fresh interpreter failed: {error}"
    if info["started"]:
        return (
            f"importing {module} started {info['started']} process(es): the import ran the job (a "
            "DataLoader with workers, a Pool or mp.spawn at top level?), and every spawn child that "
            "imports it runs it again; move that code under if __name__ == '__main__':"
        )
    return None


def _which_imports_initialise_cuda(modules: Sequence[str], timeout: float = 60.0) -> list[str]:
    """The modules among ``modules`` whose import initialises CUDA, each imported in a fresh interpreter.

    Such an import poisons every later fork that touches CUDA. It counts when torch says so
    (``torch.cuda.is_initialized()``) and when the import opened the CUDA driver without it
    (``torch.cuda.is_available()`` does). A CPU build of torch never
    initialises CUDA, so the answer there is ``[]``. Raises :class:`DoctorError` for a module
    that cannot be imported. [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) teaches why it matters.

    >>> _which_imports_initialise_cuda(["json"])
    []
    """
    found = []
    for module in modules:
        info = _probe(module, "", timeout)
        if "timed_out" in info or "missing" in info or "import_error" in info:
            reason = info.get("import_error") or info.get("missing") or f"over {timeout:.0f} s"
            raise DoctorError(f"cannot import {module!r} in a fresh interpreter: {reason}")
        if info["cuda_initialised"] or info.get("cuda_driver"):  # is_available() opens the driver only
            found.append(module)
    return found


def _check_imports(modules: Sequence[str], timeout: float) -> Finding:
    try:
        culprits = _which_imports_initialise_cuda(modules, timeout)
    except DoctorError as error:
        return finding("imports initialise CUDA", "fail", str(error))
    if culprits:
        return finding(
            "imports initialise CUDA", "warn", f"these initialise CUDA on import: {', '.join(culprits)}"
        )
    return finding(
        "imports initialise CUDA", "ok", f"none of {', '.join(modules)} initialises CUDA on import"
    )
