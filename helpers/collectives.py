"""Collectives on gloo, and DistributedDataParallel built from them: the rank-side code of notebook 11.

Every function here runs inside a rank of an initialised process group (gloo on the CPU). The two
pieces of data parallelism by hand are :func:`broadcast_parameters` (every rank starts from rank 0's
weights) and :func:`average_gradients` (after ``backward()``, every rank holds the mean of all
ranks' gradients); with them, ``optimizer.step()`` takes the same step on every rank, which is what
``DistributedDataParallel`` does. Notebook 12 uses them as the baseline of its ZeRO/FSDP benchmark.

Example (a world of one rank, in this process)::

    >>> import torch, torch.distributed as dist
    >>> from helpers.collectives import broadcast_parameters, average_gradients
    >>> from helpers.ddp import free_port
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> model = torch.nn.Linear(3, 1)
    >>> broadcast_parameters(model)
    >>> model(torch.ones(2, 3)).sum().backward()
    >>> average_gradients(model)  # the mean over one rank: the gradient itself
    >>> model.bias.grad
    tensor([2.])
    >>> dist.destroy_process_group()
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

# Before any process group exists (notebook 06, "a rank that aborts at exit"): DDP imports it.
import torch.distributed.nn  # noqa: F401
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler, get_worker_info

from helpers.digits import load_digits_split, make_model

__all__ = [
    "STEPS",
    "BATCH_SIZE",
    "LR",
    "HIDDEN",
    "join",
    "send_recv",
    "broadcast",
    "all_reduce_sum",
    "all_reduce_mean",
    "reduce_scatter",
    "all_gather",
    "async_all_reduce",
    "COLLECTIVES",
    "run_in_group",
    "every_collective",
    "broadcast_parameters",
    "average_gradients",
    "BucketedAllReduce",
    "train_steps",
    "hand_made_vs_ddp",
    "BUCKETING_WAYS",
    "measure_bucketing",
    "count_all_reduces",
    "accumulate",
    "accumulate_vs_large_batch",
    "WhoReads",
    "read_one_epoch",
]

STEPS = 12  # optimizer steps per training run: each rank reads its half of 12 global batches of 64
BATCH_SIZE = 32  # per rank
LR = 0.5
HIDDEN = (64,) * 6  # an MLP of 7 Linear layers: 14 gradients, enough for buckets to matter
TIMEOUT = timedelta(seconds=60)  # a rank that never arrives fails the others after this, not never


def join(rank: int, world_size: int, port: int) -> None:
    """Make this process rank ``rank`` of a gloo group of ``world_size`` meeting on 127.0.0.1:``port``.

    One thread per rank (the ranks share the cores), and a timeout: a rank that never arrives fails
    the others after a minute instead of never. Every rank function of notebook 11 starts with it.

    >>> join(0, 1, free_port()); dist.get_world_size(); dist.destroy_process_group()  # doctest: +SKIP
    1
    """
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=TIMEOUT
    )


def send_recv(rank: int, world_size: int) -> torch.Tensor:
    """Point to point: rank 0 sends ``[0, 1, 2]`` to rank 1, the other ranks keep their zeros.

    >>> send_recv(0, 1)  # doctest: +SKIP
    """
    tensor = torch.arange(3.0) if rank == 0 else torch.zeros(3)
    if rank == 0:
        dist.send(tensor, dst=1)  # returns once rank 1 has the data
    elif rank == 1:
        dist.recv(tensor, src=0)  # writes into the tensor it is given
    return tensor


def broadcast(rank: int, world_size: int) -> torch.Tensor:
    """Rank 0's tensor copied into every rank's: each starts with ``[rank, rank]``, all end with ``[0, 0]``.

    >>> broadcast(0, 1)  # doctest: +SKIP
    """
    tensor = torch.full((2,), float(rank))
    dist.broadcast(tensor, src=0)
    return tensor


def all_reduce_sum(rank: int, world_size: int) -> torch.Tensor:
    """Rank r holds ``[r + 1]``; after the all-reduce every rank holds the sum ``1 + 2 + ... + world_size``.

    >>> all_reduce_sum(0, 1)  # doctest: +SKIP
    """
    tensor = torch.tensor([rank + 1.0])
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)  # in place, on every rank
    return tensor


def all_reduce_mean(rank: int, world_size: int) -> torch.Tensor:
    """The mean two ways: a SUM all-reduce divided by the world size, and ``ReduceOp.AVG``, which
    gloo computes too (a sum, then a division: pytorch PR #149781, 2025-03; run on torch 2.15.0).
    Rank r holds ``[r + 1]``; every rank returns ``[mean, mean]``.

    >>> all_reduce_mean(0, 1)  # doctest: +SKIP
    """
    summed = torch.tensor([rank + 1.0])
    averaged = summed.clone()
    dist.all_reduce(summed, op=dist.ReduceOp.SUM)
    dist.all_reduce(averaged, op=dist.ReduceOp.AVG)  # on gloo since pytorch PR #149781
    return torch.cat([summed / world_size, averaged])


def reduce_scatter(rank: int, world_size: int) -> torch.Tensor:
    """Every rank holds ``world_size`` chunks; rank r receives the sum over the ranks of chunk r.

    >>> reduce_scatter(0, 1)  # doctest: +SKIP
    """
    chunks = torch.arange(world_size, dtype=torch.float32) + 10 * rank  # rank r: [10r, 10r + 1, ...]
    mine = torch.zeros(1)
    dist.reduce_scatter_tensor(mine, chunks, op=dist.ReduceOp.SUM)
    return mine


def all_gather(rank: int, world_size: int) -> torch.Tensor:
    """Every rank contributes ``[rank]`` and receives everybody's, in rank order.

    >>> all_gather(0, 1)  # doctest: +SKIP
    """
    everybody = torch.zeros(world_size)
    dist.all_gather_into_tensor(everybody, torch.tensor([float(rank)]))
    return everybody


def async_all_reduce(rank: int, world_size: int) -> torch.Tensor:
    """``async_op=True`` returns a ``Work`` at once; gloo's threads reduce while this rank goes on;
    ``work.wait()`` returns once the result is in the tensor.

    >>> async_all_reduce(0, 1)  # doctest: +SKIP
    """
    tensor = torch.full((1_000_000,), float(rank))
    work = dist.all_reduce(tensor, async_op=True)  # started, not finished
    other = torch.ones(1_000).sum()  # work that does not touch `tensor` can run meanwhile
    work.wait()  # from here on, `tensor` holds the sum
    return torch.stack([tensor[0], other])


COLLECTIVES: tuple[Callable[[int, int], torch.Tensor], ...] = (
    send_recv, broadcast, all_reduce_sum, all_reduce_mean, reduce_scatter, all_gather, async_all_reduce
)  # fmt: skip
"""The demos that :func:`run_collectives` runs, in this order, on every rank
([11 · The collectives, live](../notebooks/11_collectives_and_ddp.ipynb#the-collectives-live))."""


def run_in_group(rank: int, world_size: int, port: int, folder: str, job: Callable, *args: object) -> None:
    """What every launch of notebook 11 runs in each rank: join the group, run ``job(rank,
    world_size, *args)``, save what it returns to ``folder/rank{rank}.pt``, leave the group together
    (a barrier first: a rank whose job runs no collective could otherwise exit while another is still
    connecting, which fails that one's ``init_process_group``, the catalog's
    ``gloo_peer_left_during_init``).

    >>> import tempfile
    >>> from helpers.ddp import free_port
    >>> with tempfile.TemporaryDirectory() as folder:  # a world of one rank, in this process
    ...     run_in_group(0, 1, free_port(), folder, all_reduce_sum)
    ...     torch.load(os.path.join(folder, "rank0.pt"), weights_only=True)
    tensor([1.])
    """
    join(rank, world_size, port)
    try:
        torch.save(job(rank, world_size, *args), os.path.join(folder, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def every_collective(rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """Every demo of :data:`COLLECTIVES`, in the same order on every rank: ``{name: result}``
    ([11 · The collectives, live](../notebooks/11_collectives_and_ddp.ipynb#the-collectives-live)).

    >>> every_collective(0, 2)  # doctest: +SKIP
    """
    return {demo.__name__: demo(rank, world_size) for demo in COLLECTIVES}


def broadcast_parameters(model: nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every rank's ``model``, in place.

    What ``DistributedDataParallel`` does when it is constructed; every rank of the group must call
    it, with models of the same shapes (notebook 11, "DDP by hand").

    >>> broadcast_parameters(torch.nn.Linear(2, 2))  # doctest: +SKIP
    """
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor, src)


def average_gradients(model: nn.Module) -> None:
    """Replace every ``.grad`` of ``model`` by its mean over the ranks: all-reduce SUM, then divide by
    the world size. Call it between ``backward()`` and ``optimizer.step()`` on every rank.

    One all-reduce per parameter, after the whole backward pass: the simplest correct DDP (notebook
    11, "DDP by hand"); DDP itself all-reduces buckets of gradients while backward still runs.

    >>> average_gradients(torch.nn.Linear(2, 2))  # doctest: +SKIP
    """
    world_size = dist.get_world_size()
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= world_size


class BucketedAllReduce:
    """What DDP does in ``backward()``, by hand: gradient hooks gather the gradients into buckets, and
    each full bucket is all-reduced asynchronously while backward goes on; :meth:`wait` before the
    step. Used in
    [11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand). ``all_reduces`` and ``bytes_sent`` count what it sent.

    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    >>> [len(b) for b in BucketedAllReduce(model, bucket_bytes=0).buckets]  # one gradient each
    [1, 1, 1, 1]
    >>> [len(b) for b in BucketedAllReduce(model).buckets]  # all in one bucket of at most 1 MB
    [4]
    """

    def __init__(self, model: nn.Module, bucket_bytes: int = 1_000_000) -> None:
        self.buckets: list[list[nn.Parameter]] = [[]]
        for param in reversed(list(model.parameters())):  # backward computes the last layer first
            if self.buckets[-1] and sum(p.nbytes for p in self.buckets[-1]) + param.nbytes > bucket_bytes:
                self.buckets.append([])
            self.buckets[-1].append(param)
        self.ready = [0] * len(self.buckets)
        self.in_flight: list[tuple[int, torch.Tensor, dist.Work]] = []
        self.all_reduces = self.bytes_sent = 0
        for index, bucket in enumerate(self.buckets):
            for param in bucket:
                param.register_post_accumulate_grad_hook(
                    lambda param, index=index: self.gradient_ready(index)
                )

    def gradient_ready(self, index: int) -> None:
        """The hook: runs inside ``backward()`` once a gradient of bucket ``index`` is complete; the
        bucket's last one starts its all-reduce and returns at once.

        >>> from helpers.ddp import free_port
        >>> join(0, 1, free_port())  # a world of one rank, in this process
        >>> model = torch.nn.Linear(2, 1)
        >>> hooks = BucketedAllReduce(model)
        >>> model(torch.ones(1, 2)).sum().backward()  # the hooks ran: the one bucket is on its way
        >>> hooks.all_reduces, len(hooks.in_flight)
        (1, 1)
        >>> hooks.wait()
        >>> model.bias.grad, len(hooks.in_flight)
        (tensor([1.]), 0)
        >>> dist.destroy_process_group()
        """
        self.ready[index] += 1
        if self.ready[index] == len(self.buckets[index]):
            self.ready[index] = 0
            flat = torch.cat([p.grad.flatten() for p in self.buckets[index]])  # one message per bucket
            self.in_flight.append((index, flat, dist.all_reduce(flat, async_op=True)))
            self.all_reduces += 1
            self.bytes_sent += flat.nbytes

    def wait(self) -> None:
        """Before ``optimizer.step()``: wait for every bucket, divide by the world size, copy back.

        >>> BucketedAllReduce(torch.nn.Linear(2, 1)).wait()  # nothing in flight: returns at once
        """
        for index, flat, work in self.in_flight:
            work.wait()
            flat /= dist.get_world_size()
            sizes = [p.numel() for p in self.buckets[index]]
            for param, mean in zip(self.buckets[index], flat.split(sizes), strict=True):
                param.grad.copy_(mean.view_as(param))
        self.in_flight.clear()


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The training images and labels, read once per process."""
    if not _DIGITS:
        _DIGITS.extend(load_digits_split()[:2])
    return _DIGITS[0], _DIGITS[1]


_DIGITS: list[torch.Tensor] = []


def train_steps(
    model: nn.Module, rank: int, world_size: int, after_backward: Callable[[], None] | None = None,
    steps: int = STEPS,
) -> None:  # fmt: skip
    """``steps`` SGD steps of ``model`` on this rank's share of the digits: global batch ``s`` is
    samples ``[s * world_size * BATCH_SIZE, ...)``, rank r reads its r-th block of ``BATCH_SIZE``.
    ``after_backward`` runs between ``backward()`` and ``step()``
    ([11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand)).

    >>> train_steps(make_model(), 0, 1, steps=2)  # one process alone: plain SGD
    """
    x, y = _digits()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(steps):
        first = (step * world_size + rank) * BATCH_SIZE
        optimizer.zero_grad()
        F.cross_entropy(model(x[first : first + BATCH_SIZE]), y[first : first + BATCH_SIZE]).backward()
        if after_backward:
            after_backward()
        optimizer.step()


def hand_made_vs_ddp(rank: int, world_size: int) -> dict[str, dict[str, torch.Tensor]]:
    """The same training three ways, from a model seeded differently on every rank (rank 0's weights
    must reach the others): by hand (:func:`broadcast_parameters`, :func:`average_gradients` after
    backward), with :class:`BucketedAllReduce` (two buckets, so that the first overlaps backward), with
    DDP; the three ``state_dict``s
    ([11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand)).

    >>> hand_made_vs_ddp(0, 2)  # doctest: +SKIP
    """
    by_hand = make_model(seed=rank, hidden=HIDDEN)
    broadcast_parameters(by_hand)
    train_steps(by_hand, rank, world_size, lambda: average_gradients(by_hand))
    hooked = make_model(seed=rank, hidden=HIDDEN)
    broadcast_parameters(hooked)
    hooks = BucketedAllReduce(hooked, bucket_bytes=55_000)  # registers the hooks: 102,440 bytes in 2 buckets
    train_steps(hooked, rank, world_size, hooks.wait)
    ddp = DDP(make_model(seed=rank, hidden=HIDDEN))  # DDP broadcasts rank 0's weights itself
    train_steps(ddp, rank, world_size)
    return {"by hand": by_hand.state_dict(), "hooks": hooked.state_dict(), "DDP": ddp.module.state_dict()}


def count_all_reduces(model: DDP) -> list[int]:
    """Make ``model`` record the size in bytes of every bucket it all-reduces: a DDP communication
    hook that appends the size, then all-reduces and averages as DDP does
    ([11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand),
    [11 · `no_sync`](../notebooks/11_collectives_and_ddp.ipynb#no-sync-for-gradient-accumulation)).

    >>> sizes = count_all_reduces(DDP(torch.nn.Linear(2, 1)))  # doctest: +SKIP
    """
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    sizes: list[int] = []

    def counting_hook(state, bucket):  # noqa: ANN001, ANN202 (DDP rejects string annotations)
        sizes.append(bucket.buffer().nbytes)
        return allreduce_hook(None, bucket)

    model.register_comm_hook(None, counting_hook)
    return sizes


def _timed_steps(
    model: nn.Module, rank: int, world_size: int, after_backward: Callable[[], None] | None
) -> float:  # noqa: E501
    """Milliseconds per step of :func:`train_steps` (``STEPS`` steps, after a barrier)."""
    dist.barrier()
    start = time.perf_counter()
    train_steps(model, rank, world_size, after_backward)
    return (time.perf_counter() - start) * 1000 / STEPS


def _one_way(way: str, rank: int, world_size: int) -> tuple[float, int, int]:
    """Milliseconds, all-reduces and bytes per step of one way to average the gradients."""
    model = make_model(hidden=HIDDEN)
    if way == "DDP":
        model = DDP(model)
        sizes = count_all_reduces(model)
        ms = _timed_steps(model, rank, world_size, None)
        return ms, len(sizes) // STEPS, sum(sizes) // STEPS
    if way == "after backward":
        ms = _timed_steps(model, rank, world_size, lambda: average_gradients(model))
        return ms, len(list(model.parameters())), sum(p.nbytes for p in model.parameters())
    hooks = BucketedAllReduce(model, bucket_bytes=0 if "per gradient" in way else 1_000_000)
    ms = _timed_steps(model, rank, world_size, hooks.wait)
    return ms, hooks.all_reduces // STEPS, hooks.bytes_sent // STEPS


BUCKETING_WAYS = ("after backward", "hooks, a bucket per gradient", "hooks, 1 MB buckets", "DDP")
"""The ways :func:`measure_bucketing` compares
([11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand))."""


def measure_bucketing(rank: int, world_size: int, repeats: int = 3) -> dict[str, dict[str, float]]:
    """All-reduces, bytes and milliseconds per step (the best of ``repeats`` runs of ``STEPS`` steps)
    of each of :data:`BUCKETING_WAYS` (notebook 11, appendix on bucketing).

    >>> measure_bucketing(0, 2)  # doctest: +SKIP
    """
    figures = {}
    for way in BUCKETING_WAYS:
        ms, all_reduces, sent = min(_one_way(way, rank, world_size) for _ in range(repeats))
        figures[way] = {"all-reduces": all_reduces, "bytes": sent, "ms per step": ms}
    return figures


def accumulate(
    model: DDP, inputs: torch.Tensor, labels: torch.Tensor, micro_batches: int, no_sync: bool
) -> None:
    """Gradients of one batch, computed in ``micro_batches`` pieces that add up in ``.grad``; with
    ``no_sync`` DDP all-reduces only during the last piece's backward
    ([11 · `no_sync`](../notebooks/11_collectives_and_ddp.ipynb#no-sync-for-gradient-accumulation)).

    >>> accumulate(DDP(torch.nn.Linear(2, 1)), torch.ones(4, 2), torch.zeros(4), 2, True)  # doctest: +SKIP
    """
    pieces = list(zip(inputs.chunk(micro_batches), labels.chunk(micro_batches), strict=True))
    for i, (x, y) in enumerate(pieces):
        last = i == len(pieces) - 1
        with model.no_sync() if no_sync and not last else contextlib.nullcontext():  # forward inside too
            (F.cross_entropy(model(x), y) / micro_batches).backward()  # each piece: 1/k of the mean


def accumulate_vs_large_batch(rank: int, world_size: int, micro_batches: int = 4) -> dict[str, tuple]:
    """One SGD step on this rank's ``micro_batches * BATCH_SIZE`` samples three ways: accumulated
    with ``no_sync``, accumulated without it, in one large batch; ``{way: (state_dict, all-reduces)}``
    ([11 · `no_sync`](../notebooks/11_collectives_and_ddp.ipynb#no-sync-for-gradient-accumulation)).

    >>> accumulate_vs_large_batch(0, 2)  # doctest: +SKIP
    """
    x, y = _digits()
    mine = slice(rank * micro_batches * BATCH_SIZE, (rank + 1) * micro_batches * BATCH_SIZE)
    results = {}
    for way, pieces, no_sync in (("no_sync", micro_batches, True), ("without no_sync", micro_batches, False),
                                 ("one large batch", 1, False)):  # fmt: skip
        model = DDP(make_model(hidden=HIDDEN))
        sizes = count_all_reduces(model)
        accumulate(model, x[mine], y[mine], pieces, no_sync)
        torch.optim.SGD(model.parameters(), lr=LR).step()
        results[way] = (model.module.state_dict(), len(sizes))
    return results


class WhoReads(Dataset):
    """Sample ``i`` is ``[i, worker]``: the index and the id of the DataLoader worker that read it
    (-1 in the main process). Used in
    [11 · Ranks x DataLoader workers](../notebooks/11_collectives_and_ddp.ipynb#ranks-x-dataloader-workers).

    >>> WhoReads(3)[2]
    tensor([ 2, -1])
    """

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> torch.Tensor:
        worker = get_worker_info()
        return torch.tensor([index, worker.id if worker else -1])


def read_one_epoch(rank: int, world_size: int, samples: int, num_workers: int, method: str) -> torch.Tensor:
    """One epoch of :class:`WhoReads` through a ``DistributedSampler`` and a DataLoader with
    ``num_workers`` workers started by ``method``: every ``[index, worker, rank]`` read
    ([11 · Ranks x DataLoader workers](../notebooks/11_collectives_and_ddp.ipynb#ranks-x-dataloader-workers)).

    >>> read_one_epoch(0, 2, 64, 2, "spawn")  # doctest: +SKIP
    """
    dataset = WhoReads(samples)
    sampler = DistributedSampler(dataset, seed=0)  # rank and world size: the group's
    sampler.set_epoch(0)
    workers = dict(num_workers=num_workers, multiprocessing_context=method, timeout=60) if num_workers else {}
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, **workers)  # timeout: a stuck worker fails
    read = torch.cat(list(loader))
    return torch.cat([read, torch.full((len(read), 1), rank)], dim=1)
