"""helpers.doctor.inspector: the per-process checks (threads, CUDA, children, kernel) and ``inspect()``."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from helpers import doctor
from helpers.doctor import inspect
from helpers.environment import environment_report
from helpers.launch import launch
from tests import workers
from tests.doctor_support import (
    OPENMP_THREADS,
    ROOT,
    check_in_fresh_interpreter,
    doctor_cli,
    linux_only,
    one,
    stop,
)

# --- Threads before fork --------------------------------------------------------------------------


@linux_only
def test_a_process_that_ran_no_parallel_region_passes_the_fork_check():
    finding = check_in_fresh_interpreter("import torch\n", 'check(only=["threads before fork"])')
    assert finding["threads before fork"]["status"] == "ok"
    assert "0 waiting in an OpenMP library, 1 Python thread" in finding["threads before fork"]["measured"]


@linux_only
def test_a_parent_that_started_openmp_threads_warns_before_fork():
    finding = check_in_fresh_interpreter(OPENMP_THREADS, 'check(only=["threads before fork"])')
    assert finding["threads before fork"]["status"] == "warn"
    measured = finding["threads before fork"]["measured"]
    assert int(measured.split(", ")[1].split()[0]) >= 1  # threads waiting in libgomp/libomp


@pytest.mark.default_start_method
@linux_only
def test_openmp_threads_still_spinning_after_their_work_are_found_once_they_wait():
    # libgomp's workers spin before they sleep (GOMP_SPINCOUNT; a few ms idle, longer on a loaded
    # machine): a running thread shows no program counter, so the doctor reads them again. Here they
    # spin about 0.07 s on an idle machine; read once, the check said "ok".
    if environment_report(probe_cuda=False)["openmp_runtime"] != "GNU libgomp":
        pytest.skip("GOMP_SPINCOUNT is GNU libgomp's setting")
    setup = "import os\nos.environ['GOMP_SPINCOUNT'] = '3000000'\n" + OPENMP_THREADS
    finding = check_in_fresh_interpreter(setup, 'check(only=["threads before fork"])')
    assert finding["threads before fork"]["status"] == "warn", finding


@linux_only
def test_threads_of_a_process_whose_proc_entries_cannot_be_read_are_n_a():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to read a process as another user")
    code = "import torch, time; print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        done = doctor_cli(
            "--pid",
            str(child.pid),
            "--only",
            "threads before fork",
            "--json",
            shell_prefix="cd / && PYTHONPATH="
            + str(ROOT)
            + " setpriv --reuid 65534 --regid 65534 --clear-groups ",
        )
        (finding,) = json.loads(done.stdout or "[{}]")
        assert finding.get("status") == "n/a", done.stdout + done.stderr
        assert "ptrace" in finding["measured"]
    finally:
        stop(child)


@pytest.mark.default_start_method
@linux_only
def test_native_thread_pools_are_named_by_library():
    setup = OPENMP_THREADS + "import numpy\nnumpy.ones((300, 300)) @ numpy.ones((300, 300))\n"
    measured = check_in_fresh_interpreter(setup, 'check(only=["threads before fork"])')[
        "threads before fork"
    ]["measured"]
    assert "OpenBLAS" in measured, measured
    if environment_report(probe_cuda=False)["openmp_runtime"] == "GNU libgomp":
        assert "GNU OpenMP" in measured, measured


# --- CUDA initialised (the CPU answers here; the GPU path where a GPU is lent) --------------------


def test_a_process_that_only_imported_torch_has_not_initialised_cuda():
    # A fresh interpreter: this test process may have called torch.cuda.is_available() (the GPU
    # tests' skipif does), which on a GPU machine rules out CUDA in its fork children.
    finding = check_in_fresh_interpreter("import torch\n")["CUDA initialised"]
    assert finding["status"] == "ok"
    if torch.version.cuda is None:
        assert "CPU build" in finding["measured"]


@linux_only
def test_cuda_seen_from_outside_a_process_that_never_loaded_libcuda():
    code = "import torch, time; print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"  # torch (and its libraries) are loaded
        finding = one("CUDA initialised", pid=child.pid)
        assert finding.status == "ok" and "has not opened the CUDA driver" in finding.measured
    finally:
        stop(child)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: run where one is lent")
@linux_only
def test_is_available_alone_is_seen_in_process_and_from_outside():
    # On a GPU, torch.cuda.is_available() poisons later forks without initialising torch's CUDA
    # (notebooks/transcripts/04_fork_and_cuda.txt, table (b)): both checks must say so.
    code = (
        "import torch, time\n"
        "from helpers.doctor import check\n"
        "torch.cuda.is_available()\n"
        "(f,) = [f for f in check() if f.name == 'CUDA initialised']\n"
        "print(f.status, torch.cuda.is_initialized(), flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        status, initialised = child.stdout.readline().split()[:2]
        assert initialised == "False"  # torch's own flag misses it
        assert status == ("warn" if environment_report()["default_start_method"] == "fork" else "ok")
        assert one("CUDA initialised", pid=child.pid).status == "warn"
    finally:
        stop(child)


# --- Leftover children and the Jupyter kernel -----------------------------------------------------


def test_no_leftover_children_passes_and_a_live_child_warns():
    assert one("leftover children").status == "ok"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        finding = one("leftover children")
        assert finding.status == "warn" and f"pid {child.pid}" in finding.measured
    finally:
        stop(child)


def test_outside_a_kernel_the_kernel_check_passes():
    finding = one("Jupyter kernel")
    assert finding.status == "ok" and finding.measured == "not a Jupyter kernel"


@pytest.mark.default_start_method
@linux_only
def test_inside_a_kernel_with_spawn_the_kernel_check_warns():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        code = (
            "import multiprocessing as mp; mp.set_start_method('spawn', force=True)\n"
            "from helpers.doctor import check\n"
            "f = check(only=['Jupyter kernel'])[0]\nprint(f.status, '|', f.measured)"
        )
        outputs: list[dict] = []
        reply = client.execute_interactive(code, timeout=120, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok"
        text = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
        assert text.startswith("warn | a Jupyter kernel, default start method spawn"), text
        from_outside = one("Jupyter kernel", pid=manager.provisioner.process.pid)
        assert from_outside.status == "warn" and "unknown from outside" in from_outside.measured
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _execute_on(client, code: str, subshell_id: str | None = None, timeout: float = 60.0) -> str:
    """Runs `code` in the kernel, on a subshell when given (as JupyterLab sends widget messages)."""
    msg = client.session.msg("execute_request", {"code": code, "silent": False, "store_history": False})
    if subshell_id is not None:
        msg["header"]["subshell_id"] = subshell_id
    client.shell_channel.send(msg)
    text, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = client.get_iopub_msg(timeout=deadline - time.monotonic())
        if out["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if out["msg_type"] in ("stream", "error"):
            text.append(out["content"].get("text") or "\n".join(out["content"].get("traceback", [])))
        if out["msg_type"] == "status" and out["content"]["execution_state"] == "idle":
            return "".join(text)
    raise TimeoutError(f"no reply to {code!r}")


def test_on_a_kernel_subshell_the_kernel_check_warns_and_widgets_say_so_once():
    # What JupyterLab 4.4+ does with widget messages, done by hand: ask ipykernel 7 for a subshell
    # (control channel), then run code on it. The main thread stays quiet and "ok".
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        setup = (
            "from helpers.doctor import check\n"
            "from helpers.environment import kernel_subshells, warn_if_off_main_thread\n"
            "def report():\n"
            "    f = check(only=['Jupyter kernel'])[0]\n"
            "    print(f.status, '|', f.measured, '|', kernel_subshells(), '|', warn_if_off_main_thread())\n"
        )
        on_main = _execute_on(client, setup + "report()")
        # A kernel whose default start method is not fork (Python 3.14 on Linux, macOS) warns anyway:
        # a worker defined in a cell fails in the child.
        status = "ok" if mp.get_all_start_methods()[0] == "fork" else "warn"
        assert on_main.startswith(f"{status} | a Jupyter kernel"), on_main
        assert on_main.rstrip().endswith("| [] | False"), on_main
        request = client.session.msg("create_subshell_request", {})
        client.control_channel.send(request)
        reply = client.control_channel.get_msg(timeout=30)
        subshell = reply["content"]["subshell_id"]
        first = _execute_on(client, "report()", subshell)
        second = _execute_on(client, "report()", subshell)
        # the notice first (printed while the report line is built), once
        assert first.startswith("Note: this widget runs its code on a kernel subshell thread"), first
        assert "'Kernel Comms over subshells' > Disabled" in first and first.rstrip().endswith("| True")
        assert "\nwarn | a Jupyter kernel" in first and "1 kernel subshell(s)" in first, first
        assert f"'subshell-{subshell}'" in first and "off the main thread" in first
        assert second.startswith("warn | a Jupyter kernel") and second.rstrip().endswith("| False"), second
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# --- inspect() ------------------------------------------------------------------------------------


_HUNG = """
import threading
{register}
lock = threading.Lock()
lock.acquire()
print("ready", flush=True)
lock.acquire()  # never returns
"""


def start_hung(register: bool) -> subprocess.Popen:
    register_line = "from helpers.stack_dump import register_stack_dump\nregister_stack_dump()"
    source = _HUNG.format(register=register_line if register else "")
    child = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    wchan, deadline = Path(f"/proc/{child.pid}/wchan"), time.monotonic() + 30
    while "futex" not in wchan.read_text():  # blocked in the second acquire, not on its way there
        assert time.monotonic() < deadline, f"the child never blocked: {wchan.read_text()!r}"
        time.sleep(0.01)
    return child


@linux_only
def test_inspect_reports_a_hung_childs_state_wait_and_stack_within_a_bound():
    child = start_hung(register=False)
    try:
        started = time.monotonic()
        (report,) = inspect(child.pid, timeout=20)
        assert time.monotonic() - started < 30
        assert report.pid == child.pid and report.status in ("sleeping", "disk-sleep")
        assert report.waits and sum(report.waits.values()) >= 1
        assert report.stack_source == "py-spy" and "<module>" in report.stack, report.stack
        text = doctor.format_inspection([report])
        assert text.startswith(f"pid {child.pid} (parent {os.getpid()})") and "stacks (py-spy)" in text
    finally:
        stop(child)


@linux_only
def test_without_py_spy_inspect_uses_faulthandler_or_says_why_not(monkeypatch):
    monkeypatch.setattr("helpers.debugging.py_spy_path", lambda: None)
    registered, plain = start_hung(register=True), start_hung(register=False)
    try:
        (report,) = inspect(registered.pid, timeout=20)
        assert report.stack_source == "faulthandler (SIGUSR1)" and "<string>" in report.stack, report.stack
        assert registered.poll() is None  # SIGUSR1 was caught: the process lives on
        (report,) = inspect(plain.pid, timeout=20)
        assert report.stack_source == "none" and "py-spy is not installed" in report.stack
        assert plain.poll() is None  # never sent SIGUSR1: it would have died
    finally:
        for child in (registered, plain):
            stop(child)


@linux_only
def test_inspect_says_a_zombie_has_exited_and_waits_for_its_parent():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    (report,) = inspect(child.pid)
    assert report.status == psutil.STATUS_ZOMBIE and "parent has not reaped it" in report.stack
    child.wait()


@linux_only
def test_workers_started_by_launch_register_the_stack_dump():
    assert launch(workers.catches_sigusr1, nprocs=1, method="spawn") == [True]


# --- The thread check() runs on -------------------------------------------------------------------


def test_check_on_the_main_thread_passes_and_on_another_thread_warns():
    import signal
    import threading

    assert one("main thread").status == "ok"
    found, refused = [], []

    def off_main() -> None:
        found.extend(doctor.check(only=["main thread"]))
        try:  # what a launcher started here meets: Python installs handlers on the main thread only
            signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
        except ValueError as error:
            refused.append(str(error))

    thread = threading.Thread(target=off_main, name="launcher")
    thread.start()
    thread.join(60)
    assert found[0].status == "warn" and "thread 'launcher'" in found[0].measured, found
    assert refused and "main thread" in refused[0]
    assert one("main thread", pid=os.getpid()).status == "n/a"  # which thread launches is not visible outside
