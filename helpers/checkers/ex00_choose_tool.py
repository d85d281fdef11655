"""Exercise 00 (notebook 00): pick the right tool for each scenario."""

from __future__ import annotations

from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _NotAttempted,
    _Report,
)

__all__ = ["EX00_TOOLS", "EX00_SCENARIOS", "check_ex00"]


EX00_TOOLS = ("fork", "spawn", "shared_tensor", "queue", "hogwild", "ddp", "dataloader")

EX00_SCENARIOS: dict[str, tuple[str, str]] = {
    "Child processes must run CUDA kernels on the GPU.": (
        "spawn",
        "a forked child cannot re-initialise CUDA after the parent used it: CUDA needs spawn (or forkserver)",
    ),
    "Start 8 short CPU-only workers as fast as possible on Linux; the parent has used no CUDA.": (
        "fork",
        "fork starts a child in milliseconds (a copy of the parent); spawn needs about a second per child",
    ),
    "Train one model on 4 GPUs of one machine, one process per GPU, gradients averaged every step.": (
        "ddp",
        "DistributedDataParallel: one process per device, gradients all-reduced in backward",
    ),
    "Several CPU processes update one small model asynchronously, without locks.": (
        "hogwild",
        "lock-free asynchronous updates of a shared model are Hogwild (model.share_memory())",
    ),
    "Load and augment image batches in parallel while the model trains.": (
        "dataloader",
        "DataLoader(num_workers=...) runs dataset code in worker processes and prefetches batches",
    ),
    "Worker processes send a stream of results of varying size back to the parent.": (
        "queue",
        "a torch.multiprocessing Queue carries messages (tensors as shared-memory handles)",
    ),
    "Several processes read and write one large tensor in place, on one machine.": (
        "shared_tensor",
        "share_memory_() once; every process then reads and writes the same storage, no copies",
    ),
}


def check_ex00(module: str = "exercises.ex00_choose_tool") -> CheckResult:
    """Check exercise 00: ``choose_tool(scenario)`` picks the right tool for every scenario.

    Notebook 00, its closing programming exercise.

    >>> check_ex00("solutions.ex00_choose_tool").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        for scenario, (tool, why) in EX00_SCENARIOS.items():
            try:
                answer = mod.choose_tool(scenario)
            except NotImplementedError:
                raise _NotAttempted from None
            if answer not in EX00_TOOLS:
                report.fail(f"{scenario!r}: {answer!r} is not one of {EX00_TOOLS}")
            elif answer != tool:
                report.fail(f"{scenario!r}: you chose {answer!r}; think again (hint: {why.split(':')[0]})")
            else:
                report.ok(f"{tool}: {why}")

    return _checked("ex00", module, ("choose_tool",), body)
