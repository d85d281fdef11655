"""Record the series' GPU paths on a machine with CUDA: one labelled transcript per notebook.

    PYTHONPATH=. python tools/record_gpu_transcripts.py --out notebooks/transcripts

Each path runs as a script in a fresh interpreter with a deadline (the GPU machines have no
Jupyter): notebook 04's demos (``python -m helpers.cuda_transcript``), Hogwild with the model on
the GPU (05), DDP with nccl (06), a DataLoader with ``pin_memory`` (07) and the doctor's CUDA
checks (08). Every transcript starts with where and when it was recorded and the code that ran;
the notebooks show them, labelled as recorded, on machines without a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HOGWILD = """
import torch, torch.multiprocessing as mp
from helpers import digits, hogwild

if __name__ == "__main__":
    x_train, y_train, x_test, y_test = digits.load_digits_split()
    steps = 20 * len(x_train) // (2 * hogwild.BATCH_SIZE)
    ctx = mp.get_context("spawn")  # a forked child cannot use CUDA
    model = digits.make_model(seed=0, hidden=hogwild.HIDDEN).cuda()
    x_test, y_test = x_test.cuda(), y_test.cuda()
    print(f"before: test accuracy {digits.accuracy(model, x_test, y_test):.3f}")
    model.share_memory()  # a no-op for CUDA tensors: children get them through CUDA IPC
    args = (model, x_train.cuda(), y_train.cuda(), steps)
    workers = [ctx.Process(target=hogwild.train_worker, args=(rank, *args)) for rank in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    print("exit codes:", [w.exitcode for w in workers])
    trained = digits.accuracy(model, x_test, y_test)
    print(f"{torch.cuda.get_device_name()}: test accuracy after 2 workers x {steps} steps: {trained:.3f}")
"""

DDP_NCCL_ONE_RANK = """
import os, torch, torch.multiprocessing as mp
from helpers import ddp, digits

if __name__ == "__main__":
    snapshot = os.path.abspath("snapshot.pt")  # the recorder runs this in a temporary directory
    mp.spawn(ddp.train, args=(1, snapshot, ddp.free_port()), nprocs=1)  # rank 0: nccl on cuda:0
    state = torch.load(snapshot, weights_only=True)  # saved by rank 0 from its GPU
    where = next(iter(state["model"].values())).device
    model = digits.make_model(seed=ddp.SEED)
    model.load_state_dict(state["model"])
    _, _, x_test, y_test = digits.load_digits_split()
    print(f"rank 0 of 1 trained {state['epoch'] + 1} epochs with nccl;",
          f"its snapshot's tensors were on {where}")
    print(f"{torch.cuda.get_device_name()}: test accuracy {digits.accuracy(model.cpu(), x_test, y_test):.3f}")
"""

DDP_TWO_RANKS_ONE_GPU = """
import datetime, os, torch, torch.distributed as dist, torch.multiprocessing as mp
from helpers.ddp import free_port

def rank_on_gpu0(rank, world_size, port):
    torch.cuda.set_device(0)  # both ranks on the same GPU
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        x = torch.ones(1, device="cuda") * (rank + 1)
        dist.all_reduce(x)
        print(f"rank {rank}: all_reduce -> {x.item()}", flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__":
    try:
        mp.spawn(rank_on_gpu0, args=(2, free_port()), nprocs=2, join=True)
        print("two ranks on one GPU: the all_reduce ran")
    except Exception as error:
        print("two ranks on one GPU:", type(error).__name__, str(error).strip().splitlines()[-1][:300])
"""

PIN_MEMORY = """
import time, torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.randn(64, 1024, 1024))  # 64 samples of 4 MiB
    for pin in (False, True):
        loader = DataLoader(data, batch_size=16, num_workers=2, pin_memory=pin,
                            multiprocessing_context="spawn", timeout=120)
        pinned, seconds = [], 0.0
        for (batch,) in loader:
            pinned.append(batch.is_pinned())
            torch.cuda.synchronize(); start = time.perf_counter()
            on_gpu = batch.to("cuda", non_blocking=True)
            torch.cuda.synchronize(); seconds += time.perf_counter() - start
        mib = 64 * 4
        print(f"pin_memory={pin!s:5} batches pinned: {pinned} | host->GPU copy of {mib} MiB:",
              f"{seconds * 1e3:.1f} ms ({mib / 1024 / seconds:.1f} GiB/s)")
"""

DOCTOR_IN_PROCESS = """
import torch
from helpers.doctor import check, format_findings

def cuda_lines(title):
    findings = [f for f in check() if "CUDA" in f.name]
    print(f"## {title}\\n" + format_findings(findings, details=False))

if __name__ == "__main__":
    cuda_lines("nothing called yet")
    print("torch.cuda.is_available() ->", torch.cuda.is_available(),
          "| is_initialized():", torch.cuda.is_initialized())
    cuda_lines("after torch.cuda.is_available()")
    torch.zeros(1, device="cuda")
    cuda_lines("after a CUDA tensor")
"""

DOCTOR_PID = """
import subprocess, sys, time
job = subprocess.Popen([sys.executable, "-c",
    "import torch, time; torch.zeros(1, device='cuda'); print('ready', flush=True); time.sleep(60)"],
    stdout=subprocess.PIPE, text=True)
try:
    assert job.stdout.readline().strip() == "ready"
    done = subprocess.run([sys.executable, "-m", "helpers.doctor", "--pid", str(job.pid)],
                          capture_output=True, text=True, timeout=120)
    print(done.stdout.replace(str(job.pid), "PID"), done.stderr)
finally:
    job.kill(); job.wait(timeout=30)
"""

# (file, notebook it belongs to, what it shows, argv after the interpreter, seconds)
PATHS = [
    (
        "05_hogwild_gpu.txt",
        "05",
        "Hogwild with the model on the GPU: spawn workers, CUDA IPC",
        ["-c", HOGWILD],
        300,
    ),
    (
        "06_ddp_nccl.txt",
        "06",
        "DDP with nccl, one rank on one GPU (mp.spawn)",
        ["-c", DDP_NCCL_ONE_RANK],
        300,
    ),
    ("06_ddp_nccl.txt", "06", "Two ranks on one GPU with nccl", ["-c", DDP_TWO_RANKS_ONE_GPU], 200),
    ("07_pin_memory.txt", "07", "DataLoader with pin_memory on CUDA", ["-c", PIN_MEMORY], 300),
    ("08_doctor_cuda.txt", "08", "python -m helpers.doctor on a GPU machine", ["-m", "helpers.doctor"], 120),
    (
        "08_doctor_cuda.txt",
        "08",
        "The doctor's in-process CUDA check before and after CUDA calls",
        ["-c", DOCTOR_IN_PROCESS],
        120,
    ),
    (
        "08_doctor_cuda.txt",
        "08",
        "The doctor with --pid on a process that initialised CUDA",
        ["-c", DOCTOR_PID],
        200,
    ),
    (
        "08_doctor_cuda.txt",
        "08",
        "The doctor's --imports check",
        ["-m", "helpers.doctor", "--imports", "torch,helpers.ddp,helpers.cuda"],
        200,
    ),
]


def header() -> str:
    import torch

    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version,pci.bus_id", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "\n".join(
        [
            f"device: {props.name} ({props.total_memory / 2**30:.0f} GiB), {torch.cuda.device_count()} GPUs",
            f"driver, PCI bus id: {smi.stdout.strip() or 'unknown'}",
            f"torch: {torch.__version__} (CUDA {torch.version.cuda})",
            f"python: {sys.version.split()[0]}",
            f"date: {datetime.date.today().isoformat()}",
        ]
    )


def run(argv: list[str], timeout: float, tmp: str) -> str:
    argv = [a.replace("{tmp}", tmp) for a in argv]
    if argv[0] == "-c":  # a script file: spawn children import its functions by module and name
        Path(tmp, "snippet.py").write_text(textwrap.dedent(argv[1]))
        argv = [str(Path(tmp, "snippet.py"))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp
        )
        output, status = done.stdout + done.stderr, f"exit code {done.returncode}"
    except subprocess.TimeoutExpired as expired:
        output = (expired.stdout or b"").decode() + (expired.stderr or b"").decode()
        status = f"timed out after {timeout} s (killed)"
    return f"{output.rstrip()}\n[{status}, {time.monotonic() - start:.1f} s]"


def main() -> int:
    import tempfile

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "notebooks" / "transcripts")
    parser.add_argument("--only", nargs="*", default=(), help="transcript files to record (default: all)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("No CUDA device here: nothing recorded.")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    head = header()
    files: dict[str, list[str]] = {}
    for name, notebook, title, argv, timeout in PATHS:
        if args.only and name not in args.only:
            continue
        print(f"running: {title}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            output = run(argv, timeout, tmp)
        code = argv[1] if argv[0] == "-c" else None
        shown = textwrap.dedent(code).strip() if code else "python " + " ".join(argv).replace("{tmp}", "TMP")
        files.setdefault(name, [f"# RECORDED on a GPU machine, for notebook {notebook}", "", head, ""])
        files[name] += [f"## {title}", "", "```", shown, "```", "", "output:", "", output, ""]
        (args.out / name).write_text("\n".join(files[name]).rstrip() + "\n")  # kept if a later path hangs
        print(f"wrote {args.out / name}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
