"""helpers.doctor.target_checks: the launch target and the imports, each probed in a fresh interpreter."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch

from helpers.debugging import sleep_for, wait_for_status
from helpers.doctor import DoctorError, check, target_checks
from tests.doctor_support import ROOT, check_in_fresh_interpreter, linux_only, one

# --- The target -----------------------------------------------------------------------------------


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


# --- Imports that initialise CUDA (the CPU answers here; the GPU path where a GPU is lent) --------


def test_importing_torch_does_not_initialise_cuda_and_a_missing_module_is_bad_input():
    assert target_checks._which_imports_initialise_cuda(["json", "torch"]) == []
    finding = one("imports initialise CUDA", imports=["json", "torch"])
    assert finding.status == "ok" and "none of json, torch" in finding.measured
    with pytest.raises(DoctorError, match="no_such_module"):
        target_checks._which_imports_initialise_cuda(["no_such_module"])
    assert one("imports initialise CUDA", imports=["no_such_module"]).status == "fail"


def test_an_import_that_opens_the_cuda_driver_counts_as_initialising_cuda(monkeypatch):
    # torch.cuda.is_available() opens the driver (cuInit) and poisons later forks while
    # torch.cuda.is_initialized() stays False: the probe's driver flag must count.
    assert target_checks._probe("json", "", 60)["cuda_driver"] is False  # no GPU touched: no driver open
    monkeypatch.setattr(
        target_checks, "_probe", lambda *a: {"import_s": 0.1, "cuda_initialised": False, "cuda_driver": True}
    )
    assert target_checks._which_imports_initialise_cuda(["calls_is_available"]) == ["calls_is_available"]


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: run where one is lent")
def test_an_import_that_calls_is_available_is_named_on_a_gpu(module_dir):
    (module_dir / "doctor_is_available.py").write_text(
        "import torch\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    )
    assert target_checks._which_imports_initialise_cuda(["doctor_is_available"]) == ["doctor_is_available"]


# --- Backends, and a launcher run in a thread (read from the target's source) ---------------------


def test_the_backends_this_torch_has_are_facts_and_pass_when_nothing_missing_is_named():
    import torch.distributed as dist

    finding = one("backends", backend="gloo")
    assert (
        finding.status == "ok" and f"gloo {'yes' if dist.is_gloo_available() else 'no'}" in finding.measured
    )
    assert "TCPStore: libuv" in finding.measured  # Linux wheels have it


@pytest.mark.skipif(torch.distributed.is_mpi_available(), reason="this torch has MPI")
def test_a_backend_this_torch_lacks_fails_named_or_in_the_targets_source(module_dir):
    named = one("backends", backend="cpu:gloo,cuda:mpi")
    assert named.status == "fail" and named.measured.endswith("this torch has no mpi"), named
    (module_dir / "doctor_mpi_target.py").write_text(
        "import torch.distributed as dist\n"
        "def work(rank):\n    dist.init_process_group(backend='mpi', rank=rank, world_size=1)\n"
    )
    (module_dir / "doctor_gloo_target.py").write_text(
        "import torch.distributed as dist\ndef work(rank):\n    dist.init_process_group('gloo')\n"
    )
    from_source = one("backends", target="doctor_mpi_target:work")
    assert from_source.status == "fail" and "doctor_mpi_target.py" in from_source.measured, from_source
    assert one("backends", target="doctor_gloo_target:work").status == "ok"


def test_a_torch_built_without_libuv_warns_even_with_use_libuv_0(monkeypatch):
    # Windows wheels are built without libuv; Linux ones have it, so the constructor is replaced by one
    # that raises what torch's raises there (the message is libtorch_cpu's, verified with strings).
    # USE_LIBUV=0 is no cure: torch 2.15.0's torchrun stores and TCPStore(...) never read it (H2).
    def no_libuv(*args, **kwargs):
        raise RuntimeError(
            "use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 to disable it."
        )

    monkeypatch.setattr(torch.distributed, "TCPStore", no_libuv)
    monkeypatch.delenv("USE_LIBUV", raising=False)
    without = one("backends")
    assert without.status == "warn" and "built without libuv" in without.measured, without
    monkeypatch.setenv("USE_LIBUV", "0")
    still = one("backends")
    assert still.status == "warn" and "whatever USE_LIBUV says" in still.measured, still
    assert "mp.spawn" in still.fix and "USE_LIBUV=0 does not fix torchrun" in still.fix, still.fix
    assert "'nccl' if torch.cuda.is_available() else 'gloo'" in still.fix  # not is_nccl_available()


_THREAD_LAUNCH = """\
import logging, sys, tempfile, threading
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes

def work(rank):
    return rank

def launch():
    with tempfile.TemporaryDirectory() as folder:
        context = start_processes("doctor", sys.executable, {0: ("-c", "pass")}, {0: {}}, DefaultLogsSpecs(folder))
        try:
            print("EXIT", context.wait(timeout=60).return_values, flush=True)
        finally:
            context.close()

def start():
    LAUNCH

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    start()
"""


@pytest.mark.parametrize("start", ["threading.Thread(target=launch).start()", "launch()"])
def test_a_launcher_run_by_a_thread_warns_and_torchelastic_then_installs_no_signal_handlers(
    module_dir, start
):
    """Reproduced: torchelastic's start_processes, run by a Thread, logs that it could not register its
    signal handlers; called on the main thread it registers them and the doctor passes."""
    name = "doctor_thread_launch" if "Thread" in start else "doctor_main_launch"
    script = module_dir / f"{name}.py"
    script.write_text(_THREAD_LAUNCH.replace("LAUNCH", start))
    finding = one("launch in a thread", target=f"{name}:work")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "EXIT {0: None}" in done.stdout, done.stdout + done.stderr
    refused = "Failed to register signal handlers since torchelastic is running on a child thread"
    if "Thread" in start:
        assert finding.status == "warn" and "a Thread runs start(), which calls" not in finding.measured
        assert "a Thread runs launch(), which calls start_processes" in finding.measured, finding
        assert refused in done.stderr
    else:
        assert finding.status == "ok" and refused not in done.stderr, finding


def test_a_launch_reached_through_another_function_or_a_thread_subclass_is_found(module_dir):
    (module_dir / "doctor_indirect_launch.py").write_text(
        "import threading\nimport torch.multiprocessing as mp\n"
        "def work(rank):\n    return rank\n"
        "def train():\n    mp.spawn(work, nprocs=2)\n"
        "def runner():\n    train()\n"
        "class Launcher(threading.Thread):\n    def run(self):\n        train()\n"
        "def main():\n    threading.Thread(target=runner, daemon=True).start()\n"
    )
    finding = one("launch in a thread", target="doctor_indirect_launch:work")
    assert finding.status == "warn", finding
    assert "runner(), which calls spawn (through train())" in finding.measured
    assert "a Thread runs run(), which calls spawn (through train())" in finding.measured
    assert finding.why.startswith(
        "torch.multiprocessing's spawn installs no signal handler"
    )  # its own reason
