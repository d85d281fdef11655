"""Many short scripts, one ``import torch``: a server that forks a child per script from an interpreter
that has torch imported already.

``import torch`` costs about 4 CPU-seconds per interpreter; the catalog's reproductions are a few
lines each. :class:`ReproductionServer` starts ``python -m tests.reproduction_server`` once, which
imports torch (and its distributed, multiprocessing and data modules) and then, for each script it is
sent, forks a child that runs the script as ``__main__`` from its own file (``sys.argv``, ``__file__``
and ``sys.modules["__main__"]`` as ``python script.py`` has them, so spawn children import it as
``__mp_main__``), with stdout and stderr into a file, in its own process group, with a deadline; at
the deadline, or when the script is done, the group is killed. Linux and macOS (fork); the server is
only used where ``os.fork`` exists.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

PRELOAD = ("torch", "torch.distributed", "torch.multiprocessing", "torch.utils.data", "torch.nn.parallel")


def _run_child(path: str, output: str, errors: str, argv: list[str], cwd: str, tmpdir: str | None) -> None:
    """In the forked child: become a process group, redirect, run the script as __main__, exit."""
    os.setpgid(0, 0)
    if tmpdir:  # what a failing script leaves there (torch's error files, torchelastic's logs) goes with it
        import tempfile

        os.environ["TMPDIR"] = tmpdir
        tempfile.tempdir = None
    out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = out if errors == output else os.open(errors, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.chdir(cwd)
    sys.argv = [path, *argv]
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        source = Path(path).read_text()
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # multiprocessing joins its children, logging flushes, as at a real exit
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:
    for name in PRELOAD:
        __import__(name)
    reply = sys.stdout
    print(json.dumps({"ready": True}), file=reply, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            output = request["output"]
            cwd = request.get("cwd") or os.path.dirname(request["path"])
            errors = request.get("errors", output)
            _run_child(request["path"], output, errors, request.get("argv", []), cwd, request.get("tmpdir"))
        deadline = time.monotonic() + request["timeout"]
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            status = None
        try:
            os.killpg(pid, signal.SIGKILL)  # the script's own children too
        except (ProcessLookupError, PermissionError):
            pass
        if status is None:
            os.waitpid(pid, 0)
        code = None if status is None else os.waitstatus_to_exitcode(status)
        print(json.dumps({"returncode": code}), file=reply, flush=True)


class ReproductionServer:
    """The server as a context manager: ``run(script, timeout)`` returns (output, exit code or None).

    >>> with ReproductionServer() as server:  # doctest: +SKIP
    ...     server.run("import torch; print(torch.ones(2).sum())", timeout=30)
    ('tensor(2.)\\n', 0)
    """

    def __init__(self, folder: Path | None = None) -> None:
        self._temp = tempfile.TemporaryDirectory(prefix="reproductions-") if folder is None else None
        self.folder = Path(self._temp.name) if self._temp else folder
        self._count = 0
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> ReproductionServer:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.reproduction_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert json.loads(self._process.stdout.readline()) == {"ready": True}
        return self

    @property
    def pid(self) -> int:
        return self._process.pid

    def run(self, script: str, timeout: float = 60.0, name: str = "script") -> tuple[str, int | None]:
        """Run ``script`` (its text) from a file in a folder of its own; (stdout and stderr, exit code)."""
        self._count += 1
        folder = self.folder / f"{self._count:03d}-{name}"
        folder.mkdir()
        path, output = folder / f"{name}.py", folder / "output.txt"
        path.write_text(script)
        # the script's TMPDIR, removed after it: a failing torch script leaves files there (error files,
        # torchelastic's logs); short, since torch_shm_manager's socket path in it may not pass 107 bytes
        scratch = Path(tempfile.mkdtemp(prefix="repro-", dir="/tmp" if os.path.isdir("/tmp") else None))
        try:
            code = self.run_file(path, [], folder, output, output, timeout, tmpdir=scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return output.read_text(errors="replace"), code

    def run_file(
        self,
        path: Path,
        argv: list[str],
        cwd: Path,
        stdout: Path,
        stderr: Path,
        timeout: float,
        tmpdir: Path | None = None,
    ) -> int | None:
        """Run the script at ``path`` with ``argv`` from ``cwd``, its output into the files ``stdout``
        and ``stderr`` (the same file for both is fine); its exit code, or None if it was killed at
        ``timeout`` seconds. ``tmpdir``: its TMPDIR (default: the server's, so a leak shows)."""
        request = {
            "tmpdir": None if tmpdir is None else str(tmpdir),
            "path": str(path),
            "argv": argv,
            "cwd": str(cwd),
            "output": str(stdout),
            "errors": str(stderr),
            "timeout": timeout,
        }
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return json.loads(self._process.stdout.readline())["returncode"]

    def __exit__(self, *exc: object) -> None:
        if self._process:
            self._process.stdin.close()
            self._process.wait(timeout=30)
        if self._temp:
            self._temp.cleanup()


if __name__ == "__main__":
    _serve()
