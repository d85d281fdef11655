"""DistributedDataParallel on a laptop CPU (gloo) or on GPUs (nccl): workers and measurements for
notebook 06.

Every rank runs a function from this module (spawn children import it by module and name). The
training is small on purpose: an MLP on scikit-learn's bundled digits, a few epochs, so that two
ranks finish in seconds on two cores. The same code runs one process per GPU with nccl when there
are enough GPUs.

Rendezvous is on ``127.0.0.1`` and a free port. A plain ``init_method="tcp://127.0.0.1:PORT"``
tells the other ranks where to connect, but rank 0's ``TCPStore`` then listens on every interface
(``::``); :func:`init_distributed` hands the store a socket bound to 127.0.0.1, so nothing is
reachable from outside the machine.

Example::

    >>> from helpers.ddp import choose_backend
    >>> choose_backend(world_size=2) in ("gloo", "nccl")
    True
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING

import psutil

from helpers.processes import kill_tree

if TYPE_CHECKING:  # torch and matplotlib are imported inside the functions: importing this stays light
    import torch
    from matplotlib.axes import Axes
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler

__all__ = [
    "CONFIG",
    "free_port",
    "port_in_use",
    "listening_addresses",
    "choose_backend",
    "init_distributed",
    "digits_data",
    "make_model",
    "train_loop",
    "train_single",
    "train_ddp",
    "lesson_worker",
    "run_lesson",
    "fail_on_rank",
    "join_group",
    "max_param_difference",
    "torchrun_command",
    "run_torchrun",
    "plot_training",
    "plot_world_size",
]

# One configuration for every run (mp.spawn, torchrun, the single-process reference): the same
# seed, data and steps, so the results can be compared number by number.
# backend "gloo" keeps the lesson the same on every machine; "auto" picks with choose_backend.
CONFIG = {
    "epochs": 3,
    "batch_size": 32,
    "lr": 0.5,
    "seed": 0,
    "n_train": 1536,
    "hidden": 32,
    "backend": "gloo",
}

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "train_ddp.py"


# --- rendezvous -----------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now (the OS picks it).

    >>> 1024 <= free_port() <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    """True while some socket on this machine listens on ``port`` (any address).

    >>> port_in_use(free_port())
    False
    """
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in psutil.net_connections(kind="inet")
    )


def listening_addresses(pid: int | None = None) -> list[str]:
    """``"ip:port"`` of every listening TCP socket of process ``pid`` (default: this one).

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


def choose_backend(world_size: int) -> str:
    """``"nccl"`` when there are at least ``world_size`` GPUs (one per rank), else ``"gloo"``.

    Uses ``torch.cuda.device_count()``, which counts GPUs through NVML without initialising CUDA
    in this process (PyTorch's docs: it "will NOT poison fork if NVML discovery succeeds"); on a
    CPU-only build it returns 0 at once.

    >>> import torch
    >>> choose_backend(1) == ("nccl" if torch.cuda.device_count() >= 1 else "gloo")
    True
    """
    import torch
    import torch.distributed as dist

    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if torch.cuda.device_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _loopback_interface() -> str | None:
    """The name of the interface that carries 127.0.0.1 (``lo`` on Linux, ``lo0`` on macOS)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addresses):
            return name
    return None


def init_distributed(
    rank: int, world_size: int, port: int, backend: str = "gloo", timeout: float = 30.0
) -> None:
    """``init_process_group`` with a rendezvous that listens on 127.0.0.1:``port`` only.

    Rank 0 binds the socket itself and hands it to the ``TCPStore`` server; the other ranks connect
    to it. gloo is told to use the loopback interface (``GLOO_SOCKET_IFNAME`` is set in this
    process's environment unless already set). After ``timeout`` seconds a missing rank
    makes the others fail (``DistStoreError``) instead of waiting forever. Pair it with
    ``torch.distributed.destroy_process_group()`` in a ``finally``.

    >>> import torch.distributed as dist
    >>> init_distributed(0, 1, free_port(), timeout=10)
    >>> dist.get_world_size()
    1
    >>> dist.destroy_process_group()
    """
    import torch.distributed as dist

    if backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ and _loopback_interface():
        os.environ["GLOO_SOCKET_IFNAME"] = _loopback_interface()
    wait = timedelta(seconds=timeout)
    if rank == 0:
        listener = socket.create_server(("127.0.0.1", port))
        store = dist.TCPStore(
            "127.0.0.1", port, world_size, True, timeout=wait, master_listen_fd=listener.detach()
        )
    else:
        store = dist.TCPStore("127.0.0.1", port, world_size, False, timeout=wait)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=wait)


# --- data, model, training ------------------------------------------------------------------------


def digits_data(
    n_train: int = CONFIG["n_train"],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits as float tensors: ``(X_train, y_train, X_test, y_test)``.

    >>> X, y, X_test, y_test = digits_data()
    >>> tuple(X.shape), tuple(X_test.shape)
    ((1536, 64), (261, 64))
    """
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def make_model(seed: int = 0, hidden: int = CONFIG["hidden"]) -> nn.Sequential:
    """A 64-``hidden``-10 MLP whose initial weights depend only on ``seed``.

    >>> a, b = make_model(0), make_model(0)
    >>> all((p == q).all() for p, q in zip(a.parameters(), b.parameters()))
    True
    """
    import torch
    from torch import nn

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    torch.random.set_rng_state(generator_state)
    return model


def train_loop(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    sampler: DistributedSampler,
    batch_size: int,
    epochs: int,
    lr: float,
    progress: IO[str] | None = None,
    device: torch.device | str = "cpu",
) -> dict:
    """Plain SGD over the batches that ``sampler`` picks, calling ``sampler.set_epoch`` each epoch.

    Works the same for a bare model (one process) and a DDP-wrapped one (a rank). Returns the
    local loss of every step and the samples/s of every epoch. ``progress``: a file for a tqdm bar
    (``None``: no bar).

    >>> from torch.utils.data.distributed import DistributedSampler
    >>> X, y, _, _ = digits_data(256)
    >>> sampler = DistributedSampler(range(256), num_replicas=1, rank=0, seed=0)
    >>> history = train_loop(make_model(), X, y, sampler, batch_size=64, epochs=2, lr=0.1)
    >>> len(history["losses"]), len(history["samples_per_s"])
    (8, 2)
    """
    import torch
    from tqdm.auto import tqdm

    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses, rates = [], []
    bar = tqdm(range(epochs), desc="epochs", file=progress, disable=progress is None, mininterval=0)
    for epoch in bar:
        sampler.set_epoch(epoch)  # without it every epoch repeats the same order
        order = torch.tensor(list(iter(sampler)))
        start = time.perf_counter()
        for i in range(0, len(order), batch_size):
            index = order[i : i + batch_size]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(X[index].to(device)), y[index].to(device))
            loss.backward()  # under DDP: gradients are averaged over the ranks here
            optimizer.step()
            losses.append(loss.item())
        rates.append(len(order) / (time.perf_counter() - start))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return {"losses": losses, "samples_per_s": rates}


def train_single(batch_size: int, config: dict | None = None, threads: int = 1) -> dict:
    """The reference: one process, no process group, batch ``batch_size``, same data order.

    Runs with ``threads`` torch threads (restored afterwards): ops this small only get slower with
    more threads, badly so on a busy machine.
    Returns ``{"state": state_dict, "losses": [...], "samples_per_s": [...]}``.

    >>> run = train_single(64, {**CONFIG, "epochs": 1})
    >>> len(run["losses"])
    24
    """
    import torch
    from torch.utils.data.distributed import DistributedSampler

    cfg = {**CONFIG, **(config or {})}
    X, y, _, _ = digits_data(cfg["n_train"])
    model = make_model(cfg["seed"], cfg["hidden"])
    sampler = DistributedSampler(range(len(X)), num_replicas=1, rank=0, shuffle=True, seed=cfg["seed"])
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        history = train_loop(model, X, y, sampler, batch_size, cfg["epochs"], cfg["lr"])
    finally:
        torch.set_num_threads(before)
    return {"state": {k: v.detach().clone() for k, v in model.state_dict().items()}, **history}


def _param_sum(model) -> float:
    import torch

    with torch.no_grad():
        return float(sum(p.sum() for p in model.parameters()))


def train_ddp(
    rank: int, world_size: int, config: dict, device: torch.device, progress: IO[str] | None = None
) -> tuple[DistributedDataParallel, dict]:
    """One rank's DDP training (process group already initialised). Returns ``(ddp_model, info)``.

    Each rank builds its model with a *different* seed (``seed + rank``) on purpose: DDP's
    constructor broadcasts rank 0's parameters, so all ranks start from rank 0's weights anyway.
    ``progress``: a file for a tqdm bar (``None``: no bar).

    >>> import torch, torch.distributed as dist
    >>> init_distributed(0, 1, free_port(), timeout=10)  # a group of one: runs on any CPU
    >>> cfg = {**CONFIG, "n_train": 256, "epochs": 1}
    >>> ddp_model, info = train_ddp(0, 1, cfg, torch.device("cpu"))
    >>> len(info["losses"]), info["param_sum_before"] == info["param_sum_after"]
    (8, True)
    >>> dist.destroy_process_group()
    """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data.distributed import DistributedSampler

    X, y, X_test, y_test = digits_data(config["n_train"])
    model = make_model(config["seed"] + rank, config["hidden"]).to(device)
    before = _param_sum(model)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    after = _param_sum(model)  # rank 0's weights, broadcast by the constructor
    sampler = DistributedSampler(
        range(len(X)), num_replicas=world_size, rank=rank, shuffle=True, seed=config["seed"]
    )
    history = train_loop(
        ddp, X, y, sampler, config["batch_size"], config["epochs"], config["lr"], progress, device
    )
    with torch.no_grad():
        accuracy = (ddp(X_test.to(device)).argmax(1).cpu() == y_test).float().mean().item()
    info = {"param_sum_before": before, "param_sum_after": after, "test_accuracy": accuracy, **history}
    info["state"] = {k: v.detach().cpu().clone() for k, v in ddp.module.state_dict().items()}
    return ddp, info


# --- the worker of the notebook's main run --------------------------------------------------------


def _collectives(rank: int, world_size: int, device) -> dict:
    import torch
    import torch.distributed as dist

    summed = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(summed)  # default op: SUM, result on every rank
    shared = torch.tensor([42.0 if rank == 0 else -1.0], device=device)
    dist.broadcast(shared, src=0)  # rank 0's value everywhere
    gathered = [torch.zeros(1, device=device) for _ in range(world_size)]
    dist.all_gather(gathered, torch.tensor([10.0 * rank], device=device))
    time.sleep(0.2 * rank)  # ranks arrive at different times...
    arrived = time.time()
    dist.barrier()  # ...and leave together
    return {
        "all_reduce": summed.item(),
        "broadcast": shared.item(),
        "all_gather": [t.item() for t in gathered],
        "barrier_arrived": arrived,
        "barrier_left": time.time(),
    }


def _counting_allreduce(state: dict, bucket):
    """A DDP communication hook: count the gradient all-reduces, then do the default one."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    state["calls"] += 1
    return allreduce_hook(None, bucket)


def _no_sync_accumulation(rank: int, config: dict, device, micro_batches: int = 4) -> dict:
    """Accumulate ``micro_batches`` gradients twice: syncing each, and with ``no_sync`` but the last."""
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    X, y, _, _ = digits_data(config["n_train"])
    chunks = torch.arange(rank * 128, (rank + 1) * 128).chunk(micro_batches)
    grads, calls = {}, {}
    for mode in ("sync every micro-batch", "no_sync until the last"):
        counter = {"calls": 0}
        ddp = DDP(make_model(config["seed"], config["hidden"]).to(device))
        ddp.register_comm_hook(counter, _counting_allreduce)
        for i, index in enumerate(chunks):
            last = i == len(chunks) - 1
            context = ddp.no_sync() if mode.startswith("no_sync") and not last else contextlib.nullcontext()
            with context:
                loss = F.cross_entropy(ddp(X[index].to(device)), y[index].to(device)) / len(chunks)
                loss.backward()
        grads[mode] = torch.cat([p.grad.flatten().cpu() for p in ddp.parameters()])
        calls[mode] = counter["calls"]
    a, b = grads.values()
    return {
        "allreduce_calls": calls,
        "grad_difference": (a - b).abs().max().item(),
        "micro_batches": micro_batches,
    }


def _checkpoint(rank: int, ddp, path: str, device) -> dict:
    """Rank 0 saves, everyone waits at the barrier, everyone loads onto its own device."""
    import torch
    import torch.distributed as dist

    if rank == 0:
        torch.save(ddp.module.state_dict(), path)
    dist.barrier()  # without it a rank may read a file that rank 0 has not finished writing
    location = {"cuda:0": f"cuda:{device.index}"} if device.type == "cuda" else "cpu"
    loaded = torch.load(path, map_location=location, weights_only=True)
    same = all(torch.equal(loaded[k], v) for k, v in ddp.module.state_dict().items())
    return {"checkpoint_matches": same, "loaded_on": str(next(iter(loaded.values())).device)}


def _source_text_mistakes(rank: int) -> dict:
    """What ``model.to(rank)`` and ``DDP(model, device_ids=[rank])`` do on a machine without GPUs."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    if torch.cuda.is_available():
        return {}  # with GPUs both lines are right: the lesson is about machines without them
    errors = {}
    for name, attempt in (
        ("model.to(rank)", lambda: make_model().to(rank)),
        ("DDP(model, device_ids=[rank])", lambda: DDP(make_model(), device_ids=[rank])),
    ):
        try:
            attempt()
            errors[name] = "no error"
        except Exception as error:  # noqa: BLE001 (we report whatever it is)
            errors[name] = f"{type(error).__name__}: {error}"
    return errors


def lesson_worker(rank: int, world_size: int, port: int, out_dir: str, config: dict) -> None:
    """Everything notebook 06 runs in its ranks, in one launch (each launch costs seconds).

    Collectives, the source texts' device mistakes (CPU only), DDP training, ``no_sync``
    accumulation and a checkpoint; the results go to ``out_dir/rank{rank}.pt`` for the parent.

    Not run here: it runs inside launched ranks (:func:`run_lesson`'s example runs it on one rank).

    >>> from helpers.launch import spawn_with_deadline
    >>> with tempfile.TemporaryDirectory() as out_dir:  # doctest: +SKIP
    ...     spawn_with_deadline(lesson_worker, args=(2, free_port(), out_dir, CONFIG), nprocs=2)
    ...     sorted(p.name for p in Path(out_dir).glob("rank*.pt"))
    ['rank0.pt', 'rank1.pt']
    """
    import torch
    import torch.distributed as dist

    started = time.time()
    backend = config.get("backend", "auto")
    backend = choose_backend(world_size) if backend == "auto" else backend
    if backend == "nccl":
        torch.cuda.set_device(rank)  # one process per GPU: rank r owns cuda:r
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(config.get("threads", 1))
        device = torch.device("cpu")
    init_distributed(rank, world_size, port, backend, timeout=config.get("timeout", 60.0))
    try:
        result = {"rank": rank, "pid": os.getpid(), "backend": backend, "started": started}
        result["listening"] = listening_addresses()
        result["collectives"] = _collectives(rank, world_size, device)
        result["mistakes"] = _source_text_mistakes(rank)
        with open(Path(out_dir) / f"progress{rank}.txt", "w") as log:
            ddp, result["training"] = train_ddp(rank, world_size, config, device, log if rank == 0 else None)
        result["no_sync"] = _no_sync_accumulation(rank, config, device)
        result["checkpoint"] = _checkpoint(rank, ddp, str(Path(out_dir) / "checkpoint.pt"), device)
        result["progress"] = (Path(out_dir) / f"progress{rank}.txt").read_text()
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


_RUNS: dict = {}


def run_lesson(
    world_size: int = 2, config: dict | None = None, timeout: float = 120.0, cache: bool = True
) -> dict:
    """Launch :func:`lesson_worker` on ``world_size`` ranks with ``torch.multiprocessing`` (spawn).

    Returns ``{"ranks": [result of rank 0, ...], "seconds": wall time, "port": port}``; results are
    read back with ``weights_only=True``. Cached per ``(world_size, config)`` unless ``cache=False``.

    >>> run = run_lesson(world_size=1, config={"epochs": 1})
    >>> run["ranks"][0]["collectives"]["all_reduce"]
    1.0
    """
    import torch

    from helpers.launch import spawn_with_deadline

    cfg = {**CONFIG, **(config or {})}
    key = (world_size, tuple(sorted(cfg.items())))
    if cache and key in _RUNS:
        return _RUNS[key]
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tmp-ddp-") as out_dir:
        start = time.time()
        spawn_with_deadline(
            lesson_worker, args=(world_size, port, out_dir, cfg), nprocs=world_size, timeout=timeout
        )
        seconds = time.time() - start
        ranks = [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=True) for r in range(world_size)]
    run = {"ranks": ranks, "seconds": seconds, "port": port, "launched": start, "config": cfg}
    _RUNS[key] = run
    return run


# --- failures -------------------------------------------------------------------------------------


def fail_on_rank(rank: int, world_size: int, port: int, failing_rank: int) -> None:
    """``failing_rank`` raises before it joins the group; the others wait for it at the rendezvous.

    They would wait until the group's timeout (60 s here); torch's launcher sees the exception
    first, terminates them and re-raises it in the parent. (A rank that dies *after* joining makes
    the others fail too, with a gloo "Connection reset by peer"; which of those errors the launcher
    reports first is then a race.)

    Not run here: it starts two ranks (seconds of process start-up).

    >>> from helpers.launch import spawn_with_deadline
    >>> spawn_with_deadline(fail_on_rank, args=(2, free_port(), 1), nprocs=2)  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    torch.multiprocessing.spawn.ProcessRaisedException: ...
    """
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if rank == failing_rank:
        raise RuntimeError(f"rank {rank} failed on purpose (say, a bad configuration)")
    init_distributed(rank, world_size, port, "gloo", timeout=60.0)
    try:
        dist.all_reduce(torch.ones(1))
    finally:
        dist.destroy_process_group()


def join_group(rank: int, world_size: int, port: int, timeout: float) -> None:
    """Only join the group (and leave it). Started with fewer than ``world_size`` processes, it
    fails after ``timeout`` seconds instead of waiting forever.

    >>> join_group(0, 1, free_port(), timeout=10)  # the whole group: joins and leaves at once

    The failing case (one process of two) is not run here: it starts a process and waits the timeout.

    >>> from helpers.launch import spawn_with_deadline
    >>> spawn_with_deadline(join_group, args=(2, free_port(), 3.0), nprocs=1)  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    torch.multiprocessing.spawn.ProcessRaisedException: ...
    """
    import torch.distributed as dist

    init_distributed(rank, world_size, port, "gloo", timeout=timeout)
    dist.destroy_process_group()


# --- comparing, torchrun, plots -------------------------------------------------------------------


def max_param_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys.

    >>> import torch
    >>> max_param_difference({"w": torch.zeros(2)}, {"w": torch.tensor([0.0, 0.5])})
    0.5
    """
    if a.keys() != b.keys():
        raise ValueError(f"different parameters: {sorted(a)} vs {sorted(b)}")
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def torchrun_command(nproc: int, port: int, out_dir: str, backend: str = CONFIG["backend"]) -> list[str]:
    """The ``torchrun`` command line for ``scripts/train_ddp.py``, rendezvous on 127.0.0.1:``port``.

    ``--standalone`` would pick ``localhost:0`` itself; we name the endpoint instead (single node,
    c10d rendezvous, loopback, a port we checked is free). ``python -m torch.distributed.run`` is
    what the ``torchrun`` executable runs.

    >>> torchrun_command(2, 29999, "/tmp/x")[3:7]
    ['--nnodes=1', '--nproc-per-node=2', '--rdzv-backend=c10d', '--rdzv-endpoint=127.0.0.1:29999']
    """
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        "--max-restarts=0",
        str(SCRIPT),
        "--out",
        out_dir,
        "--backend",
        backend,
    ]


def run_torchrun(nproc: int = 2, timeout: float = 120.0, backend: str = CONFIG["backend"]) -> dict:
    """Run ``scripts/train_ddp.py`` under torchrun in a subprocess (bounded); read its result back.

    Past ``timeout`` the agent and its workers are killed and ``subprocess.TimeoutExpired`` raised.

    Returns ``{"state": ..., "env": {...}, "returncode": int, "output": str, "seconds": float}``.

    Not run here: torchrun starts an agent and ``nproc`` ranks (seconds of start-up).

    >>> run = run_torchrun(2)  # doctest: +SKIP
    >>> run["returncode"], run["env"]["WORLD_SIZE"]  # doctest: +SKIP
    (0, '2')
    """
    import torch

    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(SCRIPT.parent.parent), os.environ.get("PYTHONPATH")])
        ),
    }
    with tempfile.TemporaryDirectory(prefix="tmp-torchrun-") as out_dir:
        start = time.time()
        proc = subprocess.Popen(
            torchrun_command(nproc, port, out_dir, backend),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=out_dir,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except BaseException:
            # The agent's workers run in sessions of their own (torch.distributed.elastic) and hold
            # our stdout pipe: killing the agent's group left them running, and communicate() then
            # waited minutes for them. kill_tree finds them through the agent before signalling.
            kill_tree(proc.pid, grace=10)
            proc.communicate()
            raise
        seconds = time.time() - start
        result_file = Path(out_dir) / "result.pt"
        result = torch.load(result_file, weights_only=True) if result_file.exists() else {}
    return {
        **result,
        "returncode": proc.returncode,
        "output": output,
        "seconds": seconds,
        "port": port,
    }


def plot_training(run: dict, axes: Sequence[Axes] | None = None) -> Sequence[Axes]:
    """Per-rank loss per step and samples/s per epoch of a :func:`run_lesson` result.

    ``axes``: a (loss, throughput) pair to draw into; ``None``: a new figure. Returns the pair.

    >>> import matplotlib.pyplot as plt
    >>> run = {"ranks": [{"rank": 0, "training": {"losses": [2.3, 1.1], "samples_per_s": [900.0]}}]}
    >>> [ax.get_title() for ax in plot_training(run)]
    ['local loss per step', 'throughput per rank']
    >>> plt.close("all")
    """
    from helpers.plotting import new_figure

    if axes is None:
        fig, axes = new_figure(f"DDP, {len(run['ranks'])} rank(s)", "", "", ncols=2)
    loss_ax, rate_ax = axes
    for r in run["ranks"]:
        training = r["training"]
        loss_ax.plot(training["losses"], label=f"rank {r['rank']}", alpha=0.8)
        rate_ax.plot(
            range(1, len(training["samples_per_s"]) + 1),
            training["samples_per_s"],
            "o-",
            label=f"rank {r['rank']}",
        )
    loss_ax.set(title="local loss per step", xlabel="step", ylabel="cross-entropy")
    rate_ax.set(title="throughput per rank", xlabel="epoch", ylabel="samples/s")
    rate_ax.set_ylim(bottom=0)
    rate_ax.xaxis.get_major_locator().set_params(integer=True)
    loss_ax.legend()
    rate_ax.legend()
    return axes


def plot_world_size(world_size: int = 2) -> dict:
    """Widget callback: train on ``world_size`` ranks (1 to 3), plot loss and throughput per rank.

    Returns a summary (steps per rank, total samples/s, wall seconds). Runs are cached.

    Not run here: it launches ``world_size`` ranks (seconds) and shows a figure.

    >>> summary = plot_world_size(2)  # doctest: +SKIP
    {'world_size': 2, 'steps_per_rank': 72, 'total_samples_per_s': ..., 'wall_seconds': ...}
    >>> summary["steps_per_rank"]  # doctest: +SKIP
    72
    """
    import matplotlib.pyplot as plt

    if not 1 <= world_size <= 3:
        raise ValueError(f"world_size must be 1, 2 or 3 on this demo, got {world_size}")
    run = run_lesson(world_size)
    plot_training(run)
    plt.show()
    ranks = run["ranks"]
    summary = {
        "world_size": world_size,
        "steps_per_rank": len(ranks[0]["training"]["losses"]),
        "total_samples_per_s": round(sum(r["training"]["samples_per_s"][-1] for r in ranks)),
        "wall_seconds": round(run["seconds"], 1),
    }
    print(summary)
    return summary
