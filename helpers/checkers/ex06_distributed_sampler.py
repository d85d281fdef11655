"""Exercise 06 (notebook 06): DistributedSampler split across ranks, a new order each epoch."""

from __future__ import annotations

from collections import Counter
from types import ModuleType

from helpers.checkers.core import (
    FORK,
    CheckResult,
    _checked,
    _error_line,
    _raise_if_stub_error,
    _Report,
)
from helpers.launch import WorkerFailed, launch

__all__ = ["check_ex06"]


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

    Notebook 06, its closing programming exercise.

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
