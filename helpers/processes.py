"""Process hygiene: start children with a deadline, always reap them, and find what they left.

Every demo in the series that can hang or crash runs through :func:`run_with_deadline`, and every
group of workers through :func:`running`, so that nothing outlives the cell that started it.

Example::

    >>> import multiprocessing as mp
    >>> from helpers.processes import run_with_deadline
    >>> result = run_with_deadline(print, args=("hello",), method="spawn", timeout=30)
    >>> result.exitcode
    0
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

__all__ = [
    "ChildResult",
    "reap",
    "running",
    "run_with_deadline",
    "live_children",
    "kill_tree",
    "descendant_pids",
    "capture_fd_output",
    "shared_memory_segments",
    "dev_shm_entries",
    "held_dev_shm_entries",
    "run_python_script",
    "linux_only",
    "PLATFORM",
]

DEV_SHM = Path("/dev/shm")
# The platform whose path the series takes: ``sys.platform``, unless HELPERS_PLATFORM names another.
# ``HELPERS_PLATFORM=darwin`` on Linux makes every choice of ``helpers`` that depends on the platform
# (the start method of FAST_METHOD, the Linux-only cells of linux_only) as on macOS: how CI runs the
# macOS and Windows learners' path (docs/testing.md, "The macOS path"). torch and CPython themselves
# still behave as on this machine, and facts read from the machine (the doctor) stay this machine's.
SIMULATED_PLATFORM = "HELPERS_PLATFORM"
PLATFORM = os.environ.get(SIMULATED_PLATFORM) or sys.platform
if PLATFORM not in ("linux", "darwin", "win32") and PLATFORM != sys.platform:
    raise ValueError(f"{SIMULATED_PLATFORM}={PLATFORM!r}: use linux, darwin or win32 (or unset it)")


@dataclass
class ChildResult:
    """What happened to one child started by :func:`run_with_deadline`.

    What :func:`run_with_deadline` returns. Used in
    [01 · A worker defined in the notebook fails under spawn](../notebooks/01_start_methods.ipynb#a-worker-defined-in-the-notebook-fails-under-spawn).
    """

    exitcode: int | None  # None never survives reap(); negative means "killed by signal -exitcode"
    timed_out: bool  # True when the deadline passed and the child had to be terminated
    seconds: float  # wall time from start() to the end of the join
    output: str  # the child's stdout and stderr, when captured (fork and spawn only)

    @property
    def ok(self) -> bool:
        """True when the child finished on time with exit code 0."""
        return not self.timed_out and self.exitcode == 0


def reap(processes: Sequence[BaseProcess], timeout: float = 5.0) -> list[int | None]:
    """Join every process within one shared deadline, then terminate and kill the stragglers.
    Every helpers launcher reaps its children with it
    ([08 · Leave nothing behind](../notebooks/08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go)
    writes the same steps
    as a plain ``try/finally``).

    Returns the exit codes in order. Processes that were never started are skipped (code None).

    >>> import multiprocessing as mp
    >>> p = mp.get_context("spawn").Process(target=abs, args=(-1,))
    >>> p.start()
    >>> reap([p], timeout=30)
    [0]
    """
    deadline = time.monotonic() + timeout
    started = [p for p in processes if p.pid is not None]
    for p in started:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in started:
        if p.is_alive():
            p.terminate()
    for p in started:
        p.join(2.0)
        if p.is_alive():  # ignored SIGTERM (or stuck in a C call that blocks it): SIGKILL
            p.kill()
            p.join(2.0)
    return [p.exitcode if p.pid is not None else None for p in processes]


@contextlib.contextmanager
def running(processes: Sequence[BaseProcess], timeout: float = 30.0) -> Iterator[list[BaseProcess]]:
    """Start ``processes``; on leaving the block, reap them (also on error or KeyboardInterrupt).
    [08 · Leave nothing behind](../notebooks/08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go)
    writes the same steps as a plain ``try/finally``.

    On a normal exit the children get what is left of ``timeout`` (counted from the start of the
    block) to finish, then are terminated; on an exception they are terminated at once. Use it
    around producer/consumer code so a bug cannot leave workers behind.

    >>> import multiprocessing as mp
    >>> ctx = mp.get_context("spawn")
    >>> procs = [ctx.Process(target=abs, args=(-i,)) for i in range(2)]
    >>> with running(procs, timeout=30):
    ...     pass
    >>> [p.exitcode for p in procs]
    [0, 0]
    """
    deadline = time.monotonic() + timeout
    try:
        for p in processes:
            p.start()
        yield list(processes)
    except BaseException:
        reap(processes, timeout=0)  # the block failed or was interrupted: stop the workers now
        raise
    reap(processes, timeout=max(0.0, deadline - time.monotonic()))


@contextlib.contextmanager
def capture_fd_output(enabled: bool = True) -> Iterator[Callable[[], str]]:
    """Redirect this process's fds 1 and 2 into a temp file, so children started meanwhile
    (which inherit those fds) write there; yields a function returning what was written so far
    (call it inside the block). :func:`run_with_deadline` and
    ``helpers.field_guide.stderr_of_children`` capture their children's output with it.

    >>> import subprocess, sys
    >>> with capture_fd_output() as written:
    ...     _ = subprocess.run([sys.executable, "-c", "print('from a child')"], timeout=60)
    ...     text = written()
    >>> text
    'from a child\\n'
    """
    if not enabled:
        yield lambda: ""
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield lambda: _read_all(sink)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _read_all(sink) -> str:
    sink.seek(0)
    return sink.read().decode(errors="replace")


def run_with_deadline(
    target: Callable[..., object],
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    method: str = "spawn",
    timeout: float = 30.0,
    capture_output: bool = True,
) -> ChildResult:
    """Run ``target(*args, **kwargs)`` in one child process started with ``method``; never hang.

    The child gets ``timeout`` seconds; past that it is terminated (then killed) and the result
    says ``timed_out``. With ``capture_output`` the child's stdout/stderr (including a traceback
    printed while it bootstraps) are returned in ``output``. That works for fork and spawn; a
    forkserver child is forked by the server and writes where the server's output goes.

    No importability check is made here on purpose: notebook 01 uses this to show the failure that
    :func:`helpers.launch.launch` refuses up front.

    >>> r = run_with_deadline(print, args=("hi",), method="spawn", timeout=30)
    >>> r.ok, r.output.strip()
    (True, 'hi')
    """
    import multiprocessing as mp

    ctx = mp.get_context(method)
    if capture_output and method != "fork" and os.name == "posix":
        # Long-lived helpers inherit our fds when they start: start them before the redirect.
        from multiprocessing import forkserver, resource_tracker

        resource_tracker.ensure_running()
        if method == "forkserver":
            forkserver.ensure_running()
    if capture_output and method == "fork":
        # A fork child inherits the parent's sys.stdout object, which in Jupyter or pytest does not
        # write to fd 1; point the child's streams at the fds we capture.
        target, args, kwargs = _streams_on_fds, (target, args, kwargs or {}), {}
    proc = ctx.Process(target=target, args=args, kwargs=kwargs or {})
    start = time.monotonic()
    with capture_fd_output(capture_output) as read_output:
        try:
            proc.start()
            proc.join(timeout)
            timed_out = proc.is_alive()
        finally:
            (exitcode,) = reap([proc], timeout=0)
        seconds = time.monotonic() - start
        output = read_output()
    return ChildResult(exitcode=exitcode, timed_out=timed_out, seconds=seconds, output=output)


def _streams_on_fds(target: Callable[..., object], args: tuple, kwargs: dict) -> None:
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (lives as long as the child)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    target(*args, **kwargs)


# multiprocessing's own long-lived helpers: started on first use, alive until their parent exits.
_INFRASTRUCTURE = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def live_children(include_infrastructure: bool = False) -> list[psutil.Process]:
    """The running descendants of this process (zombies excluded): what a leak check looks for.
    Every notebook asserts ``live_children() == []`` after its demos (e.g.
    [01 · `mp.spawn`](../notebooks/01_start_methods.ipynb#mp-spawn-one-process-per-rank),
    [03 · Join before get](../notebooks/03_queues_and_pipes.ipynb#join-before-get-a-deadlock)).

    multiprocessing's forkserver and resource tracker are left out unless
    ``include_infrastructure``: they are started once and live as long as this process does.

    >>> all(child.ppid() > 0 for child in live_children())
    True
    """
    import psutil  # imported here, so the rest of this module works without it (bare GPU machines)

    children = []
    for pid in descendant_pids(os.getpid()):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            child = psutil.Process(pid)
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(child.cmdline())
            if include_infrastructure or not any(name in cmdline for name in _INFRASTRUCTURE):
                children.append(child)
    return children


def descendant_pids(pid: int) -> list[int]:
    """The pids below ``pid``. On Linux from ``/proc/PID/task/*/children``, which reads this tree
    only: psutil's ``children(recursive=True)`` reads every process on the machine (about 5 ms at
    450 processes). :func:`live_children` (the leak check after every test) and
    :mod:`helpers.multinode`'s watch over its agents (20 to 50 times a second) call it often.

    >>> import subprocess, sys
    >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    >>> child.pid in descendant_pids(os.getpid())
    True
    >>> child.kill(); child.wait()
    -9
    """
    import psutil

    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):  # not Linux, or pid gone
        with contextlib.suppress(psutil.NoSuchProcess):
            return [child.pid for child in psutil.Process(pid).children(recursive=True)]
        return []
    found, parents = [], [pid]
    while parents:
        parent = parents.pop()
        with contextlib.suppress(OSError):  # it exited meanwhile
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as file:
                    children = [int(child) for child in file.read().split()]
                found += children
                parents += children
    return found


def shared_memory_segments(pid: int | None = None) -> list[str]:
    """Shared-memory objects a process holds open or mapped (Linux; ``[]`` elsewhere).

    Lists the targets of ``/proc/PID/fd`` and the mapped files of ``/proc/PID/maps`` that live in
    ``/dev/shm``, each once. Under torch's ``file_descriptor`` strategy they appear as
    ``/dev/shm/torch_... (deleted)``: unlinked at once, alive while an fd or a mapping remains.

    >>> import torch
    >>> t = torch.zeros(4).share_memory_()
    >>> any("torch_" in s for s in shared_memory_segments())
    True
    """
    proc = Path(f"/proc/{pid or os.getpid()}")
    if not proc.exists():
        return []
    found: set[str] = set()
    for fd in (proc / "fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(str(DEV_SHM)):
                found.add(target)
    with contextlib.suppress(OSError):
        for line in (proc / "maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith(str(DEV_SHM)):
                found.add(parts[5])
    return sorted(found)


def dev_shm_entries() -> set[str]:
    """Names currently in ``/dev/shm`` (empty set where it does not exist): the leak check's view.
    Used by the doctor's /dev/shm check ([00 · Your environment](../notebooks/00_overview.ipynb#your-environment)) and by
    ``helpers.shared_tensors.torch_entries_of`` ([02 · Appendix: inside the handle](../notebooks/02_shared_tensors.ipynb#appendix-inside-the-handle)).

    >>> isinstance(dev_shm_entries(), set)
    True
    """
    if not DEV_SHM.is_dir():
        return set()
    return {entry.name for entry in DEV_SHM.iterdir()}


def held_dev_shm_entries() -> set[str]:
    """Names in ``/dev/shm`` that a live process maps or holds open (:func:`shared_memory_segments` of
    every process this user can read). The test suite's leak check counts a new entry that no process
    holds as leaked; one still held is in use, by a test still running beside it (conftest.py).

    >>> from multiprocessing import shared_memory
    >>> segment = shared_memory.SharedMemory(create=True, size=64)
    >>> segment.name.lstrip("/") in held_dev_shm_entries()
    True
    >>> segment.close(); segment.unlink()
    """
    held: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            held.update(
                Path(p).name for p in shared_memory_segments(int(proc.name)) if not p.endswith(" (deleted)")
            )
    return held


def kill_tree(pid: int, grace: float = 10.0) -> list[int]:
    """SIGTERM process ``pid`` and all its descendants; SIGKILL whatever is left after ``grace`` s.
    [08 · Appendix A](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-a-the-stop-button-measured-on-a-second-kernel) (the stop button).

    The descendants are listed *before* anything is signalled: a launcher such as torchrun starts
    its workers in sessions of their own, so killing the launcher's process group misses them, and
    once the launcher is dead they are no longer anyone's children here. Returns the pids signalled.
    It reaps those that are our children, so a ``Popen``'s ``returncode`` then reads 0.

    >>> import subprocess, sys, psutil
    >>> proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> kill_tree(proc.pid) == [proc.pid], psutil.pid_exists(proc.pid)
    (True, False)
    """
    import psutil

    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(family, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=5)
    return [process.pid for process in family]


def run_python_script(
    source: str,
    timeout: float = 60.0,
    args: Sequence[str] = (),
    env: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``source`` as a script file in a fresh interpreter, in a temporary directory; bounded.
    [01 · Start processes](../notebooks/01_start_methods.ipynb#start-processes-start-join-timeout-exitcode)
    and
    [01 · The `if __name__ == "__main__":` guard](../notebooks/01_start_methods.ipynb#the-if-name-main-guard)
    (a script run as a file, with its own start method and guard).

    For lessons that need a real ``__main__`` (the ``if __name__ == "__main__":`` guard) or a
    pristine interpreter (``set_start_method`` can only be called once per process; a process that
    must never initialise CUDA itself, ``helpers.cuda``). ``env`` changes the child's environment:
    a ``None`` value removes that variable. The script runs in a process group of its own, and
    whatever of that group is left when it ends (a child it started) is killed with it. Raises
    ``subprocess.TimeoutExpired`` past ``timeout`` (the group is killed first). Tracebacks come
    uncoloured (``PYTHON_COLORS=0``): in a Jupyter kernel, ipykernel sets ``FORCE_COLOR=1``, which
    Python 3.13+ obeys, and "RuntimeError:" would be split by colour codes.

    >>> run_python_script("print(6 * 7)").stdout
    '42\\n'
    >>> run_python_script("import os; print(os.environ.get('X'))", env={"X": "set"}).stdout
    'set\\n'
    """
    environ = {**os.environ, "PYTHON_COLORS": "0"}
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    posix = os.name == "posix"
    with tempfile.TemporaryDirectory(prefix="tmp-notebook-script-") as workdir:
        script, out, err = (Path(workdir) / name for name in ("script.py", "stdout", "stderr"))
        script.write_text(source)
        # Files, not pipes: a child the script leaves behind cannot hold our reads open.
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(script), *args],
                cwd=workdir,
                stdout=stdout,
                stderr=stderr,
                text=True,
                env=environ,
                start_new_session=posix,  # its own group, so what it started can be killed with it
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
                output = out.read_text(), err.read_text()
                raise subprocess.TimeoutExpired(proc.args, timeout, *output) from None
            finally:
                _kill_group(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group that ``proc`` leads (POSIX), or just ``proc`` elsewhere."""
    if os.name != "posix":
        proc.kill()
        return
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def linux_only(what: str) -> bool:
    """True on Linux; elsewhere print that ``what`` needs Linux and is skipped, and return False.

    The guard of every notebook cell that needs ``/proc``, ``/dev/shm``, the ``file_descriptor``
    sharing strategy or GNU OpenMP (notebooks 02-04): ``if linux_only("/proc/self/maps"): ...``.

    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     here = linux_only("/proc/self/maps")
    >>> here == (PLATFORM == "linux"), printed.getvalue().startswith("" if here else "needs Linux")
    (True, True)
    """
    if PLATFORM == "linux":
        return True
    simulated = f" ({SIMULATED_PLATFORM}, on {sys.platform})" if PLATFORM != sys.platform else ""
    print(f"needs Linux ({what}): skipped on {PLATFORM}{simulated}")
    return False
