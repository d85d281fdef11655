"""Automatic checks for the exercises: run the learner's code in real processes, explain what is wrong.

Each notebook's exercise names a file in ``exercises/`` (worker code must be importable: spawn and
forkserver children re-import it by module and name). ``check_exNN()`` imports (reloads) that
file, runs it in real child processes, bounded by deadlines, and returns a :class:`CheckResult`
whose ``feedback`` names the typical mistake it found. A file still holding the starter's
``raise NotImplementedError`` gets a "not attempted yet" result, never an exception, so a
notebook that calls a checker still runs top to bottom. Nothing is left running afterwards.

Pass another module name to check it instead (the reference solutions live in ``solutions``).

Example::

    >>> from helpers.checkers import check_ex08
    >>> result = check_ex08("solutions.ex08_exit_codes")
    >>> result.passed
    True
    >>> print(check_ex08().status)  # the untouched starter file
    not attempted yet
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import psutil

from helpers.launch import NotImportableError, WorkerFailed, launch
from helpers.processes import reap, running

if TYPE_CHECKING:  # torch is imported inside the functions: importing the checkers stays light
    import torch

__all__ = [
    "CheckResult",
    "EX00_TOOLS",
    "EX00_SCENARIOS",
    "regression_batch",
    "check_ex00",
    "check_ex01",
    "check_ex02",
    "check_ex03",
    "check_ex04",
    "check_ex05",
    "check_ex06",
    "check_ex07",
    "check_ex08",
    "CHECKERS",
]

FORK = "fork" if "fork" in mp.get_all_start_methods() else "spawn"  # fast where the lesson allows


@dataclass
class CheckResult:
    """The verdict of one checker: ``passed``, and ``feedback`` lines that say why.

    It prints as a short report (and displays as one in a notebook).

    >>> print(CheckResult("ex99", passed=False, feedback=["say what to fix"]))
    ex99: not right yet
      - say what to fix
    """

    exercise: str
    passed: bool
    feedback: list[str] = field(default_factory=list)
    attempted: bool = True

    @property
    def status(self) -> str:
        """``"passed"``, ``"not attempted yet"`` or ``"not right yet"``.

        >>> CheckResult("ex99", passed=True).status
        'passed'
        """
        if self.passed:
            return "passed"
        return "not right yet" if self.attempted else "not attempted yet"

    def __str__(self) -> str:
        return "\n".join([f"{self.exercise}: {self.status}"] + [f"  - {line}" for line in self.feedback])

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython display
        printer.text(str(self))


class _NotAttempted(Exception):
    """Raised inside a check when the learner's code still raises NotImplementedError."""


class _Report:
    """Collects what passed and what failed while a check runs."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.problems: list[str] = []

    def ok(self, message: str) -> None:
        self.passed.append(message)

    def fail(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)


def _resolve(module: ModuleType, dotted: str) -> object:
    obj: object = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _is_stub(obj: object) -> bool:
    """True when ``obj``'s source still holds the starter's ``raise NotImplementedError``."""
    try:
        return "raise NotImplementedError" in inspect.getsource(obj)
    except (OSError, TypeError):
        return False


def _path_of(module_name: str) -> str:
    return module_name.replace(".", "/") + ".py"


def _checked(exercise: str, module_name: str, names: tuple[str, ...], body: Callable) -> CheckResult:
    """Import (reload) ``module_name``, refuse stubs kindly, run ``body(module, report)``; never raise."""
    not_attempted = CheckResult(
        exercise,
        passed=False,
        attempted=False,
        feedback=[
            f"not attempted yet: edit {_path_of(module_name)}, replace `raise NotImplementedError` "
            "with your code, save, and run the check again"
        ],
    )
    try:
        module = importlib.reload(importlib.import_module(module_name))
    except Exception as exc:  # a syntax error, a bad import, ... in the learner's file
        return CheckResult(exercise, False, [f"{module_name} does not import: {type(exc).__name__}: {exc}"])
    report = _Report()
    for name in names:
        try:
            obj = _resolve(module, name)
        except AttributeError:
            return CheckResult(exercise, False, [f"{module_name} has no {name}: keep the starter's names"])
        if _is_stub(obj):
            return not_attempted
    try:
        body(module, report)
    except _NotAttempted:
        return not_attempted
    except Exception as exc:
        report.fail(f"the check stopped on an error: {type(exc).__name__}: {_first_line(str(exc))}")
    if report.problems:
        return CheckResult(exercise, False, report.problems)
    return CheckResult(exercise, True, report.passed)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _error_line(text: str) -> str:
    """The ``Type: message`` line of a traceback (its last non-empty line)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


def _raise_if_stub_error(text: str) -> None:
    if "NotImplementedError" in text:
        raise _NotAttempted


# --- running learner code in a bounded child ------------------------------------------------------


@dataclass
class _Outcome:
    status: str  # "ok" | "raised" | "timeout" | "died"
    value: object = None
    error: str = ""
    seconds: float = 0.0


def _child_entry(conn, module_name: str, func_name: str, args: tuple) -> None:
    """Child side of :func:`_in_child`: call the function, send back its value or its traceback."""
    try:
        fn = _resolve(importlib.import_module(module_name), func_name)
        conn.send(("ok", fn(*args)))
    except BaseException as exc:
        conn.send(("raised", f"{traceback.format_exc()}\n{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _kill_tree(proc) -> None:
    """SIGKILL ``proc`` and everything it started (grandchildren would otherwise be orphaned)."""
    if proc.pid is None or proc.exitcode is not None:
        return
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _in_child(
    module_name: str, func_name: str, args: tuple = (), *, method: str = FORK, timeout: float = 20.0
):
    """Run ``module_name.func_name(*args)`` in a child with a deadline; kill its whole tree on expiry."""
    ctx = mp.get_context(method)
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_entry, args=(sender, module_name, func_name, args))
    start = time.monotonic()
    try:
        proc.start()
        sender.close()
        if receiver.poll(timeout):
            try:
                status, payload = receiver.recv()
            except EOFError:
                status, payload = "died", ""
        else:
            status, payload = "timeout", ""
        seconds = time.monotonic() - start
        if status == "ok":
            proc.join(5.0)  # it may still be joining children it started
    finally:
        _kill_tree(proc)
        reap([proc], timeout=2.0)
        receiver.close()
    if status == "ok":
        return _Outcome("ok", value=payload, seconds=seconds)
    if status == "died":
        return _Outcome("died", error=f"the child died with exit code {proc.exitcode}", seconds=seconds)
    return _Outcome(status, error=payload, seconds=seconds)


# --- 00 overview ----------------------------------------------------------------------------------

EX00_TOOLS = ("fork", "spawn", "shared_tensor", "queue", "hogwild", "ddp", "dataloader")

EX00_SCENARIOS: dict[str, tuple[str, str]] = {
    "Child processes must run CUDA kernels on the GPU.": (
        "spawn",
        "a forked child cannot re-initialise CUDA after the parent used it: CUDA needs spawn (or forkserver)",
    ),
    "Start 8 short CPU-only workers as fast as possible on Linux; the parent has used no CUDA.": (
        "fork",
        "fork starts a child in milliseconds (a copy of the parent); spawn needs about a second per child",
    ),
    "Train one model on 4 GPUs of one machine, one process per GPU, gradients averaged every step.": (
        "ddp",
        "DistributedDataParallel: one process per device, gradients all-reduced in backward",
    ),
    "Several CPU processes update one small model asynchronously, without locks.": (
        "hogwild",
        "lock-free asynchronous updates of a shared model are Hogwild (model.share_memory())",
    ),
    "Load and augment image batches in parallel while the model trains.": (
        "dataloader",
        "DataLoader(num_workers=...) runs dataset code in worker processes and prefetches batches",
    ),
    "Worker processes send a stream of results of varying size back to the parent.": (
        "queue",
        "a torch.multiprocessing Queue carries messages (tensors as shared-memory handles)",
    ),
    "Several processes read and write one large tensor in place, on one machine.": (
        "shared_tensor",
        "share_memory_() once; every process then reads and writes the same storage, no copies",
    ),
}


def check_ex00(module: str = "exercises.ex00_choose_tool") -> CheckResult:
    """Check exercise 00: ``choose_tool(scenario)`` picks the right tool for every scenario.

    >>> check_ex00("solutions.ex00_choose_tool").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        for scenario, (tool, why) in EX00_SCENARIOS.items():
            try:
                answer = mod.choose_tool(scenario)
            except NotImplementedError:
                raise _NotAttempted from None
            if answer not in EX00_TOOLS:
                report.fail(f"{scenario!r}: {answer!r} is not one of {EX00_TOOLS}")
            elif answer != tool:
                report.fail(f"{scenario!r}: you chose {answer!r}; think again (hint: {why.split(':')[0]})")
            else:
                report.ok(f"{tool}: {why}")

    return _checked("ex00", module, ("choose_tool",), body)


# --- 01 start methods -----------------------------------------------------------------------------


def check_ex01(
    module: str = "exercises.ex01_start_methods", timeout: float = 60.0, method: str = "spawn"
) -> CheckResult:
    """Check exercise 01: ``describe(rank, scale)`` runs under spawn and returns rank-specific results.

    ``method`` is the start method of the two children (spawn: the point of the exercise).

    >>> check_ex01("solutions.ex01_start_methods").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        scale = 7
        try:
            results = launch(mod.describe, args=(scale,), nprocs=2, method=method, timeout=timeout)
        except NotImportableError as exc:
            report.fail(
                f"launch refused describe before starting any process: a {method} child re-imports the "
                f"worker by module and name, so write it as a top-level `def`. ({exc})"
            )
            return
        except WorkerFailed as exc:
            _raise_if_stub_error(str(exc))
            report.fail(f"a {method} child failed: {_error_line(str(exc))}")
            return
        report.ok(f"describe is importable and runs in 2 {method} children")
        pids = []
        for rank, result in enumerate(results):
            if not isinstance(result, dict) or not {"rank", "value", "pid"} <= set(result):
                report.fail(
                    f"rank {rank} returned {result!r}: return a dict with keys 'rank', 'value', 'pid'"
                )
                continue
            if result["rank"] != rank:
                report.fail(
                    f"rank {rank} reported rank {result['rank']}: return the rank argument you were given"
                )
            if result["value"] != scale * (rank + 1):
                report.fail(
                    f"rank {rank} returned value {result['value']!r}, expected scale * (rank + 1) = "
                    f"{scale * (rank + 1)}: each rank computes its own value from its rank"
                )
            pids.append(result["pid"])
        if os.getpid() in pids:
            report.fail(
                "a child reported the parent's pid: return os.getpid() (this process), not os.getppid() "
                "(its parent), computed inside describe"
            )
        elif len(set(pids)) != len(pids):
            report.fail(
                f"the ranks reported the same pid {pids}: did you return os.getppid() (the parent's) "
                "instead of os.getpid()?"
            )
        elif len(pids) == len(results):
            report.ok(f"2 ranks, 2 different child pids {pids}, values {[r['value'] for r in results]}")

    return _checked("ex01", module, ("describe",), body)


# --- 02 shared tensors ----------------------------------------------------------------------------


def check_ex02(
    module: str = "exercises.ex02_shared_tensor",
    timeout: float = 60.0,
    methods: tuple[str, ...] = ("fork", "spawn"),
) -> CheckResult:
    """Check exercise 02: a worker's in-place update of a shared tensor reaches the parent (fork and spawn).

    ``methods``: the start methods to try, in turn (those this platform lacks are skipped).

    >>> check_ex02("solutions.ex02_shared_tensor").passed
    True
    """
    import torch

    def body(mod: ModuleType, report: _Report) -> None:
        counter = mod.make_counter(4)
        if not isinstance(counter, torch.Tensor) or counter.shape != (4,) or bool(counter.any()):
            report.fail(f"make_counter(4) returned {counter!r}: expected a tensor of 4 zeros")
            return
        for method in [m for m in methods if m in mp.get_all_start_methods()]:
            counter = mod.make_counter(4)
            try:
                launch(mod.add_rank, args=(counter,), nprocs=2, method=method, timeout=timeout)
            except WorkerFailed as exc:
                _raise_if_stub_error(str(exc))
                report.fail(f"{method}: a worker failed: {_error_line(str(exc))}")
                continue
            expected = torch.full((4,), 3.0, dtype=counter.dtype)
            if torch.equal(counter, expected):
                report.ok(f"{method}: the parent sees {counter.tolist()} after ranks 0 and 1 added 1 and 2")
            elif not counter.any() and method == "fork" and not counter.is_shared():
                report.fail(
                    "fork: the parent never saw your update because make_counter's tensor is not in shared "
                    "memory: a fork child writes to its own copy-on-write copy. Return "
                    "torch.zeros(n).share_memory_(). (spawn hides this mistake: pickling a tensor for a "
                    "spawn child moves it to shared memory.)"
                )
            elif not counter.any():
                report.fail(
                    f"{method}: the parent never saw your update: did the worker rebind the tensor "
                    "(counter = counter + ...) instead of writing in place "
                    "(counter += ..., counter.add_(...))?"
                )
            else:
                report.fail(
                    f"{method}: the parent sees {counter.tolist()}, expected {expected.tolist()}: "
                    "rank r adds r + 1 to every element"
                )

    return _checked("ex02", module, ("make_counter", "add_rank"), body)


# --- 03 queues ------------------------------------------------------------------------------------


def _drain_producer(module_name: str, n_items: int, item_size: int) -> dict:
    """Run the learner's producer with an in-process queue; report what it put (child side)."""
    import queue

    q: queue.Queue = queue.Queue()
    _resolve(importlib.import_module(module_name), "producer")(q, n_items, item_size)
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    return {"items": items}


def check_ex03(
    module: str = "exercises.ex03_queues",
    timeout: float = 15.0,
    n_items: int = 8,
    item_size: int = 256 * 1024,
) -> CheckResult:
    """Check exercise 03: the producer ends with a sentinel; ``collect`` drains the Queue before joining.

    ``collect`` runs in a child with a ``timeout``: joining before draining deadlocks, and the child
    (with the producer it started) is killed at the deadline.

    >>> check_ex03("solutions.ex03_queues").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        expected = [bytes([i % 256]) * item_size for i in range(n_items)]
        small = _in_child(__name__, "_drain_producer", (module, 3, 4), timeout=timeout)
        if small.status != "ok":
            _raise_if_stub_error(small.error)
            report.fail(f"producer(q, 3, 4) did not finish: {_error_line(small.error) or small.status}")
            return
        items = small.value["items"]
        if not items or items[-1] is not None:
            report.fail(
                f"producer(q, 3, 4) put {len(items)} items and no sentinel at the end: put None after the "
                "items, or the consumer cannot know when to stop and waits for ever"
            )
            return
        if items[:-1] != [bytes([i]) * 4 for i in range(3)]:
            report.fail(f"producer(q, 3, 4) put {items[:-1]!r}; expected [b'\\x00\\x00\\x00\\x00', ...]")
            return
        report.ok("producer puts the items, then the sentinel None")
        outcome = _in_child(module, "collect", (n_items, item_size, FORK), timeout=timeout)
        if outcome.status == "timeout":
            report.fail(
                f"collect did not finish within {timeout:.0f} s: did you join the producer before reading "
                "all its items? A process that has put items on a Queue cannot exit until they have been "
                "read (its feeder thread waits on the full pipe), so join() waits for ever. Read until the "
                "sentinel first, then join."
            )
        elif outcome.status != "ok":
            _raise_if_stub_error(outcome.error)
            report.fail(f"collect failed: {_error_line(outcome.error)}")
        elif outcome.value != expected:
            got = (
                outcome.value
                if not isinstance(outcome.value, list)
                else f"a list of {len(outcome.value)} items"
            )
            report.fail(
                f"collect returned {got}; expected the {n_items} items in order (without the sentinel)"
            )
        elif outcome.seconds > min(4.0, timeout / 2):
            report.fail(
                f"collect returned the right items but took {outcome.seconds:.1f} s: it waited for a join "
                "timeout. Read until the sentinel first, then join."
            )
        else:
            report.ok(
                f"collect drains {n_items} items of {item_size // 1024} KiB, then joins "
                f"({outcome.seconds:.2f} s)"
            )

    return _checked("ex03", module, ("producer", "collect"), body)


# --- 04 fork and threads ---------------------------------------------------------------------------


def _call_and_count_threads(module_name: str, func_name: str, args: tuple) -> tuple[object, int]:
    """Child side of check_ex04: the worker's value and the torch thread count it left behind."""
    import torch

    value = _resolve(importlib.import_module(module_name), func_name)(*args)
    return value, torch.get_num_threads()


def check_ex04(
    module: str = "exercises.ex04_fork_safe", timeout: float = 15.0, size: int = 4_000_000
) -> CheckResult:
    """Check exercise 04: the worker survives a fork from a parent that already ran parallel ops.

    The parent (this process) first runs a multi-threaded op on at least 2 threads; the worker then
    runs in a fork child with a ``timeout``. With GNU OpenMP, a worker that does not limit its
    threads first hangs and is killed at the deadline.

    >>> check_ex04("solutions.ex04_fork_safe").passed
    True
    """
    import torch

    def body(mod: ModuleType, report: _Report) -> None:
        if "fork" not in mp.get_all_start_methods():
            report.ok("fork is not available on this platform, so the hazard cannot occur here")
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(max(2, threads))
        try:
            torch.randn(size, dtype=torch.float64).float()  # the parent has now used its OpenMP pool
            outcome = _in_child(
                __name__,
                "_call_and_count_threads",
                (module, "fork_safe_sum", (size,)),
                method="fork",
                timeout=timeout,
            )
        finally:
            torch.set_num_threads(threads)
        if outcome.status == "timeout":
            report.fail(
                f"your worker hung in the fork child (killed after {timeout:.0f} s): the parent had already "
                "run a multi-threaded op, and GNU OpenMP's thread pool does not survive fork. Call "
                "torch.set_num_threads(1) at the start of the worker, before its first torch op."
            )
            return
        if outcome.status != "ok":
            _raise_if_stub_error(outcome.error)
            report.fail(f"the worker failed: {_error_line(outcome.error)}")
            return
        value, child_threads = outcome.value
        if not isinstance(value, float) or not math.isfinite(value):
            report.fail(f"fork_safe_sum returned {value!r}: return a finite Python float (float(...sum()))")
        elif child_threads != 1:
            report.fail(
                f"it finished here, but the child still used {child_threads} threads: with GNU OpenMP it "
                "hangs. Call torch.set_num_threads(1) before the first torch op."
            )
        else:
            report.ok(f"the fork child set 1 thread and finished in {outcome.seconds:.2f} s")

    return _checked("ex04", module, ("fork_safe_sum",), body)


# --- 05 Hogwild -----------------------------------------------------------------------------------

_TRUE_WEIGHTS = [-1.0, -0.7, -0.4, -0.1, 0.1, 0.4, 0.7, 1.0]


def regression_batch(batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch ``(x, y)`` of a noisy linear regression task with 8 inputs (uses torch's global RNG).

    >>> x, y = regression_batch(4)
    >>> tuple(x.shape), tuple(y.shape)
    ((4, 8), (4, 1))
    """
    import torch

    x = torch.randn(batch_size, 8)
    y = x @ torch.tensor(_TRUE_WEIGHTS).unsqueeze(1) + 0.01 * torch.randn(batch_size, 1)
    return x, y


def _hogwild_solo(rank: int, module_name: str, seed: int, steps: int) -> list[float]:
    """Child side of check_ex05: the learner's worker as rank 0, 1, 0 on private models."""
    import torch

    torch.manual_seed(999)  # every child starts from the same random state and the same model
    model = torch.nn.Linear(8, 1)
    worker = _resolve(importlib.import_module(module_name), "hogwild_worker")
    return worker((0, 1, 0)[rank], model, seed, steps)


def _warm_up_optimizer() -> None:
    """Take one SGD step here, so fork children inherit the modules the first step imports lazily
    (otherwise every child imports them itself: seconds each on a busy machine)."""
    import torch

    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    weight.sum().backward()
    optimizer.step()


def _mse(model, batch) -> float:
    import torch

    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(model(batch[0]), batch[1]))


def check_ex05(module: str = "exercises.ex05_hogwild", timeout: float = 60.0, steps: int = 30) -> CheckResult:
    """Check exercise 05: per-rank seeding, decreasing loss, and updates that reach the shared model.

    >>> check_ex05("solutions.ex05_hogwild").passed
    True
    """
    import torch

    def body(mod: ModuleType, report: _Report) -> None:
        seed = 5
        _warm_up_optimizer()
        try:
            solo = launch(_hogwild_solo, args=(module, seed, steps), nprocs=3, method=FORK, timeout=timeout)
        except WorkerFailed as exc:
            _raise_if_stub_error(str(exc))
            report.fail(f"the worker failed: {_error_line(str(exc))}")
            return
        if any(not isinstance(losses, list) or len(losses) != steps for losses in solo):
            report.fail(f"return the list of the {steps} loss values (floats); got {type(solo[0]).__name__}")
            return
        if solo[0] != solo[2]:
            report.fail(
                "two runs of rank 0 drew different batches: start the worker with "
                "torch.manual_seed(seed + rank) so that each run is reproducible"
            )
        elif solo[0] == solo[1]:
            report.fail(
                "rank 0 and rank 1 drew exactly the same batches: seed each worker with "
                "torch.manual_seed(seed + rank), not one seed for all (forked workers also inherit the "
                "parent's random state, so not seeding at all makes them identical too)"
            )
        else:
            report.ok("each rank draws its own batches, reproducibly (seed + rank)")
        first, last = sum(solo[0][:5]) / 5, sum(solo[0][-5:]) / 5
        if not last < 0.5 * first:
            report.fail(
                f"the loss did not go down (first steps {first:.3f}, last {last:.3f}): "
                "zero_grad, backward, step"
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = torch.nn.Linear(8, 1)
            held_out = regression_batch(256)
        model.share_memory()
        before = [p.detach().clone() for p in model.parameters()]
        loss_before = _mse(model, held_out)
        try:
            launch(mod.hogwild_worker, args=(model, seed, steps), nprocs=2, method=FORK, timeout=timeout)
        except WorkerFailed as exc:
            report.fail(f"a Hogwild worker failed: {_error_line(str(exc))}")
            return
        if all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)):
            report.fail(
                "the updates never reached the shared model: did the worker train a copy (copy.deepcopy, a "
                "new model, load_state_dict) or rebind parameters (p.data = p.data - ...) instead of "
                "updating them in place (optimizer.step(), p.data.sub_(...))?"
            )
            return
        loss_after = _mse(model, held_out)
        if loss_after < 0.5 * loss_before:
            report.ok(
                f"2 workers trained the shared model: held-out loss {loss_before:.3f} -> {loss_after:.3f}"
            )
        else:
            report.fail(
                f"the shared model barely improved: held-out loss {loss_before:.3f} -> {loss_after:.3f}"
            )

    return _checked("ex05", module, ("hogwild_worker",), body)


# --- 06 DDP: DistributedSampler -------------------------------------------------------------------


def _expected_orders(
    rank: int, world_size: int, dataset_size: int, epochs: int, seed: int
) -> list[list[int]]:
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(
        range(dataset_size), num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def check_ex06(module: str = "exercises.ex06_distributed_sampler", timeout: float = 60.0) -> CheckResult:
    """Check exercise 06: ranks split every epoch, and the order changes between epochs (``set_epoch``).

    >>> check_ex06("solutions.ex06_distributed_sampler").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        world, size, epochs, seed = 2, 16, 3, 0
        try:
            orders = launch(
                mod.epoch_orders, args=(world, size, epochs, seed), nprocs=world, method=FORK, timeout=timeout
            )
        except WorkerFailed as exc:
            _raise_if_stub_error(str(exc))
            if "process group" in str(exc):
                report.fail(
                    "DistributedSampler asked for the default process group: pass num_replicas=world_size "
                    "and rank=rank yourself (in real DDP code the group from init_process_group "
                    "provides them)"
                )
            else:
                report.fail(f"a rank failed: {_error_line(str(exc))}")
            return
        if any(not isinstance(o, list) or len(o) != epochs for o in orders):
            report.fail(f"return one list of indices per epoch ({epochs} lists)")
            return
        orders = [[[int(i) for i in epoch] for epoch in rank_orders] for rank_orders in orders]
        for epoch in range(epochs):
            seen = Counter(orders[0][epoch] + orders[1][epoch])
            if orders[0][epoch] == orders[1][epoch]:
                report.fail(f"epoch {epoch}: both ranks read the same indices: pass rank=rank to the sampler")
                return
            if sorted(seen) != list(range(size)) or max(seen.values()) > 1:
                report.fail(f"epoch {epoch}: the ranks together did not read every index exactly once")
                return
        report.ok(f"in every epoch the {world} ranks split the {size} indices between them")
        unshuffled = list(range(0, size, world))
        if all(epoch == unshuffled for epoch in orders[0]):
            report.fail("the indices are not shuffled: keep DistributedSampler's shuffle=True")
        elif all(epoch == orders[0][0] for epoch in orders[0]):
            report.fail(
                "every epoch reads the same order: the sampler's shuffle is seeded with seed + epoch, "
                "so call "
                "sampler.set_epoch(epoch) at the start of every epoch"
            )
        elif orders != [_expected_orders(rank, world, size, epochs, seed) for rank in range(world)]:
            report.fail(
                "the order changes between epochs but differs from DistributedSampler(..., seed=seed) with "
                "set_epoch(epoch): use the seed you were given and call set_epoch with the epoch number"
            )
        else:
            report.ok("a new order every epoch: set_epoch(epoch) is called")

    return _checked("ex06", module, ("epoch_orders",), body)


# --- 07 DataLoader workers ------------------------------------------------------------------------


def check_ex07(module: str = "exercises.ex07_iterable_sharding", timeout: float = 60.0) -> CheckResult:
    """Check exercise 07: every sample comes out of a multi-worker DataLoader exactly once.

    >>> check_ex07("solutions.ex07_iterable_sharding").passed
    True
    """
    from torch.utils.data import DataLoader

    def body(mod: ModuleType, report: _Report) -> None:
        for n, workers in ((20, 2), (10, 3), (7, 0)):
            dataset = mod.ShardedRange(0, n)
            options = {"multiprocessing_context": FORK, "timeout": timeout} if workers else {}
            try:
                with warnings.catch_warnings():  # "suggested max number of worker" on a 2-core machine
                    warnings.filterwarnings("ignore", message="This DataLoader will create")
                    got = [
                        int(x) for x in DataLoader(dataset, batch_size=None, num_workers=workers, **options)
                    ]
            except NotImplementedError:
                raise _NotAttempted from None
            except Exception as exc:
                if workers == 0 and isinstance(exc, (AttributeError, TypeError)):
                    report.fail(
                        f"with num_workers=0 it failed ({type(exc).__name__}: {_first_line(str(exc))}): "
                        "get_worker_info() returns None in the main process; then yield the whole range"
                    )
                else:
                    report.fail(f"{workers} workers: {type(exc).__name__}: {_first_line(str(exc))}")
                continue
            counts = Counter(got)
            missing = sorted(set(range(n)) - set(counts))
            extra = sorted(set(counts) - set(range(n)))
            if got and not missing and not extra and set(counts.values()) == {workers}:
                report.fail(
                    f"{workers} workers, {n} samples: every sample came out {workers} times. Each worker "
                    "has its own copy of the dataset and iterates all of it: use get_worker_info() "
                    "(.id, .num_workers) to yield only this worker's share"
                )
            elif missing:
                report.fail(
                    f"{workers} workers, {n} samples: samples {missing} never came out (when n is not a "
                    "multiple of the worker count, the last share must take the rest; or interleave: "
                    "range(start + id, end, num_workers))"
                )
            elif extra or max(counts.values()) > 1:
                dup = sorted(k for k, c in counts.items() if c > 1)
                report.fail(f"{workers} workers, {n} samples: duplicated {dup}, out of range {extra}")
            else:
                report.ok(f"{workers} workers, {n} samples: each exactly once")

    return _checked("ex07", module, ("ShardedRange.__iter__",), body)


# --- 08 debugging: exit codes ---------------------------------------------------------------------


def _exit_with(code: int) -> None:
    sys.exit(code)


def _raise_quietly() -> None:
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child exits right away)
    raise RuntimeError("an uncaught exception in a child")


def _kill_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(30)


def check_ex08(module: str = "exercises.ex08_exit_codes", timeout: float = 30.0) -> CheckResult:
    """Check exercise 08: ``explain_exitcode`` describes the exit codes of real processes correctly.

    >>> check_ex08("solutions.ex08_exit_codes").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        ctx = mp.get_context(FORK)
        cases = [
            ("a child that returned normally", ctx.Process(target=_exit_with, args=(0,)), "ok"),
            ("a child that called sys.exit(3)", ctx.Process(target=_exit_with, args=(3,)), "error 3"),
            ("a child that raised an exception", ctx.Process(target=_raise_quietly), "error 1"),
            (
                "a child killed by SIGKILL",
                ctx.Process(target=_kill_self, args=(signal.SIGKILL,)),
                "killed by SIGKILL",
            ),
            (
                "a child stopped with terminate()",
                ctx.Process(target=time.sleep, args=(30,)),
                "killed by SIGTERM",
            ),
        ]
        procs = [p for _, p, _ in cases]
        with running(procs, timeout=timeout):
            running_code = procs[-1].exitcode  # None: still running
            procs[-1].terminate()
            for p in procs:
                p.join(timeout)
        hints = {
            "running": "a process that has not finished has exitcode None: test `exitcode is None` first "
            "(`not exitcode` is also true for 0)",
            "ok": "exit code 0 means success",
            "error": "a positive code n is the child's own exit status: 'error n' "
            "(an uncaught exception gives 1)",
            "killed": "a negative code -n means the child was killed by signal n: signal.Signals(n).name",
        }
        checks = [("a child still running", running_code, "running")]
        checks += [(what, p.exitcode, expected) for (what, p, expected) in cases]
        for what, code, expected in checks:
            try:
                answer = mod.explain_exitcode(code)
            except NotImplementedError:
                raise _NotAttempted from None
            except Exception as exc:
                answer = f"<raised {type(exc).__name__}: {exc}>"
            if answer == expected:
                report.ok(f"{what}: exitcode {code} -> {answer!r}")
            else:
                report.fail(
                    f"{what} has exitcode {code}: you said {answer!r}, expected {expected!r}. "
                    f"{hints[expected.split()[0]]}"
                )

    return _checked("ex08", module, ("explain_exitcode",), body)


CHECKERS: dict[str, Callable[..., CheckResult]] = {
    "ex00": check_ex00,
    "ex01": check_ex01,
    "ex02": check_ex02,
    "ex03": check_ex03,
    "ex04": check_ex04,
    "ex05": check_ex05,
    "ex06": check_ex06,
    "ex07": check_ex07,
    "ex08": check_ex08,
}
"""Every checker by exercise id, e.g. ``CHECKERS["ex02"]()`` checks ``exercises/ex02_shared_tensor.py``."""
