"""Exercise 05 (notebook 05): a Hogwild worker: per-rank seed, falling loss, shared updates."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    error_line,
    importable,
    raise_if_stub_error,
    resolve,
    run_check,
)
from helpers.launch import FAST_METHOD, WorkerFailed, launch

if TYPE_CHECKING:  # torch is imported inside the functions: importing the checkers stays light
    import torch

__all__ = ["regression_batch", "check_ex05"]

SECONDS = 10
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


_TRUE_WEIGHTS = [-1.0, -0.7, -0.4, -0.1, 0.1, 0.4, 0.7, 1.0]


def regression_batch(batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch ``(x, y)`` of a noisy linear regression task with 8 inputs (uses torch's global RNG).

    Notebook 05's programming exercise.

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
    worker = resolve(importlib.import_module(module_name), "hogwild_worker")
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


def _judge_solo_runs(module: str, seed: int, steps: int, timeout: float, report: Report) -> None:
    """The worker as rank 0, 1, 0 on private models: per-rank seeding, reproducible, a falling loss."""
    _warm_up_optimizer()
    try:
        solo = launch(
            _hogwild_solo, args=(module, seed, steps), nprocs=3, method=FAST_METHOD, timeout=timeout
        )
    except WorkerFailed as exc:
        raise_if_stub_error(str(exc))
        raise Incorrect(f"the worker failed: {error_line(str(exc))}") from None
    if any(not isinstance(losses, list) or len(losses) != steps for losses in solo):
        raise Incorrect(f"return the list of the {steps} loss values (floats); got {type(solo[0]).__name__}")
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
            f"the loss did not go down (first steps {first:.3f}, last {last:.3f}): zero_grad, backward, step"
        )


def _judge_shared_model(mod: ModuleType, seed: int, steps: int, timeout: float) -> str:
    """2 workers on one shared model: their updates must reach it, and its held-out loss must fall."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        held_out = regression_batch(256)
    model.share_memory()
    before = [p.detach().clone() for p in model.parameters()]
    loss_before = _mse(model, held_out)
    try:
        launch(mod.hogwild_worker, args=(model, seed, steps), nprocs=2, method=FAST_METHOD, timeout=timeout)
    except WorkerFailed as exc:
        raise Incorrect(f"a Hogwild worker failed: {error_line(str(exc))}") from None
    if all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)):
        raise Incorrect(
            "the updates never reached the shared model: did the worker train a copy (copy.deepcopy, a "
            "new model, load_state_dict) or rebind parameters (p.data = p.data - ...) instead of "
            "updating them in place (optimizer.step(), p.data.sub_(...))?"
        )
    loss_after = _mse(model, held_out)
    if not loss_after < 0.5 * loss_before:
        raise Incorrect(
            f"the shared model barely improved: held-out loss {loss_before:.3f} -> {loss_after:.3f}"
        )
    return f"2 workers trained the shared model: held-out loss {loss_before:.3f} -> {loss_after:.3f}"


def check_ex05(
    module: str | os.PathLike = "helpers.exercises.ex05_hogwild", timeout: float = 60.0, steps: int = 30
) -> CheckResult:
    """Check exercise 05: per-rank seeding, decreasing loss, and updates that reach the shared model.

    Notebook 05, its closing programming exercise.

    >>> check_ex05("helpers.solutions.ex05_hogwild").passed  # doctest: +ELLIPSIS
    checking .../solutions/ex05_hogwild.py (takes about 10 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        seed = 5
        _judge_solo_runs(module, seed, steps, timeout, report)
        report.ok(_judge_shared_model(mod, seed, steps, timeout))

    return run_check("ex05", module, ("hogwild_worker",), body, SECONDS)
