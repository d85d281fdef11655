"""Exercise 06 (notebook 06): a DDP ``train`` launched with ``mp.spawn``, checked in real ranks."""

from __future__ import annotations

import os
from types import ModuleType

from helpers.checkers.core import CheckResult, Incorrect, Report, importable, run_check, saved_by_launch

__all__ = ["check_ex06"]

SECONDS = 25
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


def _single_process(mod: ModuleType, batch_size: int, replicas: int = 1, set_epoch: bool = True,
                    shuffle: bool = True) -> dict:  # fmt: skip
    """Train ``mod``'s model in this process on rank 0's share of ``replicas``; return the weights."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    data, model = mod.make_data(), mod.make_model()
    sampler = DistributedSampler(data, replicas, 0, shuffle=shuffle, seed=mod.SEED)
    for epoch in range(mod.EPOCHS):
        if set_epoch:
            sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=batch_size, sampler=sampler):
            model.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            with torch.no_grad():  # plain SGD, what torch.optim.SGD(lr=LR) does (without importing it)
                for p in model.parameters():
                    p.add_(p.grad, alpha=-mod.LR)
    return model.state_dict()


def _difference(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


WORLD = 2
"""The checker runs ``launch(WORLD, path)``."""

MISTAKES = (
    (WORLD, {"set_epoch": False}, "every epoch read the same order: call sampler.set_epoch(epoch) at the "
     "start of each epoch"),
    (1, {"replicas": WORLD}, "rank 0 trained alone on its share: wrap the model in DistributedDataParallel, "
     "which averages the gradients of all ranks in backward()"),
    (1, {"shuffle": False}, "every rank read the whole dataset: give the DataLoader a DistributedSampler("
     "data, world_size, rank, seed=SEED) so that each rank reads its own share"),
)  # fmt: skip
"""(batches of BATCH_SIZE times, how the single process trained, the mistake): weights that equal
such a run's name the mistake that produced them."""


def _trained_state(module: str, timeout: float) -> dict:
    """``launch(WORLD, path)`` in a child with a deadline; the ``state_dict`` rank 0 saved to ``path``."""
    state = saved_by_launch(
        module,
        WORLD,
        timeout,
        "does every rank join with the same port and world_size, and does init_process_group have a timeout?",
        "nothing was saved to path: on rank 0, torch.save(model.module.state_dict(), path)",
    )
    if any(key.startswith("module.") for key in state):
        raise Incorrect(
            "the saved keys start with 'module.': save model.module.state_dict(), the model inside DDP, "
            "so that a plain model can load it"
        )
    return state


def check_ex06(
    module: str | os.PathLike = "helpers.exercises.ex06_ddp_train", timeout: float = 180.0
) -> CheckResult:
    """Check exercise 06: ``launch(2, path)`` trains in 2 real ranks and rank 0's weights equal one
    process trained with batches twice as large.

    Notebook 06, its closing programming exercise. Each run starts 2 spawn ranks (seconds).

    >>> check_ex06("helpers.solutions.ex06_ddp_train").passed  # doctest: +SKIP
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        state = _trained_state(module, timeout)
        report.ok(f"launch({WORLD}, path) ran {WORLD} ranks and rank 0 saved the weights")
        right = WORLD * mod.BATCH_SIZE
        if _difference(state, _single_process(mod, right)) < 1e-5:
            report.ok(f"the weights equal one process trained with batch {right}: DDP averaged the "
                      "gradients of both ranks' shares, epoch after epoch")  # fmt: skip
            return
        for batches, options, mistake in MISTAKES:
            if _difference(state, _single_process(mod, batches * mod.BATCH_SIZE, **options)) < 1e-5:
                raise Incorrect(mistake)
        raise Incorrect(
            f"the weights differ from one process trained with batch {right}: use "
            "DistributedSampler(data, world_size, rank, seed=SEED), batch_size=BATCH_SIZE, "
            "set_epoch(epoch), SGD with lr=LR, mse_loss, and wrap make_model() in DDP"
        )

    return run_check("ex06", module, ("train", "launch"), body, SECONDS)
