"""Timing that reports a median of repeats, never a single lucky (or unlucky) run.

Example::

    >>> from helpers.timing import time_call
    >>> t = time_call(sum, range(1000), repeat=5)
    >>> t.median > 0 and len(t.times) == 5
    True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["Timing", "time_call", "torch_timer", "stopwatch"]


@dataclass
class Timing:
    """Repeated measurements of one thing, in seconds."""

    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """max - min: how much the repeats disagree."""
        return max(self.times) - min(self.times)

    def __str__(self) -> str:
        median, spread = self.median * 1e3, self.spread * 1e3
        return f"median {median:.2f} ms over {len(self.times)} runs (spread {spread:.2f} ms)"


def time_call(fn: Callable, *args, repeat: int = 5, warmup: int = 1, **kwargs) -> Timing:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``repeat`` times timed.

    Use it for things that take milliseconds or more (starting a process, a queue handoff).

    >>> time_call(sorted, [3, 1, 2], repeat=3).median >= 0
    True
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return Timing(times)


def torch_timer(fn: Callable[[], object], min_run_time: float = 0.2, num_threads: int = 1) -> float:
    """Median seconds per call of ``fn()`` by ``torch.utils.benchmark`` (for fast tensor ops).

    ``torch.utils.benchmark`` handles warm-up, loops small ops until they are measurable and pins
    the thread count, which a hand-written loop gets wrong.

    >>> import torch
    >>> x = torch.ones(1000)
    >>> torch_timer(lambda: x * 2, min_run_time=0.05) < 0.01
    True
    """
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=num_threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


@dataclass
class _Elapsed:
    seconds: float = field(default=0.0)


@contextmanager
def stopwatch() -> Iterator[_Elapsed]:
    """Time a block: ``with stopwatch() as sw: ...`` then ``sw.seconds``.

    >>> with stopwatch() as sw:
    ...     _ = sum(range(10))
    >>> sw.seconds >= 0
    True
    """
    elapsed = _Elapsed()
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed.seconds = time.perf_counter() - start
