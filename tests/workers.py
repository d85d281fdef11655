"""Worker functions for the tests: importable, so spawn and forkserver children can run them."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

# Every start method this platform has; tests run each.
METHODS = [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()]
# For a test that needs a child started as spawn starts one (it imports its function by name), not
# spawn's price: a test process's forkserver has torch imported (conftest.FORKSERVER_PRELOAD), so its
# child starts in about 0.1 CPU-s where a spawn child imports torch again (2-3 CPU-s). Where learners
# meet the spawn path, it runs: the notebooks that spawn in the browser run, every notebook on the
# macOS path in `make test-wheel`, and the tests' spawn variants in `make test-spawn`.
FRESH = "forkserver" if "forkserver" in METHODS else "spawn"


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


def reload_fsdp2(rank: int, world_size: int, port: int, checkpoint: str, hidden: tuple, path: str) -> None:
    """Load a sharded checkpoint into FSDP2 on ``world_size`` ranks; rank 0 saves the full weights and
    every rank's number of local values (tests/test_sharding.py: another world size than the writer's)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from helpers import digits, sharding

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=120))  # fmt: skip
    try:
        model, _, _ = sharding.setup_fsdp2(digits.make_model(seed=1, hidden=hidden), rank, world_size)
        sharding.load_sharded(model, checkpoint)
        held = torch.tensor([sum(p.to_local().numel() for p in model.parameters())])
        every = [torch.zeros_like(held) for _ in range(world_size)]
        dist.all_gather(every, held)
        full = {k: v.full_tensor() for k, v in model.state_dict().items()}  # a collective
        if rank == 0:
            torch.save({"state": full, "held": [int(h) for h in every]}, path)
    finally:
        dist.destroy_process_group()


def in_place_collectives(rank: int, world_size: int, port: int, path: str) -> None:
    """ZeRO-1's two collectives with aliasing buffers, each rank with its own values; rank 0 saves
    whether both gave the right result on every rank (tests/test_sharding.py)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=60))  # fmt: skip
    try:
        size = 5
        grads = torch.arange(world_size * size, dtype=torch.float32) * (rank + 1)  # differ per rank
        dist.reduce_scatter_tensor(grads[rank * size : (rank + 1) * size], grads)  # output: a slice of input
        total = torch.arange(world_size * size, dtype=torch.float32) * sum(range(1, world_size + 1))
        scattered = torch.equal(
            grads[rank * size : (rank + 1) * size], total[rank * size : (rank + 1) * size]
        )
        flat = torch.full((world_size * size,), -1.0)
        flat[rank * size : (rank + 1) * size] = torch.arange(size) + 100 * rank
        dist.all_gather_into_tensor(flat, flat[rank * size : (rank + 1) * size])  # input: a slice of output
        gathered = torch.equal(flat, torch.cat([torch.arange(size) + 100.0 * r for r in range(world_size)]))
        every = [None] * world_size
        dist.all_gather_object(every, (scattered, gathered))
        if rank == 0:
            torch.save([all(s for s, _ in every), all(g for _, g in every)], path)
    finally:
        dist.destroy_process_group()
