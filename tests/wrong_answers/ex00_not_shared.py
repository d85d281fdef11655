"""Wrong: the tensor never moves to shared memory, so each child writes into its own copy."""

import torch
import torch.multiprocessing as mp
from helpers.solutions.ex00_first_program import fill_row


def fill_table(nprocs: int = 4, method: str = "spawn") -> torch.Tensor:
    ctx = mp.get_context(method)
    table = torch.zeros(nprocs, 2, dtype=torch.int64)  # the mistake: no share_memory_()
    procs = [ctx.Process(target=fill_row, args=(table, rank)) for rank in range(nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    return table
