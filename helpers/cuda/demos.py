"""The GPU demos of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), each run in
a fresh interpreter with a deadline, as plain dicts."""

from __future__ import annotations

import contextlib
import datetime
import json
import multiprocessing as mp
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

import torch

from helpers.cuda.bad_fork import CUDA_REINIT_ERROR
from helpers.processes import reap, run_python_script, run_with_deadline

__all__: list[str] = []  # the public names are imported from helpers.cuda, which re-exports them

ROOT = Path(__file__).resolve().parents[2]  # the repository: on the fresh interpreters' PYTHONPATH

# --------------------------------------------------------------------------------------------------
# The GPU demos. Each *body* runs in a fresh interpreter started by _run_fresh; the public wrappers
# return plain dicts (JSON): a script, a notebook or helpers.cuda_transcript prints, checks or records them.
# --------------------------------------------------------------------------------------------------

_MARK = "@@helpers.cuda.demos@@ "


def _run_fresh(body: str, limit: float, env: dict[str, str | None] | None = None, **kwargs) -> dict:
    """Run ``helpers.cuda.demos.<body>(**kwargs)`` in a fresh interpreter (``run_python_script``); bounded.

    The result comes back as one JSON line on stdout; ``stderr`` holds the end of the child's.
    The repository goes on ``PYTHONPATH``, so this works without installing the package.
    """
    code = (  # guarded: the demos' spawn and forkserver children import this script as __mp_main__
        "import json, sys\n"
        f"from helpers.cuda.demos import {body} as body\n"
        "if __name__ == '__main__':\n"
        f"    print({_MARK!r} + json.dumps(body(**json.loads(sys.argv[1]))), flush=True)\n"
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    try:
        done = run_python_script(code, limit, [json.dumps(kwargs)], env={"PYTHONPATH": path, **(env or {})})
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr or ""
        stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        return {"error": f"timed out after {limit:.0f} s (killed)", "stderr": stderr[-1500:]}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_MARK):
            return {**json.loads(line[len(_MARK) :]), "stderr": done.stderr[-1500:]}
    return {"error": f"exit code {done.returncode}", "stderr": done.stderr[-1500:]}


def cuda_present(timeout: float = 60.0) -> bool:
    """True when a CUDA device is usable; asked in a fresh interpreter, so this process stays clean.
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) asks it before running the GPU demos.

    >>> isinstance(cuda_present(), bool)
    True
    """
    from helpers.environment import cuda_report

    return bool(cuda_report(timeout)["cuda_devices"])


def _error_line(error: BaseException) -> str:
    """``Type: first line of the message`` (the message may be empty, e.g. ``queue.Empty``)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__


def _driver_version() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            done = subprocess.run(
                [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip().splitlines()[0]
    with contextlib.suppress(Exception):
        version = torch._C._cuda_getDriverVersion()  # e.g. 12040: the CUDA API the driver supports
        return f"CUDA driver API {version // 1000}.{version % 1000 // 10}"
    return "unknown"


def _body_info() -> dict:
    return {
        "device": torch.cuda.get_device_name(0),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "driver": _driver_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def gpu_info(timeout: float = 120.0) -> dict:
    """Device name(s), driver, torch and CUDA versions, Python and the date: a transcript's header.
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) prints it above the live results (the transcript's header).

    Not run as a doctest: it needs a CUDA device.

    >>> sorted(gpu_info())  # doctest: +SKIP
    ['cuda_runtime', 'date', 'device', 'devices', 'driver', 'python', 'stderr', 'torch']
    """
    return _run_fresh("_body_info", timeout)


def _child_cuda_op(result_path: str) -> None:
    """Child side of the fork demos: report the bad-fork flag, try one CUDA op, write the outcome."""
    torch.set_num_threads(1)
    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    outcome = {"child_bad_fork": in_bad_fork() if in_bad_fork else None}
    try:
        x = torch.ones(2, device="cuda")
        torch.cuda.synchronize()
        outcome["child_outcome"] = f"ok (sum {float(x.sum()):.0f})"
    except Exception as error:  # noqa: BLE001 (whatever it is, it is the lesson)
        outcome["child_outcome"] = _error_line(error)
    Path(result_path).write_text(json.dumps(outcome))


def _cuda_op_in_child(method: str, timeout: float) -> dict:
    """Start one ``method`` child that tries a CUDA op; its outcome, exit code and seconds."""
    with tempfile.TemporaryDirectory(prefix="tmp-cuda-child-") as workdir:
        path = Path(workdir) / "outcome.json"
        result = run_with_deadline(_child_cuda_op, args=(str(path),), method=method, timeout=timeout)
        outcome = json.loads(path.read_text()) if path.exists() else {"child_outcome": "no outcome written"}
    if result.timed_out:
        outcome["child_outcome"] = f"timed out after {timeout:.0f} s (killed)"
    outcome.update(
        child_method=method, child_exitcode=result.exitcode, child_seconds=round(result.seconds, 2)
    )
    return outcome


def _body_fork_after_init(timeout: float) -> dict:
    torch.zeros(1, device="cuda")  # the parent initialises CUDA, as fork_after_cuda does
    return {"parent_initialized": torch.cuda.is_initialized(), **_cuda_op_in_child("fork", timeout)}


def fork_after_cuda_init(timeout: float = 60.0) -> dict:
    """(a) A parent creates a CUDA tensor, then forks; the child tries a CUDA op. Fresh interpreter.
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (a); ``python -m helpers.cuda fork_after_cuda_init``.

    Expected outcome: ``child_outcome`` starts with ``RuntimeError: Cannot re-initialize CUDA in
    forked subprocess``. Not run as a doctest: it needs a CUDA device.

    >>> fork_after_cuda_init()["child_outcome"].startswith(  # doctest: +SKIP
    ...     "RuntimeError: Cannot re-initialize CUDA in forked subprocess"
    ... )
    True
    """
    return _run_fresh("_body_fork_after_init", timeout + 120, timeout=timeout)


# What the parent calls before forking, in the poison table.
_POISON_CALLS = ("nothing", "is_available()", "device_count()", "a CUDA tensor")


def _parent_call(call: str):
    if call == "nothing":
        return None
    if call == "is_available()":
        return torch.cuda.is_available()
    if call == "device_count()":
        return torch.cuda.device_count()
    if call == "a CUDA tensor":
        return str(torch.zeros(1, device="cuda").device)
    raise ValueError(f"call must be one of {_POISON_CALLS}, got {call!r}")


def _body_poison_case(call: str, timeout: float) -> dict:
    returned = _parent_call(call)
    return {
        "call": call,
        "nvml_check": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1",
        "returned": returned,
        "parent_initialized": torch.cuda.is_initialized(),
        **_cuda_op_in_child("fork", timeout),
    }


def poison_table(timeout: float = 60.0, calls: tuple[str, ...] = _POISON_CALLS) -> list[dict]:
    """(b) Which parent calls poison fork: each call, with and without PYTORCH_NVML_BASED_CUDA_CHECK=1.
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (b); ``python -m helpers.cuda poison_table``.

    Each case runs in its own fresh interpreter: it makes the call, records
    ``torch.cuda.is_initialized()``, then forks a child that reports ``_cuda_isInBadFork()`` and the
    outcome of a CUDA op. torch's docs say ``is_available()`` poisons fork unless
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1``, and ``device_count()`` only when NVML discovery fails, in
    both cases with ``is_initialized()`` still False; the table measures it on the machine at hand
    (whether NVML works there decides the ``device_count()`` rows). Not run as a doctest: it needs
    a CUDA device.

    >>> rows = poison_table(calls=("a CUDA tensor",))  # doctest: +SKIP
    >>> [(row["nvml_check"], row["parent_initialized"]) for row in rows]  # doctest: +SKIP
    [(False, True), (True, True)]
    """
    rows = []
    for nvml in (False, True):
        env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1" if nvml else None}
        for call in calls:
            row = _run_fresh("_body_poison_case", timeout + 120, env=env, call=call, timeout=timeout)
            row.setdefault("call", call)
            row.setdefault("nvml_check", nvml)
            rows.append(row)
    return rows


def _body_fixes(timeout: float) -> dict:
    torch.zeros(1, device="cuda")  # the parent has initialised CUDA, as before
    rows = {}
    for method in ("spawn", "forkserver"):
        if method in mp.get_all_start_methods():
            rows[method] = _cuda_op_in_child(method, timeout)
    return {"parent_initialized": torch.cuda.is_initialized(), "children": rows}


def cuda_fixes(timeout: float = 120.0) -> list[dict]:
    """(c) The fixes: spawn and forkserver children of a CUDA-initialised parent, and a fork child of
    a parent that kept CUDA out (it never touched CUDA). Each row: fix, parent state, child outcome.
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (c); ``python -m helpers.cuda cuda_fixes``.

    Not run as a doctest: it needs a CUDA device.

    >>> all(row["child_outcome"].startswith("ok") for row in cuda_fixes())  # doctest: +SKIP
    True
    """
    after_init = _run_fresh("_body_fixes", timeout * 2 + 120, timeout=timeout)
    rows = [
        {"fix": f"{method} (the parent initialised CUDA)", "parent_initialized": True, **child}
        for method, child in after_init.get("children", {}).items()
    ]
    if "error" in after_init:
        rows.append({"fix": "spawn/forkserver", "child_outcome": after_init["error"], **after_init})
    clean = _run_fresh("_body_poison_case", timeout + 120, call="nothing", timeout=timeout)
    rows.append({"fix": "fork, CUDA kept out of the parent", **clean})
    return rows


def ipc_consumer(inbox: mp.queues.Queue, outbox: mp.queues.Queue, timeout: float = 60.0) -> None:
    """Spawn child of :func:`cuda_ipc_queue`: receive a CUDA tensor, write into it, release it.

    Shown in [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) with the docs' rules. Needs a CUDA device and a producer.

    >>> ipc_consumer(inbox, outbox)  # doctest: +SKIP
    """
    tensor = inbox.get(timeout=timeout)
    info = {"consumer_pid": os.getpid(), "device": str(tensor.device), "received": tensor.tolist()}
    tensor.add_(1)  # in place, on the producer's memory
    torch.cuda.synchronize()
    del tensor  # consumers release promptly (docs: Multiprocessing best practices, CUDA)
    outbox.put(info)


def _body_ipc(timeout: float) -> dict:
    import torch.multiprocessing as tmp

    from helpers.processes import running

    ctx = tmp.get_context("spawn")
    tensor = torch.zeros(4, device="cuda")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    consumer = ctx.Process(target=ipc_consumer, args=(inbox, outbox, timeout))
    with running([consumer], timeout=timeout + 30):
        inbox.put(tensor)  # the producer (this process) keeps `tensor` alive until the consumer is done
        info = outbox.get(timeout=timeout)
        torch.cuda.synchronize()
        seen = tensor.tolist()
    return {"producer_pid": os.getpid(), "sent": [0.0] * 4, "consumer": info, "producer_sees": seen}


def cuda_ipc_queue(timeout: float = 120.0) -> dict:
    """(d) A CUDA tensor through a torch Queue to a spawn child, which adds 1 in place.
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (d); ``python -m helpers.cuda cuda_ipc_queue``.

    CUDA IPC shares the memory, no copy: ``producer_sees`` is all ones after the consumer's write.
    Not run as a doctest: it needs a CUDA device.

    >>> cuda_ipc_queue()["producer_sees"]  # doctest: +SKIP
    [1.0, 1.0, 1.0, 1.0]
    """
    return _run_fresh("_body_ipc", timeout + 120, timeout=timeout)


def _short_lived_producer(outbox) -> None:
    """Spawn child of :func:`broken_keep_alive`: put a CUDA tensor on the queue and exit at once."""
    outbox.put(torch.full((4,), 7.0, device="cuda"))


def _body_broken(timeout: float) -> dict:
    import torch.multiprocessing as tmp

    ctx = tmp.get_context("spawn")
    outbox = ctx.Queue()
    producer = ctx.Process(target=_short_lived_producer, args=(outbox,))
    producer.start()
    producer.join(timeout)  # the rule broken: the producer is gone before the consumer reads
    (exitcode,) = reap([producer], timeout=0)
    result = {"producer_exitcode": exitcode}
    try:
        tensor = outbox.get(timeout=timeout)
        result["consumer_outcome"] = f"received {tensor.tolist()}"
    except Exception as error:  # noqa: BLE001 (whatever it is, it is the lesson)
        result["consumer_outcome"] = _error_line(error)
    return result


def broken_keep_alive(timeout: float = 60.0) -> dict:
    """(d) The keep-alive rule broken: a spawn producer puts a CUDA tensor and exits before the
    consumer (a fresh interpreter) gets it. What happens is reported, not assumed; ``stderr`` holds
    torch's warnings from both processes. Not run as a doctest: it needs a CUDA device.
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (d); ``python -m helpers.cuda broken_keep_alive``.

    >>> sorted(broken_keep_alive())  # doctest: +SKIP
    ['consumer_outcome', 'producer_exitcode', 'stderr']
    """
    return _run_fresh("_body_broken", timeout * 2 + 120, timeout=timeout)


def _device_worker(rank: int, ndevices: int) -> dict:
    """Spawn worker: pick a GPU with ``torch.cuda.set_device``; report what the process sees."""
    torch.cuda.set_device(rank % ndevices)
    x = torch.ones(1, device="cuda")  # "cuda" means the current device
    return {"rank": rank, "current_device": torch.cuda.current_device(), "tensor_on": str(x.device)}


def _visible_worker(rank: int, ndevices: int) -> dict:
    """Spawn worker: restrict itself to one GPU with CUDA_VISIBLE_DEVICES, *before* any CUDA call."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank % ndevices)
    return {
        "rank": rank,
        "CUDA_VISIBLE_DEVICES": os.environ["CUDA_VISIBLE_DEVICES"],
        "device_count": torch.cuda.device_count(),
        "cuda:0 is": torch.cuda.get_device_name(0),
    }


def _body_devices(timeout: float) -> dict:
    from helpers.launch import launch

    ndevices = torch.cuda.device_count()  # NVML-based where possible; this parent only spawns
    nprocs = max(2, ndevices)
    return {
        "ndevices": ndevices,
        "set_device": launch(_device_worker, (ndevices,), nprocs, method="spawn", timeout=timeout),
        "visible_devices": launch(_visible_worker, (ndevices,), nprocs, method="spawn", timeout=timeout),
    }


def per_process_devices(timeout: float = 120.0) -> dict:
    """(d) One GPU per process: ``torch.cuda.set_device(rank % n)`` and ``CUDA_VISIBLE_DEVICES``,
    each in ``max(2, n)`` spawn workers (with one GPU, two workers share it).
    A GPU demo of [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda), (d); ``python -m helpers.cuda per_process_devices``.

    Not run as a doctest: it needs a CUDA device.

    >>> result = per_process_devices()  # doctest: +SKIP
    >>> len(result["set_device"]) == max(2, result["ndevices"])  # doctest: +SKIP
    True
    """
    return _run_fresh("_body_devices", timeout * 2 + 120, timeout=timeout)


# Every GPU demo, in the order [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda)
# presents them; the command line picks them by name.
GPU_DEMOS = (
    fork_after_cuda_init,
    poison_table,
    cuda_fixes,
    cuda_ipc_queue,
    broken_keep_alive,
    per_process_devices,
)


def run_gpu_demos(
    timeout: float = 120.0, progress: TextIO | None = None, names: tuple[str, ...] = ()
) -> dict:
    """The GPU demos ``names`` (default: all of :data:`GPU_DEMOS`), in order: a dict of their results.

    Needs CUDA (see :func:`cuda_present`).
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) runs them all where CUDA is
    present.

    Not run as a doctest: it needs a CUDA device and takes minutes.

    >>> list(run_gpu_demos())[:2]  # doctest: +SKIP
    ['fork_after_cuda_init', 'poison_table']
    """
    results = {}
    for demo in GPU_DEMOS:
        if names and demo.__name__ not in names:
            continue
        if progress is not None:
            print(f"running {demo.__name__} ...", file=progress, flush=True)
        results[demo.__name__] = demo(timeout=timeout)
    return results


def check_gpu_results(results: dict) -> None:
    """Assert the robust claims of the GPU demos (raises AssertionError with the evidence).
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) asserts them on a live GPU run.

    Only what the docs promise is asserted: fork after init fails, a CUDA tensor in the parent
    poisons fork, spawn and forkserver work, a parent that never touched CUDA forks fine, and CUDA
    IPC shares memory. Which *queries* poison fork is measured and printed, never asserted.
    The first example runs anywhere; the second is not run as a doctest: it needs a CUDA device.

    >>> check_gpu_results({"fork_after_cuda_init": {"parent_initialized": False}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: {'parent_initialized': False}...
    >>> check_gpu_results(run_gpu_demos())  # doctest: +SKIP
    """
    first = results["fork_after_cuda_init"]
    assert first.get("parent_initialized") is True, first
    assert CUDA_REINIT_ERROR in first.get("child_outcome", ""), first
    for row in results["poison_table"]:
        if row["call"] == "a CUDA tensor":
            assert row.get("parent_initialized") is True and CUDA_REINIT_ERROR in row["child_outcome"], row
        if row["call"] == "nothing":
            assert row.get("child_outcome", "").startswith("ok"), row
    for row in results["cuda_fixes"]:
        assert row.get("child_outcome", "").startswith("ok"), row
    ipc = results["cuda_ipc_queue"]
    assert ipc.get("producer_sees") == [1.0] * 4, ipc
    assert ipc["consumer"]["device"].startswith("cuda"), ipc


def gpu_check_exit_code(results: dict) -> int:
    """``--check`` of both GPU command lines (``python -m helpers.cuda`` and ``helpers.cuda_transcript``):
    0 when :func:`check_gpu_results` holds, else 1 with the evidence on stderr.

    >>> gpu_check_exit_code({"fork_after_cuda_init": {"parent_initialized": False}})  # the evidence: stderr
    1
    """
    try:
        check_gpu_results(results)
    except AssertionError as error:
        print(f"CHECK FAILED: {error}", file=sys.stderr)
        return 1
    return 0
