"""The doctor's checks of a launch target and of imports: always in a fresh interpreter, with a deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

from helpers.doctor.findings import DoctorError, Finding, finding
from helpers.doctor.target_source import LAUNCHERS, backend_names, read_source_facts

__all__ = ["target_checks_for"]  # helpers.doctor.check runs them

# --- Targets and imports: always in a fresh interpreter, with a deadline ---------------------------


def target_checks_for(
    target: str | Callable | None, imports: Sequence[str], timeout: float, backend: str | None = None
) -> dict[str, Callable[[], Finding]]:
    """The checks of a launch target, of imports and of the backends by name, each ready to run:
    "backends" always (``backend``: the one the job names, e.g. "nccl" or "cpu:gloo,cuda:nccl"),
    "target importable" and "launch in a thread" with a ``target``, "imports initialise CUDA" with
    ``imports``. The target is probed once for all of them. :func:`helpers.doctor.check` runs them (it
    documents the arguments).

    >>> runs = target_checks_for("helpers.debugging:sleep_for", ["json"], timeout=60.0)
    >>> [(name, run().status) for name, run in runs.items()]
    [('backends', 'ok'), ('target importable', 'ok'), ('launch in a thread', 'ok'), ('imports initialise CUDA', 'ok')]
    """
    probes: dict[tuple[str, str], dict] = {}

    def probe(module: str, attribute: str) -> dict:
        if (module, attribute) not in probes:
            probes[module, attribute] = _probe(module, attribute, timeout)
        return probes[module, attribute]

    runs: dict[str, Callable[[], Finding]] = {
        "backends": lambda: _check_backends(backend, _target_source(target, probe) if target else None)
    }
    if target is not None:
        runs["target importable"] = lambda: _check_target(target, timeout, probe)
        runs["launch in a thread"] = lambda: _check_thread_launch(target, _target_source(target, probe))
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
    info["file"] = getattr(module, "__file__", None)
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


def _check_target(
    target: str | Callable, timeout: float, probe: Callable[[str, str], dict] | None = None
) -> Finding:
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
    info = (probe or (lambda m, a: _probe(m, a, timeout)))(module, attribute)
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


# --- What the target's source says: the backends it names, the launchers it runs in threads ----------


def _target_source(target: str | Callable, probe: Callable[[str, str], dict]) -> str | None:
    """The file of the target's module (a script's for a function from its ``__main__``), or None."""
    if callable(target) and not isinstance(target, str):
        return getattr(sys.modules.get(target.__module__), "__file__", None)
    module, attribute = _parse_target(target)
    return None if module == "__main__" else probe(module, attribute).get("file")


def _available_backends() -> dict[str, bool]:
    import torch.distributed as dist

    if not dist.is_available():
        return dict.fromkeys(("gloo", "nccl", "mpi"), False)
    found = {
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "mpi": dist.is_mpi_available(),
    }
    for name in ("ucc", "xccl"):  # newer builds only
        if hasattr(dist, f"is_{name}_available"):
            found[name] = getattr(dist, f"is_{name}_available")()
    return found


def _tcpstore_libuv() -> bool | None:
    """Whether this torch's TCPStore has its libuv server (the default since 2.4; not in Windows wheels),
    found by starting one on a free localhost port; None without torch.distributed."""
    import torch.distributed as dist

    if not dist.is_available():
        return None
    try:
        store = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False, use_libuv=True)
    except (
        RuntimeError
    ) as error:  # DistStoreError: "use_libuv was requested but PyTorch was built without ..."
        if "libuv" in str(error):
            return False
        raise
    libuv = store.libuvBackend
    del store
    return libuv


def _check_backends(backend: str | None, source: str | None) -> Finding:
    """The backends this torch has, as facts; fails only when the job names one it lacks."""
    have = _available_backends()
    named = backend_names(backend)
    from_source = read_source_facts(source).backends if source else set()
    libuv = _tcpstore_libuv()
    store = {None: "no torch.distributed", True: "libuv", False: "the old server (built without libuv)"}[
        libuv
    ]
    measured = ", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in have.items())
    measured += f"; TCPStore: {store} (USE_LIBUV={os.environ.get('USE_LIBUV', 'unset')})"
    needed = named | from_source
    if needed:
        measured += f"; the job names {', '.join(sorted(needed))}" + (
            f" (in {source})" if from_source else ""
        )
    missing = sorted(name for name in needed if name in have and not have[name])
    if missing:
        return finding("backends", "fail", measured + f": this torch has no {', '.join(missing)}")
    if libuv is False:  # USE_LIBUV=0 does not help: torchrun's stores and TCPStore(...) never read it
        return finding(
            "backends",
            "warn",
            measured
            + ": torchrun's stores and a TCPStore(...) ask for libuv whatever USE_LIBUV says, and fail"
            " (init_process_group's tcp:// and env:// use the old store here)",
        )
    return finding("backends", "ok", measured)


SPAWN_IN_A_THREAD = (
    "torch.multiprocessing's spawn installs no signal handler on any thread, so this is not torchelastic's "
    "problem; but Ctrl-C raises KeyboardInterrupt in the main thread only, never in the thread that joins "
    "the workers, so that thread's clean-up (terminating the other ranks) does not run on an interrupt, "
    "and workers outside the terminal's process group (started under setsid or a scheduler) never see it."
)


def _check_thread_launch(target: str | Callable, source: str | None) -> Finding:
    """Whether the target's module runs a launcher (mp.spawn, start_processes, elastic_launch) in a Thread."""
    if source is None or not source.endswith(".py"):
        return finding("launch in a thread", "n/a", f"no Python source to read for {target!r}")
    launches = read_source_facts(source).thread_launches
    if launches and all(re.search(r"which calls spawn\b", launch) for launch in launches):
        found = finding("launch in a thread", "warn", f"{source}: " + "; ".join(launches))
        return dataclasses.replace(found, why=SPAWN_IN_A_THREAD)  # not torchelastic's reason
    if launches:
        return finding("launch in a thread", "warn", f"{source}: " + "; ".join(launches))
    measured = f"{source}: no launcher ({', '.join(LAUNCHERS)}) runs in a threading.Thread"
    return finding("launch in a thread", "ok", measured)
