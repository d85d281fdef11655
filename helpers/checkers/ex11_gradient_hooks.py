"""Exercise 11 (notebook 11): DDP from gradient hooks, checked in 2 real ranks against DDP itself."""

from __future__ import annotations

import importlib
import inspect
import os
from types import ModuleType

from helpers.checkers.core import CheckResult, Incorrect, Report, importable, raise_if_stub_error, run_check
from helpers.launch import FAST_METHOD, WorkerFailed, launch

__all__ = ["check_ex11"]

SECONDS = 15
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

WORLD = 2
"""The checker trains in this many ranks."""


def _train(model, mod: ModuleType, rank: int, steps: int) -> dict:
    """``steps`` SGD steps of ``model`` on this rank's share of ``mod.make_data()``; the gradients of
    the first step (as the optimizer saw them) and the final weights."""
    import torch

    x, y = mod.make_data().tensors
    optimizer = torch.optim.SGD(model.parameters(), lr=mod.LR)
    first_grads = None
    for step in range(steps):
        start = (step * WORLD + rank) * mod.BATCH_SIZE
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(
            model(x[start : start + mod.BATCH_SIZE]), y[start : start + mod.BATCH_SIZE]
        ).backward()
        if first_grads is None:
            first_grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
    return {"grads": first_grads, "weights": [p.detach().clone() for p in model.parameters()]}


def _rank(rank: int, port: int, module_name: str) -> dict:
    """One rank: the learner's hooks, DDP, and no synchronisation at all, trained on the same batches."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from helpers.collectives import join

    join(rank, WORLD, port)
    try:
        mod = importlib.import_module(module_name)
        hooked = mod.make_model()
        mod.average_in_backward(hooked)
        runs = {"hooks": _train(hooked, mod, rank, mod.STEPS)}
        runs["DDP"] = _train(DDP(mod.make_model()), mod, rank, mod.STEPS)
        runs["alone"] = _train(mod.make_model(), mod, rank, 1)  # this rank's own gradient
        dist.barrier()  # a rank that never finished the hooks' collectives fails here, not silently
        return runs
    finally:
        dist.destroy_process_group()


def _close(a: list, b: list, factor: float = 1.0) -> bool:
    return all((p - factor * q).abs().max().item() < 1e-6 for p, q in zip(a, b, strict=True))


def _late_binding(run: dict) -> bool:
    """Some gradients are DDP's mean and the others this rank's own: every hook reduced one parameter
    (a closure over the loop variable reads its last value when the hooks run)."""
    hooks, ddp, alone = run["hooks"]["grads"], run["DDP"]["grads"], run["alone"]["grads"]
    mean = [_close([h], [d]) for h, d in zip(hooks, ddp, strict=True)]
    own = [_close([h], [a]) and not m for h, a, m in zip(hooks, alone, mean, strict=True)]
    return any(mean) and any(own)


MISTAKES = (
    (lambda run: _close(run["hooks"]["grads"], run["DDP"]["grads"], WORLD), "each gradient is the SUM over "
     "the ranks: divide it by the world size (dist.get_world_size()) after the all-reduce"),
    (lambda run: _close(run["hooks"]["grads"], run["alone"]["grads"], 1 / WORLD), "each rank kept its own "
     "gradient (divided): all-reduce it first, dist.all_reduce(param.grad), so that every rank has the sum"),
    (lambda run: _close(run["hooks"]["grads"], run["alone"]["grads"]), "the gradients were not averaged: "
     "register the hook on every parameter with param.register_post_accumulate_grad_hook(hook)"),
    (_late_binding, "some gradients are averaged and the others stay this rank's own: every hook "
     "reduced the same parameter. Use the parameter the hook receives, def hook(param): ..., not the "
     "loop variable (a closure reads it when the hook runs: its last value)"),
)  # fmt: skip
"""(a test of one rank's runs, the mistake it reveals): how the hooks' first gradients relate to DDP's."""


def _never_waited(mod: ModuleType) -> bool:
    """The learner's module starts an asynchronous collective and never calls ``wait()``."""
    try:
        source = inspect.getsource(mod)
    except (OSError, TypeError):
        return False
    return "async_op=True" in source.replace(" ", "") and ".wait(" not in source


def check_ex11(
    module: str | os.PathLike = "helpers.exercises.ex11_gradient_hooks", timeout: float = 120.0
) -> CheckResult:
    """Check exercise 11: ``average_in_backward(model)`` makes 2 real ranks train exactly like DDP.

    Notebook 11, its closing programming exercise. Each run starts 2 ranks (seconds).

    >>> check_ex11("helpers.solutions.ex11_gradient_hooks").passed  # doctest: +SKIP
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        from helpers.ddp import free_port

        try:
            runs = launch(_rank, (free_port(), module), nprocs=WORLD, method=FAST_METHOD, timeout=timeout)
        except WorkerFailed as failed:
            raise_if_stub_error(str(failed))
            if failed.rank is None:
                hang = (
                    f"the ranks did not finish within {timeout:.0f} s: does every rank's hook call the same "
                )
                raise Incorrect(hang + "all-reduce, on every parameter, in every backward()?") from None
            raise Incorrect(f"a rank failed: {str(failed).strip().splitlines()[-1]}") from None
        for rank, run in enumerate(runs):
            if not _close(run["hooks"]["grads"], run["DDP"]["grads"]):
                if _never_waited(mod):
                    raise Incorrect("the all-reduce is asynchronous (async_op=True) and nothing waits for it: "
                                    "call wait() on the Work it returns before dividing (or drop async_op)")  # fmt: skip
                for test, mistake in MISTAKES:
                    if test(run):
                        raise Incorrect(mistake)
                differ = f"rank {rank}'s gradients after backward() differ from DDP's: all-reduce each "
                raise Incorrect(differ + "param.grad (SUM), then divide it by the world size, in the hook")
        report.ok(f"after backward() every rank's gradients equal DDP's (the mean over {WORLD} ranks)")
        if not all(_close(run["hooks"]["weights"], run["DDP"]["weights"]) for run in runs):
            raise Incorrect(f"the first step matches DDP but the weights after {mod.STEPS} steps do not: "
                            "register the hooks once, and let them average every backward()")  # fmt: skip
        report.ok(f"after {mod.STEPS} SGD steps the weights equal DDP's on both ranks, to 1e-6")

    return run_check("ex11", module, ("average_in_backward",), body, SECONDS)
