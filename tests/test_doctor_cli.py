"""helpers.doctor: the findings, ``check()``, ``format_findings`` and ``python -m helpers.doctor``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from helpers.doctor import CHECKS, DoctorError, Finding, check, findings, format_findings, inspect
from helpers.processes import kill_tree, run_python_script
from tests.doctor_support import check_in_fresh_interpreter, doctor_cli, linux_only

# --- The findings and check() ---------------------------------------------------------------------


@pytest.mark.default_start_method
def test_every_finding_says_why_the_fix_where_it_is_taught_and_what_it_prevents():
    findings = check(target="helpers.debugging:sleep_for", imports=["json"], master_port=0)
    assert [f.name for f in findings] == list(CHECKS)
    for f in findings:
        assert f.status in ("ok", "warn", "fail", "n/a") and f.measured
        assert f.why and f.fix and f.prevents, f
        assert re.fullmatch(
            r"\[\d\d · [^]]+\]\(\.\./notebooks/\d\d_\w+\.ipynb#[a-z0-9-]+\)(; \[.+)?", f.teaches
        ), f


@pytest.mark.default_start_method
def test_a_fresh_command_line_says_n_a_for_per_process_checks_instead_of_passing():
    findings = {f.name: f for f in check(this_process=False)}
    per_process = [
        "threads before fork",
        "CUDA initialised",
        "leftover children",
        "Jupyter kernel",
        "main thread",
    ]
    assert [findings[name].status for name in per_process] == ["n/a"] * 5
    assert all(findings[name].status != "n/a" for name in findings if name not in per_process)


TEACHES = "[02 · Too many open files](../notebooks/02_shared_tensors.ipynb#too-many-open-files)"


def test_format_findings_is_a_table_with_explanations_for_problems_only():
    findings = [
        Finding("open files", "fail", "soft limit 64", "because", "ulimit -n", TEACHES, "pytorch#973"),
        Finding("hostname", "ok", "localhost", "why", "fix", TEACHES, "pytorch#150532"),
    ]
    text = format_findings(findings)
    assert text.splitlines()[0].split() == ["status", "check", "measured"]
    assert "FAIL open files: because" in text and "fix: ulimit -n" in text and "pytorch#973" in text
    assert 'taught in: 02_shared_tensors.ipynb, "Too many open files"; prevents: pytorch#973' in text
    assert "../notebooks" not in text  # the link is printed as the notebook's file and the section's title
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


def test_without_torch_the_command_line_prints_a_fail_line_not_a_traceback():
    # an interpreter where torch cannot be imported (sys.modules["torch"] = None makes `import torch`
    # raise ModuleNotFoundError), running python -m helpers.doctor as a shell would
    run_doctor = "import runpy, sys\nsys.modules['torch'] = None\nrunpy.run_module('helpers.doctor', run_name='__main__')\n"
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [sys.executable, "-c", run_doctor, *extra],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert sys.executable in done.stdout and "pip install torch" in done.stdout, done.stdout
    assert re.search(
        r"^fail\s+python and torch\s+torch is not importable",
        run_python_script(
            "import sys\nsys.modules['torch'] = None\nfrom helpers.doctor import check, format_findings\n"
            "print(format_findings(check()))\n",
            timeout=60,
        ).stdout,
        re.MULTILINE,
    )


def test_the_kubernetes_fix_says_the_pages_count_against_the_memory_limit():
    fix = findings.finding("shared memory", "warn", "").fix
    assert "emptyDir" in fix and "memory limit" in fix and "OOM" in fix


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 usable CPUs"
)
@pytest.mark.parametrize("binding", [{"OMP_PROC_BIND": "true"}, {"GOMP_CPU_AFFINITY": "0"}])
def test_an_openmp_binding_is_named_as_the_cause_not_the_quota(binding):
    # importing torch under these variables binds the process (and every child) to fewer CPUs: measured
    # before and after the import in a fresh interpreter; the old finding blamed the cores torch sees
    finding = check_in_fresh_interpreter("", 'check(only=["CPU threads"])', env=binding)["CPU threads"]
    (name,) = binding
    assert finding["status"] == "warn" and f"{name}=" in finding["measured"], finding
    assert "importing torch binds a process to 1 of" in finding["measured"], finding
    assert "every child" in finding["measured"] and "quota" not in finding["why"], finding
    assert name in finding["fix"] and "set_num_threads" not in finding["fix"], finding


def test_a_finding_refuses_an_unknown_status():
    with pytest.raises(ValueError, match="status"):
        Finding("x", "fine", "", "", "", "", "")


def test_unknown_check_names_and_missing_pids_are_bad_input():
    with pytest.raises(DoctorError, match="unknown check"):
        check(only=["no such check"])
    with pytest.raises(DoctorError, match="no process"):
        check(pid=2**22 + 12345)


# --- The command line -----------------------------------------------------------------------------


def test_the_command_line_answers_a_bad_target_with_one_line_and_exit_2():
    done = doctor_cli("--target", "no_such_module:fn")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "doctor: cannot import target 'no_such_module:fn': no module named 'no_such_module'"
    ]
    assert doctor_cli("--nprocs", "many").stderr.count("\n") == 1


@pytest.mark.skipif(sys.platform == "win32", reason="ulimit is POSIX")
def test_the_command_line_under_ulimit_64_reports_the_open_file_limit():
    done = doctor_cli("--only", "open files", "--brief", shell_prefix="ulimit -n 64 && ")
    assert done.returncode == 1, done.stderr
    assert "fail    open files  soft limit 64" in done.stdout


@linux_only
def test_the_command_line_takes_the_shared_tensors_the_nodes_and_the_backend():
    done = doctor_cli("--shared-tensors", str(10**6), "--only", "memory maps", "--brief")
    assert done.returncode == 1 and "fail    memory maps" in done.stdout, done.stdout + done.stderr
    done = doctor_cli("--nnodes", "2", "--backend", "nccl", "--only", "gloo interface", "--brief")
    assert done.returncode == 0 and "2 node(s), backend nccl" in done.stdout, done.stdout + done.stderr


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
