"""Exercise 12 (notebook 12): a ZeRO-1 step by hand, checked in real ranks against DDP with Adam."""

from __future__ import annotations

import math
import os
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    importable,
    run_check,
    run_in_child,
    saved_by_launch,
    value_of,
)
from helpers.launch import FAST_METHOD

__all__ = ["check_ex12"]

SECONDS = 25
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

WORLD = 2
"""The checker runs ``launch(WORLD, path)``."""


def _flat(state: dict):
    """Every value of a state dict, flattened in order into one vector."""
    import torch

    return torch.cat([t.reshape(-1) for t in state.values()])


def _adam_reference(mod: ModuleType) -> dict:
    """What DDP with Adam computes: one process, Adam, batches of ``WORLD * BATCH_SIZE`` in order."""
    import torch

    (x, y), model = mod.make_data().tensors, mod.make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=mod.LR)
    batch = WORLD * mod.BATCH_SIZE
    for step in range(mod.STEPS):
        optimizer.zero_grad()
        inputs, labels = x[step * batch : (step + 1) * batch], y[step * batch : (step + 1) * batch]
        torch.nn.functional.mse_loss(model(inputs), labels).backward()
        optimizer.step()
    return model.state_dict()


def _check_shard_of(module: str, mod: ModuleType, report: Report, timeout: float) -> None:
    """``shard_of(make_model(), 2, 3)`` in a child: the last of three padded slices, a copy."""
    import torch

    flat = _flat(mod.make_model().state_dict())
    size = math.ceil(flat.numel() / 3)
    expected = torch.nn.functional.pad(flat, (0, 3 * size - flat.numel()))[2 * size :]
    outcome = run_in_child(module, "shard_of", (mod.make_model(), 2, 3), method=FAST_METHOD, timeout=timeout)
    shard = value_of(outcome, "shard_of(make_model(), 2, 3)", "shard_of(make_model(), 2, 3) did not return")
    if not isinstance(shard, torch.Tensor) or shard.shape != expected.shape:
        raise Incorrect(
            f"shard_of(make_model(), 2, 3) returned {getattr(shard, 'shape', type(shard).__name__)}: with "
            f"{flat.numel()} values and 3 ranks each rank keeps ceil({flat.numel()}/3) = {size} values (the "
            "flattened parameters padded with zeros to a multiple of world_size), not the whole model"
        )
    if not torch.equal(shard.detach(), expected):
        raise Incorrect(
            "shard_of(make_model(), 2, 3) has the right size but not the right values: rank r keeps "
            "values r*size to (r+1)*size of the flattened parameters, in model.parameters() order, "
            "zeros at the end"
        )
    report.ok(f"shard_of(make_model(), 2, 3) is the last third of the {flat.numel()} values, padded")


def _trained(module: str, timeout: float) -> dict:
    """``launch(WORLD, path)`` in a child with a deadline; what rank 0 saved to ``path``."""
    return saved_by_launch(
        module,
        WORLD,
        timeout,
        "does every rank call the same collectives, in the same order, with tensors of the same size?",
        "nothing was saved to path: on rank 0, torch.save({'model': ..., 'optimizer_values': ...}, path)",
    )


def check_ex12(
    module: str | os.PathLike = "exercises.ex12_zero1_step", timeout: float = 180.0
) -> CheckResult:
    """Check exercise 12: ``shard_of`` cuts the right slice, and ``launch(2, path)`` trains in 2 real
    ranks to the weights of DDP with Adam while each rank's Adam holds the state of its slice only.

    Notebook 12, its closing programming exercise. Starts 2 spawn ranks (seconds).

    >>> check_ex12("solutions.ex12_zero1_step").passed  # doctest: +SKIP
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        import torch

        _check_shard_of(module, mod, report, timeout)
        saved, initial = _trained(module, timeout), _flat(mod.make_model().state_dict())
        weights, mine = _flat(saved["model"]), math.ceil(initial.numel() / WORLD)  # rank 0's slice: [:mine]
        if (weights - _flat(_adam_reference(mod))).abs().max().item() < 1e-5:
            report.ok(f"launch({WORLD}, path): rank 0's weights equal DDP with Adam's (one process, batch "
                      f"{WORLD * mod.BATCH_SIZE}), to float rounding")  # fmt: skip
        elif torch.equal(weights, initial):
            raise Incorrect("the model's weights never changed: copy the gathered values into its "
                            "parameters (with torch.no_grad(): p.copy_(...))")  # fmt: skip
        elif torch.equal(weights[mine:], initial[mine:]):
            raise Incorrect("rank 0's weights moved only in its own slice: all_gather_into_tensor every "
                            "rank's stepped shard and copy all of it into the model")  # fmt: skip
        else:
            raise Incorrect("rank 0's weights differ from DDP with Adam's: reduce-scatter the padded, "
                            "flattened gradients, divide by the world size, step, all-gather")  # fmt: skip
        if saved["optimizer_values"] != 2 * mine:
            raise Incorrect(f"rank 0's Adam holds {saved['optimizer_values']} values of state, not "
                            f"{2 * mine} (two per value of its slice)")  # fmt: skip
        report.ok(f"rank 0's Adam holds {2 * mine} values of state: half of what DDP's Adam holds")

    return run_check("ex12", module, ("shard_of", "zero1_step", "train", "launch"), body, SECONDS)
