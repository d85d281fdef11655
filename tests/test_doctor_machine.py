"""helpers.doctor.machine_checks: versions, start method, CPUs, memory, files, network, leftovers."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch

from helpers import environment
from helpers.doctor import Finding, findings, machine_checks
from tests.doctor_support import LINUX, ROOT, check_in_fresh_interpreter, linux_only, one, stop

# --- Python, torch and the start method -----------------------------------------------------------


def test_versions_in_the_tested_range_pass():
    finding = one("python and torch")
    assert finding.status == "ok" and torch.__version__ in finding.measured


def test_versions_outside_the_tested_range_warn():
    (major, oldest), (_, newest) = environment.TESTED_PYTHONS
    torch_version = environment.TESTED_TORCH
    for python in (f"{major}.{oldest - 1}.1", f"{major}.{newest + 1}.0"):
        assert machine_checks._check_versions(python=python, torch_version=torch_version).status == "warn"
    assert machine_checks._check_versions(python="3.11.7", torch_version="2.4.0").status == "warn"
    for tested in ("2.11.0", "2.14.1", torch_version, f"{torch_version}+cpu"):
        assert machine_checks._check_versions(python="3.11.7", torch_version=tested).status == "ok", tested
    on_newest = machine_checks._check_versions(python=f"{major}.{newest}.0", torch_version=torch_version)
    assert on_newest.status == "ok" and (not LINUX or "forkserver" in on_newest.measured)


def test_a_torch_newer_than_the_tested_one_says_what_to_pin():
    for newer in ("2.15.1", "2.16.0", "2.16.0.dev20261201+cpu"):
        finding = machine_checks._check_versions(python="3.11.7", torch_version=newer)
        assert finding.status == "warn", newer
        assert f"newer than {environment.TESTED_TORCH}" in finding.measured
        assert f"pip install torch=={environment.TESTED_TORCH}" in finding.measured
        assert "make test TORCH_VERSION=" in finding.fix


def test_the_platform_default_start_method_passes():
    finding = check_in_fresh_interpreter("", 'check(only=["default start method"])')["default start method"]
    assert finding["status"] == "ok" and finding["measured"].startswith(mp.get_all_start_methods()[0])


def test_a_forced_default_start_method_warns():
    other = next(m for m in mp.get_all_start_methods() if m != mp.get_all_start_methods()[0])
    setup = f"import multiprocessing as mp; mp.set_start_method({other!r})\n"
    finding = check_in_fresh_interpreter(
        setup, 'check(only=["default start method"])', env={"MP_DEFAULT_START_METHOD": ""}
    )["default start method"]
    assert finding["status"] == "warn" and f"{other}, forced by set_start_method()" in finding["measured"]
    forced = check_in_fresh_interpreter(
        f"import multiprocessing as mp; mp.set_start_method({other!r})  # as conftest.py does\n",
        'check(only=["default start method"])',
        env={"MP_DEFAULT_START_METHOD": other},
    )["default start method"]
    assert forced["status"] == "warn" and f"MP_DEFAULT_START_METHOD={other}" in forced["measured"]


# --- CPU threads ----------------------------------------------------------------------------------


def test_threads_within_the_usable_cpus_pass():
    finding = check_in_fresh_interpreter(
        "import torch; torch.set_num_threads(1)\n", 'check(only=["CPU threads"])'
    )
    assert finding["CPU threads"]["status"] == "ok"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_more_threads_than_usable_cpus_warn():
    setup = "import os, torch\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
    setup += "torch.set_num_threads(2)\n"
    finding = check_in_fresh_interpreter(setup, 'check(only=["CPU threads"])')["CPU threads"]
    assert finding["status"] == "warn" and "on 1 usable CPU" in finding["measured"]
    assert one("CPU threads", processes=environment.usable_cpus() + 1).status == "warn"


def test_cgroup_quotas_read_as_cpus():
    assert environment._cpu_quota("max 100000") is None
    assert environment._cpu_quota("150000 100000") == 1.5
    assert environment._cpu_quota(quota_us="-1", period_us="100000") is None
    assert environment._cpu_quota(quota_us="400000", period_us="100000") == 4.0


# --- Shared memory and memory ---------------------------------------------------------------------


def test_enough_free_shared_memory_passes(tmp_path):
    finding = one("shared memory", shm_path=str(tmp_path), shm_need=1)
    assert finding.status in ("ok", "warn") and f"{tmp_path}:" in finding.measured
    if os.statvfs(tmp_path).f_blocks * os.statvfs(tmp_path).f_frsize > findings.DOCKER_DEFAULT_SHM:
        assert finding.status == "ok"


def test_free_space_below_the_need_fails(tmp_path):
    stats = os.statvfs(tmp_path)
    need = stats.f_bavail * stats.f_frsize + 1024**4
    finding = one("shared memory", shm_path=str(tmp_path), shm_need=need)
    assert finding.status == "fail" and "need" in finding.measured
    assert one("shared memory", shm_path=str(tmp_path / "missing")).status == "fail"


def test_a_memory_need_within_what_is_available_passes():
    finding = one("memory", mem_need=1024**2)
    assert finding.status == "ok", finding
    assert "available" in finding.measured and "swap" in finding.measured


def test_a_memory_need_beyond_memory_and_swap_fails_and_explains_sigkill():
    finding = one("memory", mem_need=1024**5)
    assert finding.status == "fail", finding
    assert "-9" in finding.why and "OOM" in finding.why


def test_the_memory_need_defaults_to_workers_times_a_per_worker_figure():
    finding = one("memory", processes=3)
    assert f"3 x {machine_checks._size(findings.DEFAULT_WORKER_MEM)}" in finding.measured, finding


def test_cgroup_memory_limits_are_read():
    assert environment._memory_limit("max") is None and environment._memory_limit("1073741824\n") == 1024**3
    assert environment._memory_limit("9223372036854771712") is None  # cgroup v1's "no limit"


# --- Open files -----------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits are POSIX")
def test_a_high_open_file_limit_passes():
    setup = (
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "high = hard if hard != resource.RLIM_INFINITY else 65536\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (high, hard))\n"
    )
    import resource

    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096:
        pytest.skip("the hard open-file limit here is below 4096")
    assert check_in_fresh_interpreter(setup, 'check(only=["open files"])')["open files"]["status"] == "ok"


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits are POSIX")
def test_a_child_with_a_low_open_file_limit_fails_and_file_system_sharing_passes():
    low = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
    )
    finding = check_in_fresh_interpreter(low, 'check(only=["open files"])')["open files"]
    assert finding["status"] == "fail" and "soft limit 64" in finding["measured"]
    relaxed = low + "import torch.multiprocessing as tmp; tmp.set_sharing_strategy('file_system')\n"
    assert check_in_fresh_interpreter(relaxed, 'check(only=["open files"])')["open files"]["status"] == "ok"


# --- Hostname and port ----------------------------------------------------------------------------


def test_a_resolvable_master_addr_passes():
    finding = one("hostname", master_addr="127.0.0.1")
    assert finding.status != "fail" and "MASTER_ADDR = 127.0.0.1 -> 127.0.0.1" in finding.measured


def test_an_unresolvable_master_addr_fails():
    finding = one("hostname", master_addr="no-such-host.invalid")
    assert finding.status == "fail" and "no-such-host.invalid" in finding.measured


def test_a_free_port_passes_and_a_port_held_busy_fails():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        busy = one("master port", master_port=port)
        assert busy.status == "fail" and f"*:{port} busy" in busy.measured
        assert f"pid {os.getpid()} (python) on 127.0.0.1" in busy.measured or "cannot see" in busy.measured
    assert one("master port", master_port=port).status == "ok"


def _held_port_status(server: socket.socket) -> Finding:
    return one("master port", master_port=server.getsockname()[1])


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 here")
def test_a_port_held_on_ipv6_loopback_only_is_not_free():
    try:
        server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError as error:
        pytest.skip(f"cannot listen on ::1 here: {error}")
    with server:
        assert _held_port_status(server).status == "fail"


def test_a_port_held_on_a_non_loopback_address_is_not_free():
    import psutil as ps

    addresses = [
        a.address
        for nics in ps.net_if_addrs().values()
        for a in nics
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]
    if not addresses:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with socket.create_server((addresses[0], 0)) as server:
        finding = _held_port_status(server)
        assert finding.status == "fail", finding


@linux_only
def test_a_port_a_tcpstore_holds_is_not_free():
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    finding = one("master port", master_port=store.port)
    assert finding.status == "fail", finding
    del store


@linux_only
def test_a_port_in_time_wait_that_torch_can_bind_is_free():
    from torch.distributed import TCPStore

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
        client.recv(1)
        client.close()
    finding = one("master port", master_port=port)
    assert finding.status == "ok", finding
    assert "cannot see" not in finding.measured
    store = TCPStore("127.0.0.1", port, 1, True, wait_for_workers=False)  # torch agrees: it binds
    del store


def test_torchruns_rendezvous_port_is_checked_too(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        monkeypatch.setattr(machine_checks, "TORCHRUN_RDZV_PORT", server.getsockname()[1])
        finding = one("master port", master_port=0)
        assert finding.status == "warn" and f":{server.getsockname()[1]}" in finding.measured


# --- Orphans and stale shared memory --------------------------------------------------------------


# The parent prints its spawn child's pid and dies without joining it: the child lives on.
_ORPHAN = (
    "import multiprocessing as mp, os, time\n"
    "if __name__ == '__main__':\n"
    "    child = mp.get_context('spawn').Process(target=time.sleep, args=(60,)); child.start()\n"
    "    print(child.pid, flush=True); os._exit(0)\n"
)


@linux_only
def test_no_orphan_is_ok(monkeypatch):
    # Not read from this machine: a test beside this one may have an orphan of its own right now.
    monkeypatch.setattr(machine_checks, "_orphans", list)
    assert one("orphaned workers").status == "ok"


def test_a_spawn_child_whose_parent_died_is_reported_as_orphaned():
    # Not run_python_script: the orphan inherits the parent's stdout, so reading to its end would wait.
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    orphan = psutil.Process(int(parent.stdout.readline()))
    parent.wait(30)
    parent.stdout.close()
    try:
        deadline = time.monotonic() + 30
        while "--multiprocessing-fork" not in " ".join(orphan.cmdline()) and time.monotonic() < deadline:
            time.sleep(0.1)  # the child execs the interpreter first
        finding = one("orphaned workers")
        assert finding.status == "warn" and f"pid {orphan.pid}" in finding.measured
    finally:
        orphan.kill()
        psutil.wait_procs([orphan], timeout=10)


def _orphan_of(code: str, tmpdir: str) -> psutil.Process:
    """Run ``code`` (it prints a child's pid and dies); return the child once it outlives its parent.
    Its temporary directory is ``tmpdir``: a launcher that dies so leaves multiprocessing's folder."""
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TMPDIR": tmpdir},
    )
    orphan = psutil.Process(int(parent.stdout.readline()))
    parent.wait(30)
    parent.stdout.close()
    return orphan


@pytest.fixture
def short_tmpdir():
    """A temporary directory with a short path (a forkserver's socket lives in it), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="orphan-") as folder:
        yield folder


_FORK_ORPHAN = (
    "import multiprocessing as mp, os, time\n"
    "child = mp.get_context('fork').Process(target=time.sleep, args=(60,)); child.start()\n"
    "print(child.pid, flush=True); os._exit(0)\n"
)


_FORKSERVER_ORPHAN = (
    "import multiprocessing as mp, os, time\n"
    "if __name__ == '__main__':\n"
    "    child = mp.get_context('forkserver').Process(target=time.sleep, args=(60,)); child.start()\n"
    "    print(child.pid, flush=True); os._exit(0)\n"
)


@linux_only
@pytest.mark.parametrize("code", [_FORK_ORPHAN, _FORKSERVER_ORPHAN], ids=["fork", "forkserver"])
def test_fork_and_forkserver_children_whose_launcher_died_are_orphans(code, short_tmpdir):
    orphan = _orphan_of(code, short_tmpdir)
    left = [orphan]
    if "forkserver" in code:  # the forkserver outlives the launcher too (it is the worker's parent)
        left.append(orphan.parent())
    try:
        deadline = time.monotonic() + 30
        while orphan.ppid() != 1 and "forkserver" not in code and time.monotonic() < deadline:
            time.sleep(0.1)
        finding = one("orphaned workers")
        assert finding.status == "warn" and f"pid {orphan.pid}" in finding.measured, finding
    finally:
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(left, timeout=10)


_PID1_LAUNCHER = """\
import multiprocessing as mp, os, sys, time
sys.path.insert(0, {root!r})
from helpers.doctor import check
if __name__ == "__main__":
    child = mp.get_context("spawn").Process(target=time.sleep, args=(60,)); child.start()
    (finding,) = check(only=["orphaned workers"])
    print("PID", os.getpid(), "STATUS", finding.status, finding.measured, flush=True)
    child.kill()
"""


@linux_only
def test_healthy_workers_of_a_launcher_that_is_pid_1_are_not_orphans(tmp_path):
    if os.geteuid() != 0 or subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"]).returncode:
        pytest.skip("needs unshare --pid (root) to run a launcher as PID 1, as in a container")
    script = tmp_path / "launcher.py"
    script.write_text(_PID1_LAUNCHER.format(root=str(ROOT)))
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "PID 1 STATUS ok" in done.stdout, done.stdout + done.stderr


def test_no_stale_segment_is_ok(monkeypatch):
    # Not read from this machine's /dev/shm: a test beside this one may be cleaning up right now.
    monkeypatch.setattr(machine_checks, "dev_shm_entries", set)
    assert one("stale shared memory").status == "ok"


@linux_only
def test_a_torch_segment_whose_creator_is_gone_is_stale():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = Path(f"/dev/shm/torch_{gone.pid}_doctor_test_0")
    stale.write_bytes(b"\0" * 4096)
    try:
        finding = one("stale shared memory")
        assert finding.status == "warn" and stale.name in finding.measured
    finally:
        stale.unlink()


@linux_only
def test_a_segment_a_live_process_still_maps_is_not_stale():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    segment = Path(f"/dev/shm/torch_{gone.pid}_doctor_mapped_0")
    segment.write_bytes(b"\0" * 4096)
    code = f"import mmap, time\nf = open({str(segment)!r}, 'r+b')\nm = mmap.mmap(f.fileno(), 0)\nf.close()\n"
    child = subprocess.Popen(
        [sys.executable, "-c", code + "print('ready', flush=True)\ntime.sleep(30)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        finding = one("stale shared memory")
        assert segment.name not in finding.measured, finding
        assert "never freed" not in finding.why and "torch_shm_manager" in finding.why
    finally:
        stop(child)
        segment.unlink()


# --- Stack dumps ----------------------------------------------------------------------------------


def test_stack_dumps_pass_with_py_spy_and_ptrace_allowed():
    finding = one("stack dumps")
    scope = machine_checks._ptrace_scope()
    if scope in (None, 0) or machine_checks._has_cap_sys_ptrace():
        assert finding.status == "ok" and "py-spy /" in finding.measured
    else:
        assert finding.status == "warn" and f"ptrace_scope {scope}" in finding.measured


def test_stack_dumps_warn_without_py_spy_before_python_315(monkeypatch):
    monkeypatch.setattr("helpers.debugging.py_spy_path", lambda: None)
    monkeypatch.setattr("helpers.debugging.profiling_dump_command", lambda pid: None)
    finding = one("stack dumps")
    assert finding.status == "warn" and "py-spy not installed" in finding.measured
    assert "profiling.sampling dump no (Python 3.15+)" in finding.measured


def test_stack_dumps_need_no_py_spy_from_python_315(monkeypatch):
    # Python 3.15's standard library reads a running process's stacks itself (PEP 799).
    monkeypatch.setattr("helpers.debugging.py_spy_path", lambda: None)
    monkeypatch.setattr("helpers.debugging.profiling_dump_command", lambda pid: ["python", "-m", "..."])
    finding = one("stack dumps")
    assert "py-spy not installed" in finding.measured and "profiling.sampling dump yes" in finding.measured
    scope = machine_checks._ptrace_scope()
    if scope in (None, 0) or machine_checks._has_cap_sys_ptrace():
        assert finding.status == "ok"
    else:
        assert finding.status == "warn" and "profiling.sampling may attach only" in finding.measured
