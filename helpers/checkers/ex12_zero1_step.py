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


def _adam_reference(mod: ModuleType) -> tuple:
    """What DDP with Adam computes: one process, Adam, batches of ``WORLD * BATCH_SIZE`` in order;
    the weights and Adam's first moment, flattened in ``parameters()`` order."""
    import torch

    (x, y), model = mod.make_data().tensors, mod.make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=mod.LR)
    batch = WORLD * mod.BATCH_SIZE
    for step in range(mod.STEPS):
        optimizer.zero_grad()
        inputs, labels = x[step * batch : (step + 1) * batch], y[step * batch : (step + 1) * batch]
        torch.nn.functional.mse_loss(model(inputs), labels).backward()
        optimizer.step()
    exp_avg = torch.cat([optimizer.state[p]["exp_avg"].reshape(-1) for p in model.parameters()])
    return model.state_dict(), exp_avg


def _check_shard_of(module: str, mod: ModuleType, report: Report, timeout: float) -> None:
    """``shard_of(make_model(), 2, 3)`` in a child: ``(flat, flat_grad, shard)``, the last of three
    padded slices."""
    import torch

    values = _flat(mod.make_model().state_dict())
    size = math.ceil(values.numel() / 3)
    padded = torch.nn.functional.pad(values, (0, 3 * size - values.numel()))
    call = "shard_of(make_model(), 2, 3)"
    outcome = run_in_child(module, "shard_of", (mod.make_model(), 2, 3), method=FAST_METHOD, timeout=timeout)
    returned = value_of(outcome, call, f"{call} did not return")
    if not (isinstance(returned, tuple) and len(returned) == 3):
        raise Incorrect(f"{call} returned {type(returned).__name__}, not (flat, flat_grad, shard)")
    flat, flat_grad, shard = returned
    if (
        not torch.equal(torch.as_tensor(flat).detach(), padded)
        or torch.as_tensor(flat_grad).shape != padded.shape
    ):
        raise Incorrect(
            f"{call}: flat must hold the {values.numel()} values in model.parameters() order, padded "
            f"with zeros to {3 * size} (a multiple of world_size), and flat_grad be as long"
        )
    if not isinstance(shard, torch.Tensor) or shard.shape != (size,):
        tail = (
            "not the whole model"
            if getattr(shard, "shape", None) in (values.shape, padded.shape)
            else "pad before you cut: flat.chunk(world_size) of unpadded values leaves the last slice short"
        )
        raise Incorrect(
            f"{call} returned a shard of {getattr(shard, 'shape', type(shard).__name__)}: with "
            f"{values.numel()} values and 3 ranks each rank keeps ceil({values.numel()}/3) = {size} values "
            f"(the flattened parameters padded with zeros to a multiple of world_size), {tail}"
        )
    if not torch.equal(shard.detach(), padded[2 * size :]):
        raise Incorrect(
            f"{call} has the right size but not the right values: rank r keeps values r*size to "
            "(r+1)*size of the flattened parameters, in model.parameters() order, zeros at the end"
        )
    report.ok(f"{call} returns flat, flat_grad and the last third of the {values.numel()} values, padded")


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
    module: str | os.PathLike = "helpers.exercises.ex12_zero1_step", timeout: float = 180.0
) -> CheckResult:
    """Check exercise 12: ``shard_of`` lays out the right buffers and slice, and ``launch(2, path)``
    trains in 2 real ranks to the weights (and Adam moment) of DDP with Adam while each rank's Adam
    holds the state of its slice only and the rank holds no copy of it.

    Notebook 12, its closing programming exercise. Starts 2 spawn ranks (seconds).

    >>> check_ex12("helpers.solutions.ex12_zero1_step").passed  # doctest: +SKIP
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        import torch

        try:
            _check_shard_of(module, mod, report, timeout)
            saved = _trained(module, timeout)
        except Incorrect as error:
            if "leaf Variable that requires grad is being used in an in-place operation" in str(error):
                raise Incorrect(f"{error}: autograd refuses to change a parameter in place; do it inside "
                                "`with torch.no_grad():`, or better, make the parameters views of flat "
                                "(p.data = ...) so that nothing needs copying") from None  # fmt: skip
            raise
        initial = _flat(mod.make_model().state_dict())
        weights, mine = _flat(saved["model"]), math.ceil(initial.numel() / WORLD)  # rank 0's slice: [:mine]
        reference, exp_avg = _adam_reference(mod)
        if (weights - _flat(reference)).abs().max().item() < 1e-5:
            report.ok(f"launch({WORLD}, path): rank 0's weights equal DDP with Adam's (one process, batch "
                      f"{WORLD * mod.BATCH_SIZE}), to float rounding")  # fmt: skip
        elif torch.equal(weights, initial):
            raise Incorrect("the model's weights never changed: its parameters must be views of flat "
                            "(p.data = flat[...].view_as(p)), which Adam and the all-gather write into")  # fmt: skip
        elif torch.equal(weights[mine:], initial[mine:]):
            raise Incorrect("rank 0's weights moved only in its own slice: all_gather_into_tensor every "
                            "rank's stepped shard into flat")  # fmt: skip
        else:
            raise Incorrect("rank 0's weights differ from DDP with Adam's: reduce-scatter flat_grad into "
                            "shard.grad, divide by the world size, step, all-gather into flat")  # fmt: skip
        ratio = (saved["exp_avg"][:mine].norm() / exp_avg[:mine].norm()).item()
        if abs(ratio - 1) > 1e-4:  # Adam's step hardly depends on the gradient's scale; its moment does
            raise Incorrect(f"rank 0's Adam moment exp_avg is {ratio:.2f} times DDP's: divide the "
                            "reduce-scattered gradient by the world size (the sum over the ranks is not "
                            "their average)")  # fmt: skip
        if saved["optimizer_values"] != 2 * mine:
            raise Incorrect(f"rank 0's Adam holds {saved['optimizer_values']} values of state, not "
                            f"{2 * mine} (two per value of its slice)")  # fmt: skip
        report.ok(f"rank 0's Adam holds {2 * mine} values of state, the average gradient's: half of DDP's")
        padded, step_counter = WORLD * mine, 4
        expected = 4 * padded + 4 * padded + 4 * 2 * mine + step_counter  # flat, flat_grad, Adam's state
        if saved["held"] != expected:
            raise Incorrect(f"rank 0 holds {saved['held']} bytes of parameters, gradients and Adam state, "
                            f"{saved['held'] - expected} more than flat, flat_grad and Adam's state "
                            f"({expected}): shard must be a view of flat, not a copy, its .grad a view of "
                            "flat_grad, and the model's parameters and gradients views of the two")  # fmt: skip
        report.ok(f"rank 0 holds {expected} bytes: 4 + 4 + 8/{WORLD} per parameter (padded), no copy")

    return run_check("ex12", module, ("shard_of", "zero1_step", "train", "launch"), body, SECONDS)
