"""helpers.doctor.launch_checks: a launcher's thread count, the process limit, /dev/shm under a memory limit,
and a Slurm task layout against torchrun's. Each condition is induced: a real torchrun, a real RLIMIT_NPROC in
a child, and for what a test machine cannot be (a Slurm allocation, a container) a faked environment or a
fake cgroup folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import environment
from helpers.doctor import launch_checks
from helpers.processes import run_python_script
from tests.doctor_support import LINUX, doctor_cli, linux_only, one

# --- launcher threads ------------------------------------------------------------------------------


def test_one_thread_per_process_on_spare_cpus_warns_and_names_the_launcher_that_set_it():
    torchrun = {"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "none", "LOCAL_WORLD_SIZE": "2"}
    finding = launch_checks._check_launcher_threads(1, env=torchrun, usable=8)
    assert finding.status == "warn", finding
    assert "OMP_NUM_THREADS=1 (set by torchrun" in finding.measured, finding
    assert "2 process(es) on this node (torchrun's LOCAL_WORLD_SIZE)" in finding.measured
    assert "6 CPU(s) idle" in finding.measured and "Setting OMP_NUM_THREADS" in finding.why
    ray = launch_checks._check_launcher_threads(
        2, env={"MKL_NUM_THREADS": "1", "RAY_RAYLET_PID": "7"}, usable=8
    )
    assert ray.status == "warn" and "MKL_NUM_THREADS=1 (set by Ray" in ray.measured, ray
    shell = launch_checks._check_launcher_threads(2, env={"OMP_NUM_THREADS": "1"}, usable=8)
    assert shell.status == "warn" and "no launcher seen" in shell.measured, shell


def test_threads_left_to_torch_or_one_each_on_a_full_machine_pass():
    unset = launch_checks._check_launcher_threads(2, env={}, usable=8)
    assert unset.status == "ok" and "OMP_NUM_THREADS=unset" in unset.measured, unset
    assert launch_checks._check_launcher_threads(2, env={"OMP_NUM_THREADS": "4"}, usable=8).status == "ok"
    full = launch_checks._check_launcher_threads(8, env={"OMP_NUM_THREADS": "1"}, usable=8)
    assert full.status == "ok" and "one thread each fills the CPUs" in full.measured, full


WORKER = """\
import dataclasses, json
from helpers.doctor import check
(finding,) = check(only=["launcher threads"])
print("FINDING " + json.dumps(dataclasses.asdict(finding)), flush=True)
"""


@linux_only
def test_torchrun_sets_one_thread_per_worker_and_the_check_says_torchrun_did(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["TMPDIR"] = str(tmp_path)  # torchrun leaves its log folder (torchelastic_*) in TMPDIR
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default" in done.stderr
    findings = [
        json.loads(line.split("FINDING ", 1)[1]) for line in done.stdout.splitlines() if "FINDING " in line
    ]
    assert len(findings) == 2, done.stdout
    expected = "warn" if environment.usable_cpus() > 2 else "ok"
    for finding in findings:
        assert finding["status"] == expected, finding
        assert "OMP_NUM_THREADS=1" in finding["measured"] and "set by torchrun" in finding["measured"], (
            finding
        )


# --- process limit ------------------------------------------------------------------------------------


def _no_caps(tmp_path):
    (tmp_path / "self").mkdir(exist_ok=True)
    (tmp_path / "self" / "status").write_text("Name:\tpython\nCapEff:\t0000000000000000\n")
    return str(tmp_path)


def test_a_plan_past_the_user_process_limit_fails_near_it_warns_and_within_it_passes(tmp_path):
    proc = _no_caps(tmp_path)
    run = lambda soft, used: launch_checks._check_process_limit(  # noqa: E731
        4, 2, rlimit=(soft, soft), uid=1000, in_use=used, pids=None, proc=proc
    )
    past = run(100, 90)  # 4 x (1 + 2) = 12 tasks, 10 left
    assert past.status == "fail" and "about 12 tasks" in past.measured, past
    assert "ulimit -u 100 (90 in use by uid 1000, 10 left)" in past.measured
    assert "Resource temporarily unavailable" in past.measured and "can't start new thread" in past.why
    assert run(100, 80).status == "warn"  # 20 left: under twice 12
    assert run(10_000, 80).status == "ok"


def test_root_is_not_held_by_the_user_process_limit(tmp_path):
    finding = launch_checks._check_process_limit(
        4, 2, rlimit=(10, 10), uid=0, in_use=500, pids=None, proc=_no_caps(tmp_path)
    )
    assert finding.status == "ok" and "not enforced: root" in finding.measured, finding


def test_a_cgroup_pids_max_is_read_up_the_hierarchy_v2_and_v1(tmp_path):
    job = tmp_path / "v2" / "slice" / "job"
    job.mkdir(parents=True)
    (job / "pids.max").write_text("max\n")
    (job / "pids.current").write_text("3\n")
    (job.parent / "pids.max").write_text("20\n")
    (job.parent / "pids.current").write_text("15\n")
    pids = launch_checks._cgroup_pids(tmp_path / "v2", "0::/slice/job\n")
    assert pids == (20, 15, str(job.parent)), pids
    v1 = tmp_path / "v1" / "pids" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "pids.max").write_text("100\n")
    (v1 / "pids.current").write_text("40\n")
    assert launch_checks._cgroup_pids(tmp_path / "v1", "4:memory:/x\n3:pids:/docker/abc\n")[:2] == (100, 40)
    finding = launch_checks._check_process_limit(2, 2, rlimit=None, pids=pids)
    assert finding.status == "fail" and "pids.max 20 (15 in use, 5 left" in finding.measured, finding
    assert launch_checks._check_process_limit(1, 1, rlimit=None, pids=None).status == "ok"


LOW_NPROC = """\
import dataclasses, json, os, resource, threading
from helpers.doctor import launch_checks
if os.getuid() == 0:  # the kernel does not hold root to RLIMIT_NPROC: become nobody
    os.setgid(65534)
    os.setuid(65534)
used = launch_checks._user_threads(os.getuid())
soft = used + 4
resource.setrlimit(resource.RLIMIT_NPROC, (soft, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
finding = launch_checks._check_process_limit(4, 2, pids=None)
release, started, error = threading.Event(), [], ""
try:
    for _ in range(12):  # the plan: 4 processes x (1 + 2 threads)
        thread = threading.Thread(target=release.wait)
        thread.start()
        started.append(thread)
except RuntimeError as exc:
    error = str(exc)
release.set()
for thread in started:
    thread.join(10)
print("RESULT " + json.dumps({"finding": dataclasses.asdict(finding), "error": error, "soft": soft}))
"""


@pytest.mark.skipif(not LINUX, reason="RLIMIT_NPROC counts threads on Linux")
def test_a_real_low_process_limit_fails_the_check_and_python_then_cannot_start_threads():
    done = run_python_script(textwrap.dedent(LOW_NPROC), timeout=120)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-2000:]
    result = json.loads(line.removeprefix("RESULT "))
    finding = result["finding"]
    if "not enforced" in finding["measured"]:
        pytest.skip(f"this user is exempt from RLIMIT_NPROC here: {finding['measured']}")
    assert finding["status"] == "fail", finding
    assert f"ulimit -u {result['soft']}" in finding["measured"], finding
    assert result["error"] == "can't start new thread", result  # what the finding says a user will see


# --- /dev/shm as memory under a cgroup limit ----------------------------------------------------------

MOUNTINFO = (
    "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "25 22 0:23 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=2097152k\n"
    "26 22 8:2 / /data rw - xfs /dev/sdb1 rw\n"
)


def test_a_tmpfs_dev_shm_larger_than_the_memory_limit_leaves_warns():
    finding = launch_checks._check_shm_memory(
        "/dev/shm", mountinfo=MOUNTINFO, memory=(1024**3, 512 * 1024**2), size=2 * 1024**3
    )
    assert finding.status == "warn", finding
    assert "/dev/shm is tmpfs" in finding.measured and "512.0 MiB left" in finding.measured, finding
    assert "OOM kill" in finding.measured and "Memory Ownership" in finding.prevents


def test_shm_within_the_limit_without_a_limit_or_on_disk_passes():
    room = launch_checks._check_shm_memory("/dev/shm", MOUNTINFO, memory=(8 * 1024**3, 0), size=1024**3)
    assert room.status == "ok" and "count against it" in room.measured, room
    free = launch_checks._check_shm_memory("/dev/shm", MOUNTINFO, memory=None, size=1024**3)
    assert free.status == "ok" and "no cgroup memory limit" in free.measured, free
    disk = launch_checks._check_shm_memory("/data/shm", MOUNTINFO, memory=(1, 0), size=1024**3)
    assert disk.status == "ok" and "(xfs)" in disk.measured, disk


@linux_only
def test_the_shm_check_reads_this_machine():
    finding = one("shm counts as memory")
    assert finding.status in ("ok", "warn") and "/dev/shm" in finding.measured, finding


# --- Slurm layout -------------------------------------------------------------------------------------

SLURM = {"SLURM_JOB_ID": "42", "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2"}


def test_srun_starting_several_torchrun_agents_per_node_fails_with_the_count():
    env = {**SLURM, "SLURM_NTASKS_PER_NODE": "4", "SLURM_NTASKS": "8", "SLURM_GPUS_ON_NODE": "4"}
    finding = launch_checks._check_slurm_layout(4, 2, env=env)
    assert finding.status == "fail", finding
    assert "4 agents per node x 4 = 16 workers per node" in finding.measured, finding
    assert "16 process(es) per node on 4 GPU(s)" in finding.measured and "--ntasks-per-node=1" in finding.fix


def test_nnodes_cpus_and_gpus_that_do_not_match_the_allocation_are_named():
    one_task = {**SLURM, "SLURM_NTASKS": "2"}
    nodes = launch_checks._check_slurm_layout(4, 1, env=one_task)
    assert nodes.status == "fail" and "--nnodes 1 but Slurm allocated 2 node(s)" in nodes.measured, nodes
    cpus = launch_checks._check_slurm_layout(4, 2, env={**one_task, "SLURM_CPUS_PER_TASK": "2"})
    assert cpus.status == "warn" and "4 workers per agent on 2 CPU(s) per task" in cpus.measured, cpus
    gpus = launch_checks._check_slurm_layout(4, 2, env={**one_task, "CUDA_VISIBLE_DEVICES": "0,1"})
    assert (
        gpus.status == "fail" and "on 2 GPU(s)" in gpus.measured and "invalid device ordinal" in gpus.measured
    )
    ranks = launch_checks._check_slurm_layout(
        None, 1, env={**SLURM, "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_GPUS_PER_NODE": "a100:2"}
    )
    assert ranks.status == "fail" and "4 process(es) per node on 2 GPU(s)" in ranks.measured, ranks


def test_one_agent_per_node_with_a_gpu_each_passes_and_outside_slurm_it_says_so():
    env = {**SLURM, "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "16", "SLURM_GPUS_ON_NODE": "4"}
    finding = launch_checks._check_slurm_layout(4, 2, env=env)
    assert finding.status == "ok" and "1 task(s) per node" in finding.measured, finding
    outside = launch_checks._check_slurm_layout(4, 2, env={})
    assert outside.status == "ok" and "not in a Slurm allocation" in outside.measured


def test_a_slurm_torchrun_mismatch_faked_by_environment_fails_check_and_the_command_line(monkeypatch):
    for name, value in {
        **SLURM,
        "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NTASKS_PER_NODE": "2",
    }.items():
        monkeypatch.setenv(name, value)
    finding = one("Slurm layout", nproc_per_node=2)
    assert finding.status == "fail" and "2 agents per node x 2 = 4 workers" in finding.measured, finding
    done = doctor_cli("--nproc-per-node", "2", "--only", "Slurm layout", "--brief")
    assert done.returncode == 1 and "fail    Slurm layout" in done.stdout, done.stdout + done.stderr
