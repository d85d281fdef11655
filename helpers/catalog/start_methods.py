"""Catalog entries: Start methods, pickling a worker, the main guard, contexts (CPython multiprocessing and torch.multiprocessing).

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="unpicklable_worker",
        message="AttributeError: Can't get attribute 'worker' on <module '__main__'",
        cause=(
            "a spawn/forkserver child cannot import a function defined in a notebook (Python 3.10-3.13; "
            "the module's description after it differs by version; 3.14, 3.15: `module '__main__' has no "
            "attribute`)"
        ),
        fix="",
        teaches="01_start_methods.ipynb#appendix-the-error-message-across-python-versions",
        case="unpicklable_worker",
    ),
    Entry(
        id="no_main_guard",
        message="current process has finished its bootstrapping phase.",
        cause=(
            'a script without `if __name__ == "__main__":` under spawn/forkserver (a message over several '
            "lines; the line above: `RuntimeError: An attempt has been made to start a new process before "
            "the`)"
        ),
        fix="",
        teaches="01_start_methods.ipynb#the-if-name-main-guard",
        case="unpicklable_worker",
    ),
    Entry(
        id="global_from_main_block",
        message="NameError: name 'args' is not defined",
        cause=(
            'a worker reads a global made under `if __name__ == "__main__":`; fork copies it, spawn and '
            "forkserver (3.14's default) do not: pass it as an argument"
        ),
        fix="",
        teaches=(
            "14_field_guide_launches_and_ranks.ipynb#nameerror-in-a-worker-under-forkserver-python-3-14-s-default"
        ),
        case="global_from_main_block",
    ),
    Entry(
        id="lock_across_contexts",
        message=(
            "RuntimeError: A SemLock created in a fork context is being shared with a process in a spawn "
            "context."
        ),
        cause=(
            'a Lock, Event, Semaphore or Queue of `get_context("fork")` passed to a spawn or forkserver '
            "child: make it with the child's context (refused since CPython 3.11.5 and 3.12, "
            "cpython#77377; 3.10.13 let it through and the child died of SIGSEGV)"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#appendix-d-python-3-14-s-forkserver-beyond-the-guard",
        case="lock_across_contexts",
    ),
    Entry(
        id="start_method_set_twice",
        message="RuntimeError: context has already been set",
        cause=(
            "`set_start_method` ran a second time in one process: a re-run cell, or a library or test "
            "runner that set it first. The start method is process-wide and set once (CPython's "
            "`multiprocessing`, every version)."
        ),
        fix=(
            'Take a context where you start processes, `ctx = mp.get_context("spawn")`, and use '
            "`ctx.Process`, `ctx.Queue`, `mp.spawn(..., start_method=...)`; or call `set_start_method` "
            "once, under the main guard (`force=True` replaces the default for every later caller)."
        ),
        sites=(
            "multiprocessing/context.py::DefaultContext.set_start_method::RuntimeError::context-has-already-been-set",
        ),
        reproduction="""\
import torch.multiprocessing as mp

if __name__ == "__main__":
    mp.set_start_method("spawn")
    mp.set_start_method("spawn")  # a second call: a re-run cell does this
""",
        fixed="""\
import torch.multiprocessing as mp

if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # a context, not the process-wide default: safe to run again
    ctx = mp.get_context("spawn")
    print(ctx.get_start_method())
""",
        teaches="01_start_methods.ipynb#three-start-methods",
        case="start_method_set_twice",
    ),
)
