"""Notebook 13's workers (helpers.field_guide_workers) and its rows of the error index.

Each row is produced through torch or Python in a bounded child where a Linux CPU can, and read from
the installed torch's source or libraries where it needs a GPU, Windows or macOS (each test says
which). Numbers in the messages (pids, sizes, ports) may differ: ``matches`` ignores them.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import multiprocessing
import os
import re
import sys
import time
import warnings

import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader

import helpers.field_guide_workers as fw
from helpers.field_guide import CASES, ERROR_INDEX
from tests.error_messages import entry_for, matches

LINUX_FORK = sys.platform == "linux" and "fork" in mp.get_all_start_methods()
needs_fork = pytest.mark.skipif(not LINUX_FORK, reason="forked children, /proc (Linux)")
NB13 = "13_field_guide_workers_and_machine.ipynb"


def test_notebook_13_rows_name_its_cases():
    mine = [entry for entry in ERROR_INDEX if entry.notebook == NB13]
    assert len(mine) == 11
    assert {entry.case for entry in mine} <= set(CASES)


# ---- produced here -------------------------------------------------------------------------------


@needs_fork
def test_map_count_message_is_produced_in_a_child_and_leaves_no_segment():
    ctx = mp.get_context("fork")
    results = ctx.SimpleQueue()
    child = ctx.Process(target=fw.shared_storages_until_full, args=(0, 40, results))
    child.start()
    made, error = results.get()
    child.join(timeout=60)
    assert child.exitcode == 0 and 0 < made < 80, (made, error)
    assert matches(f"RuntimeError: {error}", entry_for("unable to mmap").message), error
    assert not [name for name in os.listdir("/dev/shm") if name.startswith(f"torch_{child.pid}_")]


def test_daemonic_message_is_produced_by_a_dataloader_worker():
    method = "fork" if LINUX_FORK else "spawn"
    batches = iter(DataLoader(fw.StartsAProcess(), num_workers=1, multiprocessing_context=method, timeout=60))
    printed = "no error"
    try:
        next(batches)
    except AssertionError as error:  # not pytest.raises: its traceback would keep the worker alive
        printed = f"AssertionError: {error}"
    del batches
    gc.collect()  # the re-raised error's traceback is a reference cycle that holds the iterator
    assert matches(printed, entry_for("daemonic processes").message), printed


def test_threads_in_a_dataloader_worker_are_allowed():
    method = "fork" if LINUX_FORK else "spawn"
    loader = DataLoader(
        fw.ThreadsInWorker(), None, sampler=[0], num_workers=1, multiprocessing_context=method, timeout=60
    )
    assert [int(x) for x in loader] == [14]


def test_a_dataset_holding_an_open_file_does_not_reach_a_spawn_worker(tmp_path):
    """What section 5's bug prints under spawn, forkserver (Python 3.14's default) and on macOS: the
    Dataset is pickled before any child starts, so no worker is left behind."""
    dataset = fw.RecordsOpenedInInit(str(fw.write_records(tmp_path / "records", 4)), 4)
    printed, warned = "no error", []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            next(iter(DataLoader(dataset, None, num_workers=1, multiprocessing_context="spawn", timeout=60)))
        except TypeError as error:
            printed = f"TypeError: {error}"
        warned = [str(w.message) for w in caught]
    dataset.file.close()
    assert matches(printed, entry_for("cannot pickle").message), printed
    assert any(w.startswith("Got pickle error when attempting to start a worker Process") for w in warned), (
        warned
    )


def test_starts_a_process_works_outside_a_daemon():
    if not LINUX_FORK:
        pytest.skip("its child is forked")
    assert fw.StartsAProcess()[0] == 0


def test_share_filename_message_is_produced_with_a_storage_that_is_not_on_the_cpu():
    """An MPS storage meets the same check as this meta storage (torch/csrc/StorageSharing.cpp)."""
    with pytest.raises(RuntimeError) as raised:
        torch.UntypedStorage(4, device="meta")._share_filename_cpu_()
    assert matches(f"RuntimeError: {raised.value}", entry_for("_share_filename_").message)


def test_pin_memory_device_warning_is_produced():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(iter(DataLoader(torch.arange(4), pin_memory=True, pin_memory_device="cuda")))
    printed = [f"{w.category.__name__}: {w.message}" for w in caught]
    assert any(matches(line, entry_for("pin_memory_device").message) for line in printed), printed


# ---- read from the installed torch (they need Windows, macOS or a GPU) ---------------------------


@pytest.mark.parametrize(
    ("words", "where"),
    [
        ("have NCCL built in", "distributed/distributed_c10d.py"),  # a build without NCCL
        ("built without libuv", "lib/libtorch_cpu.so"),  # a Windows build
        ("received from another process", "lib/libtorch_python.so"),  # CUDA IPC
        ("pidfd_getfd syscall", "lib/libc10_cuda.so"),  # CUDA IPC with expandable_segments
        ("Inductor async compile process pools", "_inductor/async_compile.py"),  # a compile in a daemon
    ],
)
def test_messages_read_from_the_installed_torch(words, where):
    if where.endswith(".so") and not (fw.Path(torch.__file__).parent / where).exists():
        pytest.skip(f"this torch build has no {where}")
    text = fw.torch_text(where, words, after=1)
    message = re.sub(r"^[\w.]+(?:Error|Exception|Warning): ", "", entry_for(words).message)
    assert matches(" ".join(text.replace('"', " ").split()), " ".join(message.split()[:8])), text


def test_the_pidfd_getfd_refusal_is_torchs_prefix_and_the_errors_text():
    """ExpandableSegment::fromShared raises "pidfd_getfd: " + strerror(errno) for any error but ENOSYS."""
    if not (fw.Path(torch.__file__).parent / "lib/libc10_cuda.so").exists():
        pytest.skip("this torch build has no libc10_cuda.so")
    printed = (
        "RuntimeError: " + fw.torch_text("lib/libc10_cuda.so", "pidfd_getfd: ") + os.strerror(errno.EPERM)
    )
    assert matches(printed, entry_for("pidfd_getfd: Operation").message), printed


def test_use_libuv_0_reaches_neither_torchruns_stores_nor_tcpstore(monkeypatch):
    """H2: torch 2.15.0's torchrun stores pass no use_libuv and TCPStore's constructor ignores USE_LIBUV,
    so the index must not offer USE_LIBUV=0 as torchrun's cure (pytorch PR #196855 would change this)."""
    for where in (
        "distributed/elastic/rendezvous/static_tcp_rendezvous.py",
        "distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
        "distributed/elastic/rendezvous/dynamic_rendezvous.py",
    ):
        store = fw.torch_text(where, "TCPStore(", after=8)
        assert "use_libuv" not in store.split(")")[0], (where, store)
    default = fw.platform_facts()["store_uses_libuv"]
    monkeypatch.setenv("USE_LIBUV", "0")
    assert fw.platform_facts()["store_uses_libuv"] == default
    entry = entry_for("use_libuv was requested")
    assert "ignore `USE_LIBUV`" in entry.cause and "mp.spawn" in entry.fix, entry


_NCCL_WITHOUT_A_GPU = """
from datetime import timedelta
import torch, torch.distributed as dist
from helpers.ddp import free_port
backend = "nccl" if dist.is_nccl_available() else "gloo"  # the build, not the machine
try:  # torch 2.15.0 refuses in init_process_group, before any collective
    dist.init_process_group(backend, f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=timedelta(seconds=30))
    dist.all_reduce(torch.ones(1))
except RuntimeError as error:
    print("RuntimeError:", str(error).splitlines()[0])
finally:
    if dist.is_initialized():
        dist.destroy_process_group()
"""


@pytest.mark.skipif(
    not torch.distributed.is_nccl_available() or torch.cuda.is_available(), reason="a build with NCCL, no GPU"
)
def test_the_backend_idiom_by_the_build_fails_without_a_gpu():
    """M3: why section 2 picks the backend with torch.cuda.is_available(), not dist.is_nccl_available()."""
    from helpers.processes import run_python_script

    printed = run_python_script(_NCCL_WITHOUT_A_GPU, timeout=120).stdout
    assert "nccl2 requires at least one CUDA device" in printed, printed


# ---- the workers ---------------------------------------------------------------------------------


def test_platform_facts_agree_with_torch():
    facts = fw.platform_facts()
    assert facts["sharing_strategies"] == sorted(mp.get_all_sharing_strategies())
    assert ("nccl" in facts["backends"]) == torch.distributed.is_nccl_available()
    assert isinstance(facts["store_uses_libuv"], bool)


def test_torch_text_reads_the_sharing_strategies_by_platform():
    text = fw.torch_text("multiprocessing/__init__.py", 'sys.platform == "darwin"', after=2)
    assert '_all_sharing_strategies = {"file_system"}' in text


@pytest.mark.spawn_in_notebook("13", "count_torn_copies")
@pytest.mark.parametrize("method", ["fork", "spawn"] if LINUX_FORK else ["spawn"])
def test_copies_tear_without_the_lock_and_never_with_it(method):
    ctx = mp.get_context(method)
    weights = torch.zeros(1_000_000).share_memory_()
    counts = {}
    for lock in (None, ctx.Lock()):
        results = ctx.Queue()
        actor = ctx.Process(target=fw.count_torn_copies, args=(weights, lock, 1.0, results))
        actor.start()
        step, deadline = 0, time.monotonic() + 60
        while results.empty() and time.monotonic() < deadline:
            step += 1
            with lock or contextlib.nullcontext():
                weights.fill_(step)
        counts[lock is not None] = results.get(timeout=60)
        actor.join(timeout=60)
        assert actor.exitcode == 0
    assert counts[True][0] > 0 and counts[True][1] == 0, counts  # with the lock: copies, none torn
    assert counts[False][0] > 0, counts  # without: torn copies are likely but not certain (no count asserted)


@pytest.mark.parametrize("method", ["fork", "spawn"] if LINUX_FORK else ["spawn"])
def test_actors_see_every_version_whole(method):
    ctx = mp.get_context(method)
    weights, version = torch.zeros(1000).share_memory_(), torch.zeros((), dtype=torch.int64).share_memory_()
    lock, seen = ctx.Lock(), ctx.Queue()
    actors = [
        ctx.Process(target=fw.follow_weights, args=(r, weights, version, lock, seen, 2, 60)) for r in range(2)
    ]
    for a in actors:
        a.start()
    try:
        for step in (1, 2):
            with lock:
                weights.fill_(step)
                version.fill_(step)
            assert sorted(seen.get(timeout=60) for _ in actors) == [(0, step, True), (1, step, True)]
    finally:
        for a in actors:
            a.join(timeout=60)
            if a.exitcode is None:
                a.terminate()
    assert [a.exitcode for a in actors] == [0, 0]


def test_a_manager_queue_pickles_again_in_its_server_and_a_torch_queue_does_not():
    ctx = mp.get_context("fork" if LINUX_FORK else "spawn")
    with ctx.Manager() as manager:
        relay = manager.Queue()
        relay.put(fw.SentOnce(1))
        with pytest.raises(multiprocessing.managers.RemoteError, match="received from another process"):
            relay.get(timeout=10)
    direct = ctx.Queue()
    direct.put(fw.SentOnce(2))
    assert direct.get(timeout=10).value == 2


@needs_fork
def test_one_mapping_per_shared_storage():
    # A shared storage an earlier test of this process left in a reference cycle would be unmapped by a
    # collection the 50 allocations trigger: 47 new maps in one `make test` (2026-12-04). Collect first.
    gc.collect()
    before = fw.maps_of_this_process()
    kept = [torch.zeros(1).share_memory_() for _ in range(50)]
    assert fw.maps_of_this_process() - before >= 50
    del kept


@needs_fork
def test_a_file_opened_in_init_shares_its_offset_with_a_forked_child(tmp_path):
    path = str(fw.write_records(tmp_path / "records", 10))
    dataset = fw.RecordsOpenedInInit(path, 10)
    child = multiprocessing.get_context("fork").Process(target=dataset.file.seek, args=(48,))
    child.start()
    child.join(timeout=30)
    assert dataset.file.tell() == 48  # the child moved the parent's offset: one open file, two processes
    dataset.file.close()


def test_records_opened_per_worker_read_right_with_workers(tmp_path):
    path = str(fw.write_records(tmp_path / "records", 20))
    method = "fork" if LINUX_FORK else "spawn"
    loader = DataLoader(
        fw.RecordsOpenedPerWorker(path, 20, pause=0.002),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=method,
        timeout=60,
    )
    assert [int(x) for x in loader] == list(range(20))


def test_the_per_worker_reader_pickles_without_its_handle_after_the_main_process_read(tmp_path):
    """13's appendix G: once the main process has read, the Dataset holds an open file; pickled for a
    spawn worker it sends no handle (the worker opens its own), and the main process keeps its own."""
    import pickle

    path = str(fw.write_records(str(tmp_path / "records"), 3))
    records = fw.RecordsOpenedPerWorker(path, 3)
    assert records[2] == 2 and records.file is not None
    copy = pickle.loads(pickle.dumps(records))
    assert copy.file is None and copy.pid is None and [copy[i] for i in range(3)] == [0, 1, 2]
    assert records.file is not None and not records.file.closed
    records.file.close()
    copy.file.close()
