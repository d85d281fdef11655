"""The index of error messages: the catalog's entries that a notebook section explains, by case.

:data:`ERROR_INDEX` is the view of :mod:`helpers.catalog` that docs/errors.md and
[10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages) show
(:func:`error_index_markdown` renders it); :data:`CASES` names the cases (exercise 10 answers with
them). ``tests/test_catalog.py`` runs each entry's reproduction; :mod:`helpers.field_guide` still
exports these names.

Example::

    >>> from helpers.error_index import CASES, ERROR_INDEX
    >>> sorted({entry.case for entry in ERROR_INDEX}) == sorted(CASES)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASES", "ERROR_INDEX", "error_index_markdown"]  # IndexEntry: the rows' type

CASES: dict[str, str] = {
    "uneven_inputs": "uneven batches: [10 · Uneven inputs](../notebooks/10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs)",
    "one_rank_collective": "a collective on some ranks: [10 · One rank only](../notebooks/10_field_guide.ipynb#a-collective-called-on-one-rank-only)",
    "port_in_use": "two jobs on one port: [10 · Address in use](../notebooks/10_field_guide.ipynb#address-already-in-use-two-jobs-on-one-port)",
    "local_rank_argument": "--local_rank: [10 · Appendix F](../notebooks/10_field_guide.ipynb#appendix-f-unrecognized-arguments-local-rank-0)",
    "oom_killed": "OOM killer: [10 · Appendix G](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer)",
    "unpicklable_worker": "notebook worker, no main guard: [01 · The main guard](../notebooks/01_start_methods.ipynb#the-if-name-main-guard)",
    "cuda_in_fork": "CUDA in a forked child: [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda)",
    "shm_full": "a full /dev/shm: [08 · A full /dev/shm](../notebooks/08_debugging_and_pitfalls.ipynb#a-full-dev-shm)",
    "worker_raised": "a worker raised, see its traceback: [06 · When a rank fails](../notebooks/06_ddp_mp_spawn.ipynb#when-a-rank-fails)",
    "too_many_open_files": "out of fds: [02 · Sharing](../notebooks/02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names)",
    "debugger_in_worker": "pdb in a worker: [14 · breakpoint() in a worker](../notebooks/14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit)",  # noqa: E501
    "ddp_unused_parameters": "a parameter without gradient: [14 · Unused parameters](../notebooks/14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration)",  # noqa: E501
    "ddp_ready_twice": "a parameter reduced twice in a step: [14 · Appendix B](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs)",  # noqa: E501
    "signal_off_main_thread": "a launcher in a thread: [14 · Off the main thread](../notebooks/14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread)",  # noqa: E501
    "global_from_main_block": "a global made under the main guard: [14 · NameError under forkserver](../notebooks/14_field_guide_launches_and_ranks.ipynb#nameerror-in-a-worker-under-forkserver-python-3-14-s-default)",  # noqa: E501
    "lock_across_contexts": "a lock of another context: [14 · Appendix D](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-d-python-3-14-s-forkserver-beyond-the-guard)",  # noqa: E501
    "other_platform": "Windows or macOS: [13 · Windows and macOS]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has)",
    "cuda_resent": "a CUDA tensor sent on: [13 · Weights to actors]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors)",
    "map_count": "one mapping per shared storage: [13 · The map count]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count)",
    "handle_in_init": "a file opened in a Dataset's __init__: [13 · A file opened in __init__]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers)",
    "daemonic_worker": "a process started in a DataLoader worker: [13 · Daemonic]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children)",
    "cuda_ipc_container": "CUDA IPC in a container: [13 · Appendix B]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu)",
    "dataloader_option": "a DataLoader option: [13 · Appendix E]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-e-three-dataloader-options)",
    # helper hD (turn 5): a start method set twice, ranks that cannot reach each other over gloo
    "start_method_set_twice": "set_start_method called twice: [01 · Three start methods]("
    "../notebooks/01_start_methods.ipynb#three-start-methods)",
    "gloo_peer_unreachable": "a rank's address the others cannot reach: [09 · Appendix: real networks]("
    "../notebooks/09_multi_node.ipynb#appendix-real-networks)",
}
"""The cases of notebook 10 (and the errors that other notebooks explain), by name."""


@dataclass(frozen=True)
class IndexEntry:
    """One row of the index: the message as printed, its case, and where the series explains it."""

    message: str  # the words a user pastes into a search box, exactly as printed
    case: str  # a key of CASES
    notebook: str  # file name in notebooks/
    section: str  # the id of the section that explains it (its anchor in the notebook)
    meaning: str  # one line: what it means


def _rows() -> tuple[IndexEntry, ...]:
    from helpers.catalog import entries  # the catalog's entries that a notebook section explains

    rows = []
    for e in entries():
        if e.case:
            notebook, section = e.teaches.split("#")
            rows.append(IndexEntry(e.message, e.case, notebook, section, _first_sentence(e.cause)))
    return tuple(rows)


def _first_sentence(text: str) -> str:
    head = text.split(". ")[0]
    return head if head.endswith(".") or head == text else head + "."


ERROR_INDEX: tuple[IndexEntry, ...] = _rows()
"""The index of error messages (docs/errors.md,
[10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages))."""


def error_index_markdown(prefix: str = "notebooks/") -> str:
    """The index as a Markdown table, as docs/errors.md and
    [10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages) show it; links
    are ``prefix`` + the notebook's file name (``""`` from inside notebooks/).

    >>> error_index_markdown().splitlines()[0]
    '| message | what it means | where |'
    """
    rows = ["| message | what it means | where |", "|---|---|---|"]
    for entry in ERROR_INDEX:
        where = f"[notebook {entry.notebook[:2]}]({prefix}{entry.notebook}#{entry.section})"
        rows.append(f"| `{entry.message}` | {entry.meaning} | {where} |")
    return "\n".join(rows)
