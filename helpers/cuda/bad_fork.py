"""The lesson of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda): PyTorch's
bad-fork check and its error, and the canonical
fork-after-CUDA code (:func:`fork_after_cuda` with its child :func:`cuda_op`)."""

from __future__ import annotations

import inspect
import multiprocessing as mp
import sys

import torch

__all__: list[str] = []  # the public names are imported from helpers.cuda, which re-exports them

CUDA_REINIT_ERROR = "Cannot re-initialize CUDA in forked subprocess"


# --------------------------------------------------------------------------------------------------
# What a CPU machine can read: the check and its error, from the installed torch's own source
# --------------------------------------------------------------------------------------------------


def bad_fork_check() -> str:
    """The lines of the installed ``torch.cuda._lazy_init`` that refuse CUDA in a bad fork.

    Read live with ``inspect``, so
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) shows what *this* torch
    raises, GPU or not.

    >>> print(bad_fork_check())  # doctest: +ELLIPSIS
    # torch/cuda/__init__.py, in _lazy_init (torch ..., line ...)
    ...if _is_in_bad_fork():
    ...raise RuntimeError(
    ..."Cannot re-initialize CUDA in forked subprocess. To use CUDA with "...
    """
    lines, first = inspect.getsourcelines(torch.cuda._lazy_init)
    start = next(i for i, line in enumerate(lines) if "_is_in_bad_fork()" in line)
    end = next(i for i in range(start, len(lines)) if "start method" in lines[i])
    end += next(i for i, line in enumerate(lines[end:]) if line.strip().startswith(")"))
    body = "".join(lines[start : end + 1])
    where = f"torch {torch.__version__}, line {first + start}"
    return f"# torch/cuda/__init__.py, in _lazy_init ({where})\n{body.rstrip()}"


def bad_fork_flag() -> dict:
    """Where ``_is_in_bad_fork`` comes from in the installed torch, and whether it is real here.
    Notebook 04, "Appendix: where PyTorch's bad-fork flag lives", prints it.

    On a CUDA build it is ``torch._C._cuda_isInBadFork``, which reads a flag set in C++ by the
    ``pthread_atfork`` child handler that torch's first CUDA query registers
    (``register_fork_handler_for_device_init`` and ``is_device_in_bad_fork`` in
    ``torch/csrc/utils/device_lazy_init.cpp`` in torch 2.13; releases before 2025 had ``poison_fork``
    and ``forked_child`` in ``torch/csrc/cuda/Module.cpp``). On a CPU-only build the name is
    missing and the Python fallback is a stub that always says False.

    >>> flag = bad_fork_flag()
    >>> flag["source"]
    '_is_in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", lambda: False)'
    >>> flag["real"] == hasattr(torch._C, "_cuda_isInBadFork")
    True
    """
    source = inspect.getsource(sys.modules["torch.cuda"])
    line = next(line.strip() for line in source.splitlines() if line.startswith("_is_in_bad_fork ="))
    return {"source": line, "real": hasattr(torch._C, "_cuda_isInBadFork"), "cuda_build": torch.version.cuda}


def cuda_op(rank: int, results: mp.queues.Queue) -> None:
    """Child: one CUDA op; put ``"ok ..."`` or the error it raised on ``results``. Used in
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda).

    >>> import queue
    >>> q = queue.Queue()
    >>> cuda_op(0, q)
    >>> no_gpu = "AssertionError: Torch not compiled" if torch.version.cuda is None else "RuntimeError"
    >>> q.get().startswith("ok" if torch.cuda.is_available() else no_gpu)  # CPU build, or CUDA build, no GPU
    True
    """
    torch.set_num_threads(1)  # a fork child never runs a parallel CPU op on the inherited pool
    try:
        results.put(f"ok (sum {float(torch.ones(2, device='cuda').sum()):.0f})")
    except Exception as error:  # noqa: BLE001 (whatever it raises is the lesson)
        results.put(f"{type(error).__name__}: {error}")


def fork_after_cuda(method: str = "fork", timeout: float = 60.0) -> str:
    """Parent: initialise CUDA, then start a ``method`` child that runs :func:`cuda_op`; its outcome.

    The canonical failure of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda): with ``"fork"`` the child's op raises
    "Cannot re-initialize CUDA in forked subprocess"; with spawn or forkserver it works. Needs a
    CUDA device; :func:`fork_after_cuda_init` runs it in a fresh interpreter.

    >>> fork_after_cuda("spawn")  # doctest: +SKIP
    'ok (sum 2)'
    """
    torch.zeros(1, device="cuda")  # the parent initialises CUDA
    ctx = mp.get_context(method)
    results = ctx.Queue()
    child = ctx.Process(target=cuda_op, args=(0, results))
    child.start()
    outcome = results.get(timeout=timeout)  # get before join
    child.join(timeout)
    return outcome
