"""Catalog entries: DataLoader workers, pin memory, datasets in workers.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="handle_in_init",
        message="TypeError: cannot pickle '_io.FileIO' object",
        cause=(
            "a Dataset holding an open file sent to a spawn or forkserver worker (macOS, Windows, Python "
            "3.14+ on Linux; torch adds `UserWarning: Got pickle error when attempting to start a worker "
            "Process`): keep the path, open the file in each worker on its first read"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers",
        case="handle_in_init",
    ),
    Entry(
        id="daemonic_worker",
        message="AssertionError: daemonic processes are not allowed to have children",
        cause=(
            "a DataLoader worker (a daemon) starts a process, a pool or a library's workers in "
            "`__getitem__`: raise `num_workers`, use threads in the worker "
            "(`concurrent.futures.ThreadPoolExecutor`), or do the work outside the Dataset (torch 2.15.0's "
            "`torch.compile` does not raise it by default)"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children",
        case="daemonic_worker",
    ),
    Entry(
        id="inductor_in_daemonic",
        message=(
            "RuntimeError: Inductor async compile process pools are disabled in daemonic multiprocessing "
            "processes."
        ),
        cause=(
            "`torch.compile` in a DataLoader worker with a multiprocessing `worker_start_method`: compile "
            "in the main process, or `TORCHINDUCTOR_WORKER_START=subprocess`"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-c-inductor-s-compile-workers",
        case="daemonic_worker",
    ),
    Entry(
        id="pin_memory_device_deprecated",
        message="UserWarning: pin_memory_device is deprecated, the current accelerator will be used as the device",
        cause=(
            "`DataLoader(pin_memory_device=...)` is deprecated and ignored (torch 2.15.0: the current "
            "accelerator pins): drop it"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-e-three-dataloader-options",
        case="dataloader_option",
    ),
)
