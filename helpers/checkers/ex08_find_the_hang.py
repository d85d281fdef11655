"""Exercise 08 (notebook 08): find where a stuck job waits, from the stack dump of the real job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import ModuleType

from helpers.checkers.core import CheckResult, Incorrect, NotAttempted, Report, importable, run_check
from helpers.debugging import DUMP_END, read_stack_dump
from helpers.processes import kill_tree

__all__ = ["check_ex08"]

SECONDS = 3
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

# Each job registers a stack dump on SIGUSR1 (as
# [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)
# does), creates the file
# READY just before the line that blocks (marked "waits here"), and blocks for ever. The jobs use
# fork (POSIX, like SIGUSR1): its semaphores are unlinked at once, so killing a job leaks nothing
# in /dev/shm (under spawn they wait for the resource tracker, which dies with the job).
_ARM = f"""\
import faulthandler, os, signal, sys


def arm_stack_dump():
    dump = open(sys.argv[1], "w")
    signal.signal(signal.SIGUSR1, lambda signum, frame: print({DUMP_END!r}, file=dump, flush=True))
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True, chain=True)
    return dump


def ready():
    open(sys.argv[2], "w").close()
"""

_JOBS = {
    "a consumer waiting for results nobody sends": """
        import multiprocessing


        def collect(results, n):
            ready()
            got = []
            for _ in range(n):
                got.append(results.get())  # waits here
            return got


        if __name__ == "__main__":
            dump = arm_stack_dump()
            results = multiprocessing.get_context("fork").Queue()
            results.put("the only result")  # the queue's feeder thread appears in the dump too
            print(collect(results, 2))
    """,
    "a parent that joins a producer before draining its queue": """
        import multiprocessing


        def produce(results):
            results.put(b"x" * 1_000_000)  # more than a pipe holds: the producer cannot exit yet


        def main():
            ctx = multiprocessing.get_context("fork")
            results = ctx.Queue()
            producer = ctx.Process(target=produce, args=(results,))
            producer.start()
            ready()
            producer.join()  # waits here
            return results.get()


        if __name__ == "__main__":
            dump = arm_stack_dump()
            main()
    """,
    "a lock taken twice by the same thread": """
        import threading

        lock = threading.Lock()


        def save(state):
            ready()
            with lock:  # waits here
                state["saved"] = True


        def update(state):
            with lock:
                state["steps"] = state.get("steps", 0) + 1
                save(state)


        if __name__ == "__main__":
            dump = arm_stack_dump()
            update({})
    """,
}


def _job_source(body: str) -> str:
    return _ARM + textwrap.dedent(body)


def _expected(source: str) -> tuple[str, int]:
    """The function and line marked "waits here" in a job's source."""
    lines = source.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if "# waits here" in line)
    function = next(
        line.split("def ")[1].split("(")[0] for line in reversed(lines[:number]) if line.startswith("def ")
    )
    return function, number


def _stuck_job_dump(source: str, workdir: Path, timeout: float) -> tuple[str, str]:
    """Run ``source`` as a script until it blocks, take its stack dump, kill it; (script path, dump)."""
    script, dump, ready = workdir / "job.py", workdir / "stacks.txt", workdir / "ready"
    for path in (dump, ready):
        path.unlink(missing_ok=True)
    script.write_text(source)
    job = subprocess.Popen(
        [sys.executable, str(script), str(dump), str(ready)], cwd=workdir, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + timeout
        while not ready.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        function, number = _expected(source)
        waiting = f"line {number} in {function}"  # a dump taken on its way there would not do
        text = read_stack_dump(job.pid, str(dump), timeout, until=waiting) if ready.exists() else ""
    finally:
        kill_tree(job.pid, grace=0)  # the job and the producer it started
        job.wait(timeout=10)
    if not text:
        raise RuntimeError(f"the stuck job gave no stack dump within {timeout} s (machine very busy?)")
    return str(script), text


def _frames(dump: str) -> list[tuple[str, int, str]]:
    """(file, line, function) of every ``  File "x", line N in f`` line, in the dump's order."""
    found = []
    for line in dump.splitlines():
        line = line.strip()
        if line.startswith('File "') and '", line ' in line and " in " in line:
            path, rest = line[len('File "') :].split('", line ', 1)
            number, function = rest.split(" in ", 1)
            found.append((path, int(number), function))
    return found


def check_ex08(
    module: str | os.PathLike = "helpers.exercises.ex08_find_the_hang", timeout: float = 30.0
) -> CheckResult:
    """Check exercise 08: ``where_it_waits`` finds the line a real stuck job waits on, from its dump.

    Three small jobs get stuck for real (a ``get`` nobody answers, a ``join`` before the queue is
    drained, a lock taken twice); each one's stacks are dumped on SIGUSR1 by ``faulthandler``, as
    in
    [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand),
    and your function reads the dump.

    Notebook 08, its closing programming exercise.

    >>> check_ex08("helpers.solutions.ex08_find_the_hang").passed
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        if not hasattr(signal, "SIGUSR1"):
            raise Incorrect("this check needs POSIX (SIGUSR1, fork): run it on Linux or macOS")
        with tempfile.TemporaryDirectory(prefix="tmp-ex08-") as workdir:
            for what, job in _JOBS.items():
                source = _job_source(job)
                expected = _expected(source)
                script, dump = _stuck_job_dump(source, Path(workdir), timeout)
                try:
                    answer = mod.where_it_waits(dump, script)
                except NotImplementedError:
                    raise NotAttempted from None
                except Exception as exc:
                    answer = f"<raised {type(exc).__name__}: {exc}>"
                if isinstance(answer, tuple) and len(answer) == 2 and (answer[0], answer[1]) == expected:
                    report.ok(f"{what}: waits in {expected[0]}(), line {expected[1]} of the job")
                    continue
                report.fail(
                    f"{what}: you said {answer!r}, expected {expected!r}. {_hint(answer, dump, script)}"
                )

    return run_check("ex08", module, ("where_it_waits",), body, SECONDS)


def _hint(answer: object, dump: str, script: str) -> str:
    mine = [(line, function) for path, line, function in _frames(dump) if path == script]
    others = {(function, line) for path, line, function in _frames(dump) if path != script}
    if isinstance(answer, tuple) and len(answer) == 2 and tuple(answer) in others:
        return (
            "That frame is in Python's own code (queues.py, threading.py, popen_fork.py...), not in the "
            "job: keep only the frames whose file is my_file, the first of them is your waiting line."
        )
    if isinstance(answer, tuple) and mine and tuple(answer) == (mine[-1][1], mine[-1][0]):
        return (
            "A dump lists the most recent call first: the last frame of your file is where the job "
            "started (<module>), the first one is where it waits."
        )
    return (
        'Read the lines `  File "PATH", line N in FUNCTION`: return (FUNCTION, N) as (str, int) for the '
        "first of them whose PATH is my_file."
    )
