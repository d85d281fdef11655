"""Catalog entries: Rendezvous: TCPStore, sockets, init_process_group, the elastic rendezvous.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="port_in_use",
        message=(
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
            "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
            "already in use"
        ),
        cause=(
            "another job (or a leftover) holds the rendezvous port (`code: -98` is Linux's errno; macOS "
            "prints -48)"
        ),
        fix="",
        teaches="10_field_guide.ipynb#address-already-in-use-two-jobs-on-one-port",
        case="port_in_use",
    ),
    Entry(
        id="use_libuv_without_libuv",
        message=(
            "RuntimeError: use_libuv was requested but PyTorch was built without libuv support, run with "
            "USE_LIBUV=0 to disable it."
        ),
        cause=(
            "torchrun's stores or a `TCPStore(...)` ask for libuv, the default since torch 2.4, on a "
            "Windows build without it; in torch 2.15.0 they ignore `USE_LIBUV` (only "
            "`init_process_group`'s `tcp://` and `env://` read it, default 0 on Windows), so torchrun "
            'cannot start there (pytorch PR #196855, open): `mp.spawn` and `init_process_group("gloo", '
            '"tcp://...")`, or WSL (older torch: `was build without libuv support`)'
        ),
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        case="other_platform",
    ),
)
