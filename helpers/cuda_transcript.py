"""The recorded GPU transcript of notebook 04: write it on a GPU machine, read it everywhere else.

On a machine with CUDA, from the repository root::

    PYTHONPATH=. python -m helpers.cuda_transcript --output notebooks/transcripts/04_fork_and_cuda.txt

runs every demo of ``helpers.cuda`` (each in a fresh interpreter) and writes their outcomes under a
header that says where and when they were recorded (device, driver, torch and CUDA versions, date).
Notebook 04 shows that file, labelled as recorded, on machines without CUDA. Nothing here imports
Jupyter, and the package need not be installed (``PYTHONPATH`` pointing at the repository is enough).

Example::

    >>> from helpers.cuda_transcript import format_transcript
    >>> format_transcript({"device": "GPU X"}, {}).splitlines()[2]
    'device: GPU X'
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path
from typing import TextIO

import torch

from helpers.cuda import cuda_present, gpu_check_exit_code, gpu_info, run_gpu_demos
from helpers.resources import transcript_path

__all__ = [
    "format_transcript",
    "read_transcript",
    "recorded_banner",
    "write_transcript",
    "main",
]

_TRANSCRIPT = "04_fork_and_cuda.txt"  # helpers.resources finds it, in the clone or the installed package
_TRANSCRIPT_COMMAND = (
    "PYTHONPATH=. python -m helpers.cuda_transcript --output notebooks/transcripts/04_fork_and_cuda.txt"
)

_HEADER_KEYS = ("device", "driver", "torch", "cuda_runtime", "python", "date")


def _yes_no(value) -> str:
    return {True: "yes", False: "no", None: "n/a"}.get(value, str(value))


def _failure(result: dict) -> str:
    """What went wrong in a fresh interpreter: its error and the last line of its stderr."""
    last = [line for line in result.get("stderr", "").splitlines() if line.strip()][-1:]
    return f"{result.get('error')} ({last[0].strip()[:200]})" if last else str(result.get("error"))


def format_transcript(info: dict, results: dict) -> str:
    """The transcript text: a header (device, driver, versions, date), then each demo's outcome.
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) prints it for a live GPU run.

    >>> text = format_transcript({"device": "GPU X", "date": "2026-01-01"}, {})
    >>> _read_transcript_text(text)[0]["device"]
    'GPU X'
    """
    lines = ["# helpers.cuda: GPU demos of notebook 04, recorded on a real GPU", ""]
    lines += [f"{key}: {info.get(key, 'unknown')}" for key in _HEADER_KEYS]
    if len(info.get("devices", [])) > 1:
        lines.append(f"all devices: {', '.join(info['devices'])}")
    lines += ["", f"command: {_TRANSCRIPT_COMMAND}", ""]
    for demo, section in _SECTIONS.items():
        if demo in results:
            lines += section(results[demo])
    return "\n".join(lines).rstrip() + "\n"


def _fork_after_init_lines(r: dict) -> list[str]:
    return [
        "## (a) The parent creates a CUDA tensor, then forks; the child tries a CUDA op",
        f"parent torch.cuda.is_initialized(): {_yes_no(r.get('parent_initialized'))}",
        f"child _cuda_isInBadFork(): {_yes_no(r.get('child_bad_fork'))}",
        f"child outcome: {r.get('child_outcome') or _failure(r)}",
        "",
    ]


def _poison_table_lines(rows: list[dict]) -> list[str]:
    lines = [
        "## (b) Which parent calls poison fork (each case in a fresh interpreter)",
        f"{'parent calls':<16} {'NVML check':<11} {'returned':<10} {'parent init':<12} "
        f"{'child bad fork':<15} child's CUDA op",
    ]
    for r in rows:
        lines.append(
            f"{r['call']:<16} {_yes_no(r['nvml_check']):<11} {str(r.get('returned', '-')):<10} "
            f"{_yes_no(r.get('parent_initialized')):<12} {_yes_no(r.get('child_bad_fork')):<15} "
            f"{r.get('child_outcome') or _failure(r)}"
        )
    lines.append("(NVML check: PYTORCH_NVML_BASED_CUDA_CHECK=1 in the parent's environment)")
    lines.append("")
    return lines


def _fixes_lines(rows: list[dict]) -> list[str]:
    lines = ["## (c) The fixes"]
    for r in rows:
        outcome = r.get("child_outcome") or _failure(r)
        lines.append(f"{r['fix']:<42} child: {outcome} ({r.get('child_seconds', '?')} s)")
    lines.append("")
    return lines


def _ipc_queue_lines(r: dict) -> list[str]:
    lines = ["## (d) A CUDA tensor through a torch Queue to a spawn child (CUDA IPC)"]
    if "error" in r:
        return [*lines, f"failed: {_failure(r)}", ""]
    consumer = r["consumer"]
    shared = r["producer_sees"] == [x + 1 for x in r["sent"]]
    verdict = "the consumer's write: same memory, no copy" if shared else "NOT the consumer's write"
    return [
        *lines,
        f"producer (pid {r['producer_pid']}) sent {r['sent']} on cuda",
        f"consumer (pid {consumer['consumer_pid']}) received {consumer['received']} on "
        f"{consumer['device']}, added 1 in place, released it",
        f"producer now sees {r['producer_sees']}: {verdict}",
        "",
    ]


def _broken_keep_alive_lines(r: dict) -> list[str]:
    torch_lines = [line for line in r.get("stderr", "").splitlines() if line.strip()][-4:]
    return [
        "## (d) The keep-alive rule broken: the producer exits before the consumer gets the tensor",
        f"producer exit code: {r.get('producer_exitcode')}",
        f"consumer: {r.get('consumer_outcome') or _failure(r)}",
        *(f"stderr: {line[:200]}" for line in torch_lines),
        "",
    ]


def _per_process_devices_lines(r: dict) -> list[str]:
    count = r["ndevices"] if "ndevices" in r else _failure(r)
    lines = [f"## (d) One device per process ({count} GPU(s) here)"]
    lines += [f"set_device: {row}" for row in r.get("set_device", [])]
    lines += [f"CUDA_VISIBLE_DEVICES: {row}" for row in r.get("visible_devices", [])]
    lines.append("")
    return lines


# Each demo's part of the transcript, in the order the transcript shows them.
_SECTIONS = {
    "fork_after_cuda_init": _fork_after_init_lines,
    "poison_table": _poison_table_lines,
    "cuda_fixes": _fixes_lines,
    "cuda_ipc_queue": _ipc_queue_lines,
    "broken_keep_alive": _broken_keep_alive_lines,
    "per_process_devices": _per_process_devices_lines,
}


def _read_transcript_text(text: str) -> tuple[dict, str]:
    """Split a transcript into its header (``key: value`` lines before the first ``##``) and text.

    >>> _read_transcript_text("device: GPU X\\ndate: today\\n## (a) a demo\\nchild outcome: ok\\n")[0]
    {'device': 'GPU X', 'date': 'today'}
    """
    header = {}
    for line in text.splitlines():
        if line.startswith("## "):
            break
        match = re.match(r"([a-z_ ]+): (.*)$", line)
        if match:
            header[match.group(1)] = match.group(2)
    return header, text


def read_transcript(path: Path | str | None = None) -> tuple[dict, str] | None:
    """The committed transcript (``path``, default notebook 04's) as ``(header, text)``, or None
    when it has not been recorded yet. [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) shows it where CUDA is absent.

    >>> read_transcript("/nonexistent/transcript.txt") is None
    True
    """
    path = Path(path) if path is not None else transcript_path(_TRANSCRIPT)
    if not path.is_file():
        return None
    return _read_transcript_text(path.read_text())


def recorded_banner(header: dict) -> str:
    """The label shown above a recorded transcript: where and when it was recorded.
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) prints it above the recorded transcript.

    >>> print(recorded_banner({"device": "GPU X", "driver": "1", "torch": "2", "date": "d"}))
    RECORDED on GPU X (driver 1, torch 2, d), NOT run now: this machine has no CUDA device.
    """
    return (
        f"RECORDED on {header.get('device', '?')} (driver {header.get('driver', '?')}, torch "
        f"{header.get('torch', '?')}, {header.get('date', '?')}), "
        "NOT run now: this machine has no CUDA device."
    )


def write_transcript(out: TextIO, timeout: float = 120.0, progress: TextIO | None = None) -> dict | None:
    """Run every GPU demo and write the transcript to ``out``; return the results.
    Used by ``python -m helpers.cuda_transcript``, which records the transcript
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) shows.

    Without CUDA, write nothing and return None. Not run as a doctest: on a GPU it runs every demo
    (minutes).

    >>> import io
    >>> out = io.StringIO()
    >>> results = write_transcript(out)  # doctest: +SKIP
    >>> out.getvalue().startswith("# helpers.cuda: GPU demos")  # doctest: +SKIP
    True
    """
    if not cuda_present():
        return None
    info = gpu_info()
    if "error" in info:
        raise RuntimeError(f"could not read the GPU's details: {info}")
    results = run_gpu_demos(timeout=timeout, progress=progress)
    out.write(format_transcript(info, results))
    out.flush()
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.cuda_transcript``: run the GPU demos and print (or save) the transcript.
    Records the transcript that [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) shows where CUDA is absent.

    Not run as a doctest: a CLI entry point that needs a CUDA device and takes minutes.

    >>> main(["--output", "notebooks/transcripts/04_fork_and_cuda.txt", "--check"])  # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.cuda_transcript",
        description="Run notebook 04's GPU demos (fork after CUDA init, which calls poison fork, the "
        "fixes, CUDA tensors through a queue, one device per process), each in a fresh interpreter "
        "with a timeout, and write the transcript that the notebook shows where CUDA is absent.",
    )
    parser.add_argument("--output", default="-", help="file to write the transcript to (default: stdout)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per child (default 120)")
    parser.add_argument("--check", action="store_true", help="also assert the robust claims (exit 1 if not)")
    args = parser.parse_args(argv)
    if not cuda_present():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"No CUDA device found (torch {torch.__version__}, {build}): nothing to record.")
        return 0
    if args.output == "-":
        results = write_transcript(sys.stdout, timeout=args.timeout, progress=sys.stderr)
    else:
        buffer = io.StringIO()  # the file is written only once every demo has run
        results = write_transcript(buffer, timeout=args.timeout, progress=sys.stderr)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(buffer.getvalue())
        print(buffer.getvalue(), end="")
        print(f"transcript written to {args.output}", file=sys.stderr)
    return gpu_check_exit_code(results) if args.check and results is not None else 0


if __name__ == "__main__":
    sys.exit(main())
