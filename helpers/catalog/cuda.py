"""Catalog entries: CUDA and processes: fork after CUDA, CUDA IPC, NCCL set-up.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="cuda_in_fork",
        message=(
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
            "multiprocessing, you must use the 'spawn' start method"
        ),
        cause="CUDA (even `torch.cuda.is_available()`) ran before a fork",
        fix="",
        teaches="04_fork_and_cuda.ipynb#fork-versus-cuda",
        case="cuda_in_fork",
    ),
    Entry(
        id="cuda_resent",
        message=(
            "Attempted to send CUDA tensor received from another process; this is not currently supported. "
            "Consider cloning before sending."
        ),
        cause=(
            "a process re-sends a CUDA tensor it only received (a `Manager().Queue()`'s server does, in a "
            "`RemoteError`): a torch Queue from the sender, or `clone()` before sending on"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors",
        case="cuda_resent",
    ),
    Entry(
        id="pidfd_getfd_unsupported",
        message=(
            "The kernel on this machine does not support the pidfd_getfd syscall needed to use IPC for "
            "CUDA tensors when expandable_segments:True is set."
        ),
        cause=(
            "CUDA IPC with `expandable_segments` on a kernel without the `pidfd_getfd` syscall (ENOSYS: "
            "Linux before 5.6): `expandable_segments:False`, or a newer kernel"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        case="cuda_ipc_container",
    ),
    Entry(
        id="pidfd_getfd_eperm",
        message="RuntimeError: pidfd_getfd: Operation not permitted",
        cause=(
            "CUDA IPC with `expandable_segments`: the receiver may not take the sender's file descriptors "
            "(EPERM: Yama `ptrace_scope`, a container's seccomp profile without `CAP_SYS_PTRACE`): "
            "`--cap-add SYS_PTRACE`, `ptrace_scope` 0, or `expandable_segments:False`"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu",
        case="cuda_ipc_container",
    ),
)
