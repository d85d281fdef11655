"""Exercise 00 (overview): choose the right tool for each scenario.

Write ``choose_tool(scenario)``: given one scenario from ``helpers.checkers.EX00_SCENARIOS``, return
the best tool for it, one of ``helpers.checkers.EX00_TOOLS``:

- ``"fork"``: start children by copying this process (fast; Linux; no CUDA or threads in the parent)
- ``"spawn"``: start children as fresh interpreters (safe with CUDA and threads; slower start)
- ``"shared_tensor"``: ``share_memory_()`` a tensor and let processes read/write it in place
- ``"queue"``: ``torch.multiprocessing.Queue`` to send results between processes
- ``"hogwild"``: several processes update one shared model without locks
- ``"ddp"``: ``DistributedDataParallel``, one process per device, gradients averaged
- ``"dataloader"``: ``DataLoader(num_workers=...)`` to load and augment batches in parallel

Check with::

    from helpers.checkers import check_ex00; check_ex00()
"""

from __future__ import annotations


def choose_tool(scenario: str) -> str:
    """Return the tool (one of ``EX00_TOOLS``) that fits ``scenario`` best."""
    raise NotImplementedError("exercise 00: write choose_tool")
