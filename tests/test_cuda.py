"""helpers.cuda and helpers.cuda_transcript: what a CPU machine reads of fork-versus-CUDA from the
installed torch (asserted here), the GPU demos (where CUDA is), and the recorded transcript."""

from __future__ import annotations

import inspect
import io
import multiprocessing as mp
import subprocess
import sys

import pytest
import torch

import helpers.cuda as hc
import helpers.cuda_transcript as ct
from helpers.cuda import demos

HAS_CUDA = hc.cuda_present()
NO_CUDA_REASON = "no CUDA device on this machine: the GPU demos run on a GPU machine (python -m helpers.cuda)"


def test_bad_fork_check_is_read_from_the_installed_torch():
    text = hc.bad_fork_check()
    assert hc.CUDA_REINIT_ERROR in text and "if _is_in_bad_fork():" in text and "raise RuntimeError(" in text
    body = text.split("\n", 1)[1]
    assert inspect.cleandoc(body).splitlines()[0] in inspect.getsource(torch.cuda._lazy_init)
    assert f"torch {torch.__version__}" in text.splitlines()[0]


def test_bad_fork_flag_says_whether_the_c_flag_exists():
    flag = hc.bad_fork_flag()
    assert "_cuda_isInBadFork" in flag["source"]
    assert flag["real"] is hasattr(torch._C, "_cuda_isInBadFork")
    if not flag["real"]:  # a CPU-only build: the fallback stub never reports a bad fork
        assert torch.cuda._is_in_bad_fork() is False


def test_cuda_op_reports_the_error_instead_of_raising():
    import queue

    results = queue.Queue()
    hc.cuda_op(0, results)
    outcome = results.get_nowait()
    # Without a GPU: a CPU build says it has no CUDA; a CUDA build (pip's default on Linux) finds no driver.
    import torch

    cpu_build = "AssertionError: Torch not compiled with CUDA enabled"
    expected = "ok" if HAS_CUDA else cpu_build if torch.version.cuda is None else "RuntimeError: "
    assert outcome.startswith(expected), outcome


def test_unknown_demo_is_refused():
    done = subprocess.run(
        [sys.executable, "-m", "helpers.cuda", "teleport"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "unknown demo" in done.stderr


def test_transcript_format_round_trips_its_header():
    info = {"device": "GPU X", "driver": "1.2", "torch": "2.11.0", "cuda_runtime": "12.8", "date": "d"}
    header, text = ct._read_transcript_text(ct.format_transcript(info, {}))
    assert {k: header[k] for k in info} == info
    banner = ct.recorded_banner(header)
    assert banner.startswith("RECORDED on GPU X") and "driver 1.2" in banner and "torch 2.11.0" in banner


def test_read_transcript_of_a_missing_file_is_none(tmp_path):
    assert ct.read_transcript(tmp_path / "missing.txt") is None


@pytest.mark.parametrize(
    ("module", "option"), [("helpers.cuda", "DEMO"), ("helpers.cuda_transcript", "--output")]
)
def test_script_help(module, option):
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and option in done.stdout


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA: the GPU test runs instead")
def test_script_on_a_cpu_machine_says_no_cuda_and_writes_nothing(tmp_path):
    out = tmp_path / "t.txt"
    done = subprocess.run(
        [sys.executable, "-m", "helpers.cuda_transcript", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "No CUDA device found" in done.stdout
    assert not out.exists()
    assert ct.write_transcript(io.StringIO()) is None


@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.timeout(900)  # every demo, each in a fresh interpreter: minutes
def test_gpu_demos_run_and_their_robust_claims_hold():
    results = hc.run_gpu_demos(timeout=120)
    print(ct.format_transcript(hc.gpu_info(), results))
    hc.check_gpu_results(results)
    assert "spawn" in mp.get_all_start_methods()


def test_a_demo_case_runs_in_a_fresh_interpreter_with_its_environment():
    # The GPU demos' machinery, exercised on any machine: a fresh interpreter with an environment
    # variable set, a parent call, a fork child that tries a CUDA op and reports its outcome.
    env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    row = demos._run_fresh("_body_poison_case", 180, env=env, call="is_available()", timeout=60)
    assert row["nvml_check"] is True and row["returned"] is HAS_CUDA, row
    assert row["child_method"] == "fork" and row["child_exitcode"] == 0, row
    if not HAS_CUDA:
        assert row["parent_initialized"] is False and not row["child_outcome"].startswith("ok"), row


def test_transcript_of_failed_demos_says_why():
    failed = {"error": "exit code 1", "stderr": "Traceback ...\nRuntimeError: no GPU\n"}
    text = ct.format_transcript({}, {"cuda_ipc_queue": failed, "per_process_devices": failed})
    assert text.count("exit code 1 (RuntimeError: no GPU)") == 2
