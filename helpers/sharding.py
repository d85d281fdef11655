"""Sharding when the model does not fit: what each rank holds, ZeRO-1 by hand, FSDP2 (notebook 12).

Plain DDP with Adam keeps four copies of the model's size on every rank: the parameters, their
gradients and Adam's two moment estimates. Sharding keeps only a ``1/world_size`` slice of some of
them on each rank: ZeRO-1 the optimizer state (:func:`flat_shard` and :func:`zero1_step`, by hand;
``ZeroRedundancyOptimizer``, the library form), FSDP2 (``fully_shard``) the parameters, gradients
and optimizer state. Every rank runs :func:`train_rank`, which trains the same digits MLP with one
method after another and saves, per method, rank 0's full weights, the bytes each rank holds
(:func:`held_bytes`) and the bytes its collectives moved (:class:`CollectiveLog`). The sharded
FSDP2 model is saved with ``torch.distributed.checkpoint`` (:func:`save_sharded`) and loads into a
different world size (:func:`load_sharded`).

Example (a world of one rank, in this process)::

    >>> import os, tempfile, torch
    >>> from helpers.ddp import free_port
    >>> threads = torch.get_num_threads()  # train_rank sets one thread
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     train_rank(0, 1, free_port(), folder, methods=("zero1",), hidden=(16,), steps=2)
    ...     result = torch.load(os.path.join(folder, "zero1-rank0.pt"), weights_only=True)
    >>> sorted(result), result["memory"]["optimizer"] == 2 * 4 * 1210 + 4
    (['memory', 'moved', 'seconds_per_step', 'state'], True)
    >>> torch.set_num_threads(threads)
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable

import psutil
import torch
import torch.distributed as dist

# Before any process group exists (notebook 06, "a rank that aborts at exit").
import torch.distributed.nn  # noqa: F401
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

from helpers.ddp import TIMEOUT
from helpers.digits import load_digits_split, make_model

__all__ = [
    "METHODS",
    "HIDDEN",
    "STEPS",
    "BATCH_SIZE",
    "LR",
    "SEED",
    "held_bytes",
    "flat_shard",
    "zero1_step",
    "setup_ddp",
    "setup_ddp_by_hand",
    "setup_zero1",
    "setup_zero_redundancy",
    "setup_fsdp2",
    "CollectiveLog",
    "expected_bytes",
    "train_method",
    "train_rank",
    "benchmark_rank",
    "read_results",
    "plot_held_bytes",
    "save_sharded",
    "load_sharded",
]

METHODS = ("ddp", "ddp_by_hand", "zero1", "zero_redundancy", "fsdp2")
"""The methods :func:`train_rank` knows, by the name of their setup function (``setup_<name>``)."""
HIDDEN = (1024, 1024)  # a 64-1024-1024-10 MLP: 1,126,410 parameters, 4.5 MB per float32 copy
STEPS = 10
BATCH_SIZE = 32  # per rank
LR = 1e-3
SEED = 0


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """The part of ``tensor`` this rank holds: a DTensor's local shard, or the tensor itself."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of the tensors this rank holds: parameters, gradients, optimizer state (every tensor in
    ``optimizer.state``: Adam's two moments and its step counters).

    A sharded tensor (FSDP2's DTensor) counts its local shard only. Used in
    [12 · What every rank holds](../notebooks/12_sharding.ipynb#what-every-rank-holds-with-ddp-and-adam)
    to [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> model = nn.Linear(10, 10)  # 110 parameters: 440 bytes in float32
    >>> optimizer = torch.optim.Adam(model.parameters())
    >>> model(torch.ones(1, 10)).sum().backward(); optimizer.step()
    >>> held_bytes(model, optimizer)
    {'parameters': 440, 'gradients': 440, 'optimizer': 888}
    """
    state = getattr(optimizer, "optim", optimizer).state  # ZeroRedundancyOptimizer: its local optimizer
    tensors = [v for s in state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    return {
        "parameters": sum(_local(p).nbytes for p in model.parameters()),
        "gradients": sum(_local(p.grad).nbytes for p in model.parameters() if p.grad is not None),
        "optimizer": sum(_local(t).nbytes for t in tensors),
    }


def flat_shard(model: nn.Module, rank: int, world_size: int) -> nn.Parameter:
    """This rank's slice of all of ``model``'s parameters, flattened into one vector (padded with zeros
    to a multiple of ``world_size``): the parameter that ZeRO-1's optimizer steps. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> flat_shard(nn.Linear(2, 2), rank=1, world_size=2).shape  # 6 values; rank 1 holds 3
    torch.Size([3])
    """
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    size = -(-flat.numel() // world_size)  # ceil
    flat = F.pad(flat, (0, size * world_size - flat.numel()))
    return nn.Parameter(flat[rank * size : (rank + 1) * size].clone())


def zero1_step(model: nn.Module, shard: nn.Parameter, optimizer: torch.optim.Optimizer) -> None:
    """One ZeRO-1 step after ``backward()``: reduce-scatter the gradients, step this rank's shard,
    all-gather the parameters. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> import tempfile
    >>> from helpers.ddp import free_port
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> model = nn.Linear(2, 1); shard = flat_shard(model, 0, 1)
    >>> optimizer = torch.optim.SGD([shard], lr=1.0)
    >>> model(torch.ones(1, 2)).sum().backward(); zero1_step(model, shard, optimizer)
    >>> torch.equal(model.weight.detach().reshape(-1), shard.detach()[:2]); dist.destroy_process_group()
    True
    """
    world_size = dist.get_world_size()
    params = list(model.parameters())
    grads = torch.cat([p.grad.reshape(-1) for p in params])
    grads = F.pad(grads, (0, shard.numel() * world_size - grads.numel()))
    shard.grad = torch.empty_like(shard)
    dist.reduce_scatter_tensor(shard.grad, grads)  # my slice, summed over every rank
    shard.grad /= world_size  # the average gradient, as DDP's
    optimizer.step()  # Adam on my slice only: its state is 1/world_size of the model's
    flat = torch.empty(shard.numel() * world_size)
    dist.all_gather_into_tensor(flat, shard.detach())  # every rank's stepped slice, in rank order
    sizes = [p.numel() for p in params]
    with torch.no_grad():
        for p, piece in zip(params, flat[: sum(sizes)].split(sizes), strict=True):  # padding dropped
            p.copy_(piece.view_as(p))


Setup = tuple[nn.Module, torch.optim.Optimizer, Callable[[], None]]


def setup_ddp(model: nn.Module, rank: int, world_size: int) -> Setup:
    """Plain DDP with Adam: ``(model, optimizer, step)``; every rank holds all of Adam's state.
    Used in
    [12 · What every rank holds](../notebooks/12_sharding.ipynb#what-every-rank-holds-with-ddp-and-adam).

    >>> setup_ddp  # doctest: +ELLIPSIS
    <function setup_ddp at ...>
    """
    model = DDP(model)  # averages the gradients in backward()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    return model, optimizer, optimizer.step


def setup_ddp_by_hand(model: nn.Module, rank: int, world_size: int) -> Setup:
    """DDP by hand (notebook 11) with Adam: rank 0's parameters broadcast once, then every step
    all-reduces each gradient and divides by the world size before Adam steps. Used in
    [12 · What it costs](../notebooks/12_sharding.ipynb#what-it-costs-on-this-machine).

    >>> setup_ddp_by_hand  # doctest: +ELLIPSIS
    <function setup_ddp_by_hand at ...>
    """
    from helpers.collectives import average_gradients, broadcast_parameters

    broadcast_parameters(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    def step() -> None:
        average_gradients(model)
        optimizer.step()

    return model, optimizer, step


def setup_zero1(model: nn.Module, rank: int, world_size: int) -> Setup:
    """ZeRO-1 by hand: Adam steps this rank's :func:`flat_shard`, and :func:`zero1_step` does the
    rest. The model is not wrapped in DDP: ``zero1_step`` reduces the gradients. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> model, optimizer, step = setup_zero1(nn.Linear(2, 2), rank=0, world_size=2)
    >>> [p.shape for p in optimizer.param_groups[0]["params"]]
    [torch.Size([3])]
    """
    shard = flat_shard(model, rank, world_size)
    optimizer = torch.optim.Adam([shard], lr=LR)
    return model, optimizer, lambda: zero1_step(model, shard, optimizer)


def setup_zero_redundancy(model: nn.Module, rank: int, world_size: int) -> Setup:
    """ZeRO-1, the library form: DDP plus ``ZeroRedundancyOptimizer``, which gives each rank whole
    parameters to step and broadcasts them after the step. Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> setup_zero_redundancy  # doctest: +ELLIPSIS
    <function setup_zero_redundancy at ...>
    """
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = DDP(model)
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=LR)
    return model, optimizer, optimizer.step


def setup_fsdp2(model: nn.Module, rank: int, world_size: int) -> Setup:
    """FSDP2 on a CPU device mesh: ``fully_shard`` each Linear, then the root. Each rank holds
    ``1/world_size`` of every parameter (a DTensor), and so of its gradient and Adam state; a layer
    all-gathers its parameters before its forward and backward and frees them after. Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> setup_fsdp2  # doctest: +ELLIPSIS
    <function setup_fsdp2 at ...>
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    return model, optimizer, optimizer.step


# Bytes a rank receives, per byte of the full tensor, in a ring over W ranks (a broadcast: averaged
# over the ranks; its root receives nothing).
_RECEIVED = {"allreduce_": 2, "_allgather_base_": 1, "_reduce_scatter_base_": 1, "broadcast_": 1}


class CollectiveLog(TorchDispatchMode):
    """Records every c10d collective that runs while it is active, with the bytes of the full tensor
    (``calls``), and adds up what each rank receives (:meth:`bytes_received`). Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> with CollectiveLog() as log:
    ...     _ = torch.ones(3) + 1  # no collective
    >>> log.calls, log.bytes_received(world_size=2)
    ([], 0)
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            name = func._overloadpacket.__name__
            tensors = args[0] if isinstance(args[0], list) else [args[0]]
            if name == "_reduce_scatter_base_":
                tensors = [args[1]]  # the input: the full tensor
            self.calls.append((name, sum(t.nbytes for t in tensors)))
        return func(*args, **(kwargs or {}))

    def bytes_received(self, world_size: int) -> int:
        """Bytes one rank receives for the logged collectives: ``(W-1)/W`` of each full tensor per
        ring pass (two passes for an all-reduce).

        >>> log = CollectiveLog(); log.calls.append(("allreduce_", 400))
        >>> log.bytes_received(world_size=2)  # 2 passes x 400 bytes x 1/2
        400
        """
        total = sum(_RECEIVED.get(name, 0) * size for name, size in self.calls)
        return total * (world_size - 1) // world_size


def expected_bytes(method: str, parameters: int, world_size: int) -> int:
    """Bytes one rank receives per step, computed from the collectives each method runs on
    ``parameters`` float32 values: DDP and ZeRO-1 move the model twice per step (an all-reduce; a
    reduce-scatter and an all-gather), ``ZeroRedundancyOptimizer`` three times (DDP's all-reduce and
    a broadcast), FSDP2 three times (all-gather in forward and in backward, a reduce-scatter).
    Padding to a multiple of the world size is left out. Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> expected_bytes("fsdp2", parameters=1000, world_size=2)
    6000
    """
    passes = {"ddp": 2, "ddp_by_hand": 2, "zero1": 2, "zero_redundancy": 3, "fsdp2": 3}[method]
    return passes * 4 * parameters * (world_size - 1) // world_size


def _batches(rank: int, world_size: int, steps: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of this rank: rank r reads the r-th of every ``world_size`` batches."""
    x, y, _, _ = load_digits_split()
    per_epoch = len(x) // (BATCH_SIZE * world_size)
    for step in range(steps):
        start = ((step % per_epoch) * world_size + rank) * BATCH_SIZE
        yield x[start : start + BATCH_SIZE], y[start : start + BATCH_SIZE]


def _full_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's weights on every rank (FSDP2 gathers its shards: a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))


def train_method(method: str, rank: int, world_size: int, hidden: tuple[int, ...], steps: int) -> dict:
    """Train ``make_model(SEED, hidden)`` with ``method`` for ``steps`` Adam steps; returns what
    :func:`train_rank` saves (``memory`` adds ``process``: how much the process's resident memory
    grew from before the model was built), and the trained model under ``"model"``.

    >>> train_method  # doctest: +ELLIPSIS
    <function train_method at ...>
    """
    before = psutil.Process().memory_info().rss
    model, optimizer, step = globals()[f"setup_{method}"](make_model(SEED, hidden), rank, world_size)
    log, times = CollectiveLog(), []
    for i, (inputs, labels) in enumerate(_batches(rank, world_size, steps)):
        start = time.perf_counter()
        with log if i == steps - 1 else contextlib.nullcontext():  # the last step's, as every step's
            model.zero_grad()
            F.cross_entropy(model(inputs), labels).backward()
            step()
        times.append(time.perf_counter() - start)
    return {
        "state": _full_state(model),
        "memory": {**held_bytes(model, optimizer), "process": psutil.Process().memory_info().rss - before},
        "moved": log.bytes_received(world_size),
        "seconds_per_step": statistics.median(times[1:] or times),  # the first step allocates
        "model": model,
    }


def train_rank(
    rank: int,
    world_size: int,
    port: int,
    folder: str,
    methods: Iterable[str] = METHODS,
    hidden: tuple[int, ...] = HIDDEN,
    steps: int = STEPS,
) -> None:
    """One rank: join a gloo group, train with each of ``methods`` in turn (after a warm-up run on a
    small model, so that ``process`` counts this model and not the imports), and save to
    ``folder/METHOD-rankR.pt`` the full weights, bytes held and moved, and seconds per step; FSDP2's
    sharded model also goes to ``folder/fsdp2-checkpoint`` (:func:`save_sharded`). Used in
    [12 · What every rank holds](../notebooks/12_sharding.ipynb#what-every-rank-holds-with-ddp-and-adam)
    to [12 · Save a sharded model](../notebooks/12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size).

    >>> train_rank  # doctest: +ELLIPSIS  (the module's example runs it in a world of one)
    <function train_rank at ...>
    """
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=TIMEOUT
    )
    try:
        for method in methods:
            train_method(method, rank, world_size, (8,), 2)  # a warm-up: the first run imports and caches
            result = train_method(method, rank, world_size, hidden, steps)
            model = result.pop("model")
            if method == "fsdp2":
                save_sharded(model, os.path.join(folder, "fsdp2-checkpoint"))
            torch.save(result, os.path.join(folder, f"{method}-rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def benchmark_rank(
    rank: int,
    world_size: int,
    port: int,
    path: str,
    sizes: Iterable[tuple[int, ...]],
    repeats: int,
    steps: int,
    methods: Iterable[str] = METHODS,
) -> None:
    """One rank of ``scripts/bench_sharding.py``: every method at every model size, ``repeats`` times,
    in one process group; rank 0 saves to ``path`` one row per run (method, parameters, seconds per
    step, bytes received in a step, bytes held, the growth of the process's memory).

    >>> benchmark_rank  # doctest: +ELLIPSIS
    <function benchmark_rank at ...>
    """
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=TIMEOUT
    )
    try:
        sizes, rows = list(sizes), []
        for method in methods:  # a warm-up run of each: the first run of a method in a process imports
            train_method(method, rank, world_size, sizes[0], 2)  # and allocates more than any later
        for hidden in sizes:
            parameters = sum(p.numel() for p in make_model(SEED, hidden).parameters())
            for method in methods:
                for repeat in range(repeats):
                    result = train_method(method, rank, world_size, hidden, steps)
                    del result["model"], result["state"]
                    rows.append({"method": method, "parameters": parameters, "repeat": repeat, **result})
        if rank == 0:
            torch.save(rows, path)
    finally:
        dist.destroy_process_group()


def save_sharded(model: nn.Module, path: str) -> None:
    """Every rank writes its own shards to the folder ``path`` (``torch.distributed.checkpoint``):
    one file per rank plus ``.metadata``, which says where each piece of each tensor lies.
    Used in
    [12 · Save a sharded model](../notebooks/12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size).

    >>> save_sharded  # doctest: +ELLIPSIS
    <function save_sharded at ...>
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=path)


def load_sharded(model: nn.Module, path: str) -> nn.Module:
    """Load a checkpoint of :func:`save_sharded` into ``model``, in whatever world this process is
    in: each rank reads the pieces its own shards need, and a process without a group (a world of
    one) reads them all. Returns ``model``. Used in
    [12 · Save a sharded model](../notebooks/12_sharding.ipynb#save-a-sharded-model-load-it-into-another-world-size).

    >>> load_sharded  # doctest: +ELLIPSIS
    <function load_sharded at ...>
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    state = {"model": get_model_state_dict(model)}
    with warnings.catch_warnings():  # without a group DCP warns that it assumes one process: we mean it
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.load(state, checkpoint_id=path, no_dist=not dist.is_initialized())  # fills state's tensors
    set_model_state_dict(model, state["model"])
    return model


def read_results(folder: str, method: str, world_size: int) -> list[dict]:
    """What each rank of :func:`train_rank` saved for ``method``, in rank order
    ([12 · What every rank holds](../notebooks/12_sharding.ipynb#what-every-rank-holds-with-ddp-and-adam)
    to [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2)).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     torch.save({"moved": 0}, os.path.join(folder, "ddp-rank0.pt"))
    ...     read_results(folder, "ddp", world_size=1)
    [{'moved': 0}]
    """
    files = [os.path.join(folder, f"{method}-rank{rank}.pt") for rank in range(world_size)]
    return [torch.load(path, weights_only=True) for path in files]


_KIND_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer": "#55a868"}


def plot_held_bytes(runs: dict[str, list[dict]], title: str) -> None:
    """Stacked bars, one per method and rank: the MB of parameters, gradients and optimizer state it
    holds (``runs[method][rank]["memory"]``, from :func:`read_results`). Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> memory = {"parameters": 4e6, "gradients": 4e6, "optimizer": 8e6}
    >>> plot_held_bytes({"ddp": [{"memory": memory}] * 2}, "demo")
    """
    import matplotlib.pyplot as plt

    from helpers.plotting import new_figure

    fig, ax = new_figure(title, ylabel="MB held per rank")
    ticks, labels = [], []
    for i, (method, ranks) in enumerate(runs.items()):
        for rank, run in enumerate(ranks):
            x, bottom = (len(ranks) + 0.5) * i + rank, 0.0
            for kind, color in _KIND_COLORS.items():
                size = run["memory"][kind] / 1e6
                ax.bar(x, size, bottom=bottom, color=color, label=kind if x == 0 else None)
                bottom += size
            ticks.append(x)
            labels.append(f"{method}\nrank {rank}")
    ax.set_xticks(ticks, labels)
    ax.legend()
    plt.show()
