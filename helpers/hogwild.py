"""Hogwild training: several processes update one shared model without locks (notebook 05).

The pattern (PyTorch's "Multiprocessing best practices" and pytorch/examples ``mnist_hogwild``):
the parent calls ``model.share_memory()``; each worker sets its thread count, seeds itself with
``seed + rank``, builds its *own* optimizer over the shared parameters and runs SGD. Every
``optimizer.step()`` writes straight into the shared storage, with no lock.

Data: scikit-learn's bundled handwritten digits (8x8 images, no download), split once with a
fixed seed. Model: an MLP 64-256-256-10.

Example::

    >>> from helpers.hogwild import train
    >>> history = train(nprocs=2, epochs=2)  # this platform's default start method
    >>> history.nprocs, len(history.workers)
    (2, 2)
    >>> 0.0 <= history.test_accuracy <= 1.0
    True

From a shell: ``python -m helpers.hogwild --help``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from multiprocessing.queues import Queue as MPQueue
    from multiprocessing.synchronize import Barrier, Event

    import torch
    from matplotlib.figure import Figure
    from torch import nn

__all__ = [
    "Digits",
    "History",
    "load_digits_split",
    "make_model",
    "evaluate",
    "train_worker",
    "train",
    "train_single",
    "add_ones",
    "lost_updates",
    "plot_history",
    "explore",
    "main",
]

BATCH_SIZE = 32
N_EVALS = 8  # test-accuracy points per run (rank 0 evaluates; the same count in every variant)


@dataclass
class Digits:
    """The digits data as float tensors in [0, 1] (``x``: N x 64) and int64 labels."""

    x_train: object
    y_train: object
    x_test: object
    y_test: object


def load_digits_split(test_size: float = 0.25, seed: int = 0) -> Digits:
    """scikit-learn's bundled digits, scaled to [0, 1], split into train and test (stratified).

    The split is fixed by ``seed``, so every process and every run sees the same sets.

    >>> d = load_digits_split()
    >>> tuple(d.x_train.shape), tuple(d.x_test.shape), d.x_train.dtype
    ((1347, 64), (450, 64), torch.float32)
    """
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_size, random_state=seed, stratify=y)

    def as_x(a):
        return torch.tensor(a / 16.0, dtype=torch.float32)

    def as_y(a):
        return torch.tensor(a, dtype=torch.int64)

    return Digits(as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te))


def make_model(seed: int = 0, hidden: int = 256) -> nn.Sequential:
    """A fresh MLP 64-hidden-hidden-10 with weights drawn from ``seed``.

    >>> sum(p.numel() for p in make_model().parameters())
    85002
    """
    import torch
    from torch import nn

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10)
    )
    torch.random.set_rng_state(generator_state)
    return model


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of ``x`` that ``model`` classifies as ``y`` (no gradients, model's device).

    >>> d = load_digits_split()
    >>> 0.0 <= evaluate(make_model(), d.x_test, d.y_test) <= 1.0
    True
    """
    import torch

    device = next(model.parameters()).device
    with torch.no_grad():
        predicted = model(x.to(device)).argmax(dim=1)
    return (predicted == y.to(device)).float().mean().item()


def train_worker(
    rank: int,
    model: nn.Module,
    data: Digits,
    steps: int,
    lr: float,
    seed: int,
    threads: int,
    reports: queue.Queue | queue.SimpleQueue | MPQueue,
    report_every: int = 25,
    device: str = "cpu",
    lock: AbstractContextManager | None = None,
) -> None:
    """One Hogwild worker: ``steps`` SGD steps on the shared ``model``; progress goes to ``reports``.

    Order matters. ``torch.set_num_threads(threads)`` comes first, before any torch op: under fork
    a child whose parent already ran a multi-threaded op hangs in GNU OpenMP on its own first
    parallel op unless it changes its thread count (FACTS). Then ``torch.manual_seed(seed + rank)``
    (different batches per worker) and a per-worker optimizer (its momentum buffers are private).
    With ``lock`` (a multiprocessing Lock) each ``optimizer.step()`` is made exclusive.

    Messages on ``reports`` (tuples, see :class:`History`): ``("loss", rank, step, samples, loss,
    t)`` every ``report_every`` steps, ``("acc", rank, samples, accuracy, t)`` from rank 0, then
    ``("done", rank, samples, t_first, t_loop, t_end)``, or ``("error", rank, traceback)``.
    Times are ``time.monotonic()`` (system-wide, comparable between processes).

    >>> import queue, torch
    >>> q = queue.Queue()
    >>> train_worker(0, make_model(), load_digits_split(), steps=4, lr=0.05, seed=0, threads=1,
    ...              reports=q, report_every=2)
    >>> messages = [q.get() for _ in range(q.qsize())]
    >>> [m[0] for m in messages if m[0] != "acc"]
    ['loss', 'loss', 'done']
    """
    import torch

    try:
        t_first = time.monotonic()  # the child's first line: start-up ends here
        torch.set_num_threads(threads)
        torch.manual_seed(seed + rank)
        x, y = data.x_train.to(device), data.y_train.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5)
        loss_fn = torch.nn.CrossEntropyLoss()
        eval_every = max(1, steps // N_EVALS)
        running, samples = 0.0, 0
        t_loop = time.monotonic()
        for step in range(1, steps + 1):
            batch = torch.randint(len(x), (BATCH_SIZE,), device=device)
            optimizer.zero_grad()
            loss = loss_fn(model(x[batch]), y[batch])
            loss.backward()
            if lock is None:
                optimizer.step()
            else:
                with lock:
                    optimizer.step()
            running += loss.item()
            samples += BATCH_SIZE
            if step % report_every == 0 or step == steps:
                n = report_every if step % report_every == 0 else step % report_every
                reports.put(("loss", rank, step, samples, running / n, time.monotonic()))
                running = 0.0
            if rank == 0 and (step % eval_every == 0 or step == steps):
                accuracy = evaluate(model, data.x_test, data.y_test)
                reports.put(("acc", rank, samples, accuracy, time.monotonic()))
        reports.put(("done", rank, samples, t_first, t_loop, time.monotonic()))
    except BaseException:
        reports.put(("error", rank, traceback.format_exc()))
        raise


@dataclass
class History:
    """What a run did: per-worker losses, rank 0's test accuracies, timings, final accuracy.

    - ``losses[rank]``: list of ``(samples, loss, t)``; ``accuracies``: list of ``(samples,
      accuracy, t)``; ``t`` in seconds since the run started (the parent's clock at launch).
    - ``wall``: seconds from launch to all workers joined (includes process start-up).
    - ``workers[rank]``: dict with ``samples``, ``startup`` (launch to the first training step),
      ``loop`` (seconds in the training loop).
    - ``steady``: samples per second while training: all samples / (last loop end - first loop
      start), timed inside the workers; excludes start-up.
    """

    label: str
    nprocs: int
    threads: int
    method: str
    losses: dict = field(default_factory=dict)
    accuracies: list = field(default_factory=list)
    workers: dict = field(default_factory=dict)
    wall: float = 0.0
    steady: float = 0.0
    test_accuracy: float = 0.0

    @property
    def samples(self) -> int:
        """Samples trained on, all workers together."""
        return sum(w["samples"] for w in self.workers.values())

    def summary(self) -> str:
        """One line: label, wall time, steady-state samples/s, final test accuracy.

        >>> h = History("demo", 1, 1, "in-process", workers={0: {"samples": 3200}}, wall=2.0,
        ...             steady=1600.0, test_accuracy=0.9)
        >>> h.summary()
        'demo                   wall  2.00 s | steady   1.6k samples/s | 3,200 samples | test accuracy 0.900'
        """
        return (
            f"{self.label:<22} wall {self.wall:5.2f} s | steady {self.steady / 1e3:5.1f}k samples/s | "
            f"{self.samples:,} samples | test accuracy {self.test_accuracy:.3f}"
        )

    def _record(self, message: tuple, t0: float) -> None:
        kind, rank = message[0], message[1]
        if kind == "loss":
            _, _, _, samples, loss, t = message
            self.losses.setdefault(rank, []).append((samples, loss, t - t0))
        elif kind == "acc":
            _, _, samples, accuracy, t = message
            self.accuracies.append((samples, accuracy, t - t0))
        elif kind == "done":
            _, _, samples, t_first, t_loop, t_end = message
            self.workers[rank] = {
                "samples": samples,
                "startup": t_loop - t0,
                "loop": t_end - t_loop,
                "t_loop": t_loop,
                "t_end": t_end,
            }

    def _finish(self, wall: float, model, data: Digits) -> History:
        self.wall = wall
        first = min(w["t_loop"] for w in self.workers.values())
        last = max(w["t_end"] for w in self.workers.values())
        self.steady = self.samples / (last - first)
        self.test_accuracy = evaluate(model, data.x_test, data.y_test)
        return self


def _warm_up_optimizer() -> None:
    """Build one throwaway optimizer here, once: torch.optim's first use imports ``torch._dynamo``
    (about 800 modules, 1.5 s on a 2-core laptop). Fork children inherit the imported modules;
    without this each of them (and the first single-process run) would pay it inside the timing."""
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.5)


def _steps(epochs: float, n_train: int, nprocs: int) -> int:
    """Steps per worker so that all workers together see ``epochs`` passes over the train set."""
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    return max(1, round(epochs * n_train / BATCH_SIZE / nprocs))


def train(
    nprocs: int = 2,
    epochs: float = 30,
    lr: float = 0.05,
    *,
    threads: int = 1,
    method: str | None = None,
    seed: int = 0,
    device: str = "cpu",
    lock: bool = False,
    timeout: float = 120.0,
    on_report: Callable[[tuple], None] | None = None,
    data: Digits | None = None,
) -> History:
    """Hogwild: train one shared model in ``nprocs`` processes; return the :class:`History`.

    The total work is fixed by ``epochs`` (passes over the train set, all workers together), so
    runs with different ``nprocs`` see the same number of samples. ``method``: start method
    (default: ``spawn`` for CUDA, else this platform's default); ``threads``: torch threads per
    worker; ``lock=True`` serialises the optimizer steps (the locked variant); ``on_report`` is
    called in the parent with every message a worker sends (drive a progress bar with it). Every
    queue read is bounded; a worker that fails or the ``timeout`` ends the run with an error and
    no process is left behind.

    >>> h = train(nprocs=2, epochs=2, lock=True)  # 2 epochs of 1,347 samples: 42 steps of 32 each
    >>> sorted(h.workers), h.samples
    ([0, 1], 2688)
    """
    import torch
    import torch.multiprocessing as tmp

    from helpers.launch import WorkerFailed
    from helpers.processes import running

    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    method = method or ("spawn" if device.startswith("cuda") else mp.get_start_method())
    if device.startswith("cuda") and method == "fork":
        raise ValueError("CUDA cannot be used in forked children; use method='spawn' (or 'forkserver')")
    if method == "fork" and threads > 1:
        raise ValueError(
            "threads > 1 in a fork child can hang forever in GNU OpenMP once this process has run a "
            "multi-threaded op (FACTS; notebook 01). Use threads=1 with fork, or method='forkserver'/'spawn'."
        )
    data = data or load_digits_split()
    _warm_up_optimizer()
    model = make_model(seed).to(device)
    model.share_memory()  # parameters move to shared memory (a no-op for CUDA: shared by IPC)
    steps = _steps(epochs, len(data.x_train), nprocs)
    ctx = tmp.get_context(method)
    reports = ctx.Queue()
    step_lock = ctx.Lock() if lock else None
    args = (model, data, steps, lr, seed, threads, reports, 25, device, step_lock)
    procs = [ctx.Process(target=train_worker, args=(rank, *args), daemon=True) for rank in range(nprocs)]
    history = History(
        f"{nprocs} proc x {threads} thr {method}" + (" locked" if lock else ""), nprocs, threads, method
    )
    t0 = time.monotonic()
    with running(procs, timeout=timeout):
        while len(history.workers) < nprocs:
            try:
                message = reports.get(timeout=0.2)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode is not None and r not in history.workers]
                if dead:
                    raise WorkerFailed(
                        f"worker {dead[0]} died with exit code {procs[dead[0]].exitcode}"
                    ) from None
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(
                        f"Hogwild run unfinished after {timeout:.0f} s; workers terminated"
                    ) from None
                continue
            if message[0] == "error":
                raise WorkerFailed(f"worker {message[1]} raised:\n{message[2]}", rank=message[1])
            history._record(message, t0)
            if on_report is not None:
                on_report(message)
        for p in procs:
            p.join(max(0.1, timeout - (time.monotonic() - t0)))
    wall = time.monotonic() - t0
    reports.close()
    reports.join_thread()
    with torch.no_grad():
        return history._finish(wall, model, data)


def train_single(
    epochs: float = 30,
    lr: float = 0.05,
    *,
    threads: int = 1,
    seed: int = 0,
    device: str = "cpu",
    on_report: Callable[[tuple], None] | None = None,
    data: Digits | None = None,
) -> History:
    """The baseline: the same training loop in *this* process (no start-up), ``threads`` threads.

    This process's thread count is restored afterwards.

    >>> h = train_single(epochs=2)
    >>> h.nprocs, h.method
    (1, 'in-process')
    """
    import torch

    data = data or load_digits_split()
    _warm_up_optimizer()
    model = make_model(seed).to(device)
    reports: queue.SimpleQueue = queue.SimpleQueue()
    history = History(f"1 proc x {threads} thr", 1, threads, "in-process")
    before, rng = torch.get_num_threads(), torch.random.get_rng_state()
    t0 = time.monotonic()
    try:
        train_worker(
            0, model, data, _steps(epochs, len(data.x_train), 1), lr, seed, threads, reports, 25, device
        )
    finally:
        torch.set_num_threads(before)
        torch.random.set_rng_state(rng)
    wall = time.monotonic() - t0
    while not reports.empty():
        message = reports.get()
        history._record(message, t0)
        if on_report is not None:
            on_report(message)
    return history._finish(wall, model, data)


def add_ones(
    rank: int,
    tensor: torch.Tensor,
    adds: int,
    lock: AbstractContextManager | None = None,
    start: Event | Barrier | None = None,
) -> None:
    """Add 1 to every element of the shared ``tensor``, ``adds`` times (in place, one thread).

    ``tensor += 1`` is a read-modify-write per element: two processes doing it at the same moment
    can both read the old value, and one increment is lost. With ``lock`` each add is exclusive.
    ``start`` (an Event or Barrier-like object with ``wait``) lines the workers up.

    >>> import torch
    >>> t = torch.zeros(3)
    >>> add_ones(0, t, adds=5)
    >>> t.tolist()
    [5.0, 5.0, 5.0]
    """
    import torch

    torch.set_num_threads(1)
    if start is not None:
        start.wait(30)
    for _ in range(adds):
        if lock is None:
            tensor.add_(1)
        else:
            with lock:
                tensor.add_(1)


def lost_updates(
    nprocs: int = 2, adds: int = 200, size: int = 1_000_000, *, lock: bool = False, method: str | None = None
) -> int:
    """How many of ``nprocs * adds * size`` increments to one shared tensor were lost.

    Each worker runs :func:`add_ones` on the same shared tensor; without a lock, concurrent
    read-modify-writes overwrite each other. The count varies from run to run (it is a race);
    with ``lock=True`` it is 0.

    >>> lost_updates(nprocs=2, adds=5, size=1000, lock=True)
    0
    """
    import torch
    import torch.multiprocessing as tmp

    from helpers.processes import running

    ctx = tmp.get_context(method or mp.get_start_method())
    tensor = torch.zeros(size, dtype=torch.float32).share_memory_()
    step_lock = ctx.Lock() if lock else None
    start = ctx.Barrier(nprocs)
    procs = [ctx.Process(target=add_ones, args=(r, tensor, adds, step_lock, start)) for r in range(nprocs)]
    with running(procs, timeout=120):
        for p in procs:
            p.join(120)
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"add_ones workers failed: exit codes {[p.exitcode for p in procs]}")
    expected = float(nprocs * adds)
    return int((expected - tensor.double()).sum().item())


def plot_history(history: History, title: str | None = None) -> Figure:
    """Two panels: loss per worker over time, and rank 0's test accuracy over time.

    >>> fig = plot_history(train_single(epochs=2))
    """
    from helpers.plotting import new_figure

    fig, (left, right) = new_figure(title or history.label, ncols=2)
    for rank, points in sorted(history.losses.items()):
        left.plot([t for _, _, t in points], [loss for _, loss, _ in points], label=f"worker {rank}", lw=1)
    left.set(xlabel="seconds since launch", ylabel="training loss (mean of 25 steps)", yscale="log")
    left.legend()
    right.plot([t for *_, t in history.accuracies], [a for _, a, _ in history.accuracies], "o-")
    right.set(xlabel="seconds since launch", ylabel="test accuracy (rank 0 evaluates)", ylim=(0, 1))
    fig.tight_layout()
    return fig


def explore(nprocs: int = 2, lr: float = 0.05, epochs: int = 10) -> History:
    """Widget callback for notebook 05: one Hogwild run; prints its summary and plots it.

    Bounded so a widget move stays quick: 1-4 processes, 1-40 epochs, lr in (0, 1].

    >>> explore(nprocs=1, lr=0.05, epochs=1).nprocs  # doctest: +ELLIPSIS
    1 proc x 1 thr ...
    1
    """
    import matplotlib.pyplot as plt

    if not 1 <= nprocs <= 4 or not 1 <= epochs <= 40 or not 0 < lr <= 1:
        raise ValueError("explore() takes 1-4 processes, 1-40 epochs and 0 < lr <= 1")
    history = train(nprocs=nprocs, epochs=epochs, lr=lr, threads=1)
    print(history.summary())
    plot_history(history)
    plt.show()
    return history


def main(argv: list[str] | None = None) -> list[History]:
    """Command line: compare one process with Hogwild runs (``python -m helpers.hogwild --help``).

    >>> [h.nprocs for h in main(["--epochs", "1"])]  # doctest: +ELLIPSIS
    1 proc x 1 thr ...
    [1, 2]
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.hogwild",
        description="Train an MLP on scikit-learn's digits: one process, then Hogwild with N processes "
        "sharing the model, at the same total number of samples. Prints wall time (with start-up), "
        "steady-state samples/s (timed inside the workers) and test accuracy.",
    )
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2], help="Hogwild process counts (default 2)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    parser.add_argument(
        "--epochs", type=float, default=30, help="passes over the train set, all workers together"
    )
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (momentum 0.5)")
    parser.add_argument("--method", choices=mp.get_all_start_methods(), default=None, help="start method")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda needs spawn or forkserver)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load_digits_split()
    histories = [train_single(args.epochs, args.lr, threads=args.threads, device=args.device, data=data)]
    for n in args.nprocs:
        histories.append(
            train(
                n,
                args.epochs,
                args.lr,
                threads=args.threads,
                method=args.method,
                seed=args.seed,
                device=args.device,
                data=data,
            )
        )
    for h in histories:
        print(h.summary())
    return histories


if __name__ == "__main__":
    # Re-import so the worker functions belong to helpers.hogwild, not __main__: spawn and
    # forkserver children import them by module and name.
    from helpers.hogwild import main as _main

    _main()
