"""DistributedDataParallel on a laptop CPU (gloo) or on GPUs (nccl): the rank-side code of notebook 06.

Every function here runs in a rank (spawn children and torchrun's workers import it by module and
name), and notebook 06 displays each one before it starts it. :func:`minimal_train` is the pattern
at its smallest: process group, DDP model, ``DistributedSampler``, the loop, rank 0 saving the
weights, ``destroy_process_group`` in ``finally``. :func:`train` adds what a real run needs: nccl
on GPUs, a snapshot every epoch that a restarted run resumes from (notebook 09), and ``env://``
under torchrun. The training is small on purpose: an MLP on scikit-learn's bundled digits, a few
epochs, so two ranks finish in well under a second of compute on two cores.

Run it as a script (the GPU machines have no Jupyter)::

    torchrun --standalone --nproc-per-node=2 -m helpers.ddp --snapshot /tmp/digits.pt
    python -m helpers.ddp --snapshot /tmp/digits.pt --nprocs 2     # mp.spawn, no torchrun

Example (a world of one rank, in this process)::

    >>> import os, tempfile, torch
    >>> from helpers.ddp import train, free_port
    >>> threads = torch.get_num_threads()  # train sets one thread on the CPU
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     snapshot = os.path.join(folder, "snapshot.pt")
    ...     train(0, 1, snapshot, port=free_port(), epochs=1)
    ...     torch.load(snapshot, weights_only=True)["epoch"]
    0
    >>> torch.set_num_threads(threads)
"""

from __future__ import annotations

import argparse
import ast
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import psutil
import torch
import torch.distributed as dist

# Before any process group exists, on purpose: imported first by DDP's constructor, it would hold
# the group for ever and a rank could abort at exit (gloo_threads_left; upstream/dist_nn_abort_at_exit.py).
import torch.distributed.nn  # noqa: F401
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from helpers.digits import load_digits_split, make_model

__all__ = [
    "EPOCHS",
    "BATCH_SIZE",
    "LR",
    "SEED",
    "TIMEOUT",
    "free_port",
    "port_in_use",
    "listening_addresses",
    "rank_device",
    "minimal_train",
    "train",
    "train_single",
    "fail_before_rendezvous",
    "join_group",
    "max_param_difference",
    "gloo_threads_left",
    "explore_world_size",
    "main",
]

# One configuration for every run (mp.spawn, torchrun, the single-process reference): the same
# seed, data and steps, so the results can be compared number by number.
EPOCHS = 3
BATCH_SIZE = 32  # per rank
LR = 0.5
SEED = 0
TIMEOUT = timedelta(seconds=60)  # a rank that never arrives fails the others after this, not never


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now (the OS picks it).

    Notebook 06 gives one to every launch as the rendezvous port.

    >>> 1024 <= free_port() <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    """True while some socket on this machine listens on ``port`` (any address).

    Notebook 06 checks with it that a failed launch released its rendezvous port.

    >>> port_in_use(free_port())
    False
    """
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in psutil.net_connections(kind="inet")
    )


def listening_addresses(pid: int | None = None) -> list[str]:
    """``"ip:port"`` of every listening TCP socket of process ``pid`` (default: this one).

    Notebook 06's appendix "where the rendezvous listens" reads where a store listens with it.

    >>> with socket.create_server(("127.0.0.1", 0)) as s:
    ...     f"127.0.0.1:{s.getsockname()[1]}" in listening_addresses()
    True
    """
    proc = psutil.Process(pid or os.getpid())
    return sorted(
        f"{c.laddr.ip}:{c.laddr.port}"
        for c in proc.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    )


def rank_device(rank: int, world_size: int) -> torch.device:
    """The device of one rank: ``cuda:LOCAL_RANK`` when this node has a GPU for each of its ranks, else CPU.

    Under torchrun, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` count this node's ranks (two nodes of
    4 GPUs run 8 ranks, 4 per node); under ``mp.spawn`` on one machine they are the rank and the
    world size. Used in [06 · A real run](../notebooks/06_ddp_mp_spawn.ipynb#a-real-run-snapshots-and-gpus-train); ``train`` uses it.

    >>> rank_device(0, 10_000)  # no machine has a GPU for each of 10,000 ranks
    device(type='cpu')
    """
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    return torch.device(f"cuda:{local_rank}" if torch.cuda.device_count() >= ranks_here else "cpu")


def minimal_train(rank: int, world_size: int, port: int, path: str) -> None:
    """One DDP rank at its smallest
    ([06 · A minimal DDP training function](../notebooks/06_ddp_mp_spawn.ipynb#a-minimal-ddp-training-function)
    to
    [06 · What DDP does](../notebooks/06_ddp_mp_spawn.ipynb#what-ddp-does-2-ranks-x-batch-b-1-process-x-batch-2b));
    rank 0 saves the trained weights to ``path``.

    >>> import os, tempfile
    >>> threads = torch.get_num_threads()  # minimal_train sets one thread
    >>> with tempfile.TemporaryDirectory() as folder:  # a world of one rank, in this process
    ...     minimal_train(0, 1, free_port(), os.path.join(folder, "model.pt"))
    ...     sorted(torch.load(os.path.join(folder, "model.pt"), weights_only=True))[:2]
    ['0.bias', '0.weight']
    >>> torch.set_num_threads(threads)
    """
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=TIMEOUT
    )
    try:
        x, y, _, _ = load_digits_split()
        model = DDP(make_model(seed=SEED))  # DDP copies rank 0's weights to every rank
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        sampler = DistributedSampler(TensorDataset(x, y), world_size, rank, seed=SEED)
        loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE, sampler=sampler)
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
            for inputs, labels in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(inputs), labels).backward()  # averages the gradients of all ranks
                optimizer.step()
        if rank == 0:
            torch.save(model.module.state_dict(), path)  # .module: the model inside the DDP wrapper
    finally:
        dist.destroy_process_group()


def train(rank: int, world_size: int, snapshot: str, port: int | None = None, epochs: int = EPOCHS) -> None:
    """:func:`minimal_train` plus what a real run needs
    ([06 · A real run](../notebooks/06_ddp_mp_spawn.ipynb#a-real-run-snapshots-and-gpus-train),
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed)):
    a GPU per rank
    and nccl, a snapshot every epoch that a rerun resumes from, and ``env://`` under torchrun
    (``port=None``).

    >>> train(0, 1, "never-written.pt", port=free_port(), epochs=0)  # a world of one, no epoch: no file
    """
    device = rank_device(rank, world_size)  # its own GPU (nccl) or the CPU (gloo)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"tcp://127.0.0.1:{port}" if port else "env://",  # env://: the address torchrun set
        rank=rank,
        world_size=world_size,
        timeout=TIMEOUT,
        device_id=device if cuda else None,  # nccl: the group's GPU, known from the start
    )
    try:
        x, y, _, _ = load_digits_split()
        model = make_model(seed=SEED).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        first_epoch = 0
        if os.path.exists(snapshot):  # a restarted run continues after the last saved epoch
            state = torch.load(snapshot, map_location=device, weights_only=True)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            first_epoch = state["epoch"] + 1
        model = DDP(model, device_ids=[device.index] if cuda else None)
        sampler = DistributedSampler(TensorDataset(x, y), world_size, rank, seed=SEED)
        loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE, sampler=sampler)
        for epoch in range(first_epoch, epochs):
            sampler.set_epoch(epoch)
            for inputs, labels in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(inputs.to(device)), labels.to(device)).backward()
                optimizer.step()
            if rank == 0:  # write, then rename: a kill mid-write never leaves a torn snapshot
                state = dict(model=model.module.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch)
                torch.save(state, snapshot + ".tmp")
                os.replace(snapshot + ".tmp", snapshot)
            dist.barrier()  # nobody starts the next epoch before the snapshot is complete
    finally:
        dist.destroy_process_group()


def train_single(batch_size: int, epochs: int = EPOCHS) -> dict[str, torch.Tensor]:
    """The reference for :func:`train`: one process, no process group; returns the final state dict.

    Same data, model, seed and sampler order as :func:`train` (a ``DistributedSampler`` with one
    replica shuffles exactly like the group's), so with ``batch_size = world_size * BATCH_SIZE``
    it ends with the weights DDP ends with
    ([06 · What DDP does](../notebooks/06_ddp_mp_spawn.ipynb#what-ddp-does-2-ranks-x-batch-b-1-process-x-batch-2b)).

    >>> state = train_single(batch_size=64, epochs=1)
    >>> sorted(state)[:2]
    ['0.bias', '0.weight']
    """
    x, y, _, _ = load_digits_split()
    model = make_model(seed=SEED)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=1, rank=0, seed=SEED)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for inputs, labels in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
    return model.state_dict()


def fail_before_rendezvous(rank: int, world_size: int, port: int, failing_rank: int) -> None:
    """``failing_rank`` raises before it joins the group; the others wait for it at the rendezvous.

    They would wait until the group's timeout (60 s here); ``mp.spawn`` sees the exception first,
    terminates them and re-raises it in the parent ([06 · When a rank fails](../notebooks/06_ddp_mp_spawn.ipynb#when-a-rank-fails)).

    >>> fail_before_rendezvous(0, 1, free_port(), failing_rank=0)
    Traceback (most recent call last):
    ...
    RuntimeError: rank 0 failed on purpose (say, a bad configuration)
    """
    torch.set_num_threads(1)
    if rank == failing_rank:
        raise RuntimeError(f"rank {rank} failed on purpose (say, a bad configuration)")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=timedelta(seconds=60),
    )  # fmt: skip
    try:
        dist.all_reduce(torch.ones(1))
    finally:
        dist.destroy_process_group()


def join_group(rank: int, world_size: int, port: int, timeout: float) -> None:
    """Join the group and leave it; started with fewer than ``world_size`` processes it fails after
    ``timeout`` seconds instead of waiting forever ([06 · When a rank fails](../notebooks/06_ddp_mp_spawn.ipynb#when-a-rank-fails)).

    >>> join_group(0, 1, free_port(), timeout=10)  # the whole group: joins and leaves at once
    """
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=timedelta(seconds=timeout),
    )  # fmt: skip
    dist.destroy_process_group()


def gloo_threads_left(import_first: bool) -> list[str]:
    """The gloo threads still running after ``destroy_process_group`` in a fresh interpreter that
    imports ``torch.distributed.nn`` before ``init_process_group`` (``import_first``) or after it,
    as the first ``DDP(model)`` of a process does (notebook 06, "a rank that aborts at exit").
    Linux: thread names from ``/proc``.

    Its functions take ``group=group.WORLD`` as a default argument, evaluated when the module is first
    imported: after ``init_process_group`` that is the group, held for ever, and gloo's threads with
    it. At interpreter exit one of them may still be releasing the last gradient all-reduce, whose
    Python context needs the GIL of a finalizing interpreter: the rank aborts ("terminate called
    without an active exception", SIGABRT), after a run that did everything right.

    >>> gloo_threads_left(import_first=True)  # doctest: +SKIP
    []
    """
    script = f"""
import os, torch.distributed as dist
{"import torch.distributed.nn" if import_first else ""}
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
import torch.distributed.nn
dist.barrier()  # run by one of gloo's worker threads: it has started (and named itself)
dist.destroy_process_group()
threads = [open(f"/proc/self/task/{{task}}/comm").read().strip() for task in os.listdir("/proc/self/task")]
print(sorted(name for name in threads if "gloo" in name))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    return ast.literal_eval(done.stdout.splitlines()[-1])


def max_param_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest absolute difference between two state dicts with the same keys (notebook 06).

    >>> max_param_difference({"w": torch.zeros(2)}, {"w": torch.tensor([0.0, 0.5])})
    0.5
    """
    if a.keys() != b.keys():
        raise ValueError(f"different parameters: {sorted(a)} vs {sorted(b)}")
    return max((a[k].float().cpu() - b[k].float().cpu()).abs().max().item() for k in a)


_WORLD_SIZE_RUNS: dict[int, dict] = {}


def explore_world_size(world_size: int = 2) -> dict:
    """Widget callback of
    [06 · What DDP does](../notebooks/06_ddp_mp_spawn.ipynb#what-ddp-does-2-ranks-x-batch-b-1-process-x-batch-2b):
    :func:`minimal_train` on 1 to 3 ranks with ``mp.spawn``.

    Prints and returns a summary (steps per rank and epoch, wall seconds of the launch, the largest
    difference to one process with batch ``world_size * BATCH_SIZE``) and plots every world size
    run so far. Runs are cached per world size. Not run here: it launches ranks (seconds).

    >>> explore_world_size(2)  # doctest: +SKIP
    {'world_size': 2, 'steps_per_rank_and_epoch': 24, 'wall_seconds': 3.4, 'difference': 3e-07}
    """
    import matplotlib.pyplot as plt

    from helpers.digits import N_TRAIN
    from helpers.plotting import bar_chart, new_figure

    if not 1 <= world_size <= 3:
        raise ValueError(f"world_size must be 1, 2 or 3 on this demo, got {world_size}")
    if world_size not in _WORLD_SIZE_RUNS:
        with tempfile.TemporaryDirectory(prefix="tmp-ddp-") as folder:
            path = os.path.join(folder, "model.pt")
            start = time.perf_counter()
            mp.spawn(minimal_train, args=(world_size, free_port(), path), nprocs=world_size)
            wall = time.perf_counter() - start
            state = torch.load(path, weights_only=True)
        _WORLD_SIZE_RUNS[world_size] = {
            "world_size": world_size,
            "steps_per_rank_and_epoch": N_TRAIN // (world_size * BATCH_SIZE),
            "wall_seconds": round(wall, 1),
            "difference": float(f"{max_param_difference(state, train_single(world_size * BATCH_SIZE)):.1e}"),
        }
    runs = [_WORLD_SIZE_RUNS[w] for w in sorted(_WORLD_SIZE_RUNS)]
    fig, (left, right) = new_figure("minimal_train() on 1 to 3 ranks (mp.spawn)", ncols=2)
    labels = [f"{r['world_size']} rank(s)" for r in runs]
    bar_chart(left, labels, [r["wall_seconds"] for r in runs], colors=["#4c72b0"] * len(runs))
    left.set(title="launch wall time, start-up included", ylabel="seconds")
    bar_chart(right, labels, [r["steps_per_rank_and_epoch"] for r in runs], "{:.0f}", ["#55a868"] * len(runs))
    right.set(title="optimizer steps per rank and epoch", ylabel="steps")
    plt.show()
    print(_WORLD_SIZE_RUNS[world_size])
    return _WORLD_SIZE_RUNS[world_size]


def main(argv: list[str] | None = None) -> None:
    """``python -m helpers.ddp --snapshot PATH``: :func:`train` under torchrun, or ``mp.spawn`` it.
    ``python -m helpers.ddp`` is what torchrun runs in notebook 06's appendix on snapshots.

    Under torchrun (``RANK`` and ``WORLD_SIZE`` in the environment) this process is one rank and
    rendezvous through ``env://``. Without torchrun, ``--nprocs N`` starts N ranks with
    ``mp.spawn`` on a free port. Not run here: either way it starts processes.

    >>> main(["--snapshot", "/tmp/x.pt", "--nprocs", "2"])  # doctest: +SKIP
    """
    parser = argparse.ArgumentParser(prog="python -m helpers.ddp", description=main.__doc__.splitlines()[0])
    parser.add_argument("--snapshot", required=True, help="snapshot file: resumed from if it exists")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--nprocs", type=int, default=2, help="ranks to spawn when not run by torchrun")
    args = parser.parse_args(argv)
    if "RANK" in os.environ:  # torchrun started this process as one rank
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args.snapshot, None, args.epochs)
    else:
        mp.spawn(train, args=(args.nprocs, args.snapshot, free_port(), args.epochs), nprocs=args.nprocs)


if __name__ == "__main__":
    # Re-import so mp.spawn's children get helpers.ddp.train, not __main__.train.
    from helpers.ddp import main as _main

    _main()
