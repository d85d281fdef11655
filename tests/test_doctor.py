"""helpers.doctor: every check made to pass, and made to warn or fail by inducing the condition for real.

Conditions that belong to a process (threads already started, a forced start method, a low
open-file limit, a CPU affinity) are induced in a fresh interpreter that then runs ``check()``
on itself, so this test process stays as it was.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import torch

from helpers import doctor, environment
from helpers.debugging import sleep_for, wait_for_status
from helpers.doctor import (
    CHECKS,
    DoctorError,
    Finding,
    check,
    findings,
    format_findings,
    inspect,
    machine_checks,
    target_checks,
)
from helpers.environment import environment_report
from helpers.launch import launch
from helpers.processes import kill_tree, run_python_script
from tests import workers

ROOT = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="reads /proc (Linux only)")


def check_in_fresh_interpreter(setup: str, call: str = "check()", env: dict | None = None) -> dict[str, dict]:
    """Run ``setup`` then ``call`` in a new interpreter; return its findings by name."""
    source = textwrap.dedent(setup) + textwrap.dedent(f"""
        import dataclasses, json
        from helpers.doctor import check
        print("FINDINGS " + json.dumps([dataclasses.asdict(f) for f in {call}]))
    """)
    old = {key: os.environ.get(key) for key in (env or {})}
    os.environ.update(env or {})
    try:
        done = run_python_script(source, timeout=120)
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    line = next((x for x in done.stdout.splitlines() if x.startswith("FINDINGS ")), None)
    assert line is not None, done.stderr
    return {f["name"]: f for f in json.loads(line.removeprefix("FINDINGS "))}


def one(name: str, **kwargs) -> Finding:
    (finding,) = check(only=[name], **kwargs)
    assert finding.name == name
    return finding


def stop(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()
    if child.stdout:
        child.stdout.close()


def doctor_cli(*args: str, shell_prefix: str = "") -> subprocess.CompletedProcess:
    command = f"{shell_prefix}{sys.executable} -m helpers.doctor " + " ".join(f"'{a}'" for a in args)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, check=False)


# --- The findings themselves -----------------------------------------------------------------------


@pytest.mark.default_start_method
def test_every_finding_says_why_the_fix_where_it_is_taught_and_what_it_prevents():
    findings = check(target="helpers.debugging:sleep_for", imports=["json"], master_port=0)
    assert [f.name for f in findings] == list(CHECKS)
    for f in findings:
        assert f.status in ("ok", "warn", "fail", "n/a") and f.measured
        assert f.why and f.fix and f.teaches[:2].isdigit() and f.prevents, f


@pytest.mark.default_start_method
def test_a_fresh_command_line_says_n_a_for_per_process_checks_instead_of_passing():
    findings = {f.name: f for f in check(this_process=False)}
    per_process = ["threads before fork", "CUDA initialised", "leftover children", "Jupyter kernel"]
    assert [findings[name].status for name in per_process] == ["n/a"] * 4
    assert all(findings[name].status != "n/a" for name in findings if name not in per_process)


def test_format_findings_is_a_table_with_explanations_for_problems_only():
    findings = [
        Finding("open files", "fail", "soft limit 64", "because", "ulimit -n", "02 §5", "pytorch#973"),
        Finding("hostname", "ok", "localhost", "why", "fix", "06 §2b", "pytorch#150532"),
    ]
    text = format_findings(findings)
    assert text.splitlines()[0].split() == ["status", "check", "measured"]
    assert "FAIL open files: because" in text and "fix: ulimit -n" in text and "pytorch#973" in text
    assert "pytorch#150532" not in text  # an ok finding gets no explanation
    assert "FAIL" not in format_findings(findings, details=False)


def test_importing_the_doctor_loads_only_the_standard_library_and_helpers():
    probe = (
        "import sys\nbefore = set(sys.modules)\nimport helpers.doctor\n"
        "new = {name.split('.')[0] for name in set(sys.modules) - before}\n"
        "allowed = {'helpers', '__mp_main__', '_missing_stdlib_info'}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - allowed))\n"
    )  # multiprocessing registers __main__ again as __mp_main__; Python 3.15's traceback loads
    # _missing_stdlib_info (its ModuleNotFoundError hints), a standard module sys.stdlib_module_names omits
    assert run_python_script(probe, timeout=60).stdout.strip() == "[]"  # torch and psutil: only when checking


def test_a_finding_refuses_an_unknown_status():
    with pytest.raises(ValueError, match="status"):
        Finding("x", "fine", "", "", "", "", "")


def test_unknown_check_names_and_missing_pids_are_bad_input():
    with pytest.raises(DoctorError, match="unknown check"):
        check(only=["no such check"])
    with pytest.raises(DoctorError, match="no process"):
        check(pid=2**22 + 12345)


# --- Python, torch and the start method ------------------------------------------------------------


def test_versions_in_the_tested_range_pass():
    finding = one("python and torch")
    assert finding.status == "ok" and torch.__version__ in finding.measured


def test_versions_outside_the_tested_range_warn():
    assert machine_checks._check_versions(python="3.9.1", torch_version="2.13.0").status == "warn"
    assert machine_checks._check_versions(python="3.16.0", torch_version="2.15.0").status == "warn"
    assert machine_checks._check_versions(python="3.11.7", torch_version="2.4.0").status == "warn"
    for tested in ("2.11.0", "2.14.1", "2.15.0", "2.15.0+cpu"):
        assert machine_checks._check_versions(python="3.11.7", torch_version=tested).status == "ok", tested
    for newest in ("3.14.0", "3.15.2"):  # 3.15: make unit and every notebook passed on 3.15.2
        finding = machine_checks._check_versions(python=newest, torch_version="2.15.0")
        assert finding.status == "ok" and (not LINUX or "forkserver" in finding.measured), newest


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


# --- The target --------------------------------------------------------------------------------------


def test_a_module_level_function_passes_by_name_and_as_an_object():
    by_name = one("target importable", target="helpers.debugging:sleep_for")
    assert by_name.status == "ok" and "pickles by name" in by_name.measured
    assert one("target importable", target=sleep_for).status == "ok"


def test_a_lambda_and_a_nested_function_fail():
    def nested(rank):
        return rank

    lam = one("target importable", target=lambda rank: rank)
    assert lam.status == "fail" and "lambda" in lam.measured
    assert one("target importable", target=nested).status == "fail"


def test_a_function_defined_in_a_main_without_a_file_fails():
    # python -c, like a notebook, has a __main__ that a spawn child cannot import (a script has one:
    # test_a_function_in_a_guarded_scripts_main_passes_like_launch).
    code = (
        "from helpers.doctor import check\ndef worker(rank):\n    return rank\n"
        "(f,) = check(target=worker, only=['target importable'])\nprint(f.status, f.measured)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.startswith("fail") and "__main__" in done.stdout, done.stdout + done.stderr
    assert one("target importable", target="__main__:worker").status == "fail"


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """A directory on sys.path for throw-away modules (the fresh interpreter gets this sys.path)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_attribute_holding_a_lambda_fails_in_the_fresh_interpreter(module_dir):
    (module_dir / "doctor_lambda_target.py").write_text("work = lambda rank: rank\n")
    finding = one("target importable", target="doctor_lambda_target:work")
    assert finding.status == "fail" and "is a lambda" in finding.measured


def test_a_module_that_hangs_or_raises_on_import_fails_within_the_deadline(module_dir):
    (module_dir / "doctor_slow_target.py").write_text("import time\ntime.sleep(60)\ndef work(rank): pass\n")
    (module_dir / "doctor_broken_target.py").write_text("raise RuntimeError('top level ran')\n")
    started = time.monotonic()
    slow = one("target importable", target="doctor_slow_target:work", timeout=3)
    assert slow.status == "fail" and "took over 3 s" in slow.measured
    assert time.monotonic() - started < 30
    broken = one("target importable", target="doctor_broken_target:work")
    assert broken.status == "fail" and "RuntimeError: top level ran" in broken.measured


@linux_only
def test_what_an_unguarded_import_starts_dies_with_the_probe(module_dir):
    pid_file = module_dir / "grandchild.pid"
    (module_dir / "doctor_unguarded_target.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "raise RuntimeError('an unguarded script ran its top level')\n"
    )
    assert one("target importable", target="doctor_unguarded_target:work").status == "fail"
    grandchild = int(pid_file.read_text())
    status = wait_for_status(grandchild, psutil.STATUS_ZOMBIE, timeout=10)  # SIGKILL lands when it runs
    if status not in ("gone", psutil.STATUS_ZOMBIE):
        os.kill(grandchild, signal.SIGKILL)  # it survived: fail, but leave nothing behind
    assert status in ("gone", psutil.STATUS_ZOMBIE)


@pytest.mark.default_start_method
@pytest.mark.parametrize(
    "target", ["no_such_module:fn", "helpers.debugging:no_such_function", "no colon", "a:b:c"]
)
def test_an_unimportable_or_malformed_target_is_bad_input(target):
    with pytest.raises(DoctorError, match="target"):
        check(target=target)


def test_the_command_line_answers_a_bad_target_with_one_line_and_exit_2():
    done = doctor_cli("--target", "no_such_module:fn")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "doctor: cannot import target 'no_such_module:fn': no module named 'no_such_module'"
    ]
    assert doctor_cli("--nprocs", "many").stderr.count("\n") == 1


# --- Threads --------------------------------------------------------------------------------------


@linux_only
def test_a_process_that_ran_no_parallel_region_passes_the_fork_check():
    finding = check_in_fresh_interpreter("import torch\n", 'check(only=["threads before fork"])')
    assert finding["threads before fork"]["status"] == "ok"
    assert "0 waiting in an OpenMP library, 1 Python thread" in finding["threads before fork"]["measured"]


OPENMP_THREADS = """\
import torch
torch.set_num_threads(2)
torch.randn(4_000_000, dtype=torch.float64).float()
"""


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


# --- CUDA (the CPU answers here; the GPU path where a GPU is lent) --------------------------------


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


def test_importing_torch_does_not_initialise_cuda_and_a_missing_module_is_bad_input():
    assert target_checks._which_imports_initialise_cuda(["json", "torch"]) == []
    finding = one("imports initialise CUDA", imports=["json", "torch"])
    assert finding.status == "ok" and "none of json, torch" in finding.measured
    with pytest.raises(DoctorError, match="no_such_module"):
        target_checks._which_imports_initialise_cuda(["no_such_module"])
    assert one("imports initialise CUDA", imports=["no_such_module"]).status == "fail"


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: run where one is lent")
def test_an_import_that_initialises_cuda_is_named(module_dir):
    (module_dir / "doctor_cuda_import.py").write_text("import torch\ntorch.cuda.init()\n")
    found = target_checks._which_imports_initialise_cuda(["json", "doctor_cuda_import"])
    assert found == ["doctor_cuda_import"]
    finding = one("imports initialise CUDA", imports=["doctor_cuda_import"])
    assert finding.status == "warn"
    initialised = check_in_fresh_interpreter(
        "import torch; torch.cuda.init()\n", 'check(only=["CUDA initialised"])'
    )
    assert initialised["CUDA initialised"]["status"] == (
        "warn" if mp.get_all_start_methods()[0] == "fork" else "ok"
    )


# --- Shared memory, open files ------------------------------------------------------------------------


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


@pytest.mark.skipif(sys.platform == "win32", reason="ulimit is POSIX")
def test_the_command_line_under_ulimit_64_reports_the_open_file_limit():
    done = doctor_cli("--only", "open files", "--brief", shell_prefix="ulimit -n 64 && ")
    assert done.returncode == 1, done.stderr
    assert "fail    open files  soft limit 64" in done.stdout


# --- Hostname and port ----------------------------------------------------------------------------------


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


# --- Children, orphans, stale shared memory, kernels ----------------------------------------------------


def test_no_leftover_children_passes_and_a_live_child_warns():
    assert one("leftover children").status == "ok"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        finding = one("leftover children")
        assert finding.status == "warn" and f"pid {child.pid}" in finding.measured
    finally:
        stop(child)


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


# --- inspect() ----------------------------------------------------------------------------------------

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


def test_inspect_of_a_missing_pid_is_bad_input_and_the_cli_says_so_in_one_line():
    with pytest.raises(DoctorError, match="no process"):
        inspect(2**22 + 12345)
    done = doctor_cli("--inspect", str(2**22 + 12345))
    assert done.returncode == 2 and done.stderr.count("\n") == 1


_PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"])
print(child.pid, flush=True)
child.wait()
"""


@linux_only
def test_the_cli_inspects_a_whole_tree_and_checks_a_pid_as_json():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "ready"  # the child runs Python code now
        done = doctor_cli("--inspect", str(parent.pid), "--json")
        tree = {r["pid"]: r for r in json.loads(done.stdout)}
        assert done.returncode == 0 and sorted(tree) == sorted([parent.pid, child_pid])
        assert tree[child_pid]["ppid"] == parent.pid and "<module>" in tree[child_pid]["stack"]
        done = doctor_cli("--pid", str(parent.pid), "--json", "--only", "leftover children")
        (finding,) = json.loads(done.stdout)
        assert finding["status"] == "warn" and f"pid {child_pid}" in finding["measured"]
    finally:
        kill_tree(parent.pid)
        parent.wait()
        parent.stdout.close()


# --- Reproductions of the issue "the doctor: no false ok" (each failed with the doctor before it) -------


def test_a_target_whose_import_iterates_a_dataloader_with_workers_fails(module_dir):
    (module_dir / "doctor_loader_target.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "def work(rank):\n    return rank\n"
        "for batch in DataLoader(list(range(8)), batch_size=2, num_workers=2):  # no __main__ guard\n"
        "    pass\n"
    )
    finding = one("target importable", target="doctor_loader_target:work")
    assert finding.status == "fail", finding
    assert "started 2 process(es)" in finding.measured and "the import ran the job" in finding.measured


def test_a_target_that_sets_the_start_method_at_import_fails(module_dir):
    (module_dir / "doctor_method_target.py").write_text(
        "import torch.multiprocessing as mp\nmp.set_start_method('spawn')\ndef work(rank):\n    return rank\n"
    )
    finding = one("target importable", target="doctor_method_target:work")
    assert finding.status == "fail", finding
    assert "set_start_method" in finding.measured


_GUARDED = """\
import sys
sys.path.insert(0, {root!r})
from helpers.doctor import check
from helpers.launch import launch

def worker(rank):
    return rank + 30

if __name__ == "__main__":
    (finding,) = check(target=worker, only=["target importable"])
    print("STATUS", finding.status, launch(worker, nprocs=1, method="spawn"), flush=True)
"""


def test_a_function_in_a_guarded_scripts_main_passes_like_launch(tmp_path):
    script = tmp_path / "guarded_script.py"
    script.write_text(_GUARDED.format(root=str(ROOT)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "STATUS ok [30]" in done.stdout, done.stdout + done.stderr


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


def test_an_import_that_opens_the_cuda_driver_counts_as_initialising_cuda(monkeypatch):
    # torch.cuda.is_available() opens the driver (cuInit) and poisons later forks while
    # torch.cuda.is_initialized() stays False: the probe's driver flag must count.
    assert target_checks._probe("json", "", 60)["cuda_driver"] is False  # no GPU touched: no driver open
    monkeypatch.setattr(
        target_checks, "_probe", lambda *a: {"import_s": 0.1, "cuda_initialised": False, "cuda_driver": True}
    )
    assert target_checks._which_imports_initialise_cuda(["calls_is_available"]) == ["calls_is_available"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: run where one is lent")
def test_an_import_that_calls_is_available_is_named_on_a_gpu(module_dir):
    (module_dir / "doctor_is_available.py").write_text(
        "import torch\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    )
    assert target_checks._which_imports_initialise_cuda(["doctor_is_available"]) == ["doctor_is_available"]


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
    assert f"3 x {findings._size(findings.DEFAULT_WORKER_MEM)}" in finding.measured, finding


def test_cgroup_memory_limits_are_read():
    assert environment._memory_limit("max") is None and environment._memory_limit("1073741824\n") == 1024**3
    assert environment._memory_limit("9223372036854771712") is None  # cgroup v1's "no limit"
