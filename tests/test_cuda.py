"""helpers.cuda: the CPU twin of fork-versus-CUDA (asserted here), the GPU demos (where CUDA is)."""

from __future__ import annotations

import io
import multiprocessing as mp
import subprocess
import sys
import threading

import pytest
import torch

import helpers.cuda as hc
from helpers.environment import environment_report
from helpers.start_methods import parallel_op
from tests.workers import METHODS

HAS_CUDA = hc.cuda_present()
NO_CUDA_REASON = "no CUDA device on this machine: the GPU demos run on a GPU machine (python -m helpers.cuda)"
OPENMP_HAZARD = environment_report(probe_cuda=False)["openmp_runtime"] == "GNU libgomp"
needs_fork = pytest.mark.skipif("fork" not in METHODS, reason="needs the fork start method")


@pytest.fixture
def used_thread_pool():
    """This process has run a multi-threaded op, as a notebook kernel has."""
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    parallel_op()
    yield
    torch.set_num_threads(threads)


@needs_fork
@pytest.mark.skipif(not OPENMP_HAZARD, reason="the fork hang needs GNU OpenMP (torch's Linux pip wheel)")
def test_fork_child_hangs_in_the_parallel_op_and_says_where(used_thread_pool):
    report = hc.fork_hang_report("fork", threads=None, timeout=3)
    assert report.hung and not report.finished and report.exitcode is not None
    assert "in parallel_op" in report.stack and "_op_with_watchdog" in report.stack
    assert report.tasks and all("futex" in task for task in report.tasks), report.tasks


@pytest.mark.parametrize("method", METHODS)
def test_the_fixes_finish(method, used_thread_pool):
    threads = 1 if method == "fork" else None
    report = hc.fork_hang_report(method, threads=threads, timeout=60)
    assert report.finished and not report.hung and report.stack == "", report


def test_openmp_fixes_lists_every_available_variant(used_thread_pool):
    reports = hc.openmp_fixes(hang_timeout=3, timeout=60)
    assert [r.method for r in reports] == [m for _, m, _ in hc.FIX_VARIANTS if m in METHODS]
    assert all(r.finished for r in reports if r.threads == 1 or r.method != "fork")
    fig = hc.plot_fixes(reports)
    assert fig.axes


def test_fork_hang_report_refuses_bad_input():
    with pytest.raises(ValueError, match="not available"):
        hc.fork_hang_report("teleport")
    with pytest.raises(ValueError, match="positive"):
        hc.fork_hang_report("spawn", timeout=0)


@needs_fork
def test_hang_demo_widget_callback(used_thread_pool, capsys):
    fine = hc.hang_demo(threads=1, method="fork")
    assert fine.finished and "finished in" in capsys.readouterr().out
    if OPENMP_HAZARD:
        stuck = hc.hang_demo(threads=None, method="fork", timeout=2)
        out = capsys.readouterr().out
        assert stuck.hung and "HUNG" in out and "stuck in:" in out and "parallel_op" in out


def test_hang_demo_under_spawn(capsys):
    assert hc.hang_demo(threads=None, method="spawn").finished


@needs_fork
def test_fork_while_a_thread_holds_a_lock_deadlocks_the_child():
    held = hc.fork_while_lock_held(held=True, timeout=1)
    assert held.timed_out and not held.child_acquired and held.parent_acquired_after
    assert held.output == "child: acquiring the lock ..."
    free = hc.fork_while_lock_held(held=False, timeout=30)
    assert free.child_acquired and not free.timed_out
    assert threading.active_count() == 1 or all(t.name != "lock-holder" for t in threading.enumerate())


def test_fork_warning_from_python_3_12():
    lines = hc.fork_warning()
    assert lines[0].startswith(f"python {sys.version.split()[0]}") and "threads when forking: 2" in lines[0]
    warned = [line for line in lines if "multi-threaded, use of fork() may lead to deadlocks" in line]
    if sys.version_info >= (3, 12):
        assert warned and warned[0].startswith("DeprecationWarning: This process (pid=")
    else:
        assert not warned


def test_transcript_format_round_trips_its_header():
    info = {"device": "GPU X", "driver": "1.2", "torch": "2.11.0", "cuda_runtime": "12.8", "date": "d"}
    header, text = hc.read_transcript_text(hc.format_transcript(info, {}))
    assert {k: header[k] for k in info} == info
    banner = hc.recorded_banner(header)
    assert banner.startswith("RECORDED on GPU X") and "driver 1.2" in banner and "torch 2.11.0" in banner


def test_read_transcript_of_a_missing_file_is_none(tmp_path):
    assert hc.read_transcript(tmp_path / "missing.txt") is None
    assert "PENDING" in hc.PENDING_MESSAGE and hc.TRANSCRIPT_COMMAND in hc.PENDING_MESSAGE


def test_script_help():
    done = subprocess.run(
        [sys.executable, "-m", "helpers.cuda", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "--output" in done.stdout


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA: the GPU test runs instead")
def test_script_on_a_cpu_machine_says_no_cuda_and_writes_nothing(tmp_path):
    out = tmp_path / "t.txt"
    done = subprocess.run(
        [sys.executable, "-m", "helpers.cuda", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "No CUDA device found" in done.stdout
    assert not out.exists()
    assert hc.write_transcript(io.StringIO()) is None


@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
def test_gpu_demos_run_and_their_robust_claims_hold():
    results = hc.run_gpu_demos(timeout=120)
    print(hc.format_transcript(hc.gpu_info(), results))
    hc.check_gpu_results(results)
    assert "spawn" in mp.get_all_start_methods()


def test_a_demo_case_runs_in_a_fresh_interpreter_with_its_environment():
    # The GPU demos' machinery, exercised on any machine: a fresh interpreter with an environment
    # variable set, a parent call, a fork child that tries a CUDA op and reports its outcome.
    env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    row = hc._run_fresh("_body_poison_case", 180, env=env, call="is_available()", timeout=60)
    assert row["nvml_check"] is True and row["returned"] is HAS_CUDA, row
    assert row["child_method"] == "fork" and row["child_exitcode"] == 0, row
    if not HAS_CUDA:
        assert row["parent_initialized"] is False and not row["child_outcome"].startswith("ok"), row


def test_transcript_of_failed_demos_says_why():
    failed = {"error": "exit code 1", "stderr": "Traceback ...\nRuntimeError: no GPU\n"}
    text = hc.format_transcript({}, {"cuda_ipc_queue": failed, "per_process_devices": failed})
    assert text.count("exit code 1 (RuntimeError: no GPU)") == 2
