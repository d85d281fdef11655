"""Catalog entries: Shared memory: tensors between processes, file descriptors, /dev/shm, memory maps, the resource tracker.

Also CPython's named semaphores and ``multiprocessing.shared_memory`` segments, and the resource
tracker that cleans up after them. Data for :mod:`helpers.catalog` (its docstring says what each
field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

_CPYTHON = "multiprocessing/"  # the inventory's keys of CPython's multiprocessing start so

_FD_LIMIT_CAUSE = (
    "Under the `file_descriptor` sharing strategy (Linux's default) every shared CPU storage is one "
    "open file descriptor in each process that holds it, and the process may open only `ulimit -n` "
    "of them (often 1,024)."
)
_FD_LIMIT_FIX = (
    "Hold fewer shared storages: `clone()` what you keep from a Queue or a DataLoader (or stack "
    "samples into one tensor per batch); raise the limit (`ulimit -n 65536` in the shell, or "
    "`resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))` at the start of every process); or "
    '`torch.multiprocessing.set_sharing_strategy("file_system")` in every process (no descriptor '
    "per storage, but a crash can leave files in `/dev/shm`)."
)

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="received_0_items_of_ancdata",
        message="RuntimeError: received 0 items of ancdata",
        cause=(
            "A process receiving shared tensors (from a torch Queue, a Pipe, DataLoader workers) had no "
            "file descriptor left for the next one: the kernel dropped the descriptor sent with it. "
            + _FD_LIMIT_CAUSE
            + " A consumer that keeps what it receives (a list of batches, a replay buffer) reaches it."
        ),
        fix=_FD_LIMIT_FIX,
        sites=(_CPYTHON + "reduction.py::recvfds::RuntimeError::received-_-items-of-ancdata",),
        reproduction="""\
import resource

import torch
import torch.multiprocessing as mp


def produce(queue, done, count):
    for _ in range(count):
        queue.put(torch.zeros(1))  # a shared storage each: a file descriptor each in the receiver
    done.wait(60)  # alive until the consumer is done: it fetches each descriptor from this process


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=produce, args=(queue, done, 200))
    child.start()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    try:
        kept = [queue.get(timeout=60) for _ in range(200)]  # a consumer that keeps what it receives
    finally:
        done.set()
        child.join(timeout=60)
""",
        fixed="""\
import resource

import torch
import torch.multiprocessing as mp


def produce(queue, done, count):
    for _ in range(count):
        queue.put(torch.zeros(1))
    done.wait(60)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=produce, args=(queue, done, 200))
    child.start()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    try:
        kept = [queue.get(timeout=60).clone() for _ in range(200)]  # a copy: the shared one is freed
    finally:
        done.set()
        child.join(timeout=60)
    print(len(kept), "kept")
""",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="too_many_open_files_dataloader",
        message="RuntimeError: Too many open files. Communication with the workers is no longer possible.",
        pattern=(
            r"Too many open files\. Communication with the workers is no longer possible\."
            r"|OSError: \[Errno 24\] Too many open files"  # the same limit met in multiprocessing itself
        ),
        cause=(
            "A DataLoader's main process ran out of file descriptors while receiving a batch from its "
            "workers. "
            + _FD_LIMIT_CAUSE
            + " Batches kept alive (appended to a list, held by a cache or a metric) keep theirs open. "
            "The message goes on with two of the fixes."
        ),
        fix=_FD_LIMIT_FIX,
        sites=(
            "torch/utils/data/dataloader.py::_MultiProcessingDataLoaderIter._try_get_data::RuntimeError::"
            "too-many-open-files-communication-with-the-workers-is-no-lon",
        ),
        reproduction="""\
import resource

import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(torch.zeros(400, 1), batch_size=1, num_workers=2, multiprocessing_context="fork")
    batches = iter(loader)  # the workers start with the usual limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    kept = list(batches)  # every batch kept: a shared storage, a file descriptor each
""",
        fixed="""\
import resource

import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(torch.zeros(400, 1), batch_size=1, num_workers=2, multiprocessing_context="fork")
    batches = iter(loader)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    kept = [batch.clone() for batch in batches]  # copies in ordinary memory: each batch is freed
    print(len(kept), "batches kept")
""",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="unable_to_open_shared_memory_object",
        message=(
            "RuntimeError: unable to open shared memory object </torch_4242_1234_60> in read-write mode: "
            "Too many open files (24)"
        ),
        cause=(
            "The sending side of the same limit: `share_memory_()`, or a Queue's `put` of a tensor not "
            "yet shared, creates a file in `/dev/shm` and keeps it open, and the process has no file "
            "descriptor left. " + _FD_LIMIT_CAUSE
        ),
        fix=_FD_LIMIT_FIX,
        sites=("torch/lib/libtorch_cpu.so::unable-to-open-shared-memory-object",),
        reproduction="""\
import resource

import torch

if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    kept = [torch.zeros(1).share_memory_() for _ in range(100)]  # a file descriptor per storage
""",
        fixed="""\
import resource

import torch
import torch.multiprocessing as mp

if __name__ == "__main__":
    mp.set_sharing_strategy("file_system")  # a name per storage, no descriptor kept open
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    kept = [torch.zeros(1).share_memory_() for _ in range(100)]
    print(len(kept), "shared storages")
""",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="shared_fd_dup_failed",
        message="RuntimeError: could not duplicate a shared memory file descriptor",
        cause=(
            "A process that received a shared tensor under the `file_descriptor` strategy could not "
            "`dup` the descriptor it got for the storage, because it had none left: the same limit as "
            "`received 0 items of ancdata`, met one step later (another thread took the last "
            "descriptor in between). " + _FD_LIMIT_CAUSE
        ),
        fix=_FD_LIMIT_FIX,
        sites=("torch/lib/libtorch_python.so::could-not-duplicate-a-shared-memory-file-descriptor",),
        read_from=(
            "torch/csrc/StorageSharing.cpp (THPStorage_newSharedFd), read as a string from the installed "
            "libtorch_python.so (torch 2.15.0): receiving a storage needs as many free descriptors as "
            "duplicating it, so one thread alone meets `received 0 items of ancdata` first; only a race "
            "with another thread prints this"
        ),
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
    ),
    Entry(
        id="shm_full",
        message="RuntimeError: unable to allocate shared memory(shm) for file",
        cause=(
            "`/dev/shm` is full: torch reserves a shared storage's bytes there (`posix_fallocate`) when a "
            "DataLoader worker makes a batch or a tensor is shared, and the file system has no room. "
            "Docker gives a container 64 MB of `/dev/shm` by default. From torch 2.13 the message ends "
            "`No space left on device (28)`; 2.11 named a stale errno there. Older torch, and the "
            "allocator's other path in the same library, say `unable to write to file </torch_...>`."
        ),
        fix=(
            "Give `/dev/shm` room: `docker run --shm-size=8g` (or `--ipc=host`); in Kubernetes an "
            "`emptyDir` with `medium: Memory` mounted on `/dev/shm` (it counts against the container's "
            "memory limit). Or keep fewer bytes in flight: smaller batches, fewer workers, a lower "
            "`prefetch_factor`; `num_workers=0` confirms the cause."
        ),
        pattern=(
            r"(?:RuntimeError:\s+)?unable\s+to\s+allocate\s+shared\s+memory\(shm\)\s+for\s+file"
            r"|unable to write to file </torch_[^>\n]*>"
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::unable-to-allocate-shared-memory-shm-for-file",
            "torch/lib/libtorch_cpu.so::unable-to-write-to-file",
        ),
        reproduction="""\
import subprocess
import sys

SHARE_2_MIB = "import torch; torch.zeros(2**19).share_memory_()"
TINY_SHM = 'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$0" -c "$1"'

if __name__ == "__main__":
    # a private mount namespace whose /dev/shm holds 1 MiB (a user namespace: no root needed where
    # the kernel allows them); this machine's /dev/shm is not touched
    command = [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        TINY_SHM,
        sys.executable,
        SHARE_2_MIB,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        print("no unshare command")
        sys.exit(77)
    if done.stderr.startswith(("unshare:", "mount:")):  # user namespaces refused (a container's seccomp)
        print(done.stderr)
        sys.exit(77)
    print(done.stderr)
""",
        teaches="08_debugging_and_pitfalls.ipynb#a-full-dev-shm",
        case="shm_full",
    ),
    Entry(
        id="dataloader_bus_error",
        message="RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
        pattern=(
            r"DataLoader worker \(pid \d+\) is killed by signal: Bus error\."
            r"|ERROR: Unexpected bus error encountered in worker\. This might be caused by insufficient shared memory"
        ),
        cause=(
            "A DataLoader worker died of SIGBUS, almost always by writing a batch into a full `/dev/shm`: "
            "torch releases without PR #161910 only set the shared file's size, and the kernel found no "
            "page for a write. The worker prints `ERROR: Unexpected bus error encountered in worker` "
            "first. Newer torch reserves the memory first and raises `unable to allocate shared "
            "memory(shm)` instead."
        ),
        fix=(
            "The fixes of a full `/dev/shm`: a larger one (`docker run --shm-size=8g` or `--ipc=host`, a "
            "memory-backed `emptyDir` in Kubernetes), or fewer bytes in flight (smaller batches, fewer "
            "workers, a lower `prefetch_factor`); a newer torch names the cause."
        ),
        sites=(
            "torch/lib/libtorch_python.so::error-unexpected-bus-error-encountered-in-worker-this-might-be-"
            "caused-by-insufficient-shared-memory-",
        ),
        reproduction="""\
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset


class WritesIntoAFullShm(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        os.kill(os.getpid(), signal.SIGBUS)  # what a write into a full /dev/shm did before PR #161910
        return torch.zeros(1)


if __name__ == "__main__":
    next(iter(DataLoader(WritesIntoAFullShm(), num_workers=1, multiprocessing_context="fork")))
""",
        teaches="08_debugging_and_pitfalls.ipynb#appendix-c-the-bus-error-of-older-torch",
        case="shm_full",
    ),
    Entry(
        id="share_filename_cpu_only",
        message="RuntimeError: _share_filename_: only available on CPU",
        cause=(
            "A tensor on a device other than the CPU and CUDA (MPS on macOS, most often) was pickled for "
            "another process: a Dataset or an argument holding MPS tensors, sent to a spawn worker as it "
            "starts, or put on a Queue. macOS shares by file name only, and that is for CPU storages "
            "(on Linux the same tensor meets `_share_fd_: only available on CPU`)."
        ),
        fix=(
            "Keep tensors on the CPU until they reach the worker (Dataset, arguments, queues), and move "
            'each batch to the device in the worker or the training loop (`batch.to("mps")`).'
        ),
        read_from=(
            "torch/csrc/StorageSharing.cpp, read as a string from the installed libtorch_python.so "
            "(torch 2.15.0); needs a non-CPU, non-CUDA device (MPS on macOS), which a Linux CPU lacks"
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        case="other_platform",
    ),
    Entry(
        id="map_count",
        message="RuntimeError: unable to mmap 4 bytes from file </torch_4242_1234_43>: Cannot allocate memory (12)",
        cause=(
            "The process holds as many memory mappings as Linux allows (`vm.max_map_count`: 65,530 by "
            "the kernel's default; Fedora 39+ and Ubuntu 24.04+ ship 1,048,576), with memory to spare. "
            "Every shared storage is one mapping in each process that holds it, so a consumer keeping "
            "many small shared tensors (a replay buffer of single samples) reaches the cap."
        ),
        fix=(
            "Fewer, larger storages: stack samples into one tensor per batch (`torch.stack`), copy "
            "(`clone()`) what you keep, release what you no longer use; or raise the cap as root "
            "(`sysctl -w vm.max_map_count=262144`). Compare `wc -l /proc/PID/maps` with the sysctl."
        ),
        reproduction="""\
import ctypes
import mmap
from pathlib import Path

import torch


def fill_map_table(leave):
    # one-page mappings, reserved and never touched (no memory), until `leave` entries remain
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    pairs = (limit - len(Path("/proc/self/maps").read_text().splitlines()) - leave) // 2
    base = libc.mmap(None, 2 * pairs * mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE, 0x22 | 0x4000, -1, 0)
    for i in range(pairs):  # every other page read-only: the kernel cannot merge them into one
        libc.mprotect(base + 2 * i * mmap.PAGESIZE, mmap.PAGESIZE, mmap.PROT_READ)


if __name__ == "__main__":
    fill_map_table(leave=40)  # this process's table nearly full, as after many shared storages
    kept = []
    try:
        for _ in range(80):
            kept.append(torch.zeros(1).share_memory_())  # a mapping per storage
    except RuntimeError as error:  # torch made the file, then could not map it: remove it
        Path("/dev/shm", str(error).split("</", 1)[1].split(">", 1)[0]).unlink(missing_ok=True)
        raise
""",
        teaches="13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count",
        case="map_count",
    ),
    Entry(
        id="sem_open_missing",
        message=(
            "ImportError: This platform lacks a functioning sem_open implementation, therefore, the "
            "required synchronization primitives needed will not function, see issue 3770."
        ),
        cause=(
            "This Python was built without working POSIX named semaphores (Android and Termux, some "
            "embedded, BSD or WebAssembly builds), so `multiprocessing.synchronize` cannot be imported: "
            "every Lock, Queue, Pool, Manager and DataLoader with workers needs it. On Linux without a "
            "usable `/dev/shm` (AWS Lambda, for one) the import works and making a Lock fails instead "
            "(`OSError: [Errno 38] Function not implemented` on Lambda)."
        ),
        fix=(
            "Run without process-based parallelism there: `DataLoader(num_workers=0)`, threads "
            "(`concurrent.futures.ThreadPoolExecutor`, `multiprocessing.dummy`); or use a Python built "
            "with `sem_open`. Where `/dev/shm` is only missing, mount a tmpfs there."
        ),
        sites=(
            _CPYTHON + "synchronize.py::<module>::ImportError::"
            "this-platform-lacks-a-functioning-sem_open-implementation-th",
        ),
        read_from=(
            "CPython's Lib/multiprocessing/synchronize.py (its import of _multiprocessing.SemLock; 3.8 "
            "to 3.13): printed by Python builds without sem_open, which no Linux CPython is"
        ),
    ),
    Entry(
        id="semaphore_name_exhausted",
        message="FileExistsError: cannot find name for semaphore",
        cause=(
            "Making a Lock, Semaphore, Event or Queue, multiprocessing tried 100 random semaphore names "
            "and `sem_open` reported each as existing. On a working system that does not happen (the "
            "names are random; a full `/dev/shm` fails with `[Errno 28] No space left on device`): the "
            "platform's `sem_open` answers 'exists' wrongly, as sandboxes and libraries that emulate "
            "POSIX semaphores have done."
        ),
        fix=(
            "Check `/dev/shm` (mounted, writable, `ls /dev/shm/sem.*` for thousands of leftovers from "
            "killed jobs, removable once they are gone), and the sandbox or emulation layer the job runs "
            "in; without a working `sem_open`, use threads or `num_workers=0`."
        ),
        sites=(
            _CPYTHON + "synchronize.py::SemLock.__init__::FileExistsError::cannot-find-name-for-semaphore",
        ),
        read_from=(
            "CPython's Lib/multiprocessing/synchronize.py, SemLock.__init__ (3.8 to 3.13): it needs a "
            "sem_open that answers EEXIST for fresh random names, which a working Linux never does"
        ),
    ),
    Entry(
        id="shared_memory_exists",
        message="FileExistsError: [Errno 17] File exists: '/train_batch'",
        pattern=r"FileExistsError:\s+\[(?:Errno 17|WinError 183)\] File exists: '/?[\w.-]+'",
        cause=(
            "`SharedMemory(name=..., create=True)` with a name that already exists: a segment left by a "
            "run that crashed or was killed before `unlink()`, another job using the same name, or two "
            "processes that both create it. On Linux the segment is the file `/dev/shm/<name>` and stays "
            "until it is unlinked or the machine reboots."
        ),
        fix=(
            "Create with `name=None` (a random name) and pass `shm.name` to the other processes; let one "
            "process create and `unlink()` (in a `finally`), the others attach with `create=False`. "
            "Remove a leftover with `SharedMemory(name).unlink()` or `rm /dev/shm/<name>` once nothing "
            "uses it."
        ),
        sites=(_CPYTHON + "shared_memory.py::SharedMemory.__init__::FileExistsError::built-errno-eexist",),
        reproduction="""\
from multiprocessing import shared_memory

if __name__ == "__main__":
    first = shared_memory.SharedMemory(name="train_batch", create=True, size=1024)  # an earlier run's
    try:
        second = shared_memory.SharedMemory(name="train_batch", create=True, size=1024)
    finally:
        first.close()
        first.unlink()
""",
        fixed="""\
from multiprocessing import shared_memory

if __name__ == "__main__":
    first = shared_memory.SharedMemory(create=True, size=1024)  # a random, free name
    try:
        second = shared_memory.SharedMemory(name=first.name)  # others attach to it by that name
        second.close()
        print("attached to", first.name)
    finally:
        first.close()
        first.unlink()
""",
        teaches="08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go",
    ),
    Entry(
        id="resource_tracker_leaked",
        message=(
            "UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up "
            "at shutdown"
        ),
        cause=(
            "At the end of a program, multiprocessing's resource tracker found `SharedMemory` segments or "
            "named semaphores that were created and never unlinked, and removes them now. A process "
            "exited or was killed (SIGKILL, `os._exit`, a crash) before `unlink()`; or, up to Python "
            "3.12, a process that only attached to a segment (`SharedMemory(name)`) registered it too, "
            "so its tracker removes a segment that others still use."
        ),
        fix=(
            "The process that creates a segment unlinks it once every user is done (`try/finally`); "
            "attaching processes only `close()`, and on Python 3.13+ attach with `track=False`. Let "
            "processes end normally (join them) so that their Locks and Queues clean up."
        ),
        pattern=r"resource_tracker: There appear to be \d+ leaked \w+ objects to clean up at shutdown",
        sites=(
            _CPYTHON + "resource_tracker.py::main::UserWarning::"
            "resource_tracker-there-appear-to-be-_-leaked-_-objects-to-cl",
        ),
        reproduction='''\
import subprocess
import sys

CREATES_AND_EXITS = """
from multiprocessing import shared_memory
segment = shared_memory.SharedMemory(create=True, size=1024)
segment.close()  # closed, never unlinked
"""

if __name__ == "__main__":
    # its resource tracker writes the warning to stderr as it exits, after the program
    print(
        subprocess.run(
            [sys.executable, "-c", CREATES_AND_EXITS], capture_output=True, text=True, timeout=60
        ).stderr
    )
''',
        fixed='''\
import subprocess
import sys

CREATES_AND_UNLINKS = """
from multiprocessing import shared_memory
segment = shared_memory.SharedMemory(create=True, size=1024)
try:
    segment.buf[0] = 1  # the work
finally:
    segment.close()
    segment.unlink()  # the creator removes it
"""

if __name__ == "__main__":
    print(
        subprocess.run(
            [sys.executable, "-c", CREATES_AND_UNLINKS], capture_output=True, text=True, timeout=60
        ).stderr
    )
''',
        teaches="08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go",
    ),
    Entry(
        id="resource_tracker_cleanup_failed",
        message=(
            "UserWarning: resource_tracker: '/psm_4242abcd': [Errno 2] No such file or directory: "
            "'/psm_4242abcd'"
        ),
        pattern=(  # with the "leaked" warning it follows, when both are there: the more specific of the two
            r"(?:resource_tracker: There appear to be \d+ leaked \w+ objects to clean up at shutdown.*\n"
            r"(?:.*\n){0,4}?.*)?resource_tracker: '[^']+': \[Errno \d+\].*"
        ),
        cause=(
            "At shutdown the resource tracker tried to remove a segment or semaphore that it believed "
            "leaked (the `leaked ... objects` warning above it), and failed: another process had removed "
            "it already. Two processes each think they own the segment: typically one that only "
            "attached unlinked it, or on Python up to 3.12 an unrelated process's tracker removed it "
            "when that process exited."
        ),
        fix=(
            "Exactly one process unlinks a segment: the one that created it, after the others are done; "
            "the others only `close()`. On Python 3.13+ attach with `SharedMemory(name, track=False)`; "
            "before, an attaching process outside the creator's process tree can call "
            '`resource_tracker.unregister(shm._name, "shared_memory")`.'
        ),
        sites=(_CPYTHON + "resource_tracker.py::main::UserWarning::resource_tracker-_-_",),
        reproduction='''\
import subprocess
import sys

CREATOR = """
import subprocess, sys
from multiprocessing import shared_memory
segment = shared_memory.SharedMemory(create=True, size=1024)
other = "from multiprocessing import shared_memory as s; s.SharedMemory(name=%r).unlink()"
subprocess.run([sys.executable, "-c", other % segment.name], timeout=60)  # another program removes it
segment.close()  # and the creator, thinking the other owns it, does not unlink
"""

if __name__ == "__main__":
    print(subprocess.run([sys.executable, "-c", CREATOR], capture_output=True, text=True, timeout=120).stderr)
''',
        teaches="08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go",
    ),
    Entry(
        id="resource_tracker_died",
        message="UserWarning: resource_tracker: process died unexpectedly, relaunching.  Some resources might leak.",
        cause=(
            "multiprocessing's resource tracker, a helper process that removes leaked shared memory "
            "segments and semaphores, was found dead when the program registered a new one, and a new "
            "tracker was started: what the old one tracked is no longer cleaned up. Something killed it: "
            "a `kill -9` or OOM kill aimed at the job's processes, a scheduler or a test runner killing "
            "the process group, or code that closes every inherited file descriptor."
        ),
        fix=(
            "Stop jobs so that the tracker outlives them: terminate the main process (SIGTERM, SIGINT), "
            "not the whole group with SIGKILL, and let it join its children. Check `/dev/shm` for "
            "segments it left (`psm_*`, `sem.*`) and remove those no process uses."
        ),
        sites=(
            _CPYTHON + "resource_tracker.py::ResourceTracker.ensure_running::UserWarning::"
            "resource_tracker-process-died-unexpectedly-relaunching-some-",
        ),
        reproduction="""\
import os
import signal
import time
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

if __name__ == "__main__":
    resource_tracker.ensure_running()  # what the first Queue, Lock or segment of a program does
    tracker = int(Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()[0])
    os.kill(tracker, signal.SIGKILL)  # as a kill -9 of the job's processes does
    time.sleep(0.5)
    segment = shared_memory.SharedMemory(create=True, size=1024)  # registers it: finds the tracker dead
    segment.close()
    segment.unlink()
""",
        teaches="08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go",
    ),
    Entry(
        id="fd_acknowledgement_missing",
        message="RuntimeError: did not receive acknowledgement of fd",
        cause=(
            "macOS only: multiprocessing sent a file descriptor to another process (a shared tensor, a "
            "socket, a connection) and waited for the receiver to confirm it; the receiver died, closed "
            "the connection, or could not take the descriptor because it had reached its open-files "
            "limit (macOS's default `ulimit -n` is 256)."
        ),
        fix=(
            "Raise the receiver's limit (`ulimit -n 4096`), keep fewer received tensors or sockets alive "
            "(`clone()` what you keep), and check that the receiver is alive (its exit code, its "
            "traceback)."
        ),
        sites=(_CPYTHON + "reduction.py::sendfds::RuntimeError::did-not-receive-acknowledgement-of-fd",),
        read_from=(
            "CPython's Lib/multiprocessing/reduction.py, sendfds (3.8 to 3.13): the acknowledgement is "
            "asked for only on macOS (ACKNOWLEDGE = sys.platform == 'darwin')"
        ),
    ),
    Entry(
        id="producer_exited_before_get",
        message="ConnectionRefusedError: [Errno 111] Connection refused",
        # The receiver's traceback ends in one of two ways, by timing: the sender's socket is still a
        # file (Connection refused), or the sender's exit removed its folder (No such file).
        pattern=(
            r"(?:ConnectionRefusedError:\s+)?\[Errno 111\] Connection refused"
            r"|in get_connection\n(?:.*\n){1,10}?FileNotFoundError: \[Errno 2\] No such file or directory"
        ),
        cause=(
            "A process received a tensor from another (through a Queue, a Pipe, a DataLoader worker's "
            "batch) after the sender had exited. Only a handle crosses: under the `file_descriptor` "
            "sharing strategy (Linux's default) the receiver, while it unpickles, asks the sender's "
            "process for the shared memory's file descriptor (`rebuild_storage_fd`, CPython's "
            "`resource_sharer`), and nothing answers on its socket any more. Which error it gets depends "
            "on timing: `FileNotFoundError: [Errno 2]` under `get_connection` when the sender's exit "
            "removed the folder of its socket (`/tmp/pymp-...`), `Connection refused` when the sender "
            "shared the tensor while it was already exiting, too late for that clean-up (the folder is "
            "left behind). The same `Connection refused` from `multiprocessing.managers` means the "
            "Manager's server process has exited."
        ),
        fix=(
            "Keep the producer running, and its tensor alive, until the consumer is done with it: the "
            "producer waits on an `Event` the consumer sets after it has used (or cloned) the tensor, "
            "and is joined after that. Sending a copy of the data (a NumPy array, `tensor.tolist()`), or "
            "`set_sharing_strategy('file_system')`, also outlives the sender, at a cost."
        ),
        teaches="03_queues_and_pipes.ipynb#keep-the-producer-alive",
        reproduction="""\
import torch
import torch.multiprocessing as mp


def producer(queue):
    queue.put(torch.ones(1000))  # only a handle crosses; the data stays in this process's shared memory


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=producer, args=(queue,))
    p.start()
    p.join(60)  # the producer has exited before the consumer receives its tensor
    print(queue.get(timeout=60).sum())
""",
        fixed="""\
import torch
import torch.multiprocessing as mp


def producer(queue, done):
    queue.put(torch.ones(1000))
    done.wait(60)  # keep running until the consumer is done with the tensor


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=producer, args=(queue, done))
    p.start()
    tensor = queue.get(timeout=60)
    print(tensor.sum())
    del tensor  # done with it
    done.set()
    p.join(60)
""",
    ),
)
