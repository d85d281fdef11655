"""Fork versus CUDA: the GPU demos of notebook 04, and what a CPU machine can read of them.

Once a parent has *queried or initialised* CUDA through torch, a *fork* child that touches CUDA
raises "Cannot re-initialize CUDA in forked subprocess". A query is enough:
``torch.cuda.is_available()`` (unless ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` is set), and
``torch.cuda.device_count()`` when NVML discovery fails, both call ``torch._C._cuda_getDeviceCount``,
which registers torch's ``pthread_atfork`` handler (``register_fork_handler_for_device_init`` in
``torch/csrc/utils/device_lazy_init.cpp``). That handler marks every later fork child as a "bad
fork", and ``torch.cuda._lazy_init`` raises there, although ``torch.cuda.is_initialized()`` was
still False in the parent. So the usual ``device = "cuda" if torch.cuda.is_available() else "cpu"``
at the top of a script already rules out CUDA in fork children. CUDA initialised outside torch
(another library's ``cuInit``) is not detected: the child gets a raw CUDA error instead.
The canonical code is :func:`fork_after_cuda` with its child :func:`cuda_op`. Without a GPU,
:func:`bad_fork_check` and :func:`bad_fork_flag` read that check and its error text from the
installed torch, live.

Each GPU demo runs in a *fresh interpreter* (so the caller never initialises CUDA and stays
fork-safe), bounded by a timeout. On a GPU machine, from the repository root::

    PYTHONPATH=. python -m helpers.cuda                # run every demo, print the outcomes
    PYTHONPATH=. python -m helpers.cuda poison_table   # one demo

The package holds the lesson (``helpers.cuda.bad_fork``), the demos (``helpers.cuda.demos``) and
the command line (``helpers.cuda.cli``). ``helpers.cuda_transcript`` records the demos into the
transcript that notebook 04 shows where CUDA is absent. The CPU twin (OpenMP, locks) is in
``helpers.fork_hazards``.

Example::

    >>> from helpers.cuda import CUDA_REINIT_ERROR, bad_fork_check
    >>> CUDA_REINIT_ERROR in bad_fork_check()
    True
"""

from __future__ import annotations

from helpers.cuda.bad_fork import CUDA_REINIT_ERROR, bad_fork_check, bad_fork_flag, cuda_op, fork_after_cuda
from helpers.cuda.demos import (
    GPU_DEMOS,
    broken_keep_alive,
    check_gpu_results,
    cuda_fixes,
    cuda_ipc_queue,
    cuda_present,
    fork_after_cuda_init,
    gpu_check_exit_code,
    gpu_info,
    ipc_consumer,
    per_process_devices,
    poison_table,
    run_gpu_demos,
)

__all__ = [
    "CUDA_REINIT_ERROR",
    "bad_fork_check",
    "bad_fork_flag",
    "cuda_op",
    "fork_after_cuda",
    "cuda_present",
    "gpu_info",
    "fork_after_cuda_init",
    "poison_table",
    "cuda_fixes",
    "cuda_ipc_queue",
    "ipc_consumer",
    "broken_keep_alive",
    "per_process_devices",
    "GPU_DEMOS",
    "run_gpu_demos",
    "check_gpu_results",
    "gpu_check_exit_code",
]
