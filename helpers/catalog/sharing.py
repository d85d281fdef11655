"""Catalog entries: Shared memory: tensors between processes, file descriptors, /dev/shm, memory maps, the resource tracker.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="received_0_items_of_ancdata",
        message="RuntimeError: received 0 items of ancdata",
        cause=(
            "a Queue consumer holds more shared tensors than it may open files (`file_descriptor`: one fd "
            "per storage): raise `ulimit -n` or use `file_system`"
        ),
        fix="",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="too_many_open_files_dataloader",
        message="RuntimeError: Too many open files. Communication with the workers is no longer possible.",
        cause=(
            "the same in a DataLoader's main process (batches kept alive: one fd per storage); the message "
            "goes on with the two fixes"
        ),
        fix="",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="unable_to_open_shared_memory_object",
        message=(
            "RuntimeError: unable to open shared memory object </torch_4242_1234_60> in read-write mode: "
            "Too many open files (24)"
        ),
        cause="the same on the sending side, at `share_memory_()` or a Queue's `put`",
        fix="",
        teaches="02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names",
        case="too_many_open_files",
    ),
    Entry(
        id="shm_full",
        message="RuntimeError: unable to allocate shared memory(shm) for file",
        cause=(
            "`/dev/shm` is full (from torch 2.13 it ends `No space left on device (28)`; 2.11 named a "
            "stale errno there): `--shm-size`"
        ),
        fix="",
        teaches="08_debugging_and_pitfalls.ipynb#a-full-dev-shm",
        case="shm_full",
    ),
    Entry(
        id="dataloader_bus_error",
        message="RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
        cause="a full `/dev/shm` with torch before PR #161910",
        fix="",
        teaches="08_debugging_and_pitfalls.ipynb#appendix-c-the-bus-error-of-older-torch",
        case="shm_full",
    ),
    Entry(
        id="share_filename_cpu_only",
        message="RuntimeError: _share_filename_: only available on CPU",
        cause=(
            "a non-CPU tensor (MPS on macOS) pickled for another process, most often into a spawn worker "
            "as it starts (a Dataset or an argument holding MPS tensors): sharing by file name is for CPU "
            "storages; keep tensors on the CPU until the worker, move batches to the device in the loop"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        case="other_platform",
    ),
    Entry(
        id="map_count",
        message="RuntimeError: unable to mmap 4 bytes from file </torch_4242_1234_43>: Cannot allocate memory (12)",
        cause=(
            "the process holds `vm.max_map_count` mappings (one per shared storage), memory to spare: "
            "fewer, larger storages, or raise the sysctl"
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count",
        case="map_count",
    ),
)
