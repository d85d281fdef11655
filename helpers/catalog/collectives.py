"""Catalog entries: Collectives and process groups: gloo, NCCL, timeouts, mismatched calls, the watchdog.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="gloo_recv_timeout",
        message="Timed out waiting 5000ms for recv operation to complete",
        pattern=r"Timed out waiting \d+ms for (?:recv|send) operation to complete",
        cause=(
            "A gloo collective or send/recv on this rank waited for another rank (to receive its data, or "
            "for it to take ours: `send operation`) longer than the group's "
            "`timeout` (`init_process_group(timeout=...)`, 30 minutes by default for gloo): the other rank "
            "is alive but not in the same collective. One common reason is uneven inputs: a rank ran out "
            "of batches and went on (to evaluate, to save) while this one still all-reduces; others are a "
            "collective called under `if rank == 0:`, or a rank stuck or much slower elsewhere."
        ),
        fix=(
            "Make every rank run the same collectives in the same order: give every rank the same number "
            "of steps (a `DistributedSampler` with `drop_last=True`, or agree on the count with "
            "`all_reduce(steps, op=ReduceOp.MIN)`; DDP's `join()` context manager for uneven inputs), and "
            "move collectives out of rank-only branches. `TORCH_DISTRIBUTED_DEBUG=DETAIL` names the rank "
            "that did not arrive; a larger `timeout` only helps when a rank is just slow."
        ),
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=1),
    )
    batches = [torch.ones(4)] * (3 if rank == 0 else 2)  # uneven: rank 1 has one batch fewer
    for batch in batches:
        dist.all_reduce(batch)  # the gradient all-reduce of every training step
    time.sleep(2.5)  # rank 1 is done and busy elsewhere (saving, evaluating): alive, not in the collective
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        fixed="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=1),
    )
    batches = [torch.ones(4)] * (3 if rank == 0 else 2)  # uneven: rank 1 has one batch fewer
    steps = torch.tensor(len(batches))
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)  # the fix: every rank runs as many steps as the shortest
    for batch in batches[: int(steps)]:
        dist.all_reduce(batch)  # the gradient all-reduce of every training step
    time.sleep(2.5)  # rank 1 is done and busy elsewhere (saving, evaluating): alive, not in the collective
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        case="uneven_inputs",
    ),
    Entry(
        id="gloo_connection_closed",
        message="Connection closed by peer [127.0.0.1]:9141",
        pattern=(
            r"Connection closed by peer \[[^\]\n]*\]:\d+"
            r"|Read error \[[^\]\n]*\]:\d+: Connection reset by peer"
            r"|\] Connection reset by peer \[[^\]\n]*\]:\d+"  # gloo's pair.cc, as notebook 10's uneven-inputs case saw it
        ),
        cause=(
            "This rank was in a gloo collective or send/recv when the process at the other end of the "
            "connection exited, finished or crashed, and its sockets closed; the same case can print "
            '`Read error [127.0.0.1]:9141: Connection reset by peer` instead. torch 2.15 adds "This is '
            'typically caused by a remote worker crashing". One common reason is uneven inputs (a rank '
            "ran out of batches and returned); often the other rank died of an error of its own, which "
            "is the one to read."
        ),
        fix=(
            "Read the log of the rank at that address first (gloo prints the port with its two bytes "
            "swapped on x86 and ARM: `python -c 'import socket; print(socket.ntohs(PORT))'` gives the "
            "port that rank used; upstream/gloo_port_byte_order.py): if it crashed, fix that error. If it simply "
            "finished, make every rank run the same number of steps (`DistributedSampler(drop_last=True)`, "
            "or agree on the count with `all_reduce(steps, op=ReduceOp.MIN)`; DDP's `join()` for uneven "
            "inputs), wait for every `isend`/`irecv` (`work.wait()`) before a rank returns, and end with "
            "`dist.barrier()` then `destroy_process_group()` on every rank."
        ),
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        sites=("torch/lib/libtorch_cpu.so::connection-reset-by-peer",),
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    batches = [torch.ones(4)] * (3 if rank == 0 else 2)  # uneven: rank 1 has one batch fewer
    for batch in batches:
        dist.all_reduce(batch)  # the gradient all-reduce of every training step
    dist.destroy_process_group()  # rank 1 is done and exits while rank 0 waits in its third all_reduce


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        fixed="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    batches = [torch.ones(4)] * (3 if rank == 0 else 2)  # uneven: rank 1 has one batch fewer
    steps = torch.tensor(len(batches))
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)  # the fix: every rank runs as many steps as the shortest
    for batch in batches[: int(steps)]:
        dist.all_reduce(batch)  # the gradient all-reduce of every training step
    dist.destroy_process_group()  # rank 1 is done and exits while rank 0 waits in its third all_reduce


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        case="uneven_inputs",
        rank=-1,
    ),
    Entry(
        id="gloo_peer_left_during_init",
        message=(
            "RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo/"
            "transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:14493"
        ),
        pattern=r"connectFullMesh failed with \[[^\]\n]*\] Connection closed by peer \[[^\]\n]*\]:\d+",
        cause=(
            "While this rank was still creating its gloo group (`init_process_group`, `new_group`), a peer "
            "whose side was done returned from it, ran work with no collective, called "
            "`destroy_process_group()` and exited: its sockets closed before this rank had read what it "
            "needed. `init_process_group` is not a barrier (torch 2.x waits for every rank only with "
            "`TORCH_DIST_INIT_BARRIER=1`), so a rank that runs no collective can leave first; it happens "
            "under load, when the slow rank is descheduled (2 of 12 two-rank runs with that rank at nice 19 "
            "beside two busy loops, 2026-12-02; none with a barrier). If the peer crashed instead, its own "
            "log has the error (gloo prints its port byte-swapped: see `gloo_connection_closed`)."
        ),
        fix=(
            "Leave together: end every rank with `dist.barrier()` before `destroy_process_group()`, so "
            "no rank exits before every rank has joined and finished; or set `TORCH_DIST_INIT_BARRIER=1` "
            "(a barrier at the end of `init_process_group`)."
        ),
        reproduction="""\
import multiprocessing
import os
import signal
import time
from datetime import timedelta

import torch.distributed as dist


def join(port, rank):
    store = dist.TCPStore("127.0.0.1", port, 3, False, timeout=timedelta(seconds=30))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timedelta(seconds=30))
    dist.destroy_process_group()  # no collective: this rank may leave before the other has joined


def attempt():
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=timedelta(seconds=30), wait_for_workers=False)
    ranks = [multiprocessing.get_context("fork").Process(target=join, args=(store.port, r)) for r in (0, 1)]
    for p in ranks:
        p.start()
    deadline = time.monotonic() + 60
    while store.num_keys() < 2 and time.monotonic() < deadline:  # both have published their address
        pass
    os.kill(ranks[0].pid, signal.SIGSTOP)  # rank 0 descheduled, as on a loaded machine
    ranks[1].join(timeout=5)
    os.kill(ranks[0].pid, signal.SIGCONT)
    for p in ranks:
        p.join(timeout=60)
        if p.exitcode is None:
            p.kill()
            p.join(timeout=5)
    return [p.exitcode for p in ranks]


if __name__ == "__main__":
    for _ in range(30):  # the window is short: rank 0 may be done before it is stopped (1-4 tries idle)
        codes = attempt()
        print("exit codes:", codes, flush=True)
        if codes[0] != 0:
            break
""",
        fixed="""\
import multiprocessing
import os
import signal
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def join(port, rank):
    store = dist.TCPStore("127.0.0.1", port, 3, False, timeout=timedelta(seconds=30))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timedelta(seconds=30))
    dist.barrier()  # leave together
    dist.destroy_process_group()


def attempt():
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=timedelta(seconds=30), wait_for_workers=False)
    ranks = [multiprocessing.get_context("fork").Process(target=join, args=(store.port, r)) for r in (0, 1)]
    for p in ranks:
        p.start()
    deadline = time.monotonic() + 60
    while store.num_keys() < 2 and time.monotonic() < deadline:
        pass
    os.kill(ranks[0].pid, signal.SIGSTOP)
    ranks[1].join(timeout=5)  # rank 1 waits in the barrier for rank 0
    os.kill(ranks[0].pid, signal.SIGCONT)
    for p in ranks:
        p.join(timeout=60)
        if p.exitcode is None:
            p.kill()
            p.join(timeout=5)
    return [p.exitcode for p in ranks]


if __name__ == "__main__":
    runs = [attempt() for _ in range(3)]
    print("exit codes:", runs)
    sys.exit(0 if all(code == 0 for codes in runs for code in codes) else 1)
""",
    ),
    Entry(
        id="monitored_barrier_failed",
        message="RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 4000 ms",
        pattern=r"Ranks? \d+(?:, \d+)* failed to pass monitoredBarrier in \d+ ms",
        cause=(
            "Rank 0 waited in `dist.monitored_barrier(timeout=...)` and the ranks it names did not reach "
            "it in time: they are stuck elsewhere, slower, dead, or never call it (a collective inside "
            "`if rank == 0:`). With `TORCH_DISTRIBUTED_DEBUG=DETAIL` torch runs such a barrier before "
            "every collective, so the same message names the ranks that did not reach a collective."
        ),
        fix=(
            "Look at what the named ranks were doing (their logs, `py-spy dump --pid`): make them call "
            "the same collective, in the same order, as every other rank (no collectives under a rank-only "
            "branch), or fix what holds them up. `wait_all_ranks=True` lists every missing rank, not "
            "only the first. On torch 2.15.0 a DDP model on gloo crashes under `TORCH_DISTRIBUTED_DEBUG=DETAIL` "
            "(SIGSEGV in DDP's constructor, checked): use DETAIL on the collectives without DDP."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    if rank == 0:  # a collective inside `if rank == 0:` (logging, saving): rank 1 never calls it
        dist.monitored_barrier(timeout=timedelta(seconds=1), wait_all_ranks=True)
    time.sleep(1.5)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        fixed="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    if True:  # the fix: every rank calls the collective
        dist.monitored_barrier(timeout=timedelta(seconds=1), wait_all_ranks=True)
    time.sleep(1.5)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        case="one_rank_collective",
    ),
    Entry(
        id="monitored_barrier_peer_error",
        message=(
            "RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting "
            "for send/recv from rank 0. Please check rank 0 logs for faulty rank."
        ),
        cause=(
            "In `monitored_barrier` (or a collective under `TORCH_DISTRIBUTED_DEBUG=DETAIL`, which runs "
            "one first) rank 0 collects the other ranks and answers them. This rank reached it, but the "
            "exchange with rank 0 failed: rank 0 crashed, exited, or itself timed out waiting for another "
            'rank. The original gloo error follows ("Original exception:").'
        ),
        fix=(
            "Read rank 0's log: it either names the ranks that did not arrive (`Ranks N failed to pass "
            "monitoredBarrier`) or shows the error that killed it; fix that. This rank is not the faulty "
            "one."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cpu.so::successfully-reached-monitoredbarrier-but-received-errors-while-waiting",
        ),
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    if rank == 0:
        time.sleep(0.5)
        os._exit(1)  # rank 0 dies before the barrier (an exception, the OOM killer)
    dist.monitored_barrier(timeout=timedelta(seconds=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
    ),
    Entry(
        id="pg_wrapper_monitored_barrier",
        message=(
            "RuntimeError: ProcessGroupWrapper: Monitored Barrier encountered error running collective: "
            "CollectiveFingerPrint(OpType=ALLREDUCE"
        ),
        pattern=r"ProcessGroupWrapper: Monitored Barrier encountered error running collective",
        cause=(
            "With `TORCH_DISTRIBUTED_DEBUG=DETAIL` every collective is wrapped: the ranks first meet in a "
            "gloo monitored barrier, and here that barrier failed, so some rank never reached the "
            'collective named in the fingerprint (or died). The error after "Error:" says which '
            "(`Ranks N failed to pass monitoredBarrier`, `Connection closed by peer`)."
        ),
        fix=(
            'Find the rank named after "Error:" (or in rank 0\'s log) and make it run the same '
            "collectives in the same order as the others; if it crashed, fix its own error first."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cpu.so::processgroupwrapper-monitored-barrier-encountered-error-running-collective",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp, ProcessGroupWrapper::runCollectiveChecks: "
            "it wraps only a std::runtime_error from the barrier. On torch 2.15.0 the gloo barrier raises "
            "c10 errors, so under DETAIL the reproductions of monitored_barrier_failed and "
            "monitored_barrier_peer_error print those messages without this prefix (checked); no CPU run "
            "here printed this one"
        ),
    ),
    Entry(
        id="collective_mismatch_detail",
        message=(
            "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=0, OpType=BROADCAST"
        ),
        pattern=r"Detected mismatch between collectives on ranks\. Rank \d+ is running",
        cause=(
            "With `TORCH_DISTRIBUTED_DEBUG=DETAIL` torch compares each collective's fingerprint (operation, "
            "sequence number, tensor shapes, dtypes, devices) across ranks before running it, and two ranks "
            "were about to run different ones: a different operation, a different shape, or the same "
            "operations in a different order. Without DETAIL this is a hang, a timeout or wrong results."
        ),
        fix=(
            'Read "Collectives differ in the following aspects" at the end, then make every rank issue '
            "the same collectives, with the same shapes and dtypes, in the same order: no collective "
            "inside a rank-dependent branch, no data-dependent number of steps per rank."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=("torch/lib/libtorch_cpu.so::detected-mismatch-between-collectives-on-ranks-rank",),
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    t = torch.ones(4)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)  # another collective at the same step on rank 1
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # check every collective against the other ranks' first
    dist.set_debug_level_from_env()  # torch.distributed read the variable when it was imported
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        fixed="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    t = torch.ones(4)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.all_reduce(t)  # the fix: the same collective, in the same order, on every rank
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # check every collective against the other ranks' first
    dist.set_debug_level_from_env()  # torch.distributed read the variable when it was imported
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
    ),
    Entry(
        id="gloo_size_mismatch",
        message=(
            "Received data size doesn't match expected size. Is there a distributed collective mismatch in "
            "your code?"
        ),
        pattern=(
            r"Received data size doesn't match expected size"
            r"|op\.preamble\.length <= op\.nbytes\. \d+ vs \d+"
        ),
        cause=(
            "gloo received more bytes from another rank than this rank's tensor holds: the ranks ran a "
            "collective (or send/recv) with tensors of different sizes or dtypes, or different collectives "
            "at the same step (a receiver whose tensor is the larger one gets no error at all, only a "
            "partly filled tensor: checked with broadcast). It is raised on gloo's own thread, so the process aborts (`terminate called "
            "after throwing an instance of 'gloo::EnforceNotMet'`, SIGABRT, exit code -6) and the other "
            "ranks then see `Connection reset by peer`."
        ),
        fix=(
            "Give the tensor the same shape and dtype on every rank (pad to a common length, or exchange "
            "sizes first and use `all_gather_object` / `all_gather` into per-rank buffers for variable "
            "sizes), and make every rank call the same collectives in the same order. "
            "`TORCH_DISTRIBUTED_DEBUG=DETAIL` names the differing shapes before the data moves."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cpu.so::received-data-size-doesn-t-match-expected-size-is-there-a-distributed-collective-mismatch-in-your-co",
        ),
        reproduction="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    t = torch.ones(4 if rank == 0 else 6)  # a tensor whose size differs between ranks
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
        fixed="""\
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=5),
    )
    t = torch.ones(6)  # the fix: the same shape on every rank
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=worker, args=(rank, 2, port)) for rank in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=30)
    for p in ranks:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    print("exit codes:", [p.exitcode for p in ranks])
    sys.exit(0 if all(p.exitcode == 0 for p in ranks) else 1)
""",
    ),
    Entry(
        id="gloo_unsupported_device",
        message="RuntimeError: makeDeviceForHostname(): unsupported gloo device",
        pattern=r"makeDeviceFor(?:Hostname|Interface)\(\): unsupported gloo device",
        cause=(
            "`GLOO_DEVICE_TRANSPORT` names a gloo transport this torch build has not registered, so gloo "
            "could not create its network device (`ForInterface` when `GLOO_SOCKET_IFNAME` is set, "
            "`ForHostname` otherwise). The names are upper case and per build: `TCP` (and `TCP_TLS` where "
            "built) on Linux, `UV` on macOS and Windows; `tcp` in lower case is not one."
        ),
        fix=(
            "Unset `GLOO_DEVICE_TRANSPORT` (the platform default is right almost always) or set it to a "
            "registered name, `GLOO_DEVICE_TRANSPORT=TCP` on Linux. To pick the network, set "
            "`GLOO_SOCKET_IFNAME` instead."
        ),
        teaches="09_multi_node.ipynb#appendix-real-networks",
        sites=(
            "torch/lib/libtorch_cpu.so::makedeviceforhostname-unsupported-gloo-device",
            "torch/lib/libtorch_cpu.so::makedeviceforinterface-unsupported-gloo-device",
        ),
        reproduction="""\
import os
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    os.environ["GLOO_DEVICE_TRANSPORT"] = "tcp"  # the transport's registered name is "TCP": case matters
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=timedelta(seconds=5)
    )
    dist.destroy_process_group()
""",
        fixed="""\
import os
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    os.environ["GLOO_DEVICE_TRANSPORT"] = "TCP"  # the fix: a registered name (or leave the variable unset)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=timedelta(seconds=5)
    )
    dist.destroy_process_group()
""",
    ),
    Entry(
        id="gloo_connect_full_mesh",
        message="RuntimeError: Gloo connectFullMesh failed with",
        cause=(
            "While creating a gloo group every rank publishes the address it listens on in the store and "
            "connects to every other rank; a connection failed (then `Connection refused` or `Connect "
            "timeout` with `remote=[127.0.1.1]:PORT`, `No route to host`, or `pair.cc:144] no error`). "
            "A rank announced an address the others cannot reach: its hostname resolves to 127.x (a "
            "Debian/Ubuntu `/etc/hosts` line) or to an interface of another network, or a firewall "
            "blocks the ports (torch 2.15.0's text)."
        ),
        fix=(
            "Set `GLOO_SOCKET_IFNAME` on every node to the interface the nodes share (`ip -br addr`), e.g. "
            "`GLOO_SOCKET_IFNAME=eth0`, and `MASTER_ADDR` to an address every node reaches; or make the "
            "hostname resolve to that address. Open the ports between the nodes (gloo listens on random "
            "ports)."
        ),
        teaches="09_multi_node.ipynb#appendix-real-networks",
        sites=("torch/lib/libtorch_cpu.so::gloo-connectfullmesh-failed-with",),
        reproduction="""\
import multiprocessing
import time
from datetime import timedelta

import torch.distributed as dist


def join(port, rank, seconds):
    store = dist.TCPStore("127.0.0.1", port, 3, False, timeout=timedelta(seconds=30))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timedelta(seconds=seconds))
    dist.destroy_process_group()


if __name__ == "__main__":
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=timedelta(seconds=30), wait_for_workers=False)
    # rank 1 announces its address in the store, then is gone: as when a rank announces an address
    # the others cannot reach (a hostname that resolves to 127.0.1.1, the wrong interface)
    rank1 = multiprocessing.get_context("fork").Process(target=join, args=(store.port, 1, 60))
    rank1.start()
    deadline = time.monotonic() + 60
    while store.num_keys() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    rank1.kill()
    rank1.join(timeout=10)
    join(store.port, 0, 5)
""",
        case="gloo_peer_unreachable",
    ),
    Entry(
        id="backend_not_built_in",
        message="RuntimeError: Distributed package doesn't have UCC built in",
        pattern=r"Distributed package doesn't have (?:Gloo|UCC|XCCL) built in",
        cause=(
            "`init_process_group(backend=...)` (or `new_group`) asked for a backend this torch build does "
            "not contain: the standard Linux wheel of torch 2.15.0 has no UCC and no XCCL (XCCL is the "
            "Intel GPU backend of the XPU builds); a build configured with `USE_GLOO=0` has no gloo. "
            "`dist.is_ucc_available()`, `is_xccl_available()`, `is_gloo_available()` tell."
        ),
        fix=(
            "Use a backend the build has: `gloo` for CPU tensors, `nccl` for CUDA tensors "
            '(`backend="cpu:gloo,cuda:nccl"` for both); or install a build with the backend (an XPU '
            "wheel for `xccl`, a source build with `USE_UCC=1` for `ucc`)."
        ),
        teaches="11_collectives_and_ddp.ipynb#the-words-once",
        sites=(
            "torch/distributed/distributed_c10d.py::_create_gloo_process_group::RuntimeError::distributed-package-doesn-t-have-gloo-built-in",
            "torch/distributed/distributed_c10d.py::_create_ucc_process_group::RuntimeError::distributed-package-doesn-t-have-ucc-built-in",
            "torch/distributed/distributed_c10d.py::_create_xccl_process_group::RuntimeError::distributed-package-doesn-t-have-xccl-built-in",
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    print(
        "ucc:", dist.is_ucc_available(), "xccl:", dist.is_xccl_available(), "gloo:", dist.is_gloo_available()
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(
        "ucc", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=timedelta(seconds=5)
    )
    dist.destroy_process_group()
""",
        fixed="""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    print(
        "ucc:", dist.is_ucc_available(), "xccl:", dist.is_xccl_available(), "gloo:", dist.is_gloo_available()
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=timedelta(seconds=5)
    )
    dist.destroy_process_group()
""",
    ),
    Entry(
        id="no_nccl_built_in",
        message="RuntimeError: Distributed package doesn't have NCCL built in",
        cause=(
            '`backend="nccl"` on a torch build without NCCL: the macOS and Windows wheels and the '
            "CPU-only Linux wheels (`+cpu`) have none, and NCCL needs NVIDIA GPUs anyway. "
            "`torch.distributed.is_nccl_available()` returns False there."
        ),
        fix=(
            'Use `backend="gloo"` where there is no NVIDIA GPU (pick it at run time: '
            '`"nccl" if torch.cuda.is_available() else "gloo"`), or install a CUDA build of torch on a '
            "Linux machine with NVIDIA GPUs."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        read_from=(
            "torch/distributed/distributed_c10d.py, _create_nccl_process_group (raised when "
            "is_nccl_available() is False); the machine that checks the catalog has a CUDA wheel, with NCCL"
        ),
        case="other_platform",
    ),
    Entry(
        id="nccl_watchdog_timeout",
        message=(
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, "
            "NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600030 milliseconds before "
            "timing out."
        ),
        pattern=(
            r"Watchdog caught collective operation timeout|NCCL operation timed out"
            r"|timeout - (?:collective operation timed out|timeout watchdog detected operation timeout)"
            r"|Received a dump signal due to a collective timeout from"
        ),
        cause=(
            "An NCCL collective (the `OpType`, number `SeqNum` of the group) did not finish within the "
            "group's timeout (`Timeout(ms)`; 10 minutes by default for NCCL), so the watchdog thread of "
            "ProcessGroupNCCL aborted the communicator and takes the process down. Almost always some "
            "rank never issued that collective or issued another one: uneven data, a collective under "
            "`if rank == 0:`, a rank stuck in data loading, a long evaluation or checkpoint, or dead; "
            "less often the network or NCCL hung. torch 2.15's default `nccl` backend (nccl2) says "
            "`NCCL operation timed out` and logs `timeout - collective operation timed out`."
        ),
        fix=(
            "Compare the ranks' logs: the rank that logged no timeout, or whose last completed work is "
            "lower, went elsewhere; make every rank run the same collectives in the same order "
            "(`DistributedSampler(drop_last=True)`, no collective inside `if rank == 0:`) and give slow "
            "one-rank work (evaluation, saving) a `dist.barrier()` after it and a larger "
            "`init_process_group(timeout=...)`. To find the place: `TORCH_NCCL_TRACE_BUFFER_SIZE=2000` "
            "(the flight recorder), `TORCH_DISTRIBUTED_DEBUG=DETAIL`, `NCCL_DEBUG=INFO`; the same "
            "mistake, run with gloo on CPU under DETAIL, names the rank."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cuda.so::watchdog-caught-collective-operation-timeout",
            "torch/lib/libtorch_cuda.so::watchdog-caught-collective-operation-timeout-nccl-operation-timed-out",
            "torch/lib/libtorch_cuda.so::nccl-operation-timed-out",
            "torch/lib/libtorch_cuda.so::timeout-collective-operation-timed-out",
            "torch/lib/libtorch_cuda.so::timeout-timeout-watchdog-detected-operation-timeout",
            "torch/lib/libtorch_cuda.so::received-a-dump-signal-due-to-a-collective-timeout-from",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout and the "
            "HeartbeatMonitor (TORCH_DIST_USE_NCCL2=0, and torch before nccl2); "
            "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLUtils.cpp, "
            "ProcessGroupNCCL::checkAndAbortIfTimedOutOrError and timeoutWatchdog, and nccl2/WorkNCCL.cpp "
            "(torch 2.15's default). Needs NVIDIA GPUs. Reports: "
            "https://github.com/XPixelGroup/BasicSR/issues/737, https://github.com/pytorch/pytorch/issues/118369"
        ),
    ),
    Entry(
        id="nccl_watchdog_failure",
        message=(
            "[Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
            "kernels, subsequent GPU operations might run on corrupted/incomplete data."
        ),
        pattern=(
            r"Some NCCL operations have failed or timed out"
            r"|Process group watchdog thread terminated with exception"
            r"|failure detected by watchdog at work sequence id"
            r"|Exception \(either an error or timeout\) detected by watchdog at work"
            r"|Timeout watchdog caught (?:exception|unknown exception)"
            r"|error - timeout watchdog detected operation error"
            r"|collective timeout or exception"
        ),
        cause=(
            "These are the watchdog's follow-up lines: a collective on this rank failed or timed out (or "
            "the watchdog thread itself hit an error), and because the GPU may have used incomplete data "
            "torch aborts the communicators and takes the whole process down (SIGABRT, `terminate called "
            "after throwing an instance of 'c10::DistBackendError'`). What failed is on a line next to it "
            "or after the colon: `Watchdog caught collective operation timeout`, an NCCL error such as "
            "`unhandled system error`, or a CUDA error."
        ),
        fix=(
            "Read the specific error near it, on this rank and on the others (the first rank to fail is "
            "usually the cause; the rest time out waiting for it), and fix that one. `NCCL_DEBUG=INFO` "
            "and `TORCH_NCCL_TRACE_BUFFER_SIZE=2000` add detail; a larger timeout helps only when a rank "
            "is slow on purpose."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cuda.so::some-nccl-operations-have-failed-or-timed-out-due-to-the",
            "torch/lib/libtorch_cuda.so::process-group-watchdog-thread-terminated-with-exception",
            "torch/lib/libtorch_cuda.so::process-group-watchdog-thread-terminated-with-exception-unknown",
            "torch/lib/libtorch_cuda.so::failure-detected-by-watchdog-at-work-sequence-id",
            "torch/lib/libtorch_cuda.so::collective-timeout-or-exception",
            "torch/lib/libtorch_cuda.so::timeout-watchdog-caught-exception",
            "torch/lib/libtorch_cuda.so::timeout-watchdog-caught-unknown-exception",
            "torch/lib/libtorch_cuda.so::error-timeout-watchdog-detected-operation-error",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::handleException, the Watchdog "
            'loop and HeartbeatMonitor (exit reason "collective timeout or exception"); '
            "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLUtils.cpp, ProcessGroupNCCL::timeoutWatchdog "
            "(torch 2.15's default nccl backend). Needs NVIDIA GPUs"
        ),
        rank=-1,
    ),
    Entry(
        id="nccl_comm_aborted",
        message="torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
        pattern=(
            r"NCCL communicator was aborted(?: on rank \d+| after a previous error|\.)"
            r"|NCCL communicator encountered error set by ProcessGroupNCCL"
        ),
        cause=(
            "A collective ran on an NCCL communicator that torch had already aborted: an earlier "
            "collective on this rank timed out or failed, or another rank reported an error and the group "
            "was torn down (`Original reason for failure was:` quotes it). It is a consequence; the "
            "cause is the first error in the job's logs."
        ),
        fix=(
            "Find the first error across all ranks (a `Watchdog caught collective operation timeout`, an "
            "NCCL or CUDA error, a Python exception on one rank) and fix that. An aborted group cannot be "
            "used again: let the job end and restart it (torchrun's `--max-restarts`), or "
            "`destroy_process_group()` and create a new one."
        ),
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        sites=(
            "torch/lib/libtorch_cuda.so::nccl-communicator-was-aborted-on-rank",
            "torch/lib/libtorch_cuda.so::nccl-communicator-was-aborted-after-a-previous-error",
            "torch/lib/libtorch_cuda.so::nccl-communicator-encountered-error-set-by-processgroupnccl",
        ),
        read_from=(
            'torch/csrc/distributed/c10d/NCCLUtils.cpp, NCCLComm::checkForNcclError ("was aborted on '
            'rank", "Original reason for failure was"); ProcessGroupNCCL.cpp; '
            'nccl2/ProcessGroupNCCLUtils.cpp, checkAndAbortIfTimedOutOrError ("after a previous error"). '
            "Needs NVIDIA GPUs"
        ),
        rank=-1,
    ),
    Entry(
        id="no_backend_for_device",
        message="RuntimeError: No backend type associated with device type cpu",
        pattern=(
            r"No backend type associated with device type \w+|Tensors must be CUDA and dense"
            r"|ProcessGroupNCCL is only supported with GPUs, no GPUs found|nccl2 requires at least one CUDA device"
        ),
        cause=(
            "A process group runs each collective on the backend registered for the tensor's device, "
            'and this group has none for it: with `backend="nccl"` only CUDA tensors can take part, '
            "so a CPU tensor (a loss or a metric left on the CPU, a model not moved to the rank's GPU) "
            "fails here, and older torch said `Tensors must be CUDA and dense`. On a machine where no "
            "GPU is visible (CPU-only node, `CUDA_VISIBLE_DEVICES` empty) an NCCL group cannot start at "
            "all: `nccl2 requires at least one CUDA device`, older `ProcessGroupNCCL is only supported "
            "with GPUs`."
        ),
        fix=(
            'Move the tensor to the rank\'s GPU before the collective (`t.to(f"cuda:{local_rank}")`), '
            'or give the group a backend for each device: `init_process_group("cpu:gloo,cuda:nccl")` '
            '(or no `backend`, which registers both). On a CPU-only machine use `backend="gloo"`.'
        ),
        sites=(
            "torch/distributed/distributed_c10d.py::_nccl2_device::RuntimeError::nccl2-requires-at-least-one-cuda-device",
            "torch/lib/libtorch_cuda.so::processgroupnccl-is-only-supported-with-gpus-no-gpus-found",
            "torch/lib/libtorch_cpu.so::no-backend-type-associated-with-device-type",
            "torch/lib/libtorch_cuda.so::tensors-must-be-cuda-and-dense",
        ),
        reproduction="""\
import torch
import torch.distributed as dist

if __name__ == "__main__":
    # a group with a backend for CUDA tensors only, as backend="nccl" is (gloo here: no GPU needed)
    dist.init_process_group("cuda:gloo", store=dist.HashStore(), rank=0, world_size=1)
    dist.all_reduce(torch.ones(4))  # a CPU tensor
""",
        fixed="""\
import torch
import torch.distributed as dist

if __name__ == "__main__":
    # a backend for each device; with GPUs: "cpu:gloo,cuda:nccl"
    dist.init_process_group("cpu:gloo,cuda:gloo", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.ones(4)
    dist.all_reduce(t)
    print(t)
    dist.destroy_process_group()
""",
    ),
    Entry(
        id="nccl_error",
        message="NCCL Send failed in all_to_all: remote process exited or there was a network error",
        pattern=(
            r"NCCL (?:Send|Recv|Reduce|Broadcast|AllReduce|AllGather|ReduceScatter|AllToAll|Barrier"
            r"|GroupStart|GroupEnd) failed(?: in (?:batch operation|\w+))?"
            r"|NCCL error in: \S+|Last error: Unknown NCCL Error"
            r"|ncclRemoteError: A call failed possibly due to a network error or a remote process exiting"
        ),
        cause=(
            "An NCCL call that torch made for this collective returned an error. The words after the "
            "colon are NCCL's name for it (`unhandled system error`, `invalid usage`, `remote process "
            "exited or there was a network error`, `unhandled cuda error`) and `NCCL Last Error:` / "
            "`Last error:` NCCL's detail (`Unknown NCCL Error` when NCCL left none); the operation and "
            "collective only say where it surfaced (torch 2.15's nccl2 backend names them, the older "
            "backend prints `NCCL error in: <file>:<line>`)."
        ),
        fix=(
            "Run again with `NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=INIT,NET`) and read the `NCCL WARN` "
            "lines of the first rank that failed. `remote process exited`: read the other ranks' logs "
            "first, one of them died; `system error`: the network or shared memory (see "
            "nccl_system_error); `invalid usage`: two ranks on one GPU or mismatched calls (see "
            "nccl_invalid_usage)."
        ),
        sites=(
            "torch/lib/libtorch_cuda.so::nccl-send-failed-in-all_to_all",
            "torch/lib/libtorch_cuda.so::nccl-recv-failed-in-all_to_all",
            "torch/lib/libtorch_cuda.so::nccl-send-failed-in-all_to_all_v_single",
            "torch/lib/libtorch_cuda.so::nccl-recv-failed-in-all_to_all_v_single",
            "torch/lib/libtorch_cuda.so::nccl-send-failed-in-batch-operation",
            "torch/lib/libtorch_cuda.so::nccl-recv-failed-in-batch-operation",
            "torch/lib/libtorch_cuda.so::nccl-send-failed-in-gather",
            "torch/lib/libtorch_cuda.so::nccl-recv-failed-in-gather",
            "torch/lib/libtorch_cuda.so::nccl-send-failed-in-scatter",
            "torch/lib/libtorch_cuda.so::nccl-recv-failed-in-scatter",
            "torch/lib/libtorch_cuda.so::nccl-broadcast-failed-in-all_gather",
            "torch/lib/libtorch_cuda.so::nccl-reduce-failed-in-reduce_scatter",
            "torch/lib/libtorch_cuda.so::last-error-unknown-nccl-error",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.cpp (scatterImpl, gatherImpl, all_to_all, "
            "all_to_all_v_single, all_gather, batch_op_issue, reduce_scatter) and its NCCLException "
            '("<msg>: <ncclGetErrorString> / NCCL Last Error: <ncclGetLastError>"); '
            "torch/csrc/distributed/c10d/NCCLUtils.cpp, getNcclErrorDetailStr (the older backend); "
            "NCCL's texts: NVIDIA/nccl src/init.cc, ncclGetErrorString. Needs NVIDIA GPUs"
        ),
        rank=-1,
    ),
    Entry(
        id="symm_mem_barrier_timeout",
        message=(
            "[FATAL] SymmetricMemory::barrier: rank 1 failed to send signal to rank 0 on channel 0 after "
            "10000 milliseconds"
        ),
        pattern=(
            r"\[FATAL\] SymmetricMemory::(?:barrier|put_signal|wait_signal): rank \d+ failed to "
            r"(?:send|receive|observe)"
        ),
        cause=(
            "A symmetric-memory `barrier`, `put_signal` or `wait_signal` (torch.distributed._symmetric_memory, "
            "under its fused collectives and async tensor parallelism) waited on the GPU longer than its "
            "timeout for a peer's signal: the peer never ran the matching call (another code path, a crash, "
            "a hang before it). The kernel then traps, so this process's CUDA context is lost and the next "
            "CUDA call fails too."
        ),
        fix=(
            "Make every rank of the group run the same symmetric-memory operations in the same order, on "
            "the same channel; read the named peer rank's log for its own failure first. Give a larger "
            "`timeout_ms` only when a peer is late on purpose."
        ),
        sites=(
            "torch/lib/libtorch_cuda.so::fatal-rank-_-failed-to-send-on-channelafter-lu-milliseconds",
            "torch/lib/libtorch_cuda.so::fatal-rank-_-ed-to-send-on-channelafter-lu-milliseconds",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh, barrier_kernel, "
            "put_signal_kernel, wait_signal_kernel (a printf in a CUDA kernel; the library holds the text "
            'compressed, hence the inventory\'s garbled "[FATAL] ::: rank %d failed to send on channelafter"). '
            "Needs GPUs with peer access"
        ),
    ),
)
