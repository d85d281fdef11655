"""Catalog entries: CUDA and processes: fork after CUDA, CUDA IPC, NCCL set-up.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="cuda_in_fork",
        message=(
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
            "multiprocessing, you must use the 'spawn' start method"
        ),
        cause=(
            "The parent process initialized CUDA before it forked (any CUDA call counts, even "
            "`torch.cuda.is_available()`, which starts the driver), and the forked "
            "child then made its own CUDA call. A CUDA context cannot be copied into a forked child, so "
            "torch marks every child forked after CUDA started as unable to use CUDA (also in DataLoader "
            "workers and `mp.Pool`, which fork by default on Linux before Python 3.14)."
        ),
        fix=(
            'Start children with spawn (or forkserver): `mp.get_context("spawn").Process(...)`, '
            '`mp.spawn(...)`, `DataLoader(..., multiprocessing_context="spawn")`. Or keep every CUDA '
            "call out of the parent until the children are started (check availability inside the child, "
            "or set `PYTORCH_NVML_BASED_CUDA_CHECK=1` so `is_available()` does not initialize CUDA)."
        ),
        teaches="04_fork_and_cuda.ipynb#fork-versus-cuda",
        reproduction="""\
import torch
import torch.multiprocessing as mp


def worker():
    x = torch.zeros(1, device="cuda")  # the child's first CUDA call
    print("worker uses", x.device)


if __name__ == "__main__":
    # Any CUDA call in the parent before the fork counts, even is_available() (it initializes the
    # driver); this torch must be a CUDA build (a +cpu wheel has no CUDA to initialize).
    print("CUDA available in the parent:", torch.cuda.is_available())
    ctx = mp.get_context("fork")
    p = ctx.Process(target=worker)
    p.start()
    p.join(timeout=60)
    print("worker exit code:", p.exitcode)
    raise SystemExit(p.exitcode)
""",
        fixed="""\
import torch
import torch.multiprocessing as mp


def worker():
    x = torch.zeros(1, device="cuda" if torch.cuda.is_available() else "cpu")  # CPU on a machine without GPU
    print("worker uses", x.device)


if __name__ == "__main__":
    # Any CUDA call in the parent before the fork counts, even is_available() (it initializes the
    # driver); this torch must be a CUDA build (a +cpu wheel has no CUDA to initialize).
    print("CUDA available in the parent:", torch.cuda.is_available())
    ctx = mp.get_context("spawn")  # the fix: a fresh interpreter, which initializes CUDA itself
    p = ctx.Process(target=worker)
    p.start()
    p.join(timeout=60)
    print("worker exit code:", p.exitcode)
    raise SystemExit(p.exitcode)
""",
        case="cuda_in_fork",
    ),
    Entry(
        id="cuda_resent",
        message=(
            "Attempted to send CUDA tensor received from another process; this is not currently supported. "
            "Consider cloning before sending."
        ),
        cause=(
            "A process tried to pass on a CUDA tensor that it had itself received from another process. "
            "torch shares a CUDA tensor as a CUDA IPC handle to memory that the allocating process keeps "
            "alive and reference-counts, and it refuses to share again a storage that arrived that way "
            "(its `received_cuda` flag). A `Manager().Queue()` does this "
            "implicitly: its server process receives the tensor and sends it on (the error then comes "
            "back as a `RemoteError`)."
        ),
        fix=(
            "Send CUDA tensors with a `torch.multiprocessing` Queue or Pipe made by the process that "
            "allocated them, not through a Manager; in a relay process, `t.clone()` (a copy it owns) "
            "before sending it on, or move it to the CPU first."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors",
        read_from=(
            "torch/csrc/StorageSharing.cpp, THPStorage_shareCuda (refuses a storage whose received_cuda() "
            "is set). Needs a CUDA device"
        ),
        case="cuda_resent",
    ),
    Entry(
        id="pidfd_getfd_unsupported",
        message=(
            "The kernel on this machine does not support the pidfd_getfd syscall needed to use IPC for "
            "CUDA tensors when expandable_segments:True is set."
        ),
        pattern=(
            r"The kernel on this machine does not support the pidfd_(?:getfd|open) syscall needed to use "
            r"IPC for CUDA tensors"
        ),
        cause=(
            "A process received a CUDA tensor allocated with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`. "
            "Such memory is shared as file descriptors that the receiver copies out of the sender with the "
            "`pidfd_open` and `pidfd_getfd` system calls, and this kernel has not got them (ENOSYS: "
            "`pidfd_getfd` came with Linux 5.6, `pidfd_open` with 5.3)."
        ),
        fix=(
            "Turn expandable segments off in the sending process: "
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False` (or unset it), or "
            '`torch.cuda.memory._set_allocator_settings("expandable_segments:False")` before the shared '
            "tensors are allocated; or run on a kernel 5.6 or newer."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        read_from=(
            "c10/cuda/CUDACachingAllocator.cpp, ExpandableSegment::fromShared (pidfd_open, then "
            "pidfd_getfd for each handle; ENOSYS). Needs a CUDA device"
        ),
        case="cuda_ipc_container",
    ),
    Entry(
        id="pidfd_getfd_eperm",
        message="RuntimeError: pidfd_getfd: Operation not permitted",
        cause=(
            "A process received a CUDA tensor allocated with `expandable_segments:True`, whose memory is "
            "shared as file descriptors the receiver copies out of the sender with `pidfd_getfd`. The "
            "kernel refused (EPERM): taking another process's descriptors needs ptrace rights over it, "
            "which Yama (`/proc/sys/kernel/yama/ptrace_scope` 1 or more) or a container without "
            "`CAP_SYS_PTRACE` denies."
        ),
        fix=(
            "Turn expandable segments off in the sending process "
            "(`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False`); or allow it: `docker run --cap-add "
            "SYS_PTRACE`, or `sysctl kernel.yama.ptrace_scope=0` on a machine you control."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        read_from=(
            'c10/cuda/CUDACachingAllocator.cpp, ExpandableSegment::fromShared ("pidfd_getfd: " and the '
            "errno text when pidfd_getfd fails other than ENOSYS). Needs a CUDA device"
        ),
        case="cuda_ipc_container",
    ),
    Entry(
        id="nccl_init_failed",
        message="torch.distributed.DistBackendError: Failed to initialize NCCL communicator",
        pattern=(
            r"Failed to initialize NCCL communicator|Failed to get NCCL unique ID"
            r"|Invalid NCCL unique ID size|Failed to query NCCL-assigned rank"
            r"|NCCL timeout when waiting for nonblocking call to become successful"
            r"|NCCL communicator not initialized\.|NCCL User Rank failed"
            r"|is setting up NCCL communicator and retrieving ncclUniqueId from \[\d+\]"
        ),
        cause=(
            "Setting up the NCCL communicator of a process group failed (on the first collective, or at "
            "`init_process_group` with `device_id=`): the ranks exchange NCCL's unique ID through the "
            "store, then every rank must call ncclCommInitRank. A rank that never gets there (crashed, "
            "still loading, in another group), ranks that cannot reach each other (wrong network "
            "interface, firewall), a stale or foreign value under the store key, or NCCL failing on this "
            "GPU stop it; NCCL's own error follows the message."
        ),
        fix=(
            "Run with `NCCL_DEBUG=INFO` and read the `NCCL WARN` lines of every rank; make sure every rank "
            "reaches the same `init_process_group`/`new_group` calls, set `NCCL_SOCKET_IFNAME` to the "
            "interface the nodes share, use one `MASTER_PORT` per job, and the same torch/NCCL version on "
            'every node. Pass `device_id=torch.device("cuda", local_rank)` to `init_process_group` to '
            "fail at start-up instead of at the first collective."
        ),
        sites=(
            "torch/lib/libtorch_cuda.so::failed-to-initialize-nccl-communicator",
            "torch/lib/libtorch_cuda.so::failed-to-initialize-nccl-communicator#2",
            "torch/lib/libtorch_cuda.so::failed-to-get-nccl-unique-id",
            "torch/lib/libtorch_cuda.so::invalid-nccl-unique-id-size",
            "torch/lib/libtorch_cuda.so::failed-to-query-nccl-assigned-rank",
            "torch/lib/libtorch_cuda.so::nccl-timeout-when-waiting-for-nonblocking-call-to-become-successful",
            "torch/lib/libtorch_cuda.so::nccl-communicator-not-initialized",
            "torch/lib/libtorch_cuda.so::nccl-user-rank-failed",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/nccl2/NCCLBootstrap.cpp, exchangeUniqueIds and createNcclComm; "
            'nccl2/ProcessGroupNCCL.cpp, initNcclResources ("NCCL User Rank failed"); '
            'torch/csrc/distributed/c10d/NCCLUtils.cpp (split/shrink, "NCCL-assigned rank"); '
            "torch/csrc/cuda/nccl.cpp (TORCH_NCCL_USE_COMM_NONBLOCKING, TORCH_NCCL_NONBLOCKING_TIMEOUT). "
            "Needs NVIDIA GPUs"
        ),
    ),
    Entry(
        id="nccl_device_unknown",
        message=(
            "torch.distributed.DistBackendError: Not able to create/get the NCCL Communicator since the "
            "GPU devices are not known"
        ),
        cause=(
            "ProcessGroupNCCL names a communicator after the GPUs of the tensors passed to the collective "
            "and found none: the collective got an empty list of tensors (in older torch, whose NCCL "
            "collectives took a list of tensors on several GPUs), so it could not tell which GPU to build "
            "the communicator on. It is a sanity check before the communicator is created."
        ),
        fix=(
            "Pass at least one CUDA tensor, on this rank's GPU, to every NCCL collective (never an empty "
            "list), and bind each rank to its GPU first: `torch.cuda.set_device(local_rank)` and "
            '`init_process_group("nccl", device_id=torch.device("cuda", local_rank))`. CPU tensors '
            'go to a gloo group (`backend="cpu:gloo,cuda:nccl"`).'
        ),
        sites=(
            "torch/lib/libtorch_cuda.so::not-able-to-create-get-the-nccl-communicator-since-the-gpu-devices-are-not-known",
        ),
        read_from="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, getNCCLComm (an empty device key). Needs NVIDIA GPUs",
    ),
    Entry(
        id="nccl_system_error",
        message=(
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
            "error."
        ),
        pattern=(
            r"ncclSystemError: System call \(e\.g\. socket, malloc\) or external library call failed"
            r"|unhandled system error \(run with NCCL_DEBUG=INFO for details\)"
        ),
        cause=(
            "A system or library call inside NCCL failed; the `Last error:` line names it. Most often a "
            "socket to another rank could not connect or broke (wrong interface chosen, firewall, a node "
            "down), shared memory between local ranks could not be created (a container's /dev/shm is "
            "64 MB by default), or the InfiniBand/RDMA stack failed."
        ),
        fix=(
            "Run with `NCCL_DEBUG=INFO` and read the WARN line that says which call failed. For sockets: "
            "`NCCL_SOCKET_IFNAME=<the interface the nodes share>` and open ports between the nodes; for "
            "shared memory: `docker run --ipc=host` or `--shm-size=8g`; to rule out InfiniBand, try "
            "`NCCL_IB_DISABLE=1`."
        ),
        teaches="08_debugging_and_pitfalls.ipynb#a-full-dev-shm",
        sites=(
            "torch/lib/libtorch_cuda.so::ncclsystemerror-system-call-e-g-socket-malloc-or-external-library-call-failed-or-device-error",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/NCCLUtils.cpp, getNcclErrorDetailStr; NCCL's \"unhandled system "
            "error\" from NVIDIA/nccl src/init.cc, ncclGetErrorString (torch 2.15's nccl2 prints that one). "
            "Needs NVIDIA GPUs"
        ),
    ),
    Entry(
        id="nccl_invalid_usage",
        message="ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        pattern=(
            r"ncclInvalidUsage: This usually reflects invalid usage of NCCL library"
            r"|invalid usage \(run with NCCL_DEBUG=WARN for details\)"
        ),
        cause=(
            "NCCL refused a call as wrongly used; the `Last error:` line says how. By far the most common: "
            "`Duplicate GPU detected : rank 1 and rank 0 both on CUDA device ...`, two ranks on one GPU "
            "because the script never chose a GPU per rank (every rank defaults to `cuda:0`) or every "
            "process sees the same single GPU (`CUDA_VISIBLE_DEVICES`). Mismatched calls across ranks "
            "are another."
        ),
        fix=(
            "Give each rank its own GPU before any CUDA work: `torch.cuda.set_device(local_rank)` (with "
            '`local_rank = int(os.environ["LOCAL_RANK"])` under torchrun) and '
            '`init_process_group("nccl", device_id=torch.device("cuda", local_rank))`; start at most '
            "as many ranks per node as GPUs (`--nproc-per-node`)."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        sites=(
            "torch/lib/libtorch_cuda.so::ncclinvalidusage-this-usually-reflects-invalid-usage-of-nccl-library",
        ),
        read_from=(
            'torch/csrc/distributed/c10d/NCCLUtils.cpp, getNcclErrorDetailStr; NCCL\'s "invalid usage" from '
            "NVIDIA/nccl src/init.cc, ncclGetErrorString. Needs NVIDIA GPUs"
        ),
    ),
    Entry(
        id="invalid_device_ordinal",
        message="torch.AcceleratorError: CUDA error: invalid device ordinal",
        pattern=r"CUDA error: invalid device ordinal",
        cause=(
            "A rank asked for a GPU index that this process cannot see: `cuda:{local_rank}` with more "
            "ranks per node than visible GPUs (`--nproc-per-node` or `nprocs` larger than "
            "`torch.cuda.device_count()`), the global rank used where the local rank belongs (rank 4 on "
            "the second node of 4-GPU machines), or `CUDA_VISIBLE_DEVICES` narrowed to fewer GPUs, "
            "whose indices then start at 0 again."
        ),
        fix=(
            'Index GPUs by the local rank (`int(os.environ["LOCAL_RANK"])` under torchrun, the rank '
            "argument of `mp.spawn` on one machine), start at most `torch.cuda.device_count()` ranks "
            "per node, and remember that under `CUDA_VISIBLE_DEVICES=2,3` the two GPUs are `cuda:0` "
            "and `cuda:1`; `python -c 'import torch; print(torch.cuda.device_count())'` on the node "
            "shows how many this process sees."
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        read_from=(
            "CUDA's cudaErrorInvalidDevice as torch's c10/cuda checks raise it (CUDA error: "
            "invalid device ordinal); needs a CUDA device"
        ),
    ),
)
