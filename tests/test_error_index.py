"""The index of error messages (docs/errors.md, notebook 10 appendix E) is true.

Each linked section exists (the notebook and its heading); docs/errors.md and notebook 10 show the
table as ``helpers.field_guide`` renders it; and each message is what this torch and Python print,
produced in a bounded child where that is cheap on CPU (numbers such as ports, pids, ranks and
timeouts may differ), or read from the installed torch where producing it needs a GPU or an old torch.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import inspect
import io
import mmap
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import nbformat
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from helpers.ddp import free_port
from helpers.field_guide import ERROR_INDEX, error_index_markdown, reduce_metric
from helpers.launch import spawn_with_deadline
from helpers.processes import run_python_script
from tests.error_messages import entry_for as _entry
from tests.error_messages import matches as _matches
from tools.notebook_model import read_notebook

ROOT = Path(__file__).resolve().parents[1]
LINUX_FORK = sys.platform == "linux" and "fork" in mp.get_all_start_methods()
needs_fork = pytest.mark.skipif(not LINUX_FORK, reason="the ranks are forked (Linux)")


@pytest.mark.parametrize("entry", ERROR_INDEX, ids=lambda e: f"{e.notebook[:2]} {e.section}")
def test_each_message_links_a_section_that_exists(entry):
    assert (ROOT / "notebooks" / entry.notebook).exists(), entry.notebook
    assert entry.section in {s.id for s in read_notebook(ROOT / "notebooks" / entry.notebook).sections}, (
        f"{entry.notebook}: no #{entry.section}"
    )


def test_docs_errors_and_notebook_10_show_the_index():
    assert error_index_markdown("../notebooks/") in (ROOT / "docs" / "errors.md").read_text()
    cells = nbformat.read(ROOT / "notebooks" / "10_field_guide.ipynb", as_version=4).cells
    (at,) = [i for i, c in enumerate(cells) if re.search(r"^## Appendix E", c.source, re.MULTILINE)]
    shown = cells[at + 1]  # rendered live from ERROR_INDEX, links relative to notebooks/
    assert shown.cell_type == "code" and 'Markdown(fg.error_index_markdown(prefix=""))' in shown.source


def _raised(fn, args=(), nprocs=1) -> str:
    """``fn`` in ``nprocs`` forked ranks; what the parent gets, as the traceback's last line prints it."""
    try:
        spawn_with_deadline(fn, args=args, nprocs=nprocs, method="fork")  # removes torch's error files
    except Exception as error:  # noqa: BLE001 (any exception is the message under test)
        return f"{type(error).__module__}.{type(error).__qualname__}: {error}"
    return "no error"


def _raise_value_error(rank: int) -> None:
    raise ValueError("on purpose")


def _kill_myself(rank: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _all_reduce_then_leave(rank: int, port: int) -> None:
    """Rank 1 leaves at once; rank 0 all-reduces with a partner that is gone."""
    url = f"tcp://127.0.0.1:{port}"
    dist.init_process_group("gloo", url, rank=rank, world_size=2, timeout=timedelta(seconds=30))
    try:
        if rank == 0:
            time.sleep(0.5)
            dist.all_reduce(torch.ones(1))
    finally:
        dist.destroy_process_group()


@needs_fork
def test_the_spawn_exceptions():
    raised = _raised(_raise_value_error)
    assert _matches(raised, _entry("terminated with the following error").message), raised
    exited = _raised(_kill_myself)
    assert _matches(exited, _entry("signal SIGKILL").message), exited


@needs_fork
def test_the_gloo_messages():
    timed_out = _raised(reduce_metric, args=(2, free_port(), 2, False), nprocs=2)
    assert _matches(timed_out, _entry("Timed out waiting").message), timed_out
    closed = _raised(_all_reduce_then_leave, args=(free_port(),), nprocs=2)
    assert _matches(closed, _entry("Connection closed by peer").message), closed


@needs_fork
def test_the_detail_message(monkeypatch):
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    dist.set_debug_level_from_env()
    try:
        detail = _raised(reduce_metric, args=(2, free_port(), 2, False), nprocs=2)
    finally:
        monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG")
        dist.set_debug_level_from_env()
    assert _matches(detail, _entry("monitoredBarrier").message.replace("4000", "2000")), detail


def test_a_start_method_set_twice():
    twice = 'import multiprocessing as mp\nmp.set_start_method("spawn")\nmp.set_start_method("spawn")\n'
    printed = run_python_script(twice, timeout=60).stderr.strip().splitlines()[-1]
    assert _matches(printed, _entry("context has already been set").message), printed


def _join_through(rank: int, port: int, world_rank: int, seconds: float) -> None:
    """Join a 2-rank gloo group as ``world_rank`` through the TCPStore on 127.0.0.1:``port``."""
    store = dist.TCPStore("127.0.0.1", port, 3, False, timeout=timedelta(seconds=30))
    dist.init_process_group(
        "gloo", store=store, rank=world_rank, world_size=2, timeout=timedelta(seconds=seconds)
    )
    dist.destroy_process_group()


@needs_fork
def test_gloo_cannot_reach_the_address_a_rank_announced():
    # Rank 1 announces its address in the store and dies; rank 0 then finds nothing listening there,
    # as when a rank announces an address the others cannot reach (loopback, the wrong interface).
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=timedelta(seconds=30), wait_for_workers=False)
    one = mp.get_context("fork").Process(target=_join_through, args=(0, store.port, 1, 60))
    one.start()
    try:
        deadline = time.monotonic() + 60
        while store.num_keys() < 2 and time.monotonic() < deadline:  # its address is in the store
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        one.kill()
        one.join(timeout=10)
    raised = _raised(_join_through, args=(store.port, 0, 5))
    assert _matches(raised, _entry("connectFullMesh").message), raised
    assert "Connection refused" in raised or "Connect timeout" in raised, raised  # which: timing


def test_the_port_clash():
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        with pytest.raises(dist.DistNetworkError) as caught:
            dist.TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=10))
    printed = f"{type(caught.value).__module__}.{type(caught.value).__qualname__}: {caught.value}"
    assert _matches(printed, _entry("EADDRINUSE").message), printed


def test_the_local_rank_argument():
    # torch.distributed.launch adds `--local-rank=N` unless --use-env (torchrun never does):
    from torch.distributed import run

    assert 'cmd_args.append(f"--local-rank={macros.local_rank}")' in inspect.getsource(run)
    parser = argparse.ArgumentParser(prog="train.py")
    parser.add_argument("--local_rank", type=int, default=0)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit):
        parser.parse_args(["--local-rank=0"])
    assert _matches(stderr.getvalue(), _entry("--local-rank").message), stderr.getvalue()


@pytest.mark.skipif(
    sys.version_info >= (3, 14), reason="Python 3.14 and 3.15 word it: module '__main__' has no attribute"
)
def test_the_notebook_worker_and_the_unguarded_script():
    # What a spawn child does with a function pickled from a notebook's __main__: look it up by name.
    child = subprocess.run(
        [sys.executable, "-c", "import pickle; pickle.loads(b'c__main__\\nworker\\n.')"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert _matches(child.stderr, _entry("Can't get attribute").message), child.stderr
    unguarded = run_python_script(
        "import multiprocessing as mp\n"
        "p = mp.get_context('spawn').Process(target=print)\np.start()\np.join(30)\n",
        timeout=60,
    )
    assert _matches(unguarded.stderr, _entry("bootstrapping phase").message), unguarded.stderr


# The file_descriptor strategy at a low fd limit, through torch: a Queue consumer, a DataLoader's
# main process, and share_memory_(). One interpreter for the three (importing torch is the cost).
_FDS = """
import resource
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset

def produce(queue, done):
    for _ in range(200):
        queue.put(torch.zeros(1))  # a storage of its own each: one fd each to receive
    done.wait(60)

class Ones(Dataset):
    def __len__(self):
        return 200
    def __getitem__(self, i):
        return torch.ones(1)

def keep(items, what):
    held = []
    try:
        for item in items:
            held.append(item)  # alive, so its fd stays open
    except RuntimeError as error:
        print(what, "RuntimeError:", str(error).splitlines()[0])

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    producer = ctx.Process(target=produce, args=(queue, done))
    producer.start()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    keep((queue.get(timeout=60) for _ in range(200)), "queue:")
    done.set()
    producer.join(60)
    keep(DataLoader(Ones(), num_workers=1, multiprocessing_context="fork"), "loader:")
    keep((torch.zeros(1).share_memory_() for _ in range(200)), "share:")
"""


@needs_fork
def test_too_many_open_files_as_torch_says_it():
    printed = run_python_script(_FDS, timeout=120).stdout
    lines = dict(line.split(" ", 1) for line in printed.splitlines())
    assert errno.EMFILE == 24
    assert _matches(lines.get("queue:", ""), _entry("ancdata").message), printed
    assert _matches(lines.get("loader:", ""), _entry("Communication with the workers").message), printed
    assert _matches(lines.get("share:", ""), _entry("unable to open shared memory").message), printed


def test_the_cuda_message_as_this_torch_raises_it():
    tree = ast.parse(inspect.getsource(torch.cuda._lazy_init).strip())
    raises = [
        node.exc for node in ast.walk(tree) if isinstance(node, ast.Raise) and "forked" in ast.unparse(node)
    ]
    (call,) = raises
    printed = f"{call.func.id}: {call.args[0].value}"
    assert _matches(printed, _entry("Cannot re-initialize CUDA").message), printed


def test_the_shm_messages():
    # torch 2.13's message is built in C++ (MapAllocator); its text is in libtorch_cpu.
    library = next(Path(torch.__file__).parent.joinpath("lib").glob("libtorch_cpu.*"))
    with library.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert data.find(b"unable to allocate shared memory(shm) for file <") != -1
    assert _entry("unable to allocate shared memory").message.startswith("RuntimeError: ")


def _first_batch_error(loader) -> tuple[str, str]:
    """The error of ``loader``'s first batch and its cause, as text; the iterator (and so its
    workers) goes when this returns, since nothing keeps the exception."""
    try:
        next(iter(loader))
    except RuntimeError as error:
        return f"RuntimeError: {error}", f"RuntimeError: {error.__cause__}"
    return "no error", ""


@needs_fork
def test_the_bus_error_of_a_dataloader_worker():
    from torch.utils.data import DataLoader

    from helpers.dataloading import SignalsInWorker

    loader = DataLoader(SignalsInWorker(signal.SIGBUS), num_workers=1, multiprocessing_context="fork")
    _, cause = _first_batch_error(loader)  # "exited unexpectedly", raised from the SIGCHLD handler's error
    assert _matches(cause, _entry("Bus error").message), cause


@needs_fork
def test_the_dataloader_timeout():
    from torch.utils.data import DataLoader

    from helpers.dataloading import SlowSquares

    stuck = SlowSquares(1, work=0, delay=60)  # not just slow: see test_data's timeout test
    printed, _ = _first_batch_error(
        DataLoader(stuck, num_workers=1, timeout=1, multiprocessing_context="fork")
    )
    assert _matches(printed, _entry("DataLoader timed out").message), printed
