"""Catalog entries: Start methods, pickling a worker, the main guard, contexts (CPython multiprocessing and torch.multiprocessing).

Also what CPython's ``multiprocessing`` prints around them: connections and pipes (a peer that died,
an authentication key that differs), queues and pools with a timeout, managers, and what
``mp.spawn`` prints when a rank ends without a Python error. Data for :mod:`helpers.catalog` (its
docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

_CPYTHON = "multiprocessing/"  # the inventory's keys of CPython's multiprocessing start so

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="unpicklable_worker",
        message="AttributeError: Can't get attribute 'worker' on <module '__main__'",
        pattern=(
            r"AttributeError:\s+(?:Can't get attribute '\w+' on <module '__(?:mp_)?main__'"
            r"|module '__(?:mp_)?main__' has no attribute '\w+')"
        ),
        cause=(
            "A spawn or forkserver child cannot find the worker function, because it was defined in a "
            "notebook, the REPL or `python -c`. The child starts a fresh interpreter and unpickles its "
            "target by name (`__main__.worker`); when the parent's `__main__` has no file to import, the "
            "child's `__main__` is empty. A function defined under the script's `if __name__ == "
            "\"__main__\":` fails the same way (`<module '__mp_main__' from ...>`). Python 3.10-3.13 print "
            "`Can't get attribute`, 3.14 and 3.15 `module '__main__' has no attribute`."
        ),
        fix=(
            "Define the worker in a module that the child can import (`workers.py` beside the notebook, "
            "`from workers import worker`), at the top level of that module; in a script, define it at "
            'the top level, above `if __name__ == "__main__":`. Fork (Linux only, not with CUDA) copies '
            "the parent instead and needs neither."
        ),
        reproduction='''\
import subprocess
import sys

NOTEBOOK_CELL = """
import multiprocessing as mp

def worker():
    print("worker ran")

child = mp.get_context("spawn").Process(target=worker)
child.start()
child.join(timeout=60)
"""

if __name__ == "__main__":
    # python -c, like a notebook or the REPL: __main__ has no file that a spawn child could import
    subprocess.run([sys.executable, "-c", NOTEBOOK_CELL], timeout=120)
''',
        fixed='''\
import subprocess
import sys
from pathlib import Path

NOTEBOOK_CELL = """
import multiprocessing as mp
from workers import worker  # a module: the spawn child imports it by name

child = mp.get_context("spawn").Process(target=worker)
child.start()
child.join(timeout=60)
"""

if __name__ == "__main__":
    Path("workers.py").write_text('def worker():\\n    print("worker ran")\\n')
    subprocess.run([sys.executable, "-c", NOTEBOOK_CELL], timeout=120, check=True)
''',
        teaches="01_start_methods.ipynb#appendix-the-error-message-across-python-versions",
        case="unpicklable_worker",
    ),
    Entry(
        id="unpicklable_for_spawn",
        message="AttributeError: Can't pickle local object 'main.<locals>.<lambda>'",
        pattern=(
            r"Can't (?:pickle|get) local object|Can't pickle <function <lambda>"
            r"|cannot pickle '[\w.]+' object|can't pickle \w+ objects|EOFError: Ran out of input"
        ),
        rank=-1,  # generic: an entry for a particular object (an open file) goes first
        cause=(
            "A spawn or forkserver child (a `Process`, `mp.spawn`'s ranks, DataLoader workers: the "
            "default on macOS and Windows, forkserver on Linux from Python 3.14) receives its target, "
            "arguments and the Dataset pickled, and this object cannot be pickled: a function or "
            "lambda defined inside another function (pickle stores functions by importable name), a "
            "lock, a generator, an open connection or file, or an object holding one. Python 3.13 "
            "says `Can't get local object`, 3.14 `PicklingError: Can't pickle local object <function "
            "...>`; on Windows the child then prints `EOFError: Ran out of input`, an echo of it."
        ),
        fix=(
            "Define functions at the top level of a module (a `def` instead of a lambda; "
            "`functools.partial(top_level_function, arg)` for bound arguments). Keep locks, "
            "connections, generators and open files out of what crosses: create them in the worker "
            "(`worker_init_fn`, or lazily on the first `__getitem__`). Fork (Linux) copies the parent "
            "instead and pickles nothing, but not with CUDA and not on macOS or Windows."
        ),
        teaches="07_dataloader_workers.ipynb#what-a-spawn-worker-receives",
        reproduction="""\
import torch
from torch.utils.data import DataLoader


def main():
    loader = DataLoader(
        torch.arange(8.0),
        batch_size=4,
        num_workers=1,
        multiprocessing_context="spawn",  # the default on macOS and Windows
        collate_fn=lambda batch: torch.stack(batch) * 2,  # a lambda: pickle cannot send it
    )
    print([batch.tolist() for batch in loader])


if __name__ == "__main__":
    main()
""",
        fixed="""\
import torch
from torch.utils.data import DataLoader


def double(batch):  # a top-level function: pickled by its name, imported by the worker
    return torch.stack(batch) * 2


def main():
    loader = DataLoader(
        torch.arange(8.0), batch_size=4, num_workers=1, multiprocessing_context="spawn", collate_fn=double
    )
    print([batch.tolist() for batch in loader])


if __name__ == "__main__":
    main()
""",
    ),
    Entry(
        id="no_main_guard",
        message="current process has finished its bootstrapping phase.",
        cause=(
            'A script starts processes at its top level, outside `if __name__ == "__main__":`. A spawn '
            "or forkserver child imports the script (as `__mp_main__`) to find the worker, runs that top "
            "level again and would start a process too, which multiprocessing refuses while the child is "
            "still starting (the line above reads `RuntimeError: An attempt has been made to start a new "
            "process before the`). Spawn is the default on macOS and Windows, forkserver on Linux from "
            "Python 3.14."
        ),
        fix=(
            "Put everything that starts processes (and the code that should run once) under `if __name__ "
            '== "__main__":` at the bottom of the script; keep imports and definitions above it. Only '
            "frozen executables also need `freeze_support()`."
        ),
        sites=(
            _CPYTHON + "spawn.py::_check_not_importing_main::RuntimeError::"
            "an-attempt-has-been-made-to-start-a-new-process-before-the-c",
        ),
        reproduction="""\
import multiprocessing as mp


def work():
    print("child: work() ran")


child = mp.get_context("spawn").Process(target=work)
child.start()  # at the top level: the spawn child re-imports this file and gets here too
if __name__ == "__main__":  # the guard covers the join only
    child.join(timeout=60)
""",
        fixed="""\
import multiprocessing as mp


def work():
    print("child: work() ran")


if __name__ == "__main__":  # the child imports the file; only the parent runs this block
    child = mp.get_context("spawn").Process(target=work)
    child.start()
    child.join(timeout=60)
""",
        teaches="01_start_methods.ipynb#the-if-name-main-guard",
        case="unpicklable_worker",
    ),
    Entry(
        id="global_from_main_block",
        message="NameError: name 'args' is not defined",
        pattern=(
            r"(?:(?:Spawn|ForkServer)Process-\d+:|terminated with the following error:)(?:\n.*){1,80}?"
            r"\nNameError:\s+name '\w+' is not defined|NameError:\s+name 'args' is not defined"
        ),
        cause=(
            'A worker reads a global that the script makes under `if __name__ == "__main__":` (parsed '
            "arguments, a config, a model). A fork child has a copy of the parent's memory, so it works "
            "on Linux up to Python 3.13; a spawn or forkserver child imports the script as `__mp_main__`, "
            "the guarded block does not run, and the name is missing. Forkserver is the default on Linux "
            "from Python 3.14, spawn on macOS and Windows."
        ),
        fix=(
            "Pass what the worker needs as an argument (`Process(target=work, args=(args,))`, "
            "`mp.spawn(work, args=(args,))`), or make it at the top level of the module, where every "
            "child's import makes it too."
        ),
        reproduction="""\
import argparse

import multiprocessing as mp


def work(rank):
    print(f"rank {rank}: lr {args.lr}")  # a global of the guarded block: only a fork child has it


if __name__ == "__main__":
    args = argparse.Namespace(lr=0.1)  # parser.parse_args() in a real script
    child = mp.get_context("spawn").Process(target=work, args=(0,))
    child.start()
    child.join(timeout=60)
""",
        fixed="""\
import argparse

import multiprocessing as mp


def work(rank, args):
    print(f"rank {rank}: lr {args.lr}")


if __name__ == "__main__":
    args = argparse.Namespace(lr=0.1)
    child = mp.get_context("spawn").Process(target=work, args=(0, args))  # passed, not inherited
    child.start()
    child.join(timeout=60)
""",
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
        pattern=r"A SemLock created in a \w+ context is being shared with a process in a \w+ context",
        cause=(
            "A Lock, Event, Semaphore, Condition or Queue made with one start method's context was passed "
            'to a process of another (a `get_context("fork")` lock to a spawn child). Starting the child '
            "pickles it, which CPython refuses since 3.11.5 and 3.12 (cpython#77377; 3.10.13 lets it "
            "through and the child dies of SIGSEGV). Python 3.14 changed Linux's default to forkserver, "
            "so code that mixes `mp.Lock()` with an explicit fork context now meets it."
        ),
        fix=(
            "Make the synchronization objects with the context of the processes that use them: `ctx = "
            'mp.get_context("spawn")`, then `ctx.Lock()`, `ctx.Queue()`, `ctx.Process(...)`; do not mix '
            "`mp.Lock()` (the default context) with `get_context(...)` processes."
        ),
        sites=(
            _CPYTHON + "synchronize.py::SemLock.__getstate__::RuntimeError::"
            "a-semlock-created-in-a-fork-context-is-being-shared-with-a-p",
        ),
        reproduction="""\
import multiprocessing as mp


def work(lock):
    with lock:
        print("child: has the lock")


if __name__ == "__main__":
    lock = mp.get_context("fork").Lock()  # made with one context ...
    child = mp.get_context("spawn").Process(target=work, args=(lock,))  # ... for a child of another
    child.start()
    child.join(timeout=60)
""",
        fixed="""\
import multiprocessing as mp


def work(lock):
    with lock:
        print("child: has the lock")


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    lock = ctx.Lock()  # the lock and the process from one context
    child = ctx.Process(target=work, args=(lock,))
    child.start()
    child.join(timeout=60)
""",
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
    Entry(
        id="shared_only_through_inheritance",
        message="RuntimeError: Queue objects should only be shared between processes through inheritance",
        pattern=r"(?:RuntimeError:\s+)?\w+ objects should only be shared between processes through inheritance",
        cause=(
            "A multiprocessing Queue, Lock, Event, Semaphore, Condition, Value or Array was pickled "
            "outside a process's start: passed as an argument of `Pool.map`/`apply`/`submit` (a "
            "`ProcessPoolExecutor` too), put on another Queue or sent through a Pipe. These objects wrap "
            "an OS semaphore or pipe that a process can only inherit when it is started."
        ),
        fix=(
            "Give it to the workers when they start: `Process(target=f, args=(queue,))`, or "
            "`Pool(initializer=keep, initargs=(queue,))` with `keep` storing it in a global of the "
            "worker. Or use a manager's proxy, which pickles: `queue = mp.Manager().Queue()`."
        ),
        sites=(
            _CPYTHON + "context.py::assert_spawning::RuntimeError::"
            "_-objects-should-only-be-shared-between-processes-through-in",
        ),
        reproduction="""\
import multiprocessing as mp


def report(queue, x):
    queue.put(x * x)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    with ctx.Pool(2) as pool:
        pool.apply(report, (results, 3))  # a task's arguments are pickled: a Queue cannot be
""",
        fixed="""\
import multiprocessing as mp

results = None


def keep(queue):  # runs once in each worker as it starts: the queue is inherited then
    global results
    results = queue


def report(x):
    results.put(x * x)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    with ctx.Pool(2, initializer=keep, initargs=(queue,)) as pool:
        pool.apply(report, (3,))
    print(queue.get(timeout=60))
""",
        teaches="01_start_methods.ipynb#a-pool-of-workers-for-independent-jobs",
    ),
    Entry(
        id="pickling_authentication_string",
        message="TypeError: Pickling an AuthenticationString object is disallowed for security reasons",
        cause=(
            "A `Process` object was pickled outside a process's start, usually inside something else: an "
            "object that keeps a Process (or a Pool, a Manager, `mp.current_process()`) in an attribute "
            "and is passed to `Pool.map`, put on a Queue or sent through a Pipe. A Process carries the "
            "authentication key, which multiprocessing only sends to a child it starts."
        ),
        fix=(
            "Send data, not the object that owns processes: pass what the task needs, make the task a "
            "top-level function, or leave the process out of the object's pickled state "
            "(`__getstate__` that drops it). Ask a child about itself with `mp.current_process()` "
            "there."
        ),
        sites=(
            _CPYTHON + "process.py::AuthenticationString.__reduce__::TypeError::"
            "pickling-an-authenticationstring-object-is-disallowed-for-se",
        ),
        reproduction="""\
import multiprocessing as mp


class Trainer:
    def __init__(self, ctx):
        self.loader = ctx.Process(target=print)  # an attribute that is a Process

    def step(self, x):
        return x * x


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    trainer = Trainer(ctx)
    with ctx.Pool(2) as pool:
        print(pool.map(trainer.step, range(4)))  # pickles trainer, and its Process
""",
        fixed="""\
import multiprocessing as mp


class Trainer:
    def __init__(self, ctx):
        self.loader = ctx.Process(target=print)

    def __getstate__(self):  # what a worker receives: everything but the process
        return {k: v for k, v in self.__dict__.items() if k != "loader"}

    def step(self, x):
        return x * x


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    trainer = Trainer(ctx)
    with ctx.Pool(2) as pool:
        print(pool.map(trainer.step, range(4)))
""",
    ),
    Entry(
        id="forkserver_unexpected_eof",
        message="EOFError: unexpected EOF",
        cause=(
            "`Process.start()` under forkserver waits for the forkserver process to report the new "
            "child's pid, and the forkserver died instead. From Python 3.13.8 and 3.14 the forkserver "
            "imports the script's top level when it starts (Linux's default start method from 3.14): a "
            "script that starts processes outside the main guard, or fails at import, kills it. It also "
            "dies when it is killed: the OOM killer, a `kill` aimed at the job's processes."
        ),
        fix=(
            "Keep the script's top level to imports and definitions, everything else under `if __name__ "
            '== "__main__":`; look above the EOFError for the forkserver\'s own traceback, and in '
            '`dmesg` for an OOM kill. `get_context("spawn")` starts each child without a server.'
        ),
        sites=(_CPYTHON + "forkserver.py::read_signed::EOFError::unexpected-eof",),
        reproduction="""\
import os
import signal
import threading
from pathlib import Path

import multiprocessing as mp


def work():
    print("child ran")


def forkserver_pid():
    for pid in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split():
        if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return int(pid)


if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    first = ctx.Process(target=work)
    first.start()  # starts the forkserver
    first.join(timeout=60)
    server = forkserver_pid()
    os.kill(server, signal.SIGSTOP)  # it cannot answer the next start ...
    threading.Timer(1.0, os.kill, (server, signal.SIGKILL)).start()  # ... and dies, as under the OOM killer
    second = ctx.Process(target=work)
    second.start()
""",
        teaches="01_start_methods.ipynb#appendix-the-forkserver-and-your-script-across-python-versions",
    ),
    Entry(
        id="connection_eof",
        message="EOFError",
        pattern=r"^EOFError\s*$",
        rank=-1,
        cause=(
            "A bare `EOFError` from multiprocessing: a `recv()` found the other end of a Pipe or "
            "connection closed before a message came, because the process at that end exited or died "
            "(a crash, `os._exit`, the OOM killer) or closed its end. `Manager()` raises it when its "
            "server process died while starting (look above for that process's traceback); passing a file "
            "descriptor (a shared tensor under the `file_descriptor` strategy), when the sending process "
            "closed the connection before the descriptor arrived."
        ),
        fix=(
            "Find why the peer ended: its `exitcode` (negative: the signal that killed it; -9 is often "
            "the OOM killer) and its own traceback in the output above. Wait with `conn.poll(timeout)` "
            "and check `process.is_alive()`; close the parent's copy of the child's end after `start()`, "
            "or a dead child hangs `recv()` instead of raising; keep a producer alive until its tensors "
            "are received."
        ),
        sites=(
            _CPYTHON + "connection.py::Connection._recv::EOFError::-",
            _CPYTHON + "connection.py::PipeConnection._recv_bytes::EOFError::-",
            _CPYTHON + "reduction.py::recvfds::EOFError::-",
        ),
        reproduction="""\
import os

import multiprocessing as mp


def compute(conn):
    os._exit(1)  # dies before it sends: a crash, the OOM killer


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=compute, args=(theirs,))
    child.start()
    theirs.close()  # only the child holds that end now: its death closes it
    try:
        print(ours.recv())
    finally:
        child.join(timeout=60)
""",
        teaches="08_debugging_and_pitfalls.ipynb#what-the-parent-sees-exit-codes",
    ),
    Entry(
        id="eof_during_message",
        message="OSError: got end of file during message",
        cause=(
            "A connection's `recv()` had read part of a message when the other end closed: the sending "
            "process died (killed at a timeout, the OOM killer, a crash) in the middle of a large send, "
            "such as a big pickled result or array."
        ),
        fix=(
            "Find why the sender ended (its `exitcode`, its traceback, `dmesg` for the OOM killer). Send "
            "large arrays as shared tensors (`share_memory_()`, a torch Queue) instead of pickled bytes, "
            "and join the sender before terminating it."
        ),
        sites=(_CPYTHON + "connection.py::Connection._recv::OSError::got-end-of-file-during-message",),
        reproduction="""\
import time

import multiprocessing as mp


def send_big(conn):
    conn.send_bytes(bytes(100 * 2**20))  # 100 MiB: blocks once the pipe is full


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=send_big, args=(theirs,))
    child.start()
    theirs.close()
    time.sleep(1)
    child.kill()  # killed in the middle of its send
    child.join(timeout=60)
    ours.recv_bytes()
""",
    ),
    Entry(
        id="bad_message_length",
        message="OSError: bad message length",
        cause=(
            "A multiprocessing connection read a length prefix larger than it accepts: the peer does not "
            "speak multiprocessing's protocol. Typically a `Client` or manager pointed at an address "
            "where another kind of server listens (a web server, a TCPStore); `Listener.accept()` raises it "
            "when a port scanner or a health check connects to the listener's port; or a message was "
            "longer than the `maxlength` given to `recv_bytes`."
        ),
        fix=(
            "Check the address and port the client connects to, and that only multiprocessing clients "
            "reach a manager's port (bind it to 127.0.0.1 or a private interface). With `recv_bytes("
            "maxlength)`, raise the limit or send smaller messages."
        ),
        sites=(_CPYTHON + "connection.py::_ConnectionBase._bad_message_length::OSError::bad-message-length",),
        reproduction="""\
import socket
import threading
from multiprocessing.connection import Client


def web_server(listener):
    conn, _ = listener.accept()
    conn.sendall(b"HTTP/1.1 400 Bad Request\\r\\n\\r\\n")  # not multiprocessing's protocol
    conn.close()


if __name__ == "__main__":
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=web_server, args=(listener,), daemon=True).start()
    Client(listener.getsockname(), authkey=b"secret")  # the wrong port: another kind of server
""",
    ),
    Entry(
        id="authkey_mismatch",
        message="multiprocessing.context.AuthenticationError: digest sent was rejected",
        pattern=r"AuthenticationError:\s+digest (?:sent was rejected|received was wrong)",
        cause=(
            "A multiprocessing client and server (a `BaseManager` and its `connect()`, a `Listener` and a "
            "`Client`, a manager proxy used in another process) hold different authentication keys. The "
            "client reads `digest sent was rejected`, the server `digest received was wrong`. Children "
            "that multiprocessing starts inherit the key; processes started otherwise (torchrun, "
            "`subprocess`, another job) each have a random one."
        ),
        fix=(
            "Give both sides the same key: `BaseManager(address, authkey=KEY)` on the server and on every "
            "client, the same `authkey=` for `Listener` and `Client` (a secret from the environment, not "
            "a literal in the code); in a process not started by multiprocessing, set "
            "`mp.current_process().authkey = KEY` before using a proxy."
        ),
        sites=(
            _CPYTHON + "connection.py::answer_challenge::AuthenticationError::digest-sent-was-rejected",
            _CPYTHON + "connection.py::deliver_challenge::AuthenticationError::digest-received-was-wrong",
        ),
        reproduction="""\
from multiprocessing.managers import BaseManager

import multiprocessing as mp

if __name__ == "__main__":
    server = BaseManager(address=("127.0.0.1", 0), authkey=b"secret", ctx=mp.get_context("fork"))
    server.start()
    try:
        client = BaseManager(address=server.address, authkey=b"another key")
        client.connect()
    finally:
        server.shutdown()
""",
        fixed="""\
from multiprocessing.managers import BaseManager

import multiprocessing as mp

if __name__ == "__main__":
    server = BaseManager(address=("127.0.0.1", 0), authkey=b"secret", ctx=mp.get_context("fork"))
    server.start()
    try:
        client = BaseManager(address=server.address, authkey=b"secret")  # the server's key
        client.connect()
        print("connected")
    finally:
        server.shutdown()
""",
    ),
    Entry(
        id="queue_empty",
        message="_queue.Empty",
        pattern=r"^(?:_?queue\.)?Empty\s*$",
        rank=-1,
        cause=(
            "A bare `Empty`: `queue.get(timeout=...)` or `get_nowait()` found nothing in time. The "
            "producer died before it put anything (a crash, the OOM killer: its exit code says), hangs, "
            "or is slower than the timeout; or `get_nowait()` ran right after a `put` in another "
            "process, before the producer's feeder thread had written the item to the pipe."
        ),
        fix=(
            "Wait in a loop that checks the producer: `get(timeout=1)` and, on `Empty`, "
            "`producer.is_alive()` and its `exitcode`; read the producer's own traceback in the output. "
            "Use a blocking `get` with a deadline sized to the work, not `get_nowait()`, to wait for a "
            "result."
        ),
        sites=(
            _CPYTHON + "queues.py::Queue.get::Empty::-",
            _CPYTHON + "queues.py::Queue.get::Empty::-#2",
            _CPYTHON + "queues.py::Queue.get::Empty::-#3",
        ),
        reproduction="""\
import os

import multiprocessing as mp


def produce(queue):
    os._exit(1)  # dies before it puts anything


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=produce, args=(queue,))
    child.start()
    try:
        print(queue.get(timeout=2))
    finally:
        child.join(timeout=60)
""",
        teaches="03_queues_and_pipes.ipynb#a-producer-consumer-pipeline",
    ),
    Entry(
        id="queue_full",
        message="queue.Full",
        pattern=r"^(?:_?queue\.)?Full\s*$",
        rank=-1,
        cause=(
            "A bare `Full`: `queue.put(timeout=...)` or `put_nowait()` on a Queue made with `maxsize` "
            "found no room in time, because the consumer died, hangs or is slower than the producer."
        ),
        fix=(
            "Check the consumer (`is_alive()`, its `exitcode` and traceback) when `put` times out; size "
            "`maxsize` and the timeout to the consumer's pace, or let the producer wait (a blocking "
            "`put`) while the consumer is alive."
        ),
        sites=(
            _CPYTHON + "queues.py::Queue.put::Full::-",
            _CPYTHON + "queues.py::JoinableQueue.put::Full::-",
        ),
        reproduction="""\
import os

import multiprocessing as mp


def consume(queue):
    os._exit(1)  # dies before it takes anything


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue(maxsize=2)
    child = ctx.Process(target=consume, args=(queue,))
    child.start()
    child.join(timeout=60)
    for batch in range(3):
        queue.put(batch, timeout=2)
""",
        teaches="03_queues_and_pipes.ipynb#a-producer-consumer-pipeline",
    ),
    Entry(
        id="pool_timeout",
        message="multiprocessing.context.TimeoutError",
        pattern=r"^multiprocessing\.(?:context\.)?TimeoutError\s*$",
        rank=-1,
        cause=(
            "A bare `TimeoutError` from a Pool: `AsyncResult.get(timeout)` or `imap(...).next(timeout)` "
            "had no result in time. The task is slower than the timeout or hangs (a deadlock, a fork "
            "child stuck on a lock or an OpenMP pool it inherited), or its worker died: a Pool replaces "
            "a worker that was killed or called `os._exit`, but the task it held is lost and its result "
            "never comes."
        ),
        fix=(
            "Look for a worker that died (a message or a signal in the output above, `dmesg` for the "
            "OOM killer) and for where a live one is stuck (`py-spy dump --pid`). `concurrent.futures."
            "ProcessPoolExecutor` raises `BrokenProcessPool` when a worker dies instead of waiting; under "
            "fork, start the pool before the parent starts threads (or use spawn)."
        ),
        sites=(
            _CPYTHON + "pool.py::ApplyResult.get::TimeoutError::-",
            _CPYTHON + "pool.py::IMapIterator.next::TimeoutError::-",
        ),
        reproduction="""\
import os

import multiprocessing as mp


def square(x):
    os._exit(1)  # the worker dies with the task: the pool replaces it, the task is lost


if __name__ == "__main__":
    with mp.get_context("fork").Pool(1) as pool:
        print(pool.apply_async(square, (3,)).get(timeout=2))
""",
        teaches="01_start_methods.ipynb#a-pool-of-workers-for-independent-jobs",
    ),
    Entry(
        id="manager_unable_to_start_server",
        message="multiprocessing.context.ProcessError: Unable to start server",
        cause=(
            "`with manager:` calls the manager's `start()` and then finds the manager still not started: "
            "a `BaseManager` subclass overrides `start()` without calling `BaseManager.start` (which "
            "starts the server process and records its address). A server that fails to start raises "
            "from `start()` itself instead (an `EOFError`, the server's traceback above it)."
        ),
        fix=(
            "Call `super().start(*args, **kwargs)` in the override (or do not override `start`; pass an "
            "`initializer` to run code in the server). To use a server that runs elsewhere, `connect()` "
            "to it rather than `with`."
        ),
        sites=(_CPYTHON + "managers.py::BaseManager.__enter__::ProcessError::unable-to-start-server",),
        reproduction="""\
import multiprocessing as mp
from multiprocessing.managers import BaseManager


class QueueManager(BaseManager):
    def start(self, *args, **kwargs):  # an override that forgot BaseManager.start
        print("starting the queue server")


if __name__ == "__main__":
    with QueueManager(address=("127.0.0.1", 0), authkey=b"secret", ctx=mp.get_context("fork")):
        pass
""",
        fixed="""\
import multiprocessing as mp
from multiprocessing.managers import BaseManager


class QueueManager(BaseManager):
    def start(self, *args, **kwargs):
        print("starting the queue server")
        super().start(*args, **kwargs)


if __name__ == "__main__":
    with QueueManager(address=("127.0.0.1", 0), authkey=b"secret", ctx=mp.get_context("fork")) as manager:
        print("server at", manager.address)
""",
    ),
    Entry(
        id="spawn_exit_code",
        message="torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with exit code 1",
        pattern=(
            r"(?:(?:[\w.]+\.)?ProcessExitedException:\s+)?process\s+\d+\s+terminated\s+with\s+exit\s+code"
            r"\s+-?\d+"
        ),
        rank=-1,
        cause=(
            "A rank of `mp.spawn` (or `start_processes`) ended with a non-zero exit code and no Python "
            "exception that torch could forward: it called `sys.exit(n)` or `os._exit(n)` (argparse "
            "errors exit with 2, some libraries exit on error), or native code exited. A rank that "
            "raises gives `-- Process N terminated with the following error:` instead, and one killed "
            "by a signal `terminated with signal`."
        ),
        fix=(
            "Read that rank's own output above the exception: what it printed before it exited. Let "
            "errors in the worker raise instead of calling `sys.exit`, so that `mp.spawn` shows the "
            "traceback; parse arguments in the parent, before `mp.spawn`."
        ),
        sites=(
            "torch/multiprocessing/spawn.py::ProcessContext.join::ProcessExitedException::"
            "process-_-terminated-with-exit-code-_",
        ),
        reproduction="""\
import sys

import torch.multiprocessing as mp


def train(rank):
    if rank == 1:
        sys.exit(3)  # no exception for mp.spawn to forward: only the exit code


if __name__ == "__main__":
    mp.start_processes(train, nprocs=2, start_method="fork")  # mp.spawn's join, with quicker children
""",
        teaches="06_ddp_mp_spawn.ipynb#when-a-rank-fails",
    ),
    Entry(
        id="spawn_terminating_sigterm",
        message="Terminating process 4242 via signal SIGTERM",
        rank=-3,  # never the cause: below mp.spawn's wrapper line, which it precedes
        cause=(
            "Not the error: another rank of `mp.spawn` (or `start_processes`) failed, and torch stops "
            "the ranks still running with SIGTERM before it raises that rank's error. A rank waiting in "
            "a collective for the failed one would otherwise wait for ever."
        ),
        fix=(
            "Look below for the exception `mp.spawn` raises (`-- Process N terminated with the following "
            "error:`, or `process N terminated with exit code/signal`) and fix that rank; a worker that "
            "should clean up on SIGTERM can catch it, and must then exit."
        ),
        sites=(
            "torch/multiprocessing/spawn.py::ProcessContext.join::log.warning::"
            "terminating-process-_-via-signal-sigterm",
        ),
        reproduction="""\
import os
import resource
import time

import torch.multiprocessing as mp


def train(rank):
    if rank == 1:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        os.abort()  # rank 1 dies (a C library's abort); rank 0 is still working
    time.sleep(60)


if __name__ == "__main__":
    mp.start_processes(train, nprocs=2, start_method="fork")  # mp.spawn's join, with quicker children
""",
        teaches="06_ddp_mp_spawn.ipynb#when-a-rank-fails",
    ),
    Entry(
        id="spawn_sigterm_ignored",
        message="Unable to shutdown process 4242 via SIGTERM , forcefully exiting via SIGKILL",
        cause=(
            "After one rank failed, `mp.spawn` sent SIGTERM to the others and one of them was still "
            "running a grace period later (30 s by default): it has a SIGTERM handler that does not "
            "exit (a checkpoint-on-preemption handler, a library's), or its main thread is stuck in "
            "native code (a collective, a blocking call), where Python signal handlers cannot run. "
            "torch then kills it with SIGKILL: its `finally` blocks and exit handlers do not run."
        ),
        fix=(
            "Fix the rank that failed first (the exception below). A SIGTERM handler must end the "
            "process (`sys.exit` after saving); give collectives a timeout "
            "(`init_process_group(timeout=...)`) so a rank does not wait for a dead peer for ever."
        ),
        sites=(
            "torch/multiprocessing/spawn.py::ProcessContext.join::log.warning::"
            "unable-to-shutdown-process-_-via-sigterm-forcefully-exiting-",
        ),
        reproduction="""\
import signal
import sys
import time

import torch.multiprocessing as mp


def train(rank, ready):
    if rank == 1:
        ready.wait(30)
        sys.exit(1)  # rank 1 fails ...
    signal.signal(signal.SIGTERM, lambda signum, frame: print("rank 0: SIGTERM, carrying on", flush=True))
    ready.set()
    time.sleep(60)  # ... rank 0 has a SIGTERM handler that does not exit


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    context = mp.start_processes(train, args=(ctx.Event(),), nprocs=2, join=False, start_method="fork")
    while not context.join(grace_period=1):  # mp.spawn waits 30 s before SIGKILL
        pass
""",
        fixed="""\
import signal
import sys
import time

import torch.multiprocessing as mp


def train(rank, ready):
    if rank == 1:
        ready.wait(30)
        sys.exit(1)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # clean up, then exit
    ready.set()
    time.sleep(60)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    context = mp.start_processes(train, args=(ctx.Event(),), nprocs=2, join=False, start_method="fork")
    try:
        while not context.join(grace_period=1):
            pass
    except mp.ProcessExitedException as error:
        print(f"rank {error.error_index} failed; the other one stopped at SIGTERM")
""",
        teaches="06_ddp_mp_spawn.ipynb#when-a-rank-fails",
    ),
    Entry(
        id="autograd_after_fork",
        message=(
            "RuntimeError: Unable to handle autograd's threading in combination with fork-based "
            "multiprocessing. See https://github.com/pytorch/pytorch/wiki/Autograd-and-Fork"
        ),
        cause=(
            "A fork child ran `backward()` after its parent had: on a machine where torch sees a GPU "
            "(or another accelerator), the parent's first backward starts autograd's device threads, "
            "which a fork child does not have, and torch marks the child as unable to run autograd. "
            "The parent need not have used the GPU; on a CPU-only machine the same code works, which is "
            "why it appears when a job moves to a GPU machine (DataLoader workers, Hogwild, a fork Pool)."
        ),
        fix=(
            'Start the processes that train with spawn or forkserver (`mp.get_context("spawn")`, '
            '`mp.spawn`, `DataLoader(multiprocessing_context="spawn")`), or fork them before the '
            "parent's first `backward()`."
        ),
        sites=(
            "torch/lib/libtorch_cpu.so::unable-to-handle-autograd-s-threading-in-combination-with-fork-"
            "based-multiprocessing-see-https-githu",
        ),
        read_from=(
            "torch/csrc/autograd/engine.cpp (Engine::initialize_device_threads_pool, the check; "
            "Engine::start_device_threads marks forks bad only when a non-CPU device is counted), the "
            "string read from the installed libtorch_cpu.so (torch 2.15.0): a CPU-only machine starts no "
            "device threads and never prints it"
        ),
        teaches="04_fork_and_cuda.ipynb#what-fork-copies-and-what-it-does-not",
    ),
    Entry(
        id="pipe_handle_closed",
        message="BrokenPipeError: [Errno 32] handle is closed",
        cause=(
            "Windows only: a `send` on a multiprocessing pipe was in progress when the pipe was closed, "
            "usually by another thread of the same process (a Queue's feeder thread still writing while "
            "the queue or the process shuts down, a connection closed from a second thread)."
        ),
        fix=(
            "Close a connection only from the thread that uses it, after its last send; `queue.close()` "
            "then `queue.join_thread()` before the process ends, and join the consumers before the "
            "producers close their queues."
        ),
        sites=(_CPYTHON + "connection.py::PipeConnection._send_bytes::OSError::built-errno-epipe",),
        read_from=(
            "CPython's Lib/multiprocessing/connection.py, PipeConnection._send_bytes (Windows named "
            "pipes; 3.8 to 3.13): no Linux machine runs that class"
        ),
    ),
    Entry(
        id="process_limit_reached",
        message="BlockingIOError: [Errno 11] Resource temporarily unavailable",
        pattern=(
            r"(?:BlockingIOError:\s+)?\[Errno 11\] Resource temporarily unavailable"
            r"|can't start new thread|Thread creation failed: Resource temporarily unavailable"
            r"|fork: retry: Resource temporarily unavailable"
        ),
        cause=(
            "Starting a process (`os.fork` under a worker's `start()`) or a thread failed because this "
            "user, or this container, is at its limit of tasks: `ulimit -u` (RLIMIT_NPROC, counting "
            "every thread of every process of the user) or the cgroup's `pids.max`. Each worker brings "
            "torch's threads (intra-op, inter-op, OpenMP), so `num_workers` or `nprocs` times those "
            "threads can pass a limit of a few thousand on a shared login node or in a container. "
            "Python says `can't start new thread`, GNU OpenMP `Thread creation failed`."
        ),
        fix=(
            "`python -m helpers.doctor --nprocs N` compares the plan with the room left. Start fewer "
            "workers, give each fewer threads (`OMP_NUM_THREADS=1`, `torch.set_num_threads(1)` in the "
            "worker), end stray processes of yours, or raise the limit (`ulimit -u` up to the hard "
            "limit; a container's `--pids-limit`; Slurm and Kubernetes set their own)."
        ),
        reproduction="""\
import multiprocessing.popen_fork  # imported first: the user nobody may not read this Python's files
import os
import resource

import torch.multiprocessing as mp


def work(rank):
    pass


if __name__ == "__main__":
    if os.getuid() == 0:
        os.setuid(65534)  # root is not held by the limit: run as the user nobody
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))  # ulimit -u 1: this user is at its limit
    workers = [mp.get_context("fork").Process(target=work, args=(r,)) for r in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
""",
        fixed="""\
import multiprocessing.popen_fork  # imported first: the user nobody may not read this Python's files
import os
import resource

import torch.multiprocessing as mp


def work(rank):
    pass


if __name__ == "__main__":
    if os.getuid() == 0:
        os.setuid(65534)  # root is not held by the limit: run as the user nobody
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))  # ulimit -u raised to the hard limit: room left
    workers = [mp.get_context("fork").Process(target=work, args=(r,)) for r in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
""",
    ),
    Entry(
        id="fork_out_of_memory",
        message="OSError: [Errno 12] Cannot allocate memory",
        pattern=r"OSError: \[Errno 12\] Cannot allocate memory",
        cause=(
            "`os.fork()` (under a fork worker's `start()`, a DataLoader's workers, `subprocess` from a "
            "large process) failed: the kernel must be able to account for a copy of the parent's "
            "writable memory, even though the child shares it copy-on-write, and it refused. With "
            "`vm.overcommit_memory=2` (strict accounting, common on HPC nodes) or a memory limit, a "
            "parent that holds a large dataset or model cannot fork once, or cannot fork the Nth "
            "worker."
        ),
        fix=(
            'Start workers from a small process: `multiprocessing_context="forkserver"` (or '
            '`"spawn"`), or start them before loading the large data (`persistent_workers=True` keeps '
            "them); use fewer workers; load data lazily in the workers instead of in the parent. "
            "`cat /proc/sys/vm/overcommit_memory` shows the policy (2 is strict)."
        ),
        read_from=(
            "CPython's Lib/multiprocessing/popen_fork.py (Popen._launch: os.fork raises OSError ENOMEM); "
            "Linux's fork accounting under vm.overcommit_memory=2, a system setting no test may change"
        ),
    ),
    Entry(
        id="windows_paging_file",
        message="OSError: [WinError 1455] The paging file is too small for this operation to complete.",
        pattern=r"\[WinError 1455\] The paging file is too small for this operation to complete",
        cause=(
            "On Windows every DataLoader worker (and every `mp.spawn` rank) is a new interpreter that "
            "imports torch and loads its DLLs (the CUDA ones are large), and Windows reserves "
            "(commits) memory for each copy; the commit limit is RAM plus the paging file, so with "
            "several workers the next process cannot load `torch`'s libraries (the message names "
            "`cudnn_*.dll`, `torch_cuda.dll` or `caffe2_nvrtc.dll`)."
        ),
        fix=(
            "Use fewer workers (`num_workers=2`, or 0 to confirm), enlarge the paging file (System "
            "Properties, Advanced, Performance, Virtual memory), or use the CPU build of torch where "
            "the GPU is not needed."
        ),
        read_from=(
            "CPython's Lib/multiprocessing/popen_spawn_win32.py (each worker a new interpreter) and "
            "Windows' error 1455 on loading torch's DLLs in it; no Linux machine prints it"
        ),
        teaches="13_field_guide_workers_and_machine.ipynb#appendix-a-windows-and-macos-in-more-detail",
    ),
)
