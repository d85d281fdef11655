"""gloo's error messages print a peer's TCP port in network byte order: on a little-endian machine the
port is byte-swapped.

When a gloo peer goes away, the survivor raises `Connection closed by peer [127.0.0.1]:PORT` (also
`Read error [...]:PORT`, `connectFullMesh failed ...`). PORT is not a port of the peer: gloo's
`Address::str()` (gloo/transport/tcp/address.cc) prints `sin_port` without `ntohs`. On x86-64 and
ARM64, the port printed is the real one with its two bytes swapped (`socket.ntohs(PORT)` gives it),
so a user who looks up which process held that port (`ss -tnp`, a rank's log) finds none or the
wrong one. Seen with torch 2.15.0 (PyPI, on CPU), Python 3.11, Linux x86-64: rank 1 held 41297
(listening, and its end of the pair), the message said 20897 (= ntohs(41297)). Expected: the port
the peer used, as `ss` shows it.

Run: python gloo_port_byte_order.py
Two gloo ranks on 127.0.0.1; rank 1 reports the local ports of its TCP sockets and exits without
`destroy_process_group`; rank 0's next all_reduce fails. Prints the torch version, then a verdict
line; exits 1 where the port in rank 0's message is one of rank 1's ports only once its bytes are
swapped, 0 where it is one of them as printed.
"""

import multiprocessing
import os
import re
import socket
import stat
import sys
from datetime import timedelta

import torch
import torch.distributed as dist


def local_tcp_ports():
    """The local ports of this process's TCP sockets (listening and connected)."""
    ports = set()
    for fd in range(3, 1024):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            with socket.socket(fileno=os.dup(fd)) as sock:
                if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                    ports.add(sock.getsockname()[1])
        except OSError:
            continue
    return ports


def rank_main(rank, port, results):
    torch.set_num_threads(1)
    url = f"tcp://127.0.0.1:{port}"
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=2, timeout=timedelta(seconds=20))
    dist.all_reduce(torch.ones(4))  # the pair between the ranks is connected and used
    if rank == 1:
        results.put(("ports", sorted(local_tcp_ports())))
        results.close()
        results.join_thread()
        dist.barrier()
        os._exit(0)  # gone, its sockets closed: rank 0's next collective fails
    dist.barrier()
    try:
        dist.all_reduce(torch.ones(4))
        results.put(("message", ""))
    except Exception as error:
        results.put(("message", str(error)))


if __name__ == "__main__":
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, {sys.byteorder}-endian")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        store_port = probe.getsockname()[1]
    method = "fork" if sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    results = context.Queue()
    ranks = [context.Process(target=rank_main, args=(r, store_port, results)) for r in range(2)]
    for rank in ranks:
        rank.start()
    found = dict(results.get(timeout=120) for _ in range(2))
    for rank in ranks:
        rank.join(60)
        if rank.exitcode is None:
            rank.terminate()
            rank.join(10)
    ports, message = set(found["ports"]) - {store_port}, found["message"]
    printed = re.search(r"\]:(\d+)", message)
    if not printed:
        print(f"rank 0's message names no port: {message[:200]!r}")
        sys.exit(2)
    port = int(printed.group(1))
    print(f"rank 1's ports: {sorted(ports)}; rank 0 was told: {message[:120]}")
    if port in ports:
        print(f"{port} is one of rank 1's ports: not affected")
    elif socket.ntohs(port) in ports:
        print(
            f"AFFECTED: the message names port {port}; rank 1's port was {socket.ntohs(port)} (bytes swapped)"
        )
        sys.exit(1)
    else:
        print(f"{port} is none of rank 1's ports, swapped or not")
        sys.exit(2)
