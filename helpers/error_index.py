"""The index of error messages: each message as a user pastes it, its case, and where the series explains it.

:data:`ERROR_INDEX` is what the README's docs/errors.md and
[10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages) show
(:func:`error_index_markdown` renders it); :data:`CASES` names the cases (exercise 10 answers with
them). The field guides (notebooks 10 and 14) explain most rows; ``tests/test_error_index.py`` and
the field guides' own tests produce each message that can be produced on a CPU. Split from
:mod:`helpers.field_guide` (which still exports these names) when the index outgrew it.

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


ERROR_INDEX: tuple[IndexEntry, ...] = (
    IndexEntry(
        "AttributeError: Can't get attribute 'worker' on <module '__main__'",
        "unpicklable_worker",
        "01_start_methods.ipynb",
        "appendix-the-error-message-across-python-versions",
        "a spawn/forkserver child cannot import a function defined in a notebook (Python 3.10-3.13; the "
        "module's description after it differs by version; 3.14, 3.15: `module '__main__' has no attribute`)",
    ),
    IndexEntry(
        "current process has finished its bootstrapping phase.",
        "unpicklable_worker",
        "01_start_methods.ipynb",
        "the-if-name-main-guard",
        'a script without `if __name__ == "__main__":` under spawn/forkserver (a message over several'
        " lines; the line above: `RuntimeError: An attempt has been made to start a new process before the`)",
    ),
    IndexEntry(
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
        "multiprocessing, you must use the 'spawn' start method",
        "cuda_in_fork",
        "04_fork_and_cuda.ipynb",
        "fork-versus-cuda",
        "CUDA (even `torch.cuda.is_available()`) ran before a fork",
    ),
    IndexEntry(
        "RuntimeError: received 0 items of ancdata",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "a Queue consumer holds more shared tensors than it may open files (`file_descriptor`: one fd"
        " per storage): raise `ulimit -n` or use `file_system`",
    ),
    IndexEntry(
        "RuntimeError: Too many open files. Communication with the workers is no longer possible.",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "the same in a DataLoader's main process (batches kept alive: one fd per storage); the message goes"
        " on with the two fixes",
    ),
    IndexEntry(
        "RuntimeError: unable to open shared memory object </torch_4242_1234_60> in read-write mode: "
        "Too many open files (24)",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "the same on the sending side, at `share_memory_()` or a Queue's `put`",
    ),
    IndexEntry(
        "RuntimeError: unable to allocate shared memory(shm) for file",
        "shm_full",
        "08_debugging_and_pitfalls.ipynb",
        "a-full-dev-shm",
        "`/dev/shm` is full (from torch 2.13 it ends `No space left on device (28)`; 2.11 named a stale"
        " errno there): `--shm-size`",
    ),
    IndexEntry(
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
        "shm_full",
        "08_debugging_and_pitfalls.ipynb",
        "appendix-c-the-bus-error-of-older-torch",
        "a full `/dev/shm` with torch before PR #161910",
    ),
    IndexEntry(
        "RuntimeError: DataLoader timed out after 1 seconds",
        "worker_raised",
        "07_dataloader_workers.ipynb",
        "worker-options-persistent-workers-prefetch-factor-pin-memory-timeout",
        "a worker took longer than the loader's `timeout` for one batch (a stuck or slow Dataset)",
    ),
    IndexEntry(
        "-- Process 1 terminated with the following error:",
        "worker_raised",
        "06_ddp_mp_spawn.ipynb",
        "when-a-rank-fails",
        "one rank raised; `mp.spawn` shows the first failure it saw, which may be an echo (the line under"
        " `torch.multiprocessing.spawn.ProcessRaisedException:` and a blank line; the rank's traceback"
        " follows)",
    ),
    IndexEntry(
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
        "oom_killed",
        "10_field_guide.ipynb",
        "appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        "exit code -9: usually the out-of-memory killer",
    ),
    IndexEntry(
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
        "port_in_use",
        "10_field_guide.ipynb",
        "address-already-in-use-two-jobs-on-one-port",
        "another job (or a leftover) holds the rendezvous port (`code: -98` is Linux's errno; macOS"
        " prints -48)",
    ),
    IndexEntry(
        "error: unrecognized arguments: --local-rank=0",
        "local_rank_argument",
        "10_field_guide.ipynb",
        "appendix-f-unrecognized-arguments-local-rank-0",
        "`torch.distributed.launch` passes `--local-rank`; read `LOCAL_RANK` from the environment",
    ),
    IndexEntry(
        "Timed out waiting 5000ms for recv operation to complete",
        "uneven_inputs",
        "10_field_guide.ipynb",
        "a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        "a gloo collective waited past the group's timeout: a rank is elsewhere (uneven inputs?)",
    ),
    IndexEntry(
        "Connection closed by peer [127.0.0.1]:9141",
        "uneven_inputs",
        "10_field_guide.ipynb",
        "a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        "the other rank left (finished or crashed) while this one still communicates"
        ' (torch 2.15 goes on "This is typically caused by a remote worker crashing."; 2.11 does not);'
        " the same case can print `Read error [127.0.0.1]:9141: Connection reset by peer` instead",
    ),
    IndexEntry(
        "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 4000 ms",
        "one_rank_collective",
        "10_field_guide.ipynb",
        "a-collective-called-on-one-rank-only",
        "with TORCH_DISTRIBUTED_DEBUG=DETAIL: names the ranks that never reached the collective. Use"
        " DETAIL on a reproduction without DDP: with torch 2.15.0 and 2.13.0, a DDP model on gloo"
        " can crash under DETAIL (SIGSEGV; not in every environment)",
    ),
    IndexEntry(
        "bdb.BdbQuit",
        "debugger_in_worker",
        "14_field_guide_launches_and_ranks.ipynb",
        "breakpoint-in-a-worker-bdb-bdbquit",
        "`breakpoint()` in a child process: pdb reads `/dev/null` (multiprocessing's stdin for children),"
        " takes end-of-file as quit; debug one process, or `torch.distributed.breakpoint()`",
    ),
    IndexEntry(
        "Quitting pdb will kill the process. Quit anyway? [y/n]",
        "debugger_in_worker",
        "14_field_guide_launches_and_ranks.ipynb",
        "breakpoint-in-a-worker-bdb-bdbquit",
        "`breakpoint()` in a child process on Python 3.14+: pdb reads end-of-file from `/dev/null` as"
        " yes and exits with code 1 (no `BdbQuit`); debug one process, or `torch.distributed.breakpoint()`",
    ),
    IndexEntry(
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."
        " This error indicates that your module has parameters that were not used in producing loss.",
        "ddp_unused_parameters",
        "14_field_guide_launches_and_ranks.ipynb",
        "ddp-expected-to-have-finished-reduction-in-the-prior-iteration",
        "DDP: a parameter got no gradient in the last step: forward never used it, or used it for an"
        " output the loss ignores (an auxiliary head); remove it, or `find_unused_parameters=True` /"
        " `static_graph=True` (only if the same parameters go unused every step). The first step raised"
        " nothing and left its gradients un-averaged (torch 2.15.0)",
    ),
    IndexEntry(
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."
        " This error indicates that your training graph has changed in this iteration",
        "ddp_unused_parameters",
        "14_field_guide_launches_and_ranks.ipynb",
        "ddp-expected-to-have-finished-reduction-in-the-prior-iteration",
        "DDP with `static_graph=True`: a parameter used in one step went unused in a later one (a branch);"
        " `static_graph` is the cause here, not the fix: `find_unused_parameters=True` instead",
    ),
    IndexEntry(
        "RuntimeError: Expected to mark a variable ready only once.",
        "ddp_ready_twice",
        "14_field_guide_launches_and_ranks.ipynb",
        "appendix-b-more-ddp-errors-that-are-not-hangs",
        "DDP: a parameter's gradient hook fired twice in one step (the same layer under two reentrant"
        " `checkpoint`s with `find_unused_parameters=True`): `use_reentrant=False` or `static_graph=True`."
        " Without `find_unused_parameters` the same model runs with no error and wrong, per-rank gradients"
        " (torch 2.15.0; unsupported, per DDP's docstring)",
    ),
    IndexEntry(
        "ValueError: signal only works in main thread of the main interpreter",
        "signal_off_main_thread",
        "14_field_guide_launches_and_ranks.ipynb",
        "a-launcher-started-off-the-main-thread",
        "`signal.signal` called off the main thread (a launcher started in a thread): launch from the main thread",
    ),
    IndexEntry(
        "Failed to register signal handlers since torchelastic is running on a child thread.",
        "signal_off_main_thread",
        "14_field_guide_launches_and_ranks.ipynb",
        "a-launcher-started-off-the-main-thread",
        "torchelastic (torchrun, `elastic_launch`) started off the main thread: no signal reaches its"
        " workers, which are orphaned when the launcher is stopped",
    ),
    IndexEntry(
        "NameError: name 'args' is not defined",
        "global_from_main_block",
        "14_field_guide_launches_and_ranks.ipynb",
        "nameerror-in-a-worker-under-forkserver-python-3-14-s-default",
        'a worker reads a global made under `if __name__ == "__main__":`; fork copies it, spawn and'
        " forkserver (3.14's default) do not: pass it as an argument",
    ),
    IndexEntry(
        "RuntimeError: A SemLock created in a fork context is being shared with a process in a spawn context.",
        "lock_across_contexts",
        "14_field_guide_launches_and_ranks.ipynb",
        "appendix-d-python-3-14-s-forkserver-beyond-the-guard",
        'a Lock, Event, Semaphore or Queue of `get_context("fork")` passed to a spawn or forkserver child:'
        " make it with the child's context (refused since CPython 3.11.5 and 3.12, cpython#77377; 3.10.13"
        " let it through and the child died of SIGSEGV)",
    ),
    IndexEntry(
        "RuntimeError: Distributed package doesn't have NCCL built in",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        '`backend="nccl"` on a build without NCCL (Windows, macOS, CPU-only builds): use gloo there',
    ),
    IndexEntry(
        "RuntimeError: use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 "
        "to disable it.",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        "torchrun's stores or a `TCPStore(...)` ask for libuv, the default since torch 2.4, on a Windows build"
        " without it; in torch 2.15.0 they ignore `USE_LIBUV` (only `init_process_group`'s `tcp://` and `env://`"
        " read it, default 0 on Windows), so torchrun cannot start there (pytorch PR #196855, open): `mp.spawn`"
        ' and `init_process_group("gloo", "tcp://...")`, or WSL (older torch: `was build without libuv support`)',
    ),
    IndexEntry(
        "RuntimeError: _share_filename_: only available on CPU",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        "a non-CPU tensor (MPS on macOS) pickled for another process, most often into a spawn worker as it"
        " starts (a Dataset or an argument holding MPS tensors): sharing by file name is for CPU storages;"
        " keep tensors on the CPU until the worker, move batches to the device in the loop",
    ),
    IndexEntry(
        "Attempted to send CUDA tensor received from another process; this is not currently supported. "
        "Consider cloning before sending.",
        "cuda_resent",
        "13_field_guide_workers_and_machine.ipynb",
        "weights-from-a-trainer-to-actors",
        "a process re-sends a CUDA tensor it only received (a `Manager().Queue()`'s server does, in a"
        " `RemoteError`): a torch Queue from the sender, or `clone()` before sending on",
    ),
    IndexEntry(
        "RuntimeError: unable to mmap 4 bytes from file </torch_4242_1234_43>: Cannot allocate memory (12)",
        "map_count",
        "13_field_guide_workers_and_machine.ipynb",
        "unable-to-mmap-cannot-allocate-memory-12-the-map-count",
        "the process holds `vm.max_map_count` mappings (one per shared storage), memory to spare: fewer,"
        " larger storages, or raise the sysctl",
    ),
    IndexEntry(
        "TypeError: cannot pickle '_io.FileIO' object",
        "handle_in_init",
        "13_field_guide_workers_and_machine.ipynb",
        "a-file-opened-in-init-and-shared-by-fork-workers",
        "a Dataset holding an open file sent to a spawn or forkserver worker (macOS, Windows, Python 3.14+"
        " on Linux; torch adds `UserWarning: Got pickle error when attempting to start a worker Process`):"
        " keep the path, open the file in each worker on its first read",
    ),
    IndexEntry(
        "AssertionError: daemonic processes are not allowed to have children",
        "daemonic_worker",
        "13_field_guide_workers_and_machine.ipynb",
        "daemonic-processes-are-not-allowed-to-have-children",
        "a DataLoader worker (a daemon) starts a process, a pool or a library's workers in `__getitem__`: raise"
        " `num_workers`, use threads in the worker (`concurrent.futures.ThreadPoolExecutor`), or do the work"
        " outside the Dataset (torch 2.15.0's `torch.compile` does not raise it by default)",
    ),
    IndexEntry(
        "RuntimeError: Inductor async compile process pools are disabled in daemonic multiprocessing processes.",
        "daemonic_worker",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-c-inductor-s-compile-workers",
        "`torch.compile` in a DataLoader worker with a multiprocessing `worker_start_method`: compile in the"
        " main process, or `TORCHINDUCTOR_WORKER_START=subprocess`",
    ),
    IndexEntry(
        "The kernel on this machine does not support the pidfd_getfd syscall needed to use IPC for CUDA tensors "
        "when expandable_segments:True is set.",
        "cuda_ipc_container",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-b-cuda-between-processes-on-a-gpu",
        "CUDA IPC with `expandable_segments` on a kernel without the `pidfd_getfd` syscall (ENOSYS: Linux"
        " before 5.6): `expandable_segments:False`, or a newer kernel",
    ),
    IndexEntry(
        "RuntimeError: pidfd_getfd: Operation not permitted",
        "cuda_ipc_container",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-b-cuda-between-processes-on-a-gpu",
        "CUDA IPC with `expandable_segments`: the receiver may not take the sender's file descriptors (EPERM:"
        " Yama `ptrace_scope`, a container's seccomp profile without `CAP_SYS_PTRACE`): `--cap-add SYS_PTRACE`,"
        " `ptrace_scope` 0, or `expandable_segments:False`",
    ),
    IndexEntry(
        "UserWarning: pin_memory_device is deprecated, the current accelerator will be used as the device",
        "dataloader_option",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-e-three-dataloader-options",
        "`DataLoader(pin_memory_device=...)` is deprecated and ignored (torch 2.15.0: the current accelerator pins): drop it",
    ),
    # helper hD (turn 5): two messages users report (real-problems review, item 12)
    IndexEntry(
        "RuntimeError: context has already been set",
        "start_method_set_twice",
        "01_start_methods.ipynb",
        "three-start-methods",
        "`set_start_method` ran a second time (a re-run cell, a library or a test runner that set it"
        ' first; CPython\'s `multiprocessing`, any version): use `mp.get_context("spawn")` where you start'
        " processes, or `set_start_method(..., force=True)` once, knowing it changes every later default",
    ),
    IndexEntry(
        "RuntimeError: Gloo connectFullMesh failed with",
        "gloo_peer_unreachable",
        "09_multi_node.ipynb",
        "appendix-real-networks",
        "(then `timed out connecting: SO_ERROR: Connection refused`, `No route to host` or `Connect"
        " timeout`) a rank announced an address the others cannot reach: a hostname that"
        " resolves to 127.x or a private address, the wrong interface. Set `GLOO_SOCKET_IFNAME` to the"
        " interface the nodes share and `MASTER_ADDR` to an address all reach (torch 2.15.0's text)",
    ),
)
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
