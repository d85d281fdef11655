"""The doctor: check a machine and a launch target before anything starts, and inspect a stuck job.

The failures people hit most with ``torch.multiprocessing`` are known in advance and can be
measured before a launch: a worker that a spawn/forkserver child cannot import, OpenMP threads
already running when the parent forks, CUDA initialised before fork, ``/dev/shm`` too small
(Docker's 64 MB), an open-file limit too low for the ``file_descriptor`` sharing strategy, an
unresolvable hostname or a busy ``MASTER_PORT``, leftover children and stale shared memory; and the
limits beyond them: memory maps against ``vm.max_map_count``, logind's ``RemoveIPC``, the backends this
torch has, CUDA IPC under ptrace rules, gloo's address across nodes, a launcher run off the main thread;
and what a launcher, a scheduler and a container decide: one thread per worker set by torchrun or Ray, the
process and thread limits, a memory-backed /dev/shm under a memory limit, a Slurm layout against torchrun's.
:func:`check` measures each and returns :class:`Finding` objects; :func:`inspect` reports every
process of a stuck job's tree with its state, what it waits on and its Python stack.

From a shell (notebooks 00 and 10 call :func:`check` in a cell)::

    python -m helpers.doctor                          # this machine
    python -m helpers.doctor --target mypkg.train:worker --nprocs 4
    python -m helpers.doctor --pid 12345              # per-process checks of a running job
    python -m helpers.doctor --inspect 12345          # where is a stuck job stuck?
    python -m helpers.doctor --json                   # for machines

The doctor imports only the standard library, torch and psutil (torch and psutil inside the
functions that need them), and imports a target only in a fresh interpreter with a deadline:
importing it here would run an unguarded script's top level.

Example::

    >>> from helpers.doctor import check, format_findings
    >>> findings = check(only=["open files"])
    >>> findings[0].name, findings[0].status in ("ok", "warn", "fail")
    ('open files', True)
"""

from __future__ import annotations

from helpers.doctor.checks import check, format_findings
from helpers.doctor.cli import main
from helpers.doctor.findings import CHECKS, DoctorError, Finding
from helpers.doctor.inspector import ProcessReport, format_inspection, inspect

__all__ = [
    "Finding",
    "DoctorError",
    "CHECKS",
    "check",
    "format_findings",
    "ProcessReport",
    "inspect",
    "format_inspection",
    "main",
]
