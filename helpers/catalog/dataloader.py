"""Catalog entries: DataLoader workers, pin memory, datasets in workers.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="handle_in_init",
        message="TypeError: cannot pickle '_io.FileIO' object",
        cause=(
            "A spawn or forkserver DataLoader worker receives the Dataset pickled, and a Dataset that opened "
            "a file in `__init__` holds an open file object, which pickle refuses (the type named is "
            "`_io.BufferedReader`, `_io.FileIO` or `_io.TextIOWrapper`, as the file was opened). Spawn is the "
            "default on macOS and Windows, forkserver on Linux from Python 3.14; torch adds `UserWarning: Got "
            "pickle error when attempting to start a worker Process` above it."
        ),
        fix=(
            "Keep the path in `__init__` (`self.path = path; self.file = None`) and open the file in "
            "`__getitem__` on the worker's first read (`if self.file is None: self.file = open(self.path, "
            "'rb')`), so each worker opens its own; or pass `multiprocessing_context='fork'` on Linux, where "
            "the workers inherit the object (then read section 5 on sharing one offset)."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers",
        reproduction="""\
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __init__(self, path):
        self.file = open(path, "rb")  # an open file: a spawn worker cannot receive it

    def __len__(self):
        return 4

    def __getitem__(self, i):
        self.file.seek(i)
        return torch.tensor(self.file.read(1)[0])


if __name__ == "__main__":
    with open("records.bin", "wb") as f:
        f.write(bytes(range(4)))
    loader = DataLoader(
        Records("records.bin"), batch_size=2, num_workers=1, multiprocessing_context=mp.get_context("spawn")
    )
    print([batch.tolist() for batch in loader])
""",
        fixed="""\
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __init__(self, path):
        self.path = path  # keep the path; each worker opens its own file on its first read
        self.file = None

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if self.file is None:
            self.file = open(self.path, "rb")
        self.file.seek(i)
        return torch.tensor(self.file.read(1)[0])


if __name__ == "__main__":
    with open("records.bin", "wb") as f:
        f.write(bytes(range(4)))
    loader = DataLoader(
        Records("records.bin"), batch_size=2, num_workers=1, multiprocessing_context=mp.get_context("spawn")
    )
    print([batch.tolist() for batch in loader])
""",
        pattern=r"(?:TypeError:\s+)?cannot pickle '_io\.\w+' object",
        case="handle_in_init",
    ),
    Entry(
        id="daemonic_worker",
        message="AssertionError: daemonic processes are not allowed to have children",
        cause=(
            "A DataLoader worker is a daemonic process, and CPython's multiprocessing refuses to let a daemon "
            "start a child (`Process.start` asserts it). A `Dataset.__getitem__` that starts a process, a "
            "`multiprocessing.Pool` or a library's process workers fails in the worker (torch re-raises it as "
            "`Caught AssertionError in DataLoader worker process 0`)."
        ),
        fix=(
            "Use threads inside the worker (`concurrent.futures.ThreadPoolExecutor`), raise `num_workers` "
            "instead of nesting pools, or do that work outside the Dataset (in the main process, or before "
            "training). torch 2.15.0's `torch.compile` does not raise it by default (its compile workers "
            "start with `subprocess`)."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children",
        reproduction="""\
import multiprocessing

import torch
from torch.utils.data import DataLoader, Dataset


def square(x):
    return x * x


class Squares(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        with multiprocessing.get_context("fork").Pool(2) as pool:  # a pool inside a worker
            return torch.tensor(pool.map(square, [i, i + 1]))


if __name__ == "__main__":
    loader = DataLoader(
        Squares(), batch_size=2, num_workers=1, multiprocessing_context=multiprocessing.get_context("fork")
    )
    print([batch.tolist() for batch in loader])
""",
        fixed="""\
import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.utils.data import DataLoader, Dataset


def square(x):
    return x * x


class Squares(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        with ThreadPoolExecutor(2) as pool:  # threads: a daemonic worker may start them
            return torch.tensor(list(pool.map(square, [i, i + 1])))


if __name__ == "__main__":
    loader = DataLoader(
        Squares(), batch_size=2, num_workers=1, multiprocessing_context=multiprocessing.get_context("fork")
    )
    print([batch.tolist() for batch in loader])
""",
        case="daemonic_worker",
    ),
    Entry(
        id="inductor_in_daemonic",
        message=(
            "RuntimeError: Inductor async compile process pools are disabled in daemonic multiprocessing "
            "processes."
        ),
        cause=(
            "`torch.compile` ran inside a daemonic process (a DataLoader worker, a `Pool` worker) with "
            "Inductor's compile workers set to a multiprocessing start method "
            "(`TORCHINDUCTOR_WORKER_START=fork` or `spawn`, or `torch._inductor.config.worker_start_method`), "
            "and Inductor needed its process pool: a daemon may not have children. The default, `subprocess`, "
            "starts its pool with `subprocess.Popen` and is not affected."
        ),
        fix=(
            "Compile in the main process (the model, not the Dataset), or leave the start method at its "
            "default: unset `TORCHINDUCTOR_WORKER_START` or set it to `subprocess`, as the message says."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-c-inductor-s-compile-workers",
        read_from=(
            "torch/_inductor/async_compile.py, AsyncCompile.process_pool (torch 2.15.0): raised where "
            "_process_pool_allowed() is false. A CPU compile in a fork DataLoader worker with "
            "TORCHINDUCTOR_WORKER_START=fork ran clean here (55 s, no process pool used): the pool is asked "
            "for by GPU (Triton) kernels, so no Linux CPU prints it"
        ),
        case="daemonic_worker",
    ),
    Entry(
        id="pin_memory_device_deprecated",
        message="UserWarning: pin_memory_device is deprecated, the current accelerator will be used as the device",
        cause=(
            "`DataLoader(pin_memory_device=...)` is deprecated and ignored in torch 2.15.0: with "
            "`pin_memory=True` the loader pins for the current accelerator (`torch.accelerator`). The warning "
            "says which value it ignored (`ignore pin_memory_device='cuda'`)."
        ),
        fix=(
            "Drop `pin_memory_device`; keep `pin_memory=True`, and choose the device with "
            "`torch.accelerator.set_device_index(...)` (or `torch.cuda.set_device`) before the loader "
            "iterates."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-e-three-dataloader-options",
        reproduction="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.arange(4.0))
    loader = DataLoader(data, batch_size=2, pin_memory=True, pin_memory_device="cuda")
    print([batch for (batch,) in loader])
""",
        fixed="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.arange(4.0))
    loader = DataLoader(data, batch_size=2, pin_memory=True)  # the current accelerator pins
    print([batch for (batch,) in loader])
""",
        case="dataloader_option",
    ),
    Entry(
        id="dataloader_worker_exited",
        message="RuntimeError: DataLoader worker (pid(s) 7523) exited unexpectedly",
        cause=(
            "A worker process died without sending an error, and the main process found it dead while waiting "
            "for a batch. This line only says that: the reason is in the exception above it (`The above "
            "exception was the direct cause`), or in the log. `is killed by signal: Killed` is SIGKILL, "
            "almost always the out-of-memory killer (host RAM, not GPU memory: each worker holds its own copy "
            "of what it touches); `Bus error` is a full /dev/shm; `exited unexpectedly with exit code 1` is a "
            "worker that exited (under spawn: often failed to import or unpickle the Dataset, its traceback "
            "printed above). Without a line above (Windows, or a loader iterated off the main thread), it is "
            "any of these."
        ),
        fix=(
            "Read the exception above. For Killed: fewer workers (`num_workers`), a smaller "
            "`prefetch_factor`, keep large data out of the Dataset object (load it lazily, or store it as "
            "NumPy arrays or tensors rather than Python lists), and check `dmesg` for `Out of memory: Killed "
            "process`. For Bus error: a larger /dev/shm (`docker run --shm-size=8g`). For an exit code: rerun "
            "with `num_workers=0` to see the error in the main process."
        ),
        teaches="10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        sites=(
            (
                "torch/utils/data/dataloader.py::_MultiProcessingDataLoaderIter._try_get_data::RuntimeError::dataloader-worker-pid-s-_-exited-unexpectedly"
            ),
        ),
        reproduction="""\
import multiprocessing
import os

import torch
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 0:
            os._exit(0)  # a library that calls exit in the worker: no exception, no signal
        return torch.tensor(i)


if __name__ == "__main__":
    loader = DataLoader(
        Data(), batch_size=2, num_workers=1, multiprocessing_context=multiprocessing.get_context("fork")
    )
    print([batch.tolist() for batch in loader])
""",
        pattern=r"(?:RuntimeError:\s+)?DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly",
        rank=-1,
    ),
    Entry(
        id="dataloader_worker_killed_by_signal",
        message="RuntimeError: DataLoader worker (pid 7523) is killed by signal: Killed.",
        pattern=(
            r"DataLoader worker \(pid \d+\) is killed by signal: (?!Bus error)\w"
            r"|ERROR: Unexpected (?:segmentation fault|floating-point exception) encountered in worker\."
        ),
        cause=(
            "A DataLoader worker process was ended by a signal, which torch names after the signal's "
            "description. `Killed` is SIGKILL, which nothing inside the worker can catch: almost always the "
            "kernel's out-of-memory killer (host memory, not GPU memory: each worker holds its own copy of "
            "what it touches), or a container's memory limit. `Segmentation fault` or `Aborted` is a crash "
            "in native code in the worker (a library that is not safe to use after fork, a bad extension). "
            "`Bus error` is a full /dev/shm, with an entry of its own."
        ),
        fix=(
            "For `Killed`: check `dmesg` or `journalctl -k` for `Out of memory: Killed process`; then fewer "
            "workers (`num_workers`), a smaller `prefetch_factor`, and large data kept out of the Dataset "
            "object (load it lazily, or hold it as NumPy arrays or tensors rather than Python lists, whose "
            "reference counts make fork's shared pages private). For a crash: rerun with `num_workers=0` to "
            "see it in the main process, or try `multiprocessing_context='spawn'`."
        ),
        teaches="10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        sites=("torch/lib/libtorch_python.so::dataloader-worker-pid-_-is-killed-by-signal-_",),
        reproduction="""\
import multiprocessing
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 0:
            os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer does to a worker
        return torch.tensor(i)


if __name__ == "__main__":
    loader = DataLoader(
        Data(), batch_size=2, num_workers=1, multiprocessing_context=multiprocessing.get_context("fork")
    )
    print([batch.tolist() for batch in loader])
""",
    ),
    Entry(
        id="dataloader_worker_exit_code",
        message=(
            "RuntimeError: DataLoader worker (pid 7598) exited unexpectedly with exit code 1. Details are "
            "lost due to multiprocessing. Rerunning with num_workers=0 may give better error trace."
        ),
        cause=(
            "A worker process ended with a non-zero exit code instead of sending an exception to the main "
            "process (an exception raised in `__getitem__` would arrive as `Caught ... in DataLoader worker "
            "process`). Either the worker failed before its loop started (under spawn or forkserver: "
            "importing the main module or unpickling the Dataset; the worker's own traceback is printed above "
            "in the log, e.g. `Can't get attribute` for a Dataset defined in a notebook), or code it ran "
            "exited the process (`sys.exit`, `exit()` in a C library, argparse reading the worker's "
            "arguments)."
        ),
        fix=(
            "Look above in the log for the worker's traceback; rerun with `num_workers=0`, which runs the "
            "same code in the main process and shows the real error. Under spawn, define the Dataset in an "
            "importable module, keep the main guard, and make the Dataset picklable; in Dataset code, raise "
            "an exception instead of calling `sys.exit`."
        ),
        teaches="07_dataloader_workers.ipynb#what-a-spawn-worker-receives",
        sites=(
            (
                "torch/lib/libtorch_python.so::dataloader-worker-pid-_-exited-unexpectedly-with-exit-code-_-details-are-lost-due-to-multiprocessing"
            ),
        ),
        reproduction="""\
import multiprocessing
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 0:
            sys.exit(1)  # a library that exits on an error: SystemExit is not sent to the parent
        return torch.tensor(i)


if __name__ == "__main__":
    loader = DataLoader(
        Data(), batch_size=2, num_workers=1, multiprocessing_context=multiprocessing.get_context("fork")
    )
    print([batch.tolist() for batch in loader])
""",
        pattern=r"DataLoader worker \(pid \d+\) exited unexpectedly with exit code \d+",
    ),
    Entry(
        id="pin_memory_thread_exited",
        message="RuntimeError: Pin memory thread exited unexpectedly",
        cause=(
            "With `pin_memory=True` and an accelerator, a thread of the main process (`pt_data_pin`) takes "
            "each batch from the workers' queue and copies it to pinned memory; this says that thread died. "
            "An error while pinning is passed on as a normal exception, so the thread dies of an error "
            "outside it: receiving a batch from the workers failed (`received 0 items of ancdata` or `Too "
            "many open files` when the file-descriptor limit is reached, a worker killed while sending), or "
            "selecting the device failed; Python prints `Exception in thread ... (_pin_memory_loop)` with the "
            "real error above this line."
        ),
        fix=(
            "Read the thread's traceback above and fix that error (for file descriptors: `ulimit -n 65536`, "
            "or `torch.multiprocessing.set_sharing_strategy('file_system')`); to tell a pinning problem from "
            "a loading one, rerun with `pin_memory=False`."
        ),
        teaches="07_dataloader_workers.ipynb#worker-options-persistent-workers-prefetch-factor-pin-memory-timeout",
        sites=(
            (
                "torch/utils/data/dataloader.py::_MultiProcessingDataLoaderIter._get_data::RuntimeError::pin-memory-thread-exited-unexpectedly"
            ),
        ),
        read_from=(
            "torch/utils/data/dataloader.py, _MultiProcessingDataLoaderIter._get_data, and "
            "torch/utils/data/_utils/pin_memory.py, _pin_memory_loop (torch 2.15.0): the thread starts only "
            "when torch.accelerator.is_available(), so no CPU-only machine prints it"
        ),
        rank=-1,
    ),
    Entry(
        id="dataloader_worker_caught",
        message="RuntimeError: Caught RuntimeError in DataLoader worker process 0.",
        pattern=r"Caught \w+ in (?:DataLoader worker process \d+|pin memory thread for device \d+)\.",
        rank=-2,  # the wrapper: the worker's own error under "Original Traceback" is the cause
        cause=(
            "Not the error itself: code running in a DataLoader worker (the Dataset's `__getitem__` or "
            "`__iter__`, the `collate_fn`, the `worker_init_fn`) raised, and the DataLoader re-raises it in "
            "the main process with the same type and this header. The worker's own traceback follows "
            "under `Original Traceback (most recent call last):`; its last line is the error."
        ),
        fix=(
            "Read the last line under `Original Traceback` and look that message up (`python -m "
            "helpers.explain` with the whole text). To debug it with pdb and full tracebacks, run the "
            "same loader with `num_workers=0`: the code then runs in the main process and raises there "
            "directly."
        ),
        teaches="07_dataloader_workers.ipynb#what-workers-buy-loading-in-parallel-with-training",
        reproduction="""\
from torch.utils.data import DataLoader, Dataset


class Labelled(Dataset):
    def __init__(self):
        self.labels = {0: 1, 1: 0, 2: 1}  # no label for sample 3

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.labels[i]  # KeyError for i == 3, raised in the worker


if __name__ == "__main__":
    print([batch.tolist() for batch in DataLoader(Labelled(), batch_size=2, num_workers=1)])
""",
        fixed="""\
from torch.utils.data import DataLoader, Dataset


class Labelled(Dataset):
    def __init__(self):
        self.labels = {0: 1, 1: 0, 2: 1, 3: 0}  # every sample has its label

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.labels[i]


if __name__ == "__main__":
    print([batch.tolist() for batch in DataLoader(Labelled(), batch_size=2, num_workers=1)])
""",
    ),
    Entry(
        id="collate_ragged_in_worker",
        message="RuntimeError: Trying to resize storage that is not resizable",
        cause=(
            "The samples of one batch have different shapes and the default `collate_fn` stacks them. "
            "In a worker it first allocates the batch in shared memory, sized by the sum of the samples, "
            "then shapes it as the first sample times the batch size; when the first sample is the "
            "largest, that needs more room and shared memory cannot grow. With `num_workers=0` (or a "
            "smaller first sample) the same batch says `stack expects each tensor to be equal size`. "
            "Any tensor in shared memory (`share_memory_()`, one received from another process) "
            "refuses `resize_` with this message."
        ),
        fix=(
            "Make the samples of a batch the same shape: crop or pad in the Dataset, or pass a "
            "`collate_fn` that pads (`torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)`) or "
            "returns a list; `batch_size=1` also avoids stacking. For a shared tensor, allocate the "
            "final size before sharing it."
        ),
        teaches="07_dataloader_workers.ipynb#appendix-worker-memory-tensors-arrays-and-python-objects",
        reproduction="""\
import torch
from torch.utils.data import DataLoader, Dataset


class Sentences(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.ones(4 - i)  # a different length per sample, the first the longest


if __name__ == "__main__":
    print([batch.shape for batch in DataLoader(Sentences(), batch_size=2, num_workers=1)])
""",
        fixed="""\
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset


class Sentences(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.ones(4 - i)


def pad(batch):
    return pad_sequence(batch, batch_first=True)  # pad to the batch's longest sample


if __name__ == "__main__":
    loader = DataLoader(Sentences(), batch_size=2, num_workers=1, collate_fn=pad)
    print([batch.shape for batch in loader])
""",
    ),
    Entry(
        id="dataloader_more_workers_than_cpus",
        message=(
            "UserWarning: This DataLoader will create 2 worker processes in total. Our suggested max number "
            "of worker in current system is 1, which is smaller than what this DataLoader is going to create."
        ),
        pattern=r"This DataLoader will create \d+ worker processes in total\. Our suggested max number of worker",
        cause=(
            "`num_workers` is larger than the CPUs this process may run on, which torch reads from its "
            "CPU affinity (`os.sched_getaffinity`), not from the machine's CPU count. A small number on "
            "a large machine means the process was bound to a few CPUs: `taskset`, a container's or "
            "Slurm's cpuset (`--cpus-per-task`), or an OpenMP setting (`OMP_PROC_BIND`, "
            "`GOMP_CPU_AFFINITY`) that bound the main thread, and with it every worker it starts. Too "
            "many workers on too few CPUs make loading slower, not faster."
        ),
        fix=(
            "`python -m helpers.doctor` shows the affinity before and after `import torch` and what "
            "bound it. Ask the scheduler for more CPUs (`--cpus-per-task`), unset the binding variable, "
            "or lower `num_workers` to the suggested number."
        ),
        teaches="07_dataloader_workers.ipynb#appendix-loading-alone-a-busy-machine-and-a-widget",
        sites=(
            "torch/utils/data/dataloader.py::DataLoader.check_worker_number_rationality::UserWarning::"
            "built-_create_warning_msg-max_num_worker_suggest-self-num_wo",
        ),
        reproduction="""\
import os

import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    os.sched_setaffinity(0, {0})  # bound to one CPU, as taskset, a cpuset or OMP_PROC_BIND can leave it
    loader = DataLoader(torch.arange(8.0), batch_size=4, num_workers=2, multiprocessing_context="fork")
    print([batch.tolist() for batch in loader])
""",
        fixed="""\
import os

import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    os.sched_setaffinity(0, {0})
    workers = len(os.sched_getaffinity(0))  # no more workers than the CPUs this process may use
    loader = DataLoader(torch.arange(8.0), batch_size=4, num_workers=workers, multiprocessing_context="fork")
    print([batch.tolist() for batch in loader])
""",
    ),
    Entry(
        id="caffe2_threadpool_after_fork",
        message="[W pthreadpool-cpp.cc:90] Warning: Leaking Caffe2 thread-pool after fork. (function pthreadpool)",
        pattern=r"Leaking Caffe2 thread-pool after fork",
        rank=-3,  # never the cause of a failure
        versions="torch 1.8 to 1.9.0; 1.9.1 silenced it, and torch 2.15.0's libraries no longer hold the string",
        cause=(
            "Not an error: the parent process had created torch's internal thread pool (caffe2's "
            "pthreadpool) before it forked DataLoader workers; a forked child cannot use the parent's "
            "threads, so the worker abandons ('leaks') its copy of the pool and warns. Loading is not "
            "affected."
        ),
        fix=(
            "Nothing to fix; upgrade torch (1.9.1 and later are silent, pytorch/pytorch#57273). If a job "
            "also fails, the error is elsewhere in the log."
        ),
        read_from="pytorch/pytorch#57273 and caffe2/utils/threadpool/pthreadpool-cpp.cc of torch 1.9.0",
    ),
)
