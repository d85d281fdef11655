"""Catalog entries: Rendezvous: TCPStore, sockets, init_process_group, the elastic rendezvous.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

_FREE_PORT = """\
    with socket.socket() as s:  # a free port for this run
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
"""

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="port_in_use",
        message=(
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
            "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
            "already in use"
        ),
        pattern=(
            r"The server socket has failed to listen on any local network address\.[^\n]*"
            r"(?:EADDRINUSE|[Aa]ddress already in use)"
            r"|The server socket has failed to (?:bind to|listen on) \S+ \(errno: 98 - Address already in use\)"
            r"|DistNetworkError: on \S+, port: \d+ already in use"
        ),
        cause=(
            "The process that hosts the rendezvous store (rank 0 under `init_process_group`, the agent "
            "of the first node under torchrun) could not listen on `MASTER_PORT` / the `--rdzv-endpoint` "
            "port because another process already holds it: a second job started with the same port "
            "(29500 is everyone's default), or a leftover of an earlier run still alive. `code: -98` is "
            "Linux's EADDRINUSE (macOS prints -48); with `USE_LIBUV=0` the same failure reads `failed to "
            "bind to [::]:29500 (errno: 98 - Address already in use)`."
        ),
        fix=(
            "Give each job its own port: `torchrun --master-port=29501 ...` (or `--rdzv-endpoint=host:0` "
            "style free ports with `--standalone`), `MASTER_PORT=...` for `env://`, or pick a free port "
            "with `socket.bind(('', 0))` before `mp.spawn`. Find and stop the leftover holding the port: "
            "`ss -ltnp | grep 29500` or `lsof -i :29500`."
        ),
        sites=(
            "torch/distributed/elastic/utils/distributed.py::create_c10d_store::dist.DistNetworkError::on-_-port-_-already-in-use",
            "torch/distributed/elastic/utils/distributed.py::create_c10d_store::log.warning::port-_-already-in-use-attempt-_-_",
            "torch/lib/libtorch_cpu.so::address-already-in-use",
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-listen-on-_-_",
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-listen-on-any-local-network-address",
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-listen-on-any-local-network-address-port-_-useipv6-_-code-_-name-_-m",
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-bind-to-_-_",
        ),
        reproduction=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    first = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=5))
    # a second job on the same port: its rendezvous server cannot listen there
    second = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=5))
""",
        fixed=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    first = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=5))
    # the second job gets its own port (0: the system picks a free one)
    second = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=5))
    print("two stores on ports", first.port, second.port)
""",
        teaches="10_field_guide.ipynb#address-already-in-use-two-jobs-on-one-port",
        case="port_in_use",
    ),
    Entry(
        id="use_libuv_without_libuv",
        message=(
            "torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without libuv "
            "support, run with "
            "USE_LIBUV=0 to disable it."
        ),
        pattern=r"use_libuv was requested but PyTorch was buil[dt] without libuv support",
        cause=(
            "torchrun's stores and a plain `TCPStore(...)` ask for the libuv server, the default since "
            "torch 2.4, and some Windows builds of torch have no libuv. In torch 2.15.0 those stores "
            "ignore `USE_LIBUV` (only `init_process_group`'s `tcp://` and `env://` read it, default 0 "
            "on Windows), so torchrun cannot start there (pytorch PR #196855, open). Older torch "
            "printed `was build without libuv support`."
        ),
        fix=(
            'On Windows launch without torchrun: `mp.spawn` with `init_process_group("gloo", '
            'init_method="tcp://127.0.0.1:PORT", ...)`, or `TCPStore(..., use_libuv=False)` when you '
            "make the store yourself; or run under WSL, whose Linux build has libuv."
        ),
        read_from=(
            "torch/csrc/distributed/c10d/TCPStore.cpp (TCPStore::TCPStore: TORCH_CHECK_WITH(DistStoreError, "
            "is_libuv_tcpstore_backend_available(), ...)); only Windows builds lack libuv"
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        case="other_platform",
    ),
    Entry(
        id="tcpstore_connect_timeout",
        message=(
            "torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying "
            "to connect to (127.0.0.1, 29500)."
        ),
        pattern=(
            r"The client socket has timed out after \S+ while trying to connect to "
            r"(?:\(\S+, \d+\)|\S+:\d+)"
        ),
        cause=(
            "A rank (or torchrun's agent) tried to reach the rendezvous store at MASTER_ADDR:MASTER_PORT "
            "(or `--rdzv-endpoint`) and nothing accepted the connection before the timeout: no server "
            "listens there (rank 0 or the first node has not started, crashed, or listens on another "
            "port), the host name does not resolve, or a firewall drops the packets. The client retries "
            "until the deadline, then says this; it does not know which of these it was."
        ),
        fix=(
            "Check that every rank uses the same MASTER_ADDR/MASTER_PORT (`--rdzv-endpoint`) and that "
            "rank 0's process (the first node's agent) is up and listening: `ss -ltnp | grep PORT` on "
            "that host, `nc -zv HOST PORT` from this one. Use an address the other machines can reach "
            "(not 127.0.0.1 across nodes), open the port in the firewall, and start all nodes within "
            "the timeout (`init_process_group(timeout=...)`, `--rdzv-conf read_timeout=...`)."
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::the-client-socket-has-timed-out-after-_-while-trying-to-connect-to-_-_",
        ),
        reproduction=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    # a rank whose rank 0 never started: no store server listens on the port
    dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=1))
""",
        fixed=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=5))  # rank 0 listens first
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=1))
    client.set("hello", "world")
    print(server.get("hello"))
""",
        teaches="06_ddp_mp_spawn.ipynb#appendix-where-the-rendezvous-listens",
    ),
    Entry(
        id="tcpstore_connect_failed",
        message=(
            "torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
            "address of (10.0.0.5, 29500). The client socket has failed to connect to 10.0.0.5:29500 "
            "(errno: 113 - No route to host)."
        ),
        pattern=(
            r"The client socket has failed to connect to any network address of \(\S+, \d+\)\."
            r"|The client socket has failed to connect to \S+ \(errno: \d+ - [^)]*\)\."
        ),
        cause=(
            "The connection to the rendezvous store (MASTER_ADDR:MASTER_PORT, `--rdzv-endpoint`) failed "
            "with an error that retrying does not fix, unlike 'connection refused' (which is retried "
            "until the timeout): the address is on a network this machine has no route to (errno 101 "
            "Network is unreachable, 113 No route to host), or the connection is forbidden (13 "
            "Permission denied). The errno at the end names which. A `[W socket.cpp]` warning with "
            "this text alone, such as `[localhost]:29500 (errno: 99 - Cannot assign requested address)`, "
            "is one of the host's addresses failing (IPv6 `::1` where the machine has none; macOS says "
            "errno 49, Windows 10049): torch tries the next, and the job goes on when one connects."
        ),
        fix=(
            "Set MASTER_ADDR / `--rdzv-endpoint` to an address of rank 0's machine that this machine "
            "can reach: `ping HOST`, `ip route get HOST`, `nc -zv HOST PORT`; on machines with several "
            "interfaces use the address of the shared network (and set `GLOO_SOCKET_IFNAME` / "
            "`NCCL_SOCKET_IFNAME` to that interface)."
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::the-client-socket-has-failed-to-connect-to-any-network-address-of-_-_",
            "torch/lib/libtorch_cpu.so::the-client-socket-has-failed-to-connect-to-_-_",
        ),
        reproduction="""\
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    # MASTER_ADDR set to an address no interface can connect to (a broadcast address)
    dist.TCPStore("255.255.255.255", 29500, is_master=False, timeout=timedelta(seconds=2))
""",
        fixed=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=5))
    # the address of the machine that runs rank 0, reachable from here
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=2))
    print("connected:", client.num_keys() >= 0)
""",
        teaches="09_multi_node.ipynb#appendix-real-networks",
    ),
    Entry(
        id="server_socket_bind_refused",
        message=(
            "torch.distributed.DistNetworkError: The server socket has failed to bind. port: 80, useIpv6: 0, "
            "code: -13, name: EACCES, message: permission denied"
        ),
        pattern=(
            r"The server socket has failed to bind\. [^\n]*(?:EACCES|EPERM|EADDRNOTAVAIL|ENODEV)"
            r"|The server socket has failed to bind to \S+ \(errno: (?!98\b)\d+ - [^)]*\)"
            r"|The server socket has failed to listen on provided socket\."
        ),
        cause=(
            "The rendezvous store's server (rank 0, or the first node's torchrun agent) could not bind its "
            "listening socket for a reason other than the port being taken: a port below 1024 without "
            "root (EACCES), a sandbox or security policy that forbids listening (EPERM), or a socket "
            "handed over by the launcher (`master_listen_fd`) that can no longer listen. The libuv store "
            "(the default) prints `failed to bind.` with the libuv error name; `USE_LIBUV=0` prints "
            "`failed to bind to ADDR (errno: ...)`."
        ),
        fix=(
            "Use an unprivileged port (1024-65535; torch's default 29500) for MASTER_PORT / "
            "`--master-port` / `--rdzv-endpoint`, and run where listening on TCP is allowed (inside a "
            "sandbox, allow network access for the job). For EADDRINUSE see `port_in_use`."
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-bind",
            "torch/lib/libtorch_cpu.so::the-server-socket-has-failed-to-listen-on-provided-socket-socket-_-code-_-name-_-message-_",
        ),
        reproduction="""\
import os
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    if os.geteuid() == 0:  # root may bind any port: run as an ordinary user
        os.setgid(65534)
        os.setuid(65534)
    # MASTER_PORT below 1024: only root may listen there
    dist.TCPStore("127.0.0.1", 80, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=2))
""",
        fixed="""\
import os
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    # an unprivileged port (0: the system picks a free one; 29500 is torch's default)
    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=2)
    )
    print("listening on", store.port)
""",
    ),
    Entry(
        id="server_socket_no_dual_stack",
        message="[W socket.cpp:449] [c10d] The server socket does not support IPv4 communication on [::]:29500.",
        pattern=r"The server socket does not support IPv4 communication on \S+\.",
        cause=(
            "The store's server (with `USE_LIBUV=0`) listens on an IPv6 socket and asks the kernel to "
            "accept IPv4 connections on it too (dual stack); the kernel refused, so clients that connect "
            "over IPv4 (MASTER_ADDR as an IPv4 address) may not reach it. It is a warning: the server "
            "still starts."
        ),
        fix=(
            "Nothing if the job starts. If IPv4 clients then time out, connect over IPv6 (MASTER_ADDR an "
            "IPv6 address or a name that resolves to one), or allow dual-stack sockets "
            "(`sysctl net.ipv6.bindv6only=0`), or use the default libuv store (unset `USE_LIBUV=0`)."
        ),
        sites=("torch/lib/libtorch_cpu.so::the-server-socket-does-not-support-ipv4-communication-on-_",),
        read_from=(
            "torch/csrc/distributed/c10d/socket.cpp (SocketListenOp::tryListen, when "
            "SocketImpl::enableDualStack fails); this machine's kernel allows dual stack"
        ),
    ),
    Entry(
        id="tcpstore_accept_failed",
        message=(
            "[E socket.cpp:964] [c10d] The server socket on [::]:29500 has failed to accept a connection "
            "(errno: 24 - Too many open files)."
        ),
        pattern=(
            r"The server socket on \S+ has failed to accept a connection"
            r"|The server socket on \S+ is not listening for connections\."
        ),
        cause=(
            "The store server of the non-libuv backend (`USE_LIBUV=0`) could not accept a rank's "
            "connection: most often the process is out of file descriptors (errno 24: one socket per "
            "rank, so thousands of ranks exceed a `ulimit -n` of 1024), or its listening socket was "
            "closed under it (`is not listening`). The rank that was refused then times out connecting."
        ),
        fix=(
            "Raise the open-file limit of the process that hosts the store (`ulimit -n 65536` before "
            "torchrun, `LimitNOFILE=` in a systemd unit, `resource.setrlimit(RLIMIT_NOFILE, ...)`), and "
            "use the default libuv store (unset `USE_LIBUV=0`), which serves many ranks from one event "
            "loop."
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::the-server-socket-on-_-has-failed-to-accept-a-connection-_",
            "torch/lib/libtorch_cpu.so::the-server-socket-on-_-is-not-listening-for-connections",
        ),
        read_from="torch/csrc/distributed/c10d/socket.cpp (SocketImpl::accept)",
    ),
    Entry(
        id="file_store_missing_folder",
        message="torch.distributed.DistStoreError: No such file or directory",
        cause=(
            '`init_process_group` with `init_method="file:///PATH"` (or a `FileStore(PATH, ...)`) names '
            "a file in a folder that does not exist on this machine. The store cannot create the file, "
            "and it retries, waiting for the file to appear, for the store's default 300 s, not the "
            "`timeout` given to `init_process_group`: the rank seems to hang for five minutes, then "
            "says this without the path (upstream/file_store_missing_folder.py)."
        ),
        fix=(
            "Create the folder before the ranks start (`os.makedirs(folder, exist_ok=True)`) and pass a "
            "new file in it (a file left by an earlier job holds its keys: delete it first). Across "
            "machines the path must be on a file system every node mounts at the same place; or use "
            "`tcp://` or `env://` instead."
        ),
        read_from=(
            "torch/distributed/rendezvous.py (_file_rendezvous_handler: FileStore(path, world_size), no "
            "timeout) and torch/csrc/distributed/c10d/FileStore.cpp (File::File retries ENOENT until "
            "the store's timeout); measured on torch 2.15.0: 301 s with timeout=5 s"
        ),
    ),
    Entry(
        id="store_wait_timeout",
        message=(
            "[W1202 03:04:49.983031663 socket.cpp:494] [c10d] waitForInput: socket SocketImpl(fd=13, "
            "addr=[::ffff:127.0.0.1]:45738, remote=[::ffff:127.0.0.1]:48409) timed out after 1000ms"
        ),
        pattern=(
            r"waitForInput: socket SocketImpl\([^\n]*\) timed out after \d+ms"
            r"|waitForInput: poll for socket SocketImpl\([^\n]*\) returned 0, likely a timeout"
        ),
        cause=(
            "A store `get`/`wait` (the rendezvous store of `init_process_group` or torchrun) waited "
            "for a key that another rank was to set, and it was not set in time: that rank crashed, is "
            "slower (still loading data or a checkpoint), or never calls the matching function. The "
            "client logs these two lines, then the caller raises `DistStoreError: wait timeout after "
            "...ms, keys: ...` or its own timeout error (a store based barrier, torchrun's exit "
            "barrier): the keys, or that error's own entry, say what it waited for."
        ),
        fix=(
            "Look at the other ranks' output for the first error: the rank that never set the key. If "
            "it is only slow, raise the timeout (`init_process_group(timeout=timedelta(minutes=...))`, "
            "`TCPStore(timeout=...)`); if it never calls the same function (`new_group`, a barrier), "
            "make every rank call it in the same order."
        ),
        rank=-1,
        sites=(
            "torch/lib/libtorch_cpu.so::waitforinput-poll-for-socket-_-returned-0-likely-a-timeout",
            "torch/lib/libtorch_cpu.so::waitforinput-socket-_-timed-out-after-_ms",
        ),
        reproduction=f"""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=1))
    store.wait(["ready"])  # the rank that sets "ready" never does
""",
        fixed=f"""\
import socket
import threading
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
{_FREE_PORT}
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=5))
    other = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
    threading.Thread(target=other.set, args=("ready", "1")).start()  # the other rank sets it
    store.wait(["ready"])
    print("ready")
""",
    ),
    Entry(
        id="store_clients_missing",
        message=(
            "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
            "joined."
        ),
        pattern=r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined\.",
        cause=(
            "Rank 0 (with `tcp://` or `env://`; torchrun's first agent with `--rdzv-backend=static`) hosts "
            "the rendezvous store and waits until `world_size` ranks have connected to it; only the "
            "number before the slash did, within the timeout. The others did not start, crashed before "
            "`init_process_group`, connect to another address or port (their MASTER_ADDR/MASTER_PORT), "
            "cannot reach this host (a firewall, the wrong interface), or `world_size` is larger than "
            "the number of ranks started."
        ),
        fix=(
            "Start every rank, with the same MASTER_ADDR/MASTER_PORT and `world_size` (nodes x "
            "processes per node); look at the missing ranks' own output for an earlier error; from "
            "another node check `nc -zv MASTER_ADDR MASTER_PORT`. Their messages say `The client socket "
            "has timed out` when they cannot reach this store."
        ),
        teaches="09_multi_node.ipynb#one-agent-per-node-one-rendezvous",
        sites=(
            "torch/lib/libtorch_cpu.so::timed-out-after-_-seconds-waiting-for-clients-_-_-clients-joined",
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch.distributed as dist

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # rank 0 of a world of 2 hosts the store and waits for rank 1, which is never started
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2, timeout=timedelta(seconds=2)
    )
""",
        fixed="""\
import socket
from datetime import timedelta

import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=20)
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    ranks = [ctx.Process(target=run, args=(rank, port)) for rank in (0, 1)]  # every rank started
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(60)
""",
    ),
    Entry(
        id="store_based_barrier_timeout",
        message=(
            "torch.distributed.DistStoreError: Timed out initializing process group in store based barrier "
            "on rank 0, for key: store_based_barrier_key:1 (world_size=2, num_workers_joined=1, "
            "timeout=0:30:00 error=wait timeout after 10002ms, keys: "
            "/default_pg/0//store_based_barrier_key:1:last_worker)"
        ),
        pattern=(
            r"Timed out initializing process group in store based barrier on rank:? \d+, for key: \S+ "
            r"\(world_size=\d+, (?:num_workers_joined|worker_count)=\d+"
        ),
        cause=(
            "With `TORCH_DIST_INIT_BARRIER=1`, `init_process_group` and `new_group` end with a barrier "
            "through the store that waits until `world_size` ranks arrive. `num_workers_joined` of them "
            "did in time: the others crashed before, are slow to start, or (for `new_group`) never call "
            "it; `new_group` is collective over all ranks, even those not in the new group. The barrier "
            "checks at least every 10 seconds, so it fails no sooner than that. Older torch always ran "
            "this barrier (the variable came in 2023) and printed `on rank: N ... worker_count=N`."
        ),
        fix=(
            "Call `dist.new_group(ranks)` on every rank, with the same `ranks`, in the same order (use the "
            "group only on its members); check the missing ranks' output for an earlier error; or pass "
            "`use_local_synchronization=True` to `new_group` so that only members wait. A larger "
            "`timeout=` helps only when ranks are slow."
        ),
        sites=(
            "torch/distributed/distributed_c10d.py::_store_based_barrier::DistStoreError::timed-out-initializing-process-group-in-store-based-barrier-",
        ),
        reproduction="""\
import os
import socket
from datetime import timedelta

import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port, done):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=5)
    )
    try:
        if rank == 0:
            # a group of rank 0 only, made on rank 0 only: every rank must call new_group
            dist.new_group([0], timeout=timedelta(seconds=1))
    finally:
        done.set() if rank == 0 else done.wait(30)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["TORCH_DIST_INIT_BARRIER"] = "1"  # the barrier after each new group (off by default)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    done = ctx.Event()
    procs = [ctx.Process(target=run, args=(rank, port, done)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
""",
        fixed="""\
import os
import socket
import sys
from datetime import timedelta

import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=5)
    )
    dist.new_group([0], timeout=timedelta(seconds=5))  # every rank calls it, members or not
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["TORCH_DIST_INIT_BARRIER"] = "1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=run, args=(rank, port)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    sys.exit(max(p.exitcode for p in procs))
""",
    ),
    Entry(
        id="op_on_rank_not_in_group",
        message=(
            "UserWarning: Running all_reduce on global rank 1 which does not belong to the given group."
        ),
        pattern=r"Running \w+ on global rank -?\d+ which does not belong to the given group\.",
        cause=(
            "A collective (`all_reduce`, `broadcast`, `barrier`...) was called with `group=` a group this "
            "rank is not a member of. `new_group` returns a placeholder (`GroupMember.NON_GROUP_MEMBER`) "
            "on ranks outside the group; a collective on it does nothing and returns None, so the tensor "
            "is left unchanged on this rank and any `.wait()` on the result fails."
        ),
        fix=(
            "Call the collective only on members: `if dist.get_rank() in ranks:` (or `if group != "
            "dist.GroupMember.NON_GROUP_MEMBER:`), keeping the `new_group(ranks)` call itself on every "
            "rank."
        ),
        sites=(
            "torch/distributed/distributed_c10d.py::_warn_not_in_group::UserWarning::running-_-on-global-rank-_-which-does-not-belong-to-the-give",
        ),
        reproduction="""\
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=5)
    )
    group = dist.new_group([0])  # every rank calls new_group
    dist.all_reduce(torch.ones(1), group=group)  # rank 1 is not in the group
    dist.barrier()  # leave together: a rank that exits while another still connects breaks its init
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=run, args=(rank, port)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
""",
        fixed="""\
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=5)
    )
    ranks = [0]
    group = dist.new_group(ranks)
    if rank in ranks:  # only members run the group's collectives
        dist.all_reduce(torch.ones(1), group=group)
    dist.barrier()  # leave together: a rank that exits while another still connects breaks its init
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=run, args=(rank, port)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    sys.exit(max(p.exitcode for p in procs))
""",
    ),
    Entry(
        id="invalid_process_group",
        message="ValueError: Invalid process group specified",
        cause=(
            "A process group passed to `destroy_process_group`, `get_backend`, `get_backend_config` or "
            "`set_timeout` is not one torch knows: it was destroyed already (a second "
            "`destroy_process_group(group)`, or a group made before `destroy_process_group()` tore "
            "down everything), or it comes from another `init_process_group`."
        ),
        fix=(
            "Destroy each group once, and drop your references to it afterwards; after "
            "`destroy_process_group()` (all groups) make new groups with `new_group` before using them. "
            "`dist.is_initialized()` tells whether a default group exists."
        ),
        sites=(
            "torch/distributed/distributed_c10d.py::destroy_process_group::ValueError::invalid-process-group-specified",
            "torch/distributed/distributed_c10d.py::get_backend::ValueError::invalid-process-group-specified",
            "torch/distributed/distributed_c10d.py::get_backend_config::ValueError::invalid-process-group-specified",
            "torch/distributed/distributed_c10d.py::get_backend_impl::ValueError::invalid-process-group-specified",
            "torch/distributed/distributed_c10d.py::set_timeout::ValueError::invalid-process-group-specified",
        ),
        reproduction="""\
import torch.distributed as dist

if __name__ == "__main__":
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.new_group([0])
    dist.destroy_process_group(group)
    dist.destroy_process_group(group)  # a second time: torch no longer knows the group
""",
        fixed="""\
import torch.distributed as dist

if __name__ == "__main__":
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.new_group([0])
    dist.destroy_process_group(group)
    group = None  # destroyed once; drop the reference
    dist.destroy_process_group()
""",
    ),
    Entry(
        id="device_mesh_without_groups",
        message="RuntimeError: DeviceMesh process groups not initialized!",
        cause=(
            "`DeviceMesh.get_group()` was called on a mesh built without process groups: one made with "
            "`DeviceMesh(..., _init_backend=False)` (some libraries build meshes that way and create "
            "the groups later) or an `xla` mesh, for which torch makes none."
        ),
        fix=(
            "Make the mesh with `init_device_mesh(device_type, mesh_shape, mesh_dim_names=...)` after "
            "`init_process_group`, which creates a process group per mesh dimension; or take the groups "
            "from the library that built the mesh."
        ),
        sites=(
            "torch/distributed/device_mesh.py::DeviceMesh.get_group::RuntimeError::devicemesh-process-groups-not-initialized",
        ),
        read_from=(
            "torch/distributed/device_mesh.py (DeviceMesh.get_group: no `_dim_group_names` when "
            "`_init_backend` is False or device_type is 'xla'); a CPU mesh without an initialized "
            "default group fails earlier with 'Default process group has not been initialized'"
        ),
    ),
    Entry(
        id="torch_distributed_init_failed",
        message="RuntimeError: Failed to initialize torch.distributed",
        cause=(
            "`import torch.distributed` ran torch's C++ initialization of the distributed package "
            "(`torch._C._c10d_init()`) and it returned false: the installed torch is broken or mixed "
            "(files of two versions, a partially upgraded environment), not anything in your script."
        ),
        fix=(
            "Reinstall torch cleanly in a fresh environment (`pip uninstall -y torch` until none is left, "
            'then `pip install torch`), and check `python -c "import torch.distributed as d; '
            'print(d.is_available())"`.'
        ),
        sites=(
            "torch/distributed/__init__.py::<module>::RuntimeError::failed-to-initialize-torch-distributed",
        ),
        read_from=(
            "torch/distributed/__init__.py (module level: `if is_available() and not "
            "torch._C._c10d_init(): raise`); a working install cannot print it"
        ),
    ),
    Entry(
        id="env_rendezvous_variable_missing",
        message=(
            "ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
            "variable MASTER_ADDR expected, but not set"
        ),
        pattern=(
            r"Error initializing torch\.distributed using env:// rendezvous: environment variable \w+ "
            r"expected, but not set"
        ),
        cause=(
            "`init_process_group()` without `init_method` reads the rendezvous from the environment "
            "(`env://`): MASTER_ADDR, MASTER_PORT, and RANK and WORLD_SIZE unless passed as arguments. "
            "torchrun sets them for each worker; a script started with plain `python` (or a worker of "
            "`mp.spawn`/`mp.Process` whose parent did not set them) has none."
        ),
        fix=(
            "Launch with `torchrun --nproc-per-node=N script.py`; or, under `mp.spawn`, set "
            '`os.environ["MASTER_ADDR"] = "127.0.0.1"` and `os.environ["MASTER_PORT"] = "29500"` '
            "before starting the workers and pass `rank=` and `world_size=`; or give "
            '`init_method="tcp://HOST:PORT"`.'
        ),
        sites=(
            "torch/distributed/rendezvous.py::_env_rendezvous_handler._get_env_or_raise::_env_error::built-env_var",
        ),
        reproduction="""\
import os

import torch.distributed as dist

if __name__ == "__main__":
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(name, None)  # what plain `python script.py` gives
    dist.init_process_group("gloo", rank=0, world_size=1)
""",
        fixed="""\
import os
import socket

import torch.distributed as dist

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"] = "127.0.0.1"  # what torchrun sets for each worker
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=0, world_size=1)
    dist.destroy_process_group()
""",
        teaches="06_ddp_mp_spawn.ipynb#appendix-where-the-rendezvous-listens",
    ),
    Entry(
        id="rendezvous_store_unreachable",
        message=(
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
            "C10d store has failed. See inner exception for details."
        ),
        pattern=(
            r"RendezvousConnectionError: The connection to the C10d store has failed\."
            r"|RendezvousError: The file creation for C10d store has failed\."
        ),
        cause=(
            "torchrun's agent (`--rdzv-backend=c10d`) could not reach the rendezvous store at "
            "`--rdzv-endpoint`, or lost it later (the node that hosts it, the first one whose address "
            "matches the endpoint, exited or crashed). The real reason is the inner exception printed "
            "above it: a client timeout (nobody listens there yet), 'address in use' on the host, or, "
            "with `--rdzv-conf store_type=file`, a file path that cannot be created or opened. When "
            "the inner exception has a catalog entry of its own (a client timeout), read that one."
        ),
        fix=(
            "Read the inner exception above this one. Start the host node (the one whose own address is "
            "the endpoint) with the same `--rdzv-endpoint=HOST:PORT` and `--rdzv-id`, make HOST:PORT "
            "reachable from every node (`nc -zv HOST PORT`), or name the host explicitly with "
            "`--rdzv-conf is_host=1` on it; raise `--rdzv-conf read_timeout=...` when nodes start far "
            "apart. For `store_type=file`, give a path on a filesystem every node shares and can write."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py::C10dRendezvousBackend._call_store::RendezvousConnectionError::the-connection-to-the-c10d-store-has-failed-see-inner-except",
            "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py::_create_file_store::RendezvousConnectionError::the-connection-to-the-c10d-store-has-failed-see-inner-except",
            "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py::_create_file_store::RendezvousError::the-file-creation-for-c10d-store-has-failed-see-inner-except",
            "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py::_create_tcp_store::RendezvousConnectionError::the-connection-to-the-c10d-store-has-failed-see-inner-except",
        ),
        reproduction="""\
import sys

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

if __name__ == "__main__":
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=1,
        run_id="demo",
        max_restarts=0,
        # a file store whose endpoint is a folder, not a file path: the store cannot open it
        rdzv_backend="c10d",
        rdzv_endpoint=".",
        rdzv_configs={"store_type": "file"},
    )
    elastic_launch(config, sys.executable)("-c", "pass")
""",
        fixed="""\
import sys

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

if __name__ == "__main__":
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=1,
        run_id="demo",
        max_restarts=0,
        # a path to a file (on a filesystem every node shares, for several nodes)
        rdzv_backend="c10d",
        rdzv_endpoint="rendezvous_store",
        rdzv_configs={"store_type": "file"},
    )
    elastic_launch(config, sys.executable)("-c", "pass")
""",
        rank=-1,
        teaches="09_multi_node.ipynb#one-agent-per-node-one-rendezvous",
    ),
    Entry(
        id="rendezvous_join_timeout",
        message="torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
        pattern=r"^(?:[\w.]+\.)?RendezvousTimeoutError\s*$|\bRendezvousTimeoutError(?:: \"|\(\))",
        cause=(
            "torchrun's agents wait for `--nnodes` (at least its minimum, `MIN:MAX`) nodes to join the "
            "rendezvous; fewer joined within the join timeout (600 s by default, `--rdzv-conf "
            "join_timeout=...`), so this agent gave up. The others were not started, started with a "
            "different `--rdzv-id` or `--rdzv-endpoint`, or failed before joining. The error carries no "
            "message."
        ),
        fix=(
            "Start torchrun on every node with the same `--nnodes`, `--rdzv-id`, `--rdzv-backend` and "
            "`--rdzv-endpoint`, within the join timeout of each other (raise `--rdzv-conf "
            "join_timeout=1800` when a scheduler starts nodes far apart); or make `--nnodes` match the "
            "nodes you start (`--nnodes=1:4` lets fewer start)."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py::_DistributedRendezvousOpExecutor.run::RendezvousTimeoutError::-",
        ),
        reproduction=f"""\
import socket
import sys

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

if __name__ == "__main__":
{_FREE_PORT}
    config = LaunchConfig(
        min_nodes=2, max_nodes=2, nproc_per_node=1, run_id="demo", max_restarts=0,  # two nodes...
        rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{{port}}", rdzv_configs={{"join_timeout": 2}},
    )
    elastic_launch(config, sys.executable)("-c", "pass")  # ...and only this one starts
""",
        fixed=f"""\
import socket
import sys

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

if __name__ == "__main__":
{_FREE_PORT}
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=1, run_id="demo", max_restarts=0,  # the nodes started
        rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{{port}}", rdzv_configs={{"join_timeout": 2}},
    )
    elastic_launch(config, sys.executable)("-c", "pass")
""",
        teaches="09_multi_node.ipynb#one-agent-per-node-one-rendezvous",
    ),
    Entry(
        id="rendezvous_closed",
        message="torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
        pattern=(
            r"^(?:[\w.]+\.)?RendezvousClosedError\s*$|\bRendezvousClosedError(?:: \"|\(\))"
            r"|The rendezvous '[^'\n]*' is closed, terminating pending rendezvous\."
        ),
        cause=(
            "The rendezvous of this `--rdzv-id` was closed: another agent of the job finished, or failed "
            "for good (out of `--max-restarts`), and closed it so that no new round starts. An agent that "
            "joins or restarts after that gets this error; a spare node waiting beyond `--nnodes`'s "
            "maximum is told 'is closed, terminating pending rendezvous' (logged at INFO) and exits."
        ),
        fix=(
            "Look at the other nodes' output for the failure that ended the job. To run again, start all "
            "nodes with a new `--rdzv-id` (the closed state stays in the store while its host lives); "
            "do not start a node into a job that has already finished."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py::_DistributedRendezvousOpExecutor.run::RendezvousClosedError::-",
            "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py::_RendezvousJoinOp.__call__::RendezvousGracefulExitError::the-rendezvous-_-is-closed-terminating-pending-rendezvous",
        ),
        reproduction=f"""\
import socket

from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

if __name__ == "__main__":
{_FREE_PORT}
    params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{{port}}", run_id="demo",
                                  min_nodes=1, max_nodes=1, join_timeout=5)
    handler = get_rendezvous_handler(params)
    handler.set_closed()  # what an agent does when the job ends or fails for good
    handler.next_rendezvous()  # a node that joins (or restarts) after that
""",
        fixed=f"""\
import socket

from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

if __name__ == "__main__":
{_FREE_PORT}
    params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{{port}}", run_id="demo-2",
                                  min_nodes=1, max_nodes=1, join_timeout=5)
    handler = get_rendezvous_handler(params)  # a new run id: a fresh rendezvous
    info = handler.next_rendezvous()
    print("rank", info.rank, "of", info.world_size)
    handler.shutdown()
""",
        teaches="09_multi_node.ipynb#appendix-no-restarts-left-and-the-error-file",
    ),
    Entry(
        id="rendezvous_keep_alive_failed",
        message=(
            "The node 'node1_4242_0' has failed to send a keep-alive heartbeat to the rendezvous 'job1' "
            "due to an error of type RendezvousConnectionError."
        ),
        pattern=(
            r"The node '[^'\n]*' has failed to send a keep-alive heartbeat to the rendezvous '[^'\n]*' "
            r"due to an error of type \w+\."
        ),
        cause=(
            "Each torchrun agent writes a heartbeat into the rendezvous store every few seconds (5 s by "
            "default) so that the others know it is alive; this write failed. The store lives in the "
            "host node's agent: that node exited, crashed or was preempted, or the network to it broke. "
            "Agents whose heartbeat stops for long are dropped from the rendezvous."
        ),
        fix=(
            "Find out why the host node (the one named by `--rdzv-endpoint`) went away: its own output, "
            "the scheduler's log. With `--max-restarts` the survivors re-rendezvous only if the store is "
            "still there, so run the store where it outlives a node (an endpoint on a stable machine, or "
            "the etcd backend)."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py::DynamicRendezvousHandler._keep_alive::log.warning::the-node-_-has-failed-to-send-a-keep-alive-heartbeat-to-the-",
        ),
        read_from="torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (DynamicRendezvousHandler._keep_alive)",
        teaches="09_multi_node.ipynb#appendix-a-node-lost",
    ),
    Entry(
        id="etcd_unreachable",
        message=(
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to etcd "
            "has failed. See inner exception for details."
        ),
        pattern=r"RendezvousConnectionError: The connection to etcd has failed\.",
        cause=(
            "With `--rdzv-backend=etcd-v2`, the agent could not reach the etcd server at "
            "`--rdzv-endpoint` (or a read or write to it timed out): etcd is not running there, the "
            "address or port is wrong, TLS settings do not match, or the network drops it. The inner "
            "exception (an `etcd.EtcdException` or urllib3 timeout) above says which."
        ),
        fix=(
            "Check that etcd serves the v2 API at that endpoint (`curl http://HOST:2379/version`; start "
            "etcd 3.x with `--enable-v2`), and pass `--rdzv-conf protocol=https,cacert=...,cert=...,"
            "key=...` when it uses TLS; or switch to `--rdzv-backend=c10d`, which needs no etcd."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py::EtcdRendezvousBackend.get_state::RendezvousConnectionError::the-connection-to-etcd-has-failed-see-inner-exception-for-de",
            "torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py::EtcdRendezvousBackend.set_state::RendezvousConnectionError::the-connection-to-etcd-has-failed-see-inner-exception-for-de",
            "torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py::_create_etcd_client::RendezvousConnectionError::the-connection-to-etcd-has-failed-see-inner-exception-for-de",
        ),
        read_from=(
            "torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py (get_state, set_state, "
            "_create_etcd_client); no etcd server (nor the python-etcd package) here"
        ),
    ),
    Entry(
        id="etcd_store_key_timeout",
        message="LookupError: Timeout while waiting for keys in EtcdStore",
        pattern=r"LookupError: (?:Timeout while waiting for keys in EtcdStore|Key \S+ not found in EtcdStore)",
        cause=(
            "With the etcd rendezvous, the store the workers get (through `init_process_group`'s env:// "
            "rendezvous under torchrun) is an EtcdStore; a `get` or `wait` for a key that another rank "
            "was to publish timed out: that rank failed, is slow, or never publishes it."
        ),
        fix=(
            "Look at the other ranks' output for their first error; raise the timeout if they are only "
            "slow (`init_process_group(timeout=...)`); make every rank make the same store calls."
        ),
        sites=(
            "torch/distributed/elastic/rendezvous/etcd_store.py::EtcdStore.get::LookupError::key-_-not-found-in-etcdstore",
            "torch/distributed/elastic/rendezvous/etcd_store.py::EtcdStore.wait::LookupError::timeout-while-waiting-for-keys-in-etcdstore",
        ),
        read_from="torch/distributed/elastic/rendezvous/etcd_store.py (EtcdStore.get, EtcdStore.wait); no etcd here",
    ),
    Entry(
        id="free_port_socket_failed",
        message="RuntimeError: Failed to create a socket",
        pattern=r"RuntimeError: Failed to create a socket$|^[^\n]*Socket creation attempt failed\.",
        cause=(
            "torchrun's agent picks a free port for the workers' MASTER_PORT by binding a socket to port "
            "0, first IPv6 then IPv4; 'Socket creation attempt failed.' is logged for each family that "
            "fails, and when both fail it raises. IPv6 disabled in the kernel makes the first attempt "
            "fail (a warning only); both fail when the process is out of file descriptors (`ulimit -n`) "
            "or sockets are forbidden (a sandbox)."
        ),
        fix=(
            "A warning alone with IPv6 disabled is harmless. If it raises, raise the open-file limit "
            "(`ulimit -n 65536`) or close the descriptors the launching process leaks, and run where the "
            "process may open sockets."
        ),
        sites=(
            "torch/distributed/elastic/utils/distributed.py::get_socket_with_port::RuntimeError::failed-to-create-a-socket",
            "torch/distributed/elastic/utils/distributed.py::get_socket_with_port::log.warning::socket-creation-attempt-failed",
            "torch/distributed/elastic/utils/distributed.py::get_socket_with_port::log.warning::socket-creation-attempt-failed#2",
        ),
        reproduction="""\
import os
import resource

from torch.distributed.elastic.utils.distributed import get_free_port

if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    held = []
    try:
        while True:  # a process that leaks file descriptors up to its limit
            held.append(open(os.devnull))
    except OSError:
        pass
    get_free_port()  # what the agent calls for MASTER_PORT
""",
        fixed="""\
import os
import resource

from torch.distributed.elastic.utils.distributed import get_free_port

if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    held = [open(os.devnull) for _ in range(10)]  # descriptors closed when done: room left
    for f in held:
        f.close()
    print("port", get_free_port())
""",
    ),
    Entry(
        id="tensorpipe_socket_error",
        message=(
            "RuntimeError: async error on socket: Connection reset by peer (this error originated at "
            "tensorpipe/transport/shm/connection_impl.cc:187)"
        ),
        pattern=r"async error on socket: [^\n(]*(?:\(this error originated at tensorpipe/\S+\))?",
        cause=(
            "`torch.distributed.rpc` (its TensorPipe agent) lost a connection to another worker: the "
            "kernel reported an error on the socket (connection reset, refused, timed out), usually "
            "because the peer process exited or crashed, or the network between them broke; during "
            "`init_rpc` with many workers on one machine the shared-memory transport's connections can "
            "be reset too (pytorch#85607)."
        ),
        fix=(
            "Look at the peer worker's output for why it exited first; call `rpc.shutdown()` on every "
            "worker (graceful by default) instead of letting some exit early; across machines set "
            "`TP_SOCKET_IFNAME` to the interface the workers share."
        ),
        sites=("torch/lib/libtorch_cpu.so::async-error-on-socket",),
        read_from=(
            "third_party/tensorpipe (tensorpipe/transport/*/connection_impl.cc and listener_impl.cc: "
            '`TP_CREATE_ERROR(SystemError, "async error on socket", error)` on EPOLLERR), linked into '
            "libtorch_cpu for torch.distributed.rpc; reported in "
            "https://github.com/pytorch/pytorch/issues/85607"
        ),
    ),
    Entry(
        id="symm_mem_ipc_socket",
        message="RuntimeError: Failed to bind socket: Address already in use",
        pattern=r"Failed to (?:bind|create) socket: ",
        cause=(
            "CUDA symmetric memory (`torch.distributed._symmetric_memory`, used by async tensor "
            "parallelism and some fused collectives) passes CUDA memory handles between the ranks of a "
            "node over a Unix domain socket at `$TMPDIR/symm_mem-<pid>` (`/tmp` when TMPDIR, TMP, TEMP "
            "and TEMPDIR are unset). Creating or binding it failed: a file of that name left by a dead "
            "process with the same pid (containers reuse small pids; `Address already in use`), a "
            "temporary directory that does not exist or is not writable, or a sandbox that forbids Unix "
            "sockets."
        ),
        fix=(
            "Remove stale `symm_mem-*` files from the temporary directory (`rm -f /tmp/symm_mem-*` when "
            "no job runs), or point `TMPDIR` at an existing, writable, per-job local directory before "
            "launching."
        ),
        sites=(
            "torch/lib/libtorch_cuda.so::failed-to-bind-socket",
            "torch/lib/libtorch_cuda.so::failed-to-create-socket",
        ),
        read_from=(
            "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryUtils.cpp (IpcChannel::IpcChannel, "
            "TORCH_CHECKs on socket() and bind()); CUDA only"
        ),
    ),
    Entry(
        id="default_group_not_initialized",
        message=(
            "ValueError: Default process group has not been initialized, please make sure to call "
            "init_process_group."
        ),
        pattern=r"Default process group (?:has not been|is not) initialized",
        cause=(
            "A `torch.distributed` call (`get_rank`, a collective, DDP, `barrier`, a sampler's "
            "`num_replicas` default) ran in a process that has no process group: the script was started "
            "with `python` instead of `torchrun` and initializes only when `RANK` is set; the call runs "
            "before `init_process_group` or after `destroy_process_group`; or it runs in another process "
            "(a DataLoader worker, a `multiprocessing` child), which does not inherit the parent's group. "
            "Older torch raised `AssertionError: Default process group is not initialized`."
        ),
        fix=(
            "Launch with `torchrun --nproc-per-node=N script.py` (or call `init_process_group` in each "
            "`mp.spawn` rank) before any distributed call; guard single-process runs with "
            "`dist.is_available() and dist.is_initialized()`; keep distributed calls out of Dataset code "
            "and other child processes (pass the rank and world size to them as plain values)."
        ),
        teaches="06_ddp_mp_spawn.ipynb#a-minimal-ddp-training-function",
        sites=(
            "torch/distributed/distributed_c10d.py::_get_default_group::ValueError::"
            "default-process-group-has-not-been-initialized-please-make-s",
            "torch/distributed/distributed_c10d.py::_get_default_store::ValueError::"
            "default-process-group-has-not-been-initialized-please-make-s",
        ),
        reproduction="""\
import torch.distributed as dist

if __name__ == "__main__":
    print(dist.get_rank())  # started with python, not torchrun: no init_process_group ran here
""",
        fixed="""\
import torch.distributed as dist

if __name__ == "__main__":
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # torchrun: env:// instead
    print(dist.get_rank())
    dist.destroy_process_group()
""",
    ),
)
