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
from helpers.doctor import Finding, findings, machine_checks, platform_checks
from helpers.processes import run_python_script
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
    scope = machine_checks.ptrace_scope()
    if scope in (None, 0) or machine_checks.has_cap_sys_ptrace():
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
    scope = machine_checks.ptrace_scope()
    if scope in (None, 0) or machine_checks.has_cap_sys_ptrace():
        assert finding.status == "ok"
    else:
        assert finding.status == "warn" and "profiling.sampling may attach only" in finding.measured


# --- Memory maps, logind's RemoveIPC, CUDA IPC, the address gloo binds -----------------------------

# A child uses up its memory maps (one page each) until {left} are left, as a process holding many shared
# tensors does: vm.max_map_count itself is system-wide, so it stays as it is. Then the doctor, then torch.
_SHORT_OF_MAPS = """
import mmap, os, re, torch
from helpers.doctor import check
check(only=["memory maps"], shared_tensors=1)  # its imports happen before the maps run out
def in_use():
    with open("/proc/self/maps", "rb") as maps:
        return sum(1 for _ in maps)
limit = int(open("/proc/sys/vm/max_map_count").read())
held = [mmap.mmap(-1, mmap.PAGESIZE) for _ in range(max(0, limit - in_use() - {left}))]
(finding,) = check(only=["memory maps"], shared_tensors={need})
print("FINDING", finding.status, finding.measured)
tensors, error = [], ""
try:
    for _ in range({need}):
        tensors.append(torch.zeros(4).share_memory_())
except RuntimeError as caught:
    error = str(caught).splitlines()[0]
    segment = re.search(r"from file <(/torch_[^>]+)>", error)  # torch leaves the segment it could not map
    if segment and os.path.exists("/dev/shm" + segment.group(1)):
        os.unlink("/dev/shm" + segment.group(1))
print("SHARED", len(tensors), "ERROR", error)
"""


def _short_of_maps(left: int, need: int) -> tuple[str, int, str]:
    done = run_python_script(_SHORT_OF_MAPS.format(left=left, need=need), timeout=120)
    finding = next(line for line in done.stdout.splitlines() if line.startswith("FINDING"))
    shared = next(line for line in done.stdout.splitlines() if line.startswith("SHARED"))
    return finding, int(shared.split()[1]), shared.partition(" ERROR ")[2]


@linux_only
def test_a_process_short_of_memory_maps_fails_and_torch_fails_to_share_as_it_says():
    finding, shared, error = _short_of_maps(left=300, need=400)
    assert finding.startswith("FINDING fail") and "the job needs 400" in finding, finding
    assert shared < 400 and "unable to mmap 16 bytes from file </torch_" in error, error
    assert error.endswith("Cannot allocate memory (12)"), error


@linux_only
def test_a_process_with_maps_to_spare_passes_and_shares_every_tensor():
    finding, shared, error = _short_of_maps(left=100_000, need=400)  # nothing used up
    assert finding.startswith("FINDING ok"), finding
    assert (shared, error) == (400, "")
    assert "pass --shared-tensors N" in one("memory maps").measured  # the need defaults to a DataLoader's
    assert platform_checks._check_memory_maps(10, proc="/no/such/proc").status == "n/a"


def _logind_root(root: Path, conf: str = "", user_min: int = 1000) -> Path:
    """A root laid out as logind reads it: systemd as the init, logind.conf with its commented default."""
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/logind.conf.d").mkdir(parents=True)
    (root / "etc/systemd/logind.conf").write_text("[Login]\n#RemoveIPC=yes\n" + conf)
    (root / "etc/login.defs").write_text(f"UID_MIN\t\t\t {user_min}\n")
    return root


def test_remove_ipc_warns_for_a_user_who_does_not_linger_and_passes_otherwise(tmp_path):
    """A fake root: logind's settings and the end of a login session cannot be made on a test machine
    (systemd is not even the init in CI's container); the files are laid out as logind reads them."""
    root = _logind_root(tmp_path)
    named = {"strategy": "file_system", "method": "fork"}  # file_system storages keep their /dev/shm names
    warned = platform_checks._check_remove_ipc(str(root), uid=1001, user="alice", **named)
    assert warned.status == "warn" and "RemoveIPC=yes (the default in" in warned.measured, warned
    assert "lingering no" in warned.measured and "enable-linger" in warned.fix
    sems = platform_checks._check_remove_ipc(str(root), uid=1001, user="alice", method="spawn")  # sem.mp-*
    assert sems.status == "warn" and "start method spawn" in sems.measured, sems
    fd = platform_checks._check_remove_ipc(str(root), 1001, "alice", "file_descriptor", "fork")  # unlinked
    assert fd.status == "ok" and "nothing named at risk" in fd.measured, fd  # torch's Linux default: a note
    assert platform_checks._check_remove_ipc(str(root), 999, "daemon", **named).status == "ok"  # system user
    (root / "var/lib/systemd/linger").mkdir(parents=True)
    (root / "var/lib/systemd/linger/alice").touch()
    assert platform_checks._check_remove_ipc(str(root), uid=1001, user="alice", **named).status == "ok"
    (root / "etc/systemd/logind.conf.d/50-ipc.conf").write_text("[Login]\nRemoveIPC=no\n")
    kept = platform_checks._check_remove_ipc(str(root), uid=1002, user="bob", **named)
    assert kept.status == "ok" and "RemoveIPC=no" in kept.measured and "50-ipc.conf" in kept.measured
    assert platform_checks._check_remove_ipc(str(tmp_path / "no-systemd"), uid=1001).status == "ok"


def _proc_root(root: Path, scope: int | None, cap: bool, seccomp: int = 0) -> str:
    if scope is not None:  # None: a kernel without Yama
        (root / "sys/kernel/yama").mkdir(parents=True)
        (root / "sys/kernel/yama/ptrace_scope").write_text(f"{scope}\n")
    (root / "self").mkdir()
    (root / "self/status").write_text(f"CapEff:\t{(1 << 19) if cap else 0:016x}\nSeccomp:\t{seccomp}\n")
    return str(root)


@pytest.mark.parametrize(
    ("scope", "cap", "conf", "status"),
    [
        (1, False, "expandable_segments:True", "warn"),  # a child receiving from its parent is refused
        (None, False, "expandable_segments:True", "warn"),  # no Yama, but Docker's seccomp filter
        (2, False, "expandable_segments:True", "warn"),
        (3, True, "expandable_segments:True", "warn"),
        (2, True, "expandable_segments:True", "ok"),
        (0, False, "expandable_segments:True", "ok"),
        (3, False, "max_split_size_mb:128", "ok"),  # cudaMalloc segments: cudaIpc handles, no ptrace
    ],
)
def test_cuda_ipc_of_expandable_segments_needs_ptrace(tmp_path, scope, cap, conf, status):
    """A fake procfs: Yama's setting is system-wide (and absent here), and no GPU is needed to read what
    decides it; torch's pidfd_getfd call (c10/cuda/CUDACachingAllocator.cpp) is where it fails."""
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf}
    proc = _proc_root(tmp_path, scope, cap, seccomp=2 if scope is None else 0)
    found = platform_checks._check_cuda_ipc(proc, env, "linux", cuda="13.0")
    assert found.status == status, found
    assert (
        f"ptrace_scope {'absent' if scope is None else scope}" in found.measured
        and "pidfd_getfd" in found.why
    )
    assert ("seccomp filter yes" in found.measured) == (scope is None)


def test_cuda_ipc_is_not_on_windows_nor_with_ipc_handles_disabled_and_a_cpu_build_needs_none(tmp_path):
    proc = _proc_root(tmp_path, 0, False)
    assert platform_checks._check_cuda_ipc(proc, {}, "win32", cuda="12.8").status == "warn"
    disabled = {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC": "0",
    }
    assert platform_checks._check_cuda_ipc(proc, disabled, "linux", cuda="13.0").status == "warn"
    cpu_build = platform_checks._check_cuda_ipc(proc, {}, "linux", cuda=None)
    assert cpu_build.status == "ok" and cpu_build.measured.endswith("no CUDA tensors to share")


def test_a_hostname_that_resolves_to_loopback_fails_gloo_on_several_nodes_only(monkeypatch):
    # "localhost" resolves to loopback everywhere: the real lookup a Debian host's 127.0.1.1 name gets.
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    check_gloo = platform_checks._check_gloo_interface
    several = check_gloo(2, None, 5.0, hostname="localhost")
    assert several.status == "fail" and "hostname localhost -> " in several.measured, several
    assert check_gloo(1, None, 5.0, hostname="localhost").status == "ok"
    assert check_gloo(2, "nccl", 5.0, hostname="localhost").status == "ok"  # no gloo group
    assert check_gloo(2, None, 5.0, hostname="no-such-host.invalid").status == "fail"  # gloo uses 127.0.0.1
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    assert check_gloo(2, None, 5.0).status == "fail"  # the loopback interface, named
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-interface0")
    assert check_gloo(1, None, 5.0).status == "fail"
    for name, nics in psutil.net_if_addrs().items():  # an interface off loopback, where there is one
        if any(a.family == socket.AF_INET and not a.address.startswith("127.") for a in nics):
            monkeypatch.setenv("GLOO_SOCKET_IFNAME", name)
            assert check_gloo(2, None, 5.0, hostname="localhost").status == "ok"
            break


def test_a_helpers_py_where_a_notebook_starts_is_reported(tmp_path, monkeypatch):
    """Issue 53: a learner's helpers.py next to the notebooks shadows the series' package there."""
    from helpers.doctor import check

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    (clean,) = check(only=["helpers package"])
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "helpers.py").write_text("x = 1\n")
    (shadowed,) = check(only=["helpers package"])
    assert clean.status == "ok" and shadowed.status == "warn", (clean, shadowed)
    assert str(tmp_path / "notebooks" / "helpers.py") in shadowed.measured and "Rename" in shadowed.fix
