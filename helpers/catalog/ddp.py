"""Catalog entries: DistributedDataParallel, Join, ZeroRedundancyOptimizer, FSDP2 and distributed checkpoints.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="ddp_unused_parameters",
        message=(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
            "one. This error indicates that your module has parameters that were not used in producing loss."
        ),
        cause=(
            "DDP averages gradients as they are produced in backward, bucket by bucket, and waits for every "
            "parameter's gradient. A parameter got no gradient in the last step (forward never used it, or "
            "used it for an output the loss ignores, such as an auxiliary head), so that step's reduction "
            "never finished and the next forward raises. The first step raised nothing and left its gradients "
            "un-averaged (torch 2.15.0)."
        ),
        fix=(
            "Remove the unused parameters, or make the loss use every output; otherwise `DDP(model, "
            "find_unused_parameters=True)` (an extra pass over the graph each step), or `static_graph=True` "
            "when the same parameters go unused in every step."
        ),
        teaches=(
            "14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration"
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux_head = nn.Linear(4, 1)  # built, but forward never uses it

    def forward(self, x):
        return self.body(x)


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net())
        for step in range(2):
            model(torch.randn(8, 4)).sum().backward()  # the second forward raises
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux_head = nn.Linear(4, 1)  # built, but forward never uses it

    def forward(self, x):
        return self.body(x)


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net(), find_unused_parameters=True)
        for step in range(2):
            model(torch.randn(8, 4)).sum().backward()  # the second forward raises
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        case="ddp_unused_parameters",
    ),
    Entry(
        id="ddp_unused_parameters_static_graph",
        message=(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
            "one. This error indicates that your training graph has changed in this iteration"
        ),
        cause=(
            "`DDP(..., static_graph=True)` records, in the first step, which parameters get gradients and "
            "assumes the same set in every later step. A parameter used then went unused in a later step (a "
            "branch in forward), so DDP waited for a gradient that never came. Here `static_graph` is the "
            "cause, not the fix."
        ),
        fix=(
            "Use `find_unused_parameters=True` instead of `static_graph=True` when forward takes different "
            "branches; keep `static_graph` only for a model whose used parameters never change."
        ),
        teaches=(
            "14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration"
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x, use_b):
        x = self.a(x)
        return self.b(x) if use_b else x  # a branch: b is used in some steps only


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net(), static_graph=True)
        for step in range(3):
            model(torch.randn(8, 4), use_b=step == 0).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x, use_b):
        x = self.a(x)
        return self.b(x) if use_b else x  # a branch: b is used in some steps only


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net(), find_unused_parameters=True)
        for step in range(3):
            model(torch.randn(8, 4), use_b=step == 0).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        case="ddp_unused_parameters",
    ),
    Entry(
        id="ddp_ready_twice",
        message="RuntimeError: Expected to mark a variable ready only once.",
        cause=(
            "DDP's gradient hook for one parameter fired twice in one backward: here a layer run twice under "
            "reentrant activation checkpointing (`checkpoint(..., use_reentrant=True)`), each checkpoint "
            "running a backward of its own, with `find_unused_parameters=True`. Without "
            "`find_unused_parameters` the same model runs with no error and wrong, per-rank gradients (torch "
            "2.15.0; unsupported, per DDP's docstring); a parameter shared by two modules or used outside "
            "`forward` does the same."
        ),
        fix=(
            "`checkpoint(..., use_reentrant=False)` (the non-reentrant checkpoint, which PyTorch recommends), "
            "or `DDP(..., static_graph=True)`; for a shared parameter, use it once per forward or inside the "
            "DDP-wrapped module only."
        ),
        teaches="14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs",
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        x = checkpoint(self.layer, x, use_reentrant=True)
        return checkpoint(self.layer, x, use_reentrant=True)  # the same layer, checkpointed twice


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net(), find_unused_parameters=True)
        model(torch.randn(8, 4, requires_grad=True)).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        x = checkpoint(self.layer, x, use_reentrant=False)
        return checkpoint(self.layer, x, use_reentrant=False)  # the same layer, checkpointed twice


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(Net(), find_unused_parameters=True)
        model(torch.randn(8, 4, requires_grad=True)).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        case="ddp_ready_twice",
    ),
    Entry(
        id="ddp_model_mismatch",
        message=(
            "RuntimeError: DDP expects same model across all ranks, but Rank 1 has 4 params, while rank 0 has "
            "inconsistent 2 params."
        ),
        cause=(
            "DDP's constructor all-gathers each rank's number of parameters and found a difference: the ranks "
            "built different models (a config read differently per rank, layers added on rank 0 only, a model "
            "frozen or pruned on one rank). `inconsistent 0 params` is usually not a model difference: the "
            "all-gather itself failed or timed out (a rank that never reached DDP, or a broken NCCL or "
            "network setup) and left zeros."
        ),
        fix=(
            "Build the same model on every rank (same config, same seed-independent structure) and wrap it in "
            "DDP on every rank; for `inconsistent 0 params`, find the rank that is late or stuck (`py-spy "
            "dump`, the NCCL watchdog's log) and check the collectives with a plain `all_reduce` first."
        ),
        teaches="06_ddp_mp_spawn.ipynb#a-minimal-ddp-training-function",
        sites=("torch/lib/libtorch_cpu.so::ddp-expects-same-model-across-all-ranks-but-rank",),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        layers = [nn.Linear(4, 4)]
        if rank == 1:
            layers.append(nn.Linear(4, 4))  # e.g. a config flag read differently on rank 1
        model = DDP(nn.Sequential(*layers))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        layers = [nn.Linear(4, 4), nn.Linear(4, 4)]  # the same model on every rank
        model = DDP(nn.Sequential(*layers))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
    ),
    Entry(
        id="ddp_grad_strides",
        message=(
            "UserWarning: Grad strides do not match bucket view strides. This may indicate grad was not "
            "created according to the gradient layout contract, or that the param's strides changed since DDP "
            "was constructed.  This is not an error, but may impair performance."
        ),
        cause=(
            "DDP lays out its gradient buckets when it is constructed, with each parameter's strides at that "
            "moment. A parameter's memory layout changed afterwards (the model moved to `channels_last` after "
            "`DDP(...)`), or a gradient was made with other strides, so every step copies the gradient into a "
            "bucket view of another layout: correct, but slower."
        ),
        fix=(
            "Convert the model before wrapping it: `model.to(memory_format=torch.channels_last)` then "
            "`DDP(model)`; do not assign `param.grad` tensors of another layout."
        ),
        teaches="11_collectives_and_ddp.ipynb#appendix-what-bucketing-changes-measured",
        sites=(
            (
                "torch/lib/libtorch_cpu.so::grad-strides-do-not-match-bucket-view-strides-this-may-indicate-grad-was-not-created-according-to-th"
            ),
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(nn.Conv2d(3, 8, 3))
        model.to(memory_format=torch.channels_last)  # after DDP: the bucket views keep the old strides
        x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
        model(x).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        conv = nn.Conv2d(3, 8, 3).to(memory_format=torch.channels_last)  # before DDP
        model = DDP(conv)
        x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
        model(x).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        pattern=r"Grad strides do not match bucket view strides",
    ),
    Entry(
        id="alltoall_list_size",
        message="RuntimeError: ProcessGroupGloo::alltoall: input tensor list size 3 does not match world size 2",
        cause=(
            "`dist.all_to_all(outputs, inputs)` sends `inputs[j]` to rank j and receives `outputs[j]` from "
            "it, so both lists need exactly one tensor per rank of the group. A list had another length (a "
            "list built from the data, or from the world size of another group)."
        ),
        fix=(
            "Build both lists with `dist.get_world_size(group)` entries, one per rank (empty tensors for a "
            "rank that gets nothing); or use `all_to_all_single` with `input_split_sizes` and "
            "`output_split_sizes` for uneven amounts."
        ),
        teaches="11_collectives_and_ddp.ipynb#the-collectives-live",
        sites=(
            "torch/lib/libtorch_cpu.so::does-not-match-world-size",
            "torch/lib/libtorch_python.so::does-not-match-world-size",
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        inputs = [torch.full((1,), float(rank)) for _ in range(3)]  # 3 tensors for 2 ranks
        outputs = [torch.empty(1) for _ in range(world_size)]
        dist.all_to_all(outputs, inputs)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        inputs = [torch.full((1,), float(rank)) for _ in range(world_size)]  # one tensor per rank
        outputs = [torch.empty(1) for _ in range(world_size)]
        dist.all_to_all(outputs, inputs)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        pattern=r"(?:\w+::alltoall:\s+)?(?:input|output) tensor list size \d+ does not match world size \d+",
    ),
    Entry(
        id="join_multiple_process_groups",
        message="ValueError: Using join context manager with multiple process groups",
        cause=(
            "`Join([...])` runs its shadow collectives for every joinable on one process group, and the "
            "joinables given to it were built on different groups: here a DDP model on a group from "
            "`dist.new_group` and a `ZeroRedundancyOptimizer` on the default group. Two group objects are "
            "different even when they hold the same ranks."
        ),
        fix=(
            "Build every joinable in one `Join` on the same group: pass the same `process_group=` to "
            "`DDP(...)` and `ZeroRedundancyOptimizer(...)` (or leave both on the default group)."
        ),
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        sites=(
            (
                "torch/distributed/algorithms/join.py::Join._extract_dist_info::ValueError::using-join-context-manager-with-multiple-process-groups"
            ),
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        group = dist.new_group([0, 1])  # a second group, the same ranks
        model = DDP(nn.Linear(4, 1), process_group=group)
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
        with Join([model, optimizer]):
            model(torch.randn(8, 4)).sum().backward()
            optimizer.step()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        group = dist.new_group([0, 1])  # a second group, the same ranks
        model = DDP(nn.Linear(4, 1), process_group=group)
        optimizer = ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1, process_group=group
        )
        with Join([model, optimizer]):
            model(torch.randn(8, 4)).sum().backward()
            optimizer.step()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
    ),
    Entry(
        id="join_early_termination",
        message="RuntimeError: Rank 0 exhausted all inputs.",
        cause=(
            "`Join([...], throw_on_early_termination=True)` with uneven inputs: one rank ran out of batches "
            "before the others. By design the rank that ran out raises `Rank N exhausted all inputs.` and "
            "every other rank raises `Detected at least one rank that exhausted inputs. Throwing across all "
            "ranks.` at its next forward, so that none waits forever in a collective."
        ),
        fix=(
            "Either catch the `RuntimeError` on every rank around the epoch loop and go on to the next epoch "
            "together (the intended use), or use `Join([model])` without the flag, which shadows the "
            "collectives of the ranks that finished; or give every rank the same number of batches "
            "(`DistributedSampler(drop_last=True)`)."
        ),
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        sites=(
            (
                "torch/distributed/algorithms/join.py::Join._notify_procs_to_terminate::RuntimeError::rank-_-exhausted-all-inputs"
            ),
            (
                "torch/distributed/algorithms/join.py::Join.notify_join_context::RuntimeError::detected-at-least-one-rank-that-exhausted-inputs-throwing-ac"
            ),
        ),
        reproduction="""\
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [torch.randn(8, 4) for _ in range(3 + rank)]  # rank 0: 3 batches, rank 1: 4
        with Join([model], throw_on_early_termination=True):
            for x in batches:
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=run, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    sys.exit(int(any(p.exitcode != 0 for p in ranks)))
""",
        fixed="""\
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [torch.randn(8, 4) for _ in range(3 + rank)]  # rank 0: 3 batches, rank 1: 4
        with Join([model]):
            for x in batches:
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=run, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    sys.exit(int(any(p.exitcode != 0 for p in ranks)))
""",
        pattern=r"Rank \d+ exhausted all inputs\.|Detected at least one rank that exhausted inputs\. Throwing across all ranks\.",
    ),
    Entry(
        id="fsdp2_handle_invalidated",
        message="RuntimeError: This gradient reduction handle was invalidated",
        cause=(
            "With FSDP2's manual backward finalization, `model.finalize_backward(async_op=True)` returns a "
            "handle for the gradient reduction still in flight. `model.reset_iter_state()` (the recovery call "
            "after a failed step) ran before `handle.wait()`: it discards the in-flight reduction, so the "
            "handle no longer matches the module's active reduction and its `wait` raises."
        ),
        fix=(
            "Call `handle.wait()` before `reset_iter_state()`; after a reset, drop the old handle (that "
            "step's gradients are lost: restart the step or the gradient-accumulation sequence) and do not "
            "wait on it."
        ),
        teaches="12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2",
        sites=(
            (
                "torch/distributed/fsdp/_fully_shard/_fsdp_state.py::FSDPState.wait_for_gradient_reduction::RuntimeError::this-gradient-reduction-handle-was-invalidated"
            ),
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import fully_shard


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        model.set_manual_backward_finalization(True)
        model(torch.randn(8, 4)).sum().backward()
        handle = model.finalize_backward(async_op=True)
        model.reset_iter_state()  # e.g. an error handler resets the step; the handle is now stale
        handle.wait()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
        fixed="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import fully_shard


def run(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=10),
    )
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        model.set_manual_backward_finalization(True)
        model(torch.randn(8, 4)).sum().backward()
        handle = model.finalize_backward(async_op=True)
        handle.wait()  # wait first: the gradients are reduced
        model.reset_iter_state()  # a reset after the wait invalidates nothing
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(run, args=(2, port), nprocs=2, join=False, start_method="fork")
    if not any(context.join(timeout=1) for _ in range(30)):  # at most ~30 s
        for p in context.processes:
            p.kill()
            p.join(timeout=5)
        raise SystemExit("the ranks did not finish in 30 s")
""",
    ),
    Entry(
        id="dcp_unexpected_key",
        message=(
            "RuntimeError: An unexpected key, blocks.0._checkpoint_wrapped_module.weight, exists. FQN is "
            "blocks.0.weight"
        ),
        cause=(
            "`get_model_state_dict` / `get_state_dict` take `model.state_dict()` and map each key to the "
            "parameter's name in the module tree, allowing only DDP's `module.` and `torch.compile`'s "
            "`_orig_mod.` as extra parts. A key kept another wrapper's part, such as "
            "`_checkpoint_wrapped_module.` of activation checkpointing: usually a model whose own "
            "`state_dict` override builds the dict from `named_parameters()`, which skips the hooks that "
            "remove that part."
        ),
        fix=(
            "Do not override `state_dict` with `named_parameters()`; let `nn.Module.state_dict` (and its "
            "hooks) build it, and for the trainable parameters only use `get_model_state_dict(model, "
            "options=StateDictOptions(ignore_frozen_params=True))`."
        ),
        teaches="12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size",
        sites=(
            (
                "torch/distributed/checkpoint/state_dict.py::_get_model_state_dict::RuntimeError::an-unexpected-key-_-exists-fqn-is-_"
            ),
        ),
        reproduction="""\
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.distributed.checkpoint.state_dict import get_model_state_dict


class Adapter(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

    def state_dict(self, *args, **kwargs):
        # save the trainable parameters only, named as named_parameters() names them
        return {name: p.detach() for name, p in self.named_parameters() if p.requires_grad}


if __name__ == "__main__":
    model = Adapter()
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear))
    print(list(get_model_state_dict(model)))
""",
        fixed="""\
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict


class Adapter(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

    # no state_dict override: nn.Module's hooks drop the wrapper's `_checkpoint_wrapped_module.`


if __name__ == "__main__":
    model = Adapter()
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear))
    # the trainable parameters only: DSD's option instead of a hand-made state_dict
    print(list(get_model_state_dict(model, options=StateDictOptions(ignore_frozen_params=True))))
""",
        pattern=r"An unexpected key, \S+, exists\. FQN is \S+",
    ),
    Entry(
        id="dcp_full_state_dict_devices",
        message="ValueError: Multiple devices found",
        cause=(
            "`set_model_state_dict` / `set_optimizer_state_dict` / `set_state_dict` with "
            "`StateDictOptions(full_state_dict=True)` (or `broadcast_from_rank0=True`) send the full tensors "
            "to the device the model's (or optimizer's) tensors are on, and need them on one device. The "
            "model's tensors were on several (`Multiple devices found`: part on a GPU, part on the CPU, as "
            "with a `device_map` or CPU offload), or the optimizer's state was (`Device mismatch`)."
        ),
        fix=(
            "Move the whole model to one device before loading (`model.to(device)`; the optimizer's state "
            "follows its parameters), load, then place it as you need; or load with `full_state_dict=False` "
            "from a sharded DCP checkpoint."
        ),
        teaches="12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size",
        sites=(
            (
                "torch/distributed/checkpoint/state_dict.py::_load_model_state_dict::ValueError::multiple-devices-found"
            ),
            (
                "torch/distributed/checkpoint/state_dict.py::_load_optim_state_dict._device::ValueError::device-mismatch"
            ),
        ),
        read_from=(
            "torch/distributed/checkpoint/state_dict.py, _load_model_state_dict and "
            "_load_optim_state_dict._device (torch 2.15.0): two devices need an accelerator besides the CPU "
            "(a meta tensor is left out of the count), so no CPU-only machine prints them"
        ),
        pattern=r"ValueError: (?:Multiple devices found|Device mismatch)$",
    ),
    Entry(
        id="dcp_metadata_not_found",
        message="Rank local metadata is not found.",
        cause=(
            "`dcp.load` found no `.metadata` file in the checkpoint folder, fell back to a per-rank "
            "`__<rank>.metadata` file, found none either, and fails with `AssertionError: metadata is None; "
            "global metadata read failed: ...` (the paths it tried are in that line). The folder is not a "
            "finished DCP checkpoint: a wrong `checkpoint_id` (another step, a relative path from another "
            "working directory), a save that was interrupted before rank 0 wrote `.metadata`, or a file saved "
            "with `torch.save`."
        ),
        fix=(
            "Point `checkpoint_id` (or `FileSystemReader(path)`) at the folder that holds `.metadata` and the "
            "`.distcp` files, by an absolute path; save with `dcp.save` on every rank and let it finish; load "
            "a `torch.save` file with `torch.load`."
        ),
        teaches="12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size",
        sites=(
            (
                "torch/distributed/checkpoint/state_dict_loader.py::_load_state_dict.local_step::log.warning::rank-local-metadata-is-not-found"
            ),
        ),
        reproduction="""\
import torch
import torch.distributed.checkpoint as dcp
from torch import nn

if __name__ == "__main__":
    model = nn.Linear(4, 4)
    dcp.save({"model": model.state_dict()}, checkpoint_id="checkpoints/step_100")
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id="checkpoints/step_10")  # a step that was never saved
""",
        fixed="""\
import torch
import torch.distributed.checkpoint as dcp
from torch import nn

if __name__ == "__main__":
    model = nn.Linear(4, 4)
    dcp.save({"model": model.state_dict()}, checkpoint_id="checkpoints/step_100")
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id="checkpoints/step_100")  # the folder that holds .metadata
""",
        pattern=r"Rank local metadata is not found\.|metadata is None; global metadata read failed",
    ),
    Entry(
        id="symm_mem_not_rendezvoused",
        message=(
            "RuntimeError: NCCL host communicator for group 0 not found. Have you rendezvoused any tensor "
            "with this group?"
        ),
        cause=(
            "A symmetric-memory operation on the NCCL backend (`torch.ops.symm_mem.*`) named a process group "
            "for which no symmetric-memory tensor was rendezvoused yet: the communicator it needs is "
            "registered by `symm_mem.rendezvous(tensor, group)`, which every rank of the group must call."
        ),
        fix=(
            "Allocate the buffer with `symm_mem.empty(...)` and call `symm_mem.rendezvous(buffer, group)` on "
            "every rank of that group before the first operation that names the group; use the same group "
            "(name) in both."
        ),
        sites=("torch/lib/libtorch_cuda.so::not-found-have-you-rendezvoused-any-tensor-with-this-group",),
        read_from=(
            "torch/csrc/distributed/c10d/symm_mem/nccl_devcomm_manager.hpp, NCCLDevCommManager::get_comm (and "
            "get_devcomm) in libtorch_cuda.so: NCCL symmetric memory on GPUs only"
        ),
        pattern=r"NCCL (?:host|device) communicator for group \S+ not found\. Have you rendezvoused any tensor with this group\?",
    ),
)
