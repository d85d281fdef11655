"""Sharding when the model does not fit: what each rank holds, ZeRO-1 by hand, FSDP2 (notebook 12).

Plain DDP with Adam keeps four copies of the model's size on every rank: the parameters, their
gradients and Adam's two moment estimates. Sharding keeps only a ``1/world_size`` slice of some of
them on each rank: ZeRO-1 the optimizer state (:func:`flat_shard` and :func:`zero1_step`, by hand;
``ZeroRedundancyOptimizer``, the library form), FSDP2 (``fully_shard``) the parameters, gradients
and optimizer state. Every rank runs :func:`train_rank`, which trains the same digits MLP with one
method after another and saves, per method, rank 0's full weights, the bytes each rank holds
(:func:`held_bytes`, checked by :func:`reachable_bytes`) and the bytes it sent in a step, measured
(:func:`bytes_written`) beside the model computed from its collectives (:class:`CollectiveLog`). The sharded
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
    (['bytes', 'memory', 'seconds_per_step', 'state'], True)
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
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim import Optimizer
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
    "reachable_bytes",
    "CollectiveLog",
    "bytes_written",
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


def _storage(tensor: torch.Tensor) -> tuple[int, int]:
    """``(address, bytes)`` of the memory ``tensor`` lives in (a DTensor: its local shard's)."""
    storage = _local(tensor).untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of every tensor this rank holds for training, each block of memory counted once:
    parameters (the model's and the optimizer's own, such as ZeRO-1's slice), their gradients, and
    the optimizer's state (Adam's two moments and its step counters), and DDP's gradient buckets
    (the flat buffers it all-reduces: another copy of the gradients unless
    ``gradient_as_bucket_view=True``; 0 without DDP).

    It counts storages, not tensors: a view (a slice of a flat buffer) adds nothing, a copy adds its
    bytes. A sharded tensor (FSDP2's DTensor) counts its local shard. :func:`reachable_bytes` checks
    it against every tensor the process can reach. Used in
    [12 · What every rank holds](../notebooks/12_sharding.ipynb#what-every-rank-holds-with-ddp-and-adam)
    to [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> model = nn.Linear(10, 10)  # 110 parameters: 440 bytes in float32
    >>> optimizer = torch.optim.Adam(model.parameters())
    >>> model(torch.ones(1, 10)).sum().backward(); optimizer.step()
    >>> held_bytes(model, optimizer)
    {'parameters': 440, 'gradients': 440, 'optimizer': 888, 'buckets': 0}
    """
    optimizer = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer: its local optimizer
    params = [*model.parameters(), *(p for group in optimizer.param_groups for p in group["params"])]
    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    kinds = {"parameters": params, "gradients": [p.grad for p in params if p.grad is not None]}
    seen, held = set(), {}
    for kind, tensors in {**kinds, "optimizer": state}.items():
        blocks = dict(_storage(t) for t in tensors)  # address -> bytes: each block once
        held[kind] = sum(size for address, size in blocks.items() if address not in seen)
        seen.update(blocks)
    ddp = model._get_ddp_logging_data() if isinstance(model, DDP) else {}  # bucket sizes in bytes
    copies = ddp and not ddp["gradient_as_bucket_view"]
    held["buckets"] = sum(int(b) for b in ddp["bucket_sizes"].split(",")) if copies else 0
    return held


def _tensors_in_process() -> dict[int, int]:
    """``{address: bytes}`` of the storage of every tensor the garbage collector tracks, and of
    their gradients (a DTensor: its local shard). It collects first: tensors left in reference cycles
    (FSDP2's autograd hooks make them) are garbage, not memory the rank holds, until a collection
    frees them, and one not yet run would count them."""
    import gc

    gc.collect()
    blocks = {}
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor):  # type(): isinstance would wake deprecated proxies
            for tensor in (obj, obj.grad if obj.is_leaf else None):
                if tensor is not None and _local(tensor).device.type != "meta":
                    address, size = _storage(tensor)
                    if size:
                        blocks[address] = size
    return blocks


def reachable_bytes(before: dict[int, int]) -> int:
    """Bytes of the tensors this process holds now that it did not hold at ``before``
    (``_tensors_in_process()`` then): every storage reachable from Python, each once, whoever holds
    it. An independent count for :func:`held_bytes` (it finds copies that no list names); a small tensor
    whose storage reuses an address freed since ``before`` is missed (a few bytes). Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> before = _tensors_in_process(); kept = torch.ones(1000)
    >>> reachable_bytes(before)
    4000
    """
    return sum(size for address, size in _tensors_in_process().items() if address not in before)


def flat_shard(model: nn.Module, rank: int, world_size: int) -> tuple:
    """ZeRO-1's buffers: ``(flat, flat_grad, shard)``. ``flat`` holds all of ``model``'s parameters in
    one vector, padded with zeros to a multiple of ``world_size``, and the parameters become views of
    it; ``flat_grad`` does the same for their gradients. ``shard``, the parameter ZeRO-1's optimizer
    steps, is this rank's slice of ``flat`` (a view: no copy), its gradient the slice of
    ``flat_grad``. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> model = nn.Linear(2, 2); flat, flat_grad, shard = flat_shard(model, rank=1, world_size=2)
    >>> shard.shape, shard.data_ptr() == flat[3:].data_ptr(), model.bias.data_ptr() == flat[4:].data_ptr()
    (torch.Size([3]), True, True)
    """
    params = list(model.parameters())
    size = -(-sum(p.numel() for p in params) // world_size)  # ceil: each rank's slice
    flat, flat_grad = torch.zeros(size * world_size), torch.zeros(size * world_size)  # padded
    offset = 0
    for p in params:  # each parameter and its gradient become a view of the two flat buffers
        piece = slice(offset, offset + p.numel())
        flat[piece] = p.detach().reshape(-1)
        p.data, p.grad = flat[piece].view_as(p), flat_grad[piece].view_as(p)
        offset += p.numel()
    shard = nn.Parameter(flat[rank * size : (rank + 1) * size])  # shares flat's memory
    shard.grad = flat_grad[rank * size : (rank + 1) * size]
    return flat, flat_grad, shard


def zero1_step(flat: Tensor, flat_grad: Tensor, shard: nn.Parameter, optimizer: Optimizer) -> None:
    """One ZeRO-1 step after ``backward()`` (the gradients were zeroed in place:
    ``zero_grad(set_to_none=False)``): reduce-scatter the gradients into this rank's slice, step it
    in place, all-gather every rank's slice into ``flat`` (the model). Every buffer is one of
    :func:`flat_shard`'s. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> from helpers.ddp import free_port
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> model = nn.Linear(2, 1); flat, flat_grad, shard = flat_shard(model, 0, 1)
    >>> optimizer, before = torch.optim.SGD([shard], lr=1.0), flat.clone()
    >>> model(torch.ones(1, 2)).sum().backward(); zero1_step(flat, flat_grad, shard, optimizer)
    >>> [round(step, 5) for step in (before - flat).tolist()], model.bias.data_ptr() == flat[2:].data_ptr()
    ([1.0, 1.0, 1.0], True)
    >>> dist.destroy_process_group()
    """
    dist.reduce_scatter_tensor(shard.grad, flat_grad)  # my slice of the gradients, summed over the ranks
    shard.grad /= dist.get_world_size()  # the average gradient, as DDP's
    optimizer.step()  # Adam on my slice only, in place: it writes into flat, the model's memory
    dist.all_gather_into_tensor(flat, shard.detach())  # every rank's stepped slice, in rank order


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
    """ZeRO-1 by hand: Adam steps this rank's slice of :func:`flat_shard`, and :func:`zero1_step`
    does the rest. The model is not wrapped in DDP: ``zero1_step`` reduces the gradients. Used in
    [12 · ZeRO-1 by hand](../notebooks/12_sharding.ipynb#zero-1-by-hand-shard-the-optimizer-state).

    >>> model, optimizer, step = setup_zero1(nn.Linear(2, 2), rank=0, world_size=2)
    >>> [p.shape for p in optimizer.param_groups[0]["params"]]
    [torch.Size([3])]
    """
    flat, flat_grad, shard = flat_shard(model, rank, world_size)
    optimizer = torch.optim.Adam([shard], lr=LR)
    return model, optimizer, lambda: zero1_step(flat, flat_grad, shard, optimizer)


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


# What one rank sends, per byte of a collective's full tensor and per ring pass over W ranks, is
# (W-1)/W of it: a ring all-reduce is two passes (a reduce-scatter, then an all-gather). That is
# NCCL's ring algorithm. Gloo (torch 2.15.0) runs a reduce-scatter as a whole all-reduce, then keeps
# this rank's piece (ProcessGroupGloo.cpp, reduce_scatter_tensor_coalesced; pytorch PR #118911).
_PASSES = {
    "ring": {"allreduce_": 2, "_allgather_base_": 1, "_reduce_scatter_base_": 1},
    "gloo": {"allreduce_": 2, "_allgather_base_": 1, "_reduce_scatter_base_": 2},
}


def _broadcast_sent(size: int, root: int, rank: int, world_size: int, algorithm: str) -> int:
    """Bytes ``rank`` sends in a broadcast of ``size`` bytes: gloo's root sends it to every other
    rank; in a ring (NCCL) every rank passes it on but the one before the root."""
    if algorithm == "gloo":
        return size * (world_size - 1) if rank == root else 0
    return 0 if (rank + 1) % world_size == root else size


class CollectiveLog(TorchDispatchMode):
    """Records every c10d collective that runs while it is active (``calls``: name, bytes of the full
    tensor, root), and computes from them what one rank sends (:meth:`bytes_sent`): a model, not a
    measurement (:func:`bytes_written` measures). Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> with CollectiveLog() as log:
    ...     _ = torch.ones(3) + 1  # no collective
    >>> log.calls, log.bytes_sent(world_size=2, rank=0)
    ([], 0)
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            name = func._overloadpacket.__name__
            tensors = args[0] if isinstance(args[0], list) else [args[0]]
            if name == "_reduce_scatter_base_":
                tensors = [args[1]]  # the input: the full tensor
            root = args[2] if name == "broadcast_" else -1  # (tensors, group, root_rank, ...)
            self.calls.append((name, sum(t.nbytes for t in tensors), root))
        return func(*args, **(kwargs or {}))

    def bytes_sent(self, world_size: int, rank: int, algorithm: str = "ring") -> int:
        """Bytes ``rank`` sends for the logged collectives, computed: ``(W-1)/W`` of each full tensor
        per pass, as ``algorithm`` runs them (``"ring"``: NCCL's; ``"gloo"``: torch 2.15.0's gloo,
        whose reduce-scatter is an all-reduce).

        >>> log = CollectiveLog(); log.calls.append(("_reduce_scatter_base_", 400, -1))
        >>> log.bytes_sent(world_size=2, rank=0), log.bytes_sent(world_size=2, rank=0, algorithm="gloo")
        (200, 400)
        """
        total = 0
        for name, size, root in self.calls:
            if name == "broadcast_":
                total += _broadcast_sent(size, root, rank, world_size, algorithm)
            else:
                total += _PASSES[algorithm].get(name, 0) * size * (world_size - 1) // world_size
        return total


def bytes_written() -> int | None:
    """Bytes this process has written so far (``wchar`` of ``/proc/self/io``, every thread): gloo's
    TCP transport sends with ``write``/``writev``, so the difference around a step measures what this
    rank sent, whatever else runs on the machine. ``None`` where there is no ``/proc`` (not Linux).
    Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> isinstance(bytes_written(), int) or bytes_written() is None
    True
    """
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))
    except OSError:
        return None


def expected_bytes(method: str, parameters: int, world_size: int, algorithm: str = "ring") -> int:
    """Bytes one rank sends per step, computed from the collectives each method runs on
    ``parameters`` float32 values, in passes of ``(W-1)/W`` of the model: DDP two (an all-reduce),
    ZeRO-1 two (a reduce-scatter and an all-gather), ``ZeroRedundancyOptimizer`` three (DDP's
    all-reduce and broadcasts: the mean over the ranks), FSDP2 three (all-gathers in forward and in
    backward, a reduce-scatter). With ``algorithm="gloo"`` a reduce-scatter counts as an all-reduce:
    ZeRO-1 three passes, FSDP2 four. Padding to a multiple of the world size is left out. Used in
    [12 · What it costs](../notebooks/12_sharding.ipynb#what-it-costs-on-this-machine).

    >>> expected_bytes("fsdp2", parameters=1000, world_size=2), expected_bytes("fsdp2", 1000, 2, "gloo")
    (6000, 8000)
    """
    passes = {"ddp": 2, "ddp_by_hand": 2, "zero1": 2, "zero_redundancy": 3, "fsdp2": 3}[method]
    passes += algorithm == "gloo" and method in ("zero1", "fsdp2")  # one reduce-scatter each
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


def train_method(
    method: str, rank: int, world_size: int, hidden: tuple[int, ...], steps: int, reachable: bool = True
) -> dict:
    """Train ``make_model(SEED, hidden)`` with ``method`` for ``steps`` Adam steps; returns what
    :func:`train_rank` saves and the trained model under ``"model"``. ``memory``: :func:`held_bytes`,
    ``reachable`` (:func:`reachable_bytes` since before the model was built) and ``process`` (how
    much the process's resident memory grew); ``bytes``: what this rank sent in the last step,
    measured (:func:`bytes_written`) and computed from its collectives for a ring and for gloo.
    ``reachable=False`` makes ``reachable`` None: it walks every object the garbage collector tracks,
    twice (about 0.3 CPU-s a walk once torch's compiler is imported), which a warm-up run and the
    benchmark, whose table does not show it, need not pay. Memory is counted after a barrier, once
    every rank's collectives finished and no gloo thread still holds one's buffer: twice under load
    the browser run counted 266,240 bytes more than held_bytes without it, the size of FSDP2's first
    layer unsharded (not reproduced in 24 runs alone or beside 3 busy loops; the cause is not confirmed).

    >>> train_method  # doctest: +ELLIPSIS
    <function train_method at ...>
    """
    batches = list(_batches(rank, world_size, steps))  # the data is not the model's memory
    before, tensors_before = psutil.Process().memory_info().rss, _tensors_in_process() if reachable else {}
    model, optimizer, step = globals()[f"setup_{method}"](make_model(SEED, hidden), rank, world_size)
    log, times = CollectiveLog(), []
    for i, (inputs, labels) in enumerate(batches):
        start, written = time.perf_counter(), bytes_written()
        with log if i == steps - 1 else contextlib.nullcontext():  # the last step's, as every step's
            model.zero_grad(set_to_none=False)  # in place: ZeRO-1's gradients are views of one buffer
            F.cross_entropy(model(inputs), labels).backward()
            step()
        times.append(time.perf_counter() - start)
    sent = None if written is None else bytes_written() - written
    dist.barrier()  # every rank's collectives are done before memory is counted (docstring)
    memory = held_bytes(model, optimizer)
    memory["reachable"] = reachable_bytes(tensors_before) if reachable else None
    return {
        "memory": {**memory, "process": psutil.Process().memory_info().rss - before},
        "bytes": {"sent": sent, **{m: log.bytes_sent(world_size, rank, m) for m in ("ring", "gloo")}},
        "seconds_per_step": statistics.median(times[1:] or times),  # the first step allocates
        "state": _full_state(model),
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
    ``folder/METHOD-rankR.pt`` the full weights, bytes held and sent, and seconds per step; FSDP2's
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
            train_method(method, rank, world_size, (8,), 2, reachable=False)  # a warm-up: imports, caches
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
    step, bytes sent in a step (measured and computed), bytes held, the growth of the process's memory).

    >>> benchmark_rank  # doctest: +ELLIPSIS
    <function benchmark_rank at ...>
    """
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=TIMEOUT
    )
    try:
        sizes, rows = list(sizes), []
        # A warm-up run of each: the first run of a method in a process imports and allocates more than later.
        for method in methods:
            train_method(method, rank, world_size, sizes[0], 2, reachable=False)
        for hidden in sizes:
            parameters = sum(p.numel() for p in make_model(SEED, hidden).parameters())
            for method in methods:
                for repeat in range(repeats):
                    result = train_method(method, rank, world_size, hidden, steps, reachable=False)
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
    ...     torch.save({"bytes": {"sent": 0}}, os.path.join(folder, "ddp-rank0.pt"))
    ...     read_results(folder, "ddp", world_size=1)
    [{'bytes': {'sent': 0}}]
    """
    files = [os.path.join(folder, f"{method}-rank{rank}.pt") for rank in range(world_size)]
    return [torch.load(path, weights_only=True) for path in files]


_KIND_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer": "#55a868", "buckets": "#8c8c8c"}


def plot_held_bytes(runs: dict[str, list[dict]], title: str) -> None:
    """Stacked bars, one per method and rank: the MB of parameters, gradients, optimizer state and
    DDP's buckets it holds (``runs[method][rank]["memory"]``, from :func:`read_results`). Used in
    [12 · The library forms](../notebooks/12_sharding.ipynb#the-library-forms-zeroredundancyoptimizer-and-fsdp2).

    >>> memory = {"parameters": 4e6, "gradients": 4e6, "optimizer": 8e6, "buckets": 4e6}
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
            labels.append(f"r{rank}")
        middle = (len(ranks) + 0.5) * i + (len(ranks) - 1) / 2
        ax.text(middle, -0.1, method, transform=ax.get_xaxis_transform(), ha="center", va="top")
    ax.set_xticks(ticks, labels)  # the rank under each bar, the method under its group: nothing overlaps
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over one
    fig.tight_layout()
    plt.show()
