"""helpers.processes: deadlines, reaping, leak finding, under fork and spawn."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
import torch

from helpers.processes import (
    dev_shm_entries,
    kill_tree,
    linux_only,
    live_children,
    reap,
    run_python_script,
    run_with_deadline,
    running,
    shared_memory_segments,
)
from tests import workers
from tests.workers import METHODS


@pytest.mark.parametrize("method", METHODS)
def test_run_with_deadline_terminates_a_stuck_child(method):
    result = run_with_deadline(time.sleep, args=(60,), method=method, timeout=1.0)
    assert result.timed_out
    assert result.exitcode == -signal.SIGTERM
    assert result.seconds < 30  # killed at its 1 s deadline, not after the 60 s sleep


@pytest.mark.parametrize("method", METHODS)
def test_run_with_deadline_reports_the_exit_code(method):
    result = run_with_deadline(workers.shout_and_exit, args=("hello", 3), method=method, timeout=30)
    assert (result.timed_out, result.exitcode, result.ok) == (False, 3, False)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "forkserver"])
def test_run_with_deadline_captures_child_output(method):
    result = run_with_deadline(
        workers.shout_and_exit, args=("hello from the child", 0), method=method, timeout=30
    )
    assert result.ok
    assert result.output.count("hello from the child") == 2  # stdout and stderr


def test_run_with_deadline_shows_a_child_traceback():
    result = run_with_deadline(workers.raise_value_error, method="spawn", timeout=30)
    assert result.exitcode == 1
    assert "ValueError: raised on purpose" in result.output


def test_reap_kills_a_child_that_ignores_sigterm():
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=workers.ignore_sigterm_and_sleep, args=(ready,))
    proc.start()
    assert ready.wait(30)
    assert reap([proc], timeout=0.2) == [-signal.SIGKILL]


def test_reap_skips_processes_never_started():
    import multiprocessing as mp

    proc = mp.get_context("spawn").Process(target=time.sleep, args=(1,))
    assert reap([proc], timeout=1) == [None]


@pytest.mark.parametrize("method", METHODS)
def test_running_cleans_up_when_the_block_raises(method):
    import multiprocessing as mp

    ctx = mp.get_context(method)
    procs = [ctx.Process(target=time.sleep, args=(60,)) for _ in range(2)]
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), running(procs, timeout=60):
        raise KeyboardInterrupt
    assert time.monotonic() - start < 30  # terminated at once, not after the 60 s deadline
    assert all(not p.is_alive() for p in procs)
    assert [p.exitcode for p in procs] == [-signal.SIGTERM] * 2


def test_live_children_sees_a_running_child_and_not_after_reap():
    import multiprocessing as mp

    proc = mp.get_context("spawn").Process(target=time.sleep, args=(60,))
    proc.start()
    try:
        assert proc.pid in [c.pid for c in live_children()]
    finally:
        reap([proc], timeout=0)
    assert proc.pid not in [c.pid for c in live_children()]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_shared_memory_segments_lists_a_shared_tensor_until_it_is_freed():
    before = shared_memory_segments()
    tensor = torch.zeros(1024).share_memory_()
    during = shared_memory_segments()
    assert len(during) == len(before) + 1
    assert "torch_" in (set(during) - set(before)).pop()
    del tensor
    assert shared_memory_segments() == before


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_dev_shm_entries_sees_a_file_system_strategy_segment():
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(create=True, size=4096)
    try:
        assert segment.name.lstrip("/") in dev_shm_entries()
    finally:
        segment.close()
        segment.unlink()
    assert segment.name.lstrip("/") not in dev_shm_entries()


def test_run_python_script_runs_in_a_temporary_directory():
    done = run_python_script("import os; print(os.getcwd())")
    assert done.returncode == 0
    assert "tmp-notebook-script-" in done.stdout
    assert not os.path.exists(done.stdout.strip())


def test_run_python_script_times_out():
    import subprocess

    with pytest.raises(subprocess.TimeoutExpired):
        run_python_script("import time; time.sleep(60)", timeout=0.5)


def test_run_python_script_sets_and_removes_environment_variables(monkeypatch):
    monkeypatch.setenv("DROPPED", "here")
    code = "import os; print(os.environ.get('ADDED'), os.environ.get('DROPPED'))"
    assert run_python_script(code, env={"ADDED": "yes", "DROPPED": None}).stdout.split() == ["yes", "None"]


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")
def test_run_python_script_takes_what_the_script_started_with_it():
    import psutil

    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
    )
    done = run_python_script(code, timeout=60)  # the script returns at once, its child would sleep on
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the script's child outlived it"
        time.sleep(0.1)


# A launcher that starts a worker in a session of its own (as torchrun does), both holding our pipe.
LAUNCHER = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(worker.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("kill", ["kill_tree", "killpg"])
def test_kill_tree_reaches_a_worker_in_its_own_session(kill):
    import subprocess
    import sys

    import psutil

    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    worker = psutil.Process(int(launcher.stdout.readline()))
    if kill == "kill_tree":
        assert kill_tree(launcher.pid, grace=5) == [launcher.pid, worker.pid]
        launcher.communicate(timeout=10)  # the pipe closed: nobody holds it any more
        assert not worker.is_running()
    else:  # the launcher's process group: the worker is not in it and survives
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(10)
        assert worker.is_running()
        worker.kill()
        worker.wait(10)
        launcher.communicate(timeout=10)


def test_descendants_are_found_as_psutil_finds_them_grandchildren_included():
    import subprocess

    import psutil

    from helpers import processes

    tree = subprocess.Popen(["bash", "-c", "sleep 60 & bash -c 'sleep 60 & wait' & wait"])
    try:
        root = psutil.Process(tree.pid)
        deadline = time.monotonic() + 30
        while len(root.children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = sorted(child.pid for child in root.children(recursive=True))
        assert sorted(processes.descendant_pids(tree.pid)) == expected
    finally:
        kill_tree(tree.pid)
    assert processes.descendant_pids(tree.pid) == []  # gone


def test_linux_only_is_true_on_linux_and_silent(monkeypatch, capsys):
    from helpers import processes

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(processes, "PLATFORM", "linux")
    assert linux_only("/proc") is True and capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(processes, "PLATFORM", "darwin")
    assert linux_only("/proc") is False
    assert capsys.readouterr().out == "needs Linux (/proc): skipped on darwin\n"


SIMULATION = (
    "from helpers.launch import FAST_METHOD\n"
    "from helpers.processes import PLATFORM, linux_only\n"
    "print(PLATFORM, FAST_METHOD, linux_only('/proc'))\n"
)


@pytest.mark.skipif(sys.platform != "linux", reason="simulates another platform on Linux")
def test_helpers_platform_gives_the_macos_path_on_linux():
    """HELPERS_PLATFORM=darwin: FAST_METHOD spawns and Linux-only cells skip (the macOS path CI runs);
    unset, this Linux machine's choices; a name that is no platform is refused. No torch import."""
    import subprocess

    def run(value: str | None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "HELPERS_PLATFORM"}
        env |= {"HELPERS_PLATFORM": value} if value is not None else {}
        return subprocess.run(
            [sys.executable, "-c", SIMULATION], env=env, capture_output=True, text=True, timeout=60
        )

    assert run(None).stdout.split() == ["linux", "fork", "True"]
    mac = run("darwin").stdout.splitlines()
    assert mac == [
        "needs Linux (/proc): skipped on darwin (HELPERS_PLATFORM, on linux)",
        "darwin spawn False",
    ]
    assert "use linux, darwin or win32" in run("macos").stderr
