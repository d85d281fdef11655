"""Run the doctor's checks: :func:`check` measures, :func:`format_findings` prints."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from helpers.doctor.findings import CHECKS, DEFAULT_SHM_NEED, DoctorError, Finding, torch_missing
from helpers.doctor.inspector import process_checks_for
from helpers.doctor.launch_checks import launch_checks_for
from helpers.doctor.machine_checks import machine_checks_for
from helpers.doctor.platform_checks import platform_checks_for
from helpers.doctor.target_checks import target_checks_for
from helpers.section_links import as_plain_text

__all__: list[str] = []  # the public names are imported from helpers.doctor, which re-exports them

# --- check(): run them all -------------------------------------------------------------------------


def check(
    target: str | Callable | None = None,
    *,
    pid: int | None = None,
    this_process: bool = True,
    processes: int = 1,
    shm_path: str = "/dev/shm",
    shm_need: int = DEFAULT_SHM_NEED,
    mem_need: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    imports: Sequence[str] = (),
    shared_tensors: int | None = None,
    nodes: int = 1,
    nproc_per_node: int | None = None,
    backend: str | None = None,
    only: Sequence[str] | None = None,
    timeout: float = 30.0,
) -> list[Finding]:
    """Measure what decides whether a multiprocessing launch works here; one :class:`Finding` per check.

    - ``target``: the worker, as ``"module:function"`` or the function itself; checked in a fresh
      interpreter (importable, not a lambda or nested function, pickles by name).
    - Per-process checks (threads already started, CUDA initialised, leftover children, running
      in a Jupyter kernel) look at this process (``this_process``, the default: call ``check()``
      inside the job's script or kernel), or at process ``pid`` from outside; with
      ``this_process=False`` and no ``pid`` (a fresh command line) they report ``n/a``.
    - ``processes``: how many workers the job starts (for oversubscription); ``shm_path`` and
      ``shm_need`` (bytes): where shared memory lives and how much the job needs; ``mem_need``
      (bytes): the job's memory (default: ``processes`` x ``DEFAULT_WORKER_MEM``);
      ``master_addr``/``master_port``: the rendezvous (default: MASTER_ADDR/MASTER_PORT, else
      torchrun's ports 29500 and 29400); ``imports``: modules to test for CUDA initialisation on import.
    - ``shared_tensors``: shared CPU tensors a process holds at once, one memory map each (default: a
      DataLoader's figure, 64); ``nodes``: how many machines the job spans (gloo's address matters on
      several); ``nproc_per_node``: torchrun's ``--nproc-per-node``, the workers each agent starts (None:
      no torchrun; compared with a Slurm allocation's tasks, CPUs and GPUs); ``backend``: the backend the job names (e.g. ``"nccl"``; a target's own
      ``init_process_group`` call is read too).
    - ``only``: names from :data:`CHECKS` to run (default: all that apply).

    Where this interpreter cannot import torch, the one finding is a ``fail`` of ``python and torch``
    that names the interpreter. Raises :class:`DoctorError` for a malformed or unimportable target. Notebook 00 (your
    environment) prints it; notebook 10 checks a bad target and a busy port with it.

    >>> [f.name for f in check(only=["open files", "master port"], master_port=0)]
    ['open files', 'master port']
    """
    try:
        import torch  # noqa: F401  (most checks need it: without it, one line that says why, no traceback)
    except ImportError as error:
        return [torch_missing(error)]
    if pid is not None:
        import psutil

        if not psutil.pid_exists(pid):
            raise DoctorError(f"no process with pid {pid}")
    unknown = sorted(set(only or ()) - set(CHECKS))
    if unknown:
        raise DoctorError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}")
    runs = {
        **machine_checks_for(
            pid=pid,
            processes=processes,
            shm_path=shm_path,
            shm_need=shm_need,
            mem_need=mem_need,
            master_addr=master_addr,
            master_port=master_port,
            timeout=timeout,
        ),
        **process_checks_for(pid, per_process=this_process or pid is not None),
        **target_checks_for(target, imports, timeout, backend),
        **platform_checks_for(
            pid=pid, shared_tensors=shared_tensors, nodes=nodes, backend=backend, timeout=timeout
        ),
        **launch_checks_for(
            processes=processes, shm_path=shm_path, nproc_per_node=nproc_per_node, nodes=nodes
        ),
    }
    wanted = [name for name in CHECKS if name in runs and (only is None or name in only)]
    return [runs[name]() for name in wanted]


def format_findings(findings: Sequence[Finding], details: bool = True) -> str:
    """The findings as a table (status, check, what was measured), then why and the fix for each problem.

    ``details=False`` leaves out the explanations. Notebook 00 prints it line by line.

    >>> print(format_findings([Finding("open files", "ok", "soft 4096", "why", "fix", "", "#973")]))
    status  check       measured
    ok      open files  soft 4096
    """
    width = max([len("check"), *(len(f.name) for f in findings)])
    lines = [f"{'status':<6}  {'check':<{width}}  measured"]
    for f in findings:
        measured = textwrap.wrap(f.measured, 100 - width) or [""]
        lines.append(f"{f.status:<6}  {f.name:<{width}}  {measured[0]}")
        lines += [f"{'':<6}  {'':<{width}}  {more}" for more in measured[1:]]
    problems = [f for f in findings if f.status in ("warn", "fail")]
    if details and problems:
        for f in problems:
            lines.append("")
            lines += textwrap.wrap(f"{f.status.upper()} {f.name}: {f.why}", 110, subsequent_indent="  ")
            lines += textwrap.wrap(f"fix: {f.fix}", 110, initial_indent="  ", subsequent_indent="    ")
            lines += textwrap.wrap(
                f"taught in: {as_plain_text(f.teaches)}; prevents: {f.prevents}",
                110,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    return "\n".join(lines)
