"""Worker functions for the tests: importable, so spawn and forkserver children can run them."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

# Every start method this platform has; tests run each.
METHODS = [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()]


def shout_and_exit(message: str, code: int) -> None:
    print(message, flush=True)
    print(message, file=sys.stderr, flush=True)
    sys.exit(code)


def raise_value_error(*_args) -> None:
    raise ValueError("raised on purpose")


def ignore_sigterm_and_sleep(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(60)


def rank_and_pid(rank: int, offset: int = 0) -> tuple[int, int]:
    return rank + offset, os.getpid()


def shared_ones(rank: int, n: int):
    import torch

    return torch.full((n,), float(rank))


def sleep_on_rank(rank: int, sleepy_rank: int, seconds: float) -> None:
    if rank == sleepy_rank:
        time.sleep(seconds)


def exit_on_rank(rank: int, bad_rank: int, code: int) -> None:
    if rank == bad_rank:
        os._exit(code)


def thread_count(_rank: int) -> int:
    import torch

    return torch.get_num_threads()


def put_rank(rank: int, queue) -> None:
    queue.put(rank)


def catches_sigusr1(_rank: int) -> bool:
    """Whether this process handles SIGUSR1 (``stack_dump.register_stack_dump`` installs a handler)."""
    with open(f"/proc/{os.getpid()}/status") as status:
        mask = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(mask, 16) >> (signal.SIGUSR1 - 1) & 1)
