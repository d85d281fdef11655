"""Install torch (the build this machine needs), then the project and its dev tools, from the lock.

What `make setup` / `make lab` / `make test` run, and the conda route's last step
(`python tools/install_torch.py` in the activated environment). Standard library only.

Which build (`--build`, the Makefile's TORCH_BUILD; default auto):

- Linux without an NVIDIA GPU (auto), or `cpu` anywhere on Linux: the CPU build, from PyTorch's
  CPU-only wheel index (about 190 MB instead of PyPI's CUDA build, about 2.7 GB of downloads).
- Linux with an NVIDIA GPU (auto), or `cuda`: the default build from the configured indexes (PyPI's
  Linux wheel is the CUDA build).
- macOS and Windows: their default build (PyPI's wheels there have no CUDA; for a CUDA build on
  Windows, see pytorch.org's install selector).

Where the CPU-only index cannot be reached (a short probe, then pip with a short timeout), it
falls back to what the configured indexes offer and says so in the one line it prints at the end:
which torch it installed and which build (read from `torch.version.cuda`).

The torch version: `--version`, else the lock's torch pin for this Python
(requirements/constraints.txt; an older Python may get an older torch). Every other
package is installed within the lock (`pip install -c`). Another torch version
(`make test TORCH_VERSION=2.11.0`) is installed without the lock's torch pin and without the pins
only torch needs (its CUDA libraries, setuptools, ...), which that release sets for itself.

    python tools/install_torch.py --dry-run             # print the pip commands, install nothing
    python tools/install_torch.py --locked-version      # the lock's torch for this Python
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "constraints.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_SECONDS = 4.0  # the reachability probe, DNS included
# For the CPU-index call only: give up on a slow or half-open index quickly, then fall back.
CPU_INDEX_PIP_OPTIONS = ("--timeout", "10", "--retries", "1")


@dataclass(frozen=True)
class Plan:
    """What to install: `build` is "cpu" or "default"; `index` the CPU-only index or None."""

    build: str
    index: str | None
    reason: str


def choose(system: str, build: str, gpu: bool, index_reachable: bool) -> Plan:
    """The pure decision: platform, TORCH_BUILD, NVIDIA GPU present, CPU-only index reachable.

    >>> choose("Linux", "auto", gpu=False, index_reachable=True)
    Plan(build='cpu', index='https://download.pytorch.org/whl/cpu', reason='no NVIDIA GPU found')
    >>> choose("Linux", "auto", gpu=False, index_reachable=False).index is None
    True
    >>> choose("Darwin", "cpu", gpu=False, index_reachable=True).build
    'default'
    """
    if build not in ("auto", "cpu", "cuda"):
        raise ValueError(f"TORCH_BUILD must be auto, cpu or cuda, not {build!r}")
    if system != "Linux":
        why = "macOS's wheel has no CUDA" if system == "Darwin" else f"{system}: the default wheel"
        return Plan("default", None, why)
    if build == "cuda" or (build == "auto" and gpu):
        return Plan("default", None, "TORCH_BUILD=cuda" if build == "cuda" else "an NVIDIA GPU is present")
    reason = "TORCH_BUILD=cpu" if build == "cpu" else "no NVIDIA GPU found"
    if not index_reachable:
        return Plan("default", None, f"{reason}, but the CPU-only index could not be reached")
    return Plan("cpu", CPU_INDEX, reason)


def pip_commands(python: str, plan: Plan, version: str, constraints: str, target: str) -> list[list[str]]:
    """The pip calls for a plan: torch from the CPU-only index first (if any), then the project.

    The first installs torch alone (`--no-deps`: its dependencies come from the configured indexes,
    within the lock); the second asks for `torch==VERSION`, which `VERSION+cpu` already satisfies.

    >>> plan = choose("Linux", "cpu", gpu=False, index_reachable=True)
    >>> [c[4:7] for c in pip_commands("py", plan, "2.15.0", "c.txt", ".[dev]")][0]
    ['torch==2.15.0+cpu', '--index-url', 'https://download.pytorch.org/whl/cpu']
    """
    pip = [python, "-m", "pip", "install"]
    commands = []
    if plan.index:
        commands.append(
            [*pip, f"torch=={version}+cpu", "--index-url", plan.index, "--no-deps", *CPU_INDEX_PIP_OPTIONS]
        )
    commands.append([*pip, "-e", target, f"torch=={version}", "-c", constraints])
    return commands


def nvidia_gpu_present() -> bool:
    """An NVIDIA GPU, found without torch: the driver's /proc entries or `nvidia-smi -L`."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def reachable(url: str, seconds: float = PROBE_SECONDS) -> bool:
    """Whether `url` answers within `seconds`, name lookup included (in a thread: DNS has no timeout)."""
    answered = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=seconds):
                answered.append(True)
        except urllib.error.HTTPError:
            answered.append(True)  # the server answered, if only with an error: pip will say more
        except Exception:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(seconds)
    return bool(answered)


# --- The lock --------------------------------------------------------------------------------------


def _marker_true(marker: str, python: tuple[int, ...]) -> bool:
    """Evaluates the lock's markers: `and`-joined comparisons of python_(full_)version, sys_platform."""
    values = {"sys_platform": sys.platform, "platform_machine": platform.machine()}
    for clause in re.split(r"\s+and\s+", marker.strip().strip("()")):
        name, op, value = re.fullmatch(r"(\w+)\s*(==|!=|<=|>=|<|>)\s*'([^']*)'", clause.strip()).groups()
        if name in ("python_version", "python_full_version"):
            if value.endswith(".*"):
                parts = tuple(int(p) for p in value[:-2].split("."))
                got = python[: len(parts)] == parts
                ok = got if op == "==" else not got
            else:
                want = tuple(int(p) for p in value.split("."))
                here = python[: len(want)] if name == "python_version" else python
                ok = {"==": here == want, "!=": here != want, "<": here < want, "<=": here <= want,
                      ">": here > want, ">=": here >= want}[op]  # fmt: skip
        else:
            ok = (values[name] == value) == (op == "==")
        if not ok:
            return False
    return True


def locked_torch(lock: Path = LOCK, python: tuple[int, ...] | None = None) -> str:
    """The lock's torch version for this Python (or `python`, a version tuple).

    >>> locked_torch(python=(3, 10, 14)) < locked_torch(python=(3, 11, 7))
    True
    """
    python = python or tuple(sys.version_info[:3])
    for line in lock.read_text().splitlines():
        match = re.match(r"torch==([^\s;]+)\s*(?:;\s*(.*))?$", line)
        if match and (match.group(2) is None or _marker_true(match.group(2), python)):
            return match.group(1)
    raise SystemExit(f"{lock}: no torch pin for Python {'.'.join(map(str, python))}")


def _lock_entries(lock: Path) -> list[tuple[str, str, set[str]]]:
    """(name, requirement line, the names it is there for) per pin, from uv's `# via` annotations."""
    entries: list[tuple[str, str, set[str]]] = []
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            entries.append((re.split(r"[=<>!~; \[]", line, maxsplit=1)[0].lower(), line, set()))
        elif entries and line.strip().startswith("#"):
            via = line.strip().lstrip("#").strip()
            via = via[len("via") :].strip() if via.startswith("via") else via
            if via:
                entries[-1][2].add(via.split(" ")[0].lower())
    return entries


def constraints(lock: Path = LOCK, keep_torch_deps: bool = True) -> str:
    """The lock as pip constraints, less its torch pins (the version is always asked for explicitly).

    With `keep_torch_deps=False` (a torch version other than the lock's), also less what only torch
    needs (its CUDA libraries, triton, sympy, setuptools ...): another release pins those
    differently (torch 2.11.0 wants setuptools<82, for one), and brings its own.
    """
    entries = _lock_entries(lock)
    dropped = {"torch"}
    while not keep_torch_deps:
        more = {name for name, _, via in entries if via and via <= dropped and name not in dropped}
        if not more:
            break
        dropped |= more
    return "".join(line + "\n" for name, line, _ in entries if name not in dropped)


# --- Running it ------------------------------------------------------------------------------------


def _installed(python: str) -> tuple[str, str | None] | None:
    probe = "import torch; print(torch.__version__); print(torch.version.cuda or '')"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if out.returncode:
        return None
    version, cuda = (out.stdout.splitlines() + ["", ""])[:2]
    return version, cuda or None


def _run(command: list[str], *options: str) -> int:
    print("+", shlex.join(command), flush=True)
    return subprocess.run([*command, "--quiet", *options]).returncode


def compile_command(python: str, site_packages: list[str]) -> list[str]:
    """Byte-compile ``site_packages`` on every core (:func:`main` runs it after pip).

    pip compiles each module it installs, one at a time (about 12,800 modules with the CUDA build).
    Told ``--no-compile``, it leaves that to this command, which
    writes the same ``.pyc`` files (timestamp-checked, as pip's), skips those already up to date,
    and, as pip does, leaves a file that does not compile to Python (``-qq``: no error output).

    >>> compile_command("py", ["/venv/site-packages"])
    ['py', '-m', 'compileall', '-qq', '-j', '0', '/venv/site-packages']
    """
    return [python, "-m", "compileall", "-qq", "-j", "0", *site_packages]


def site_packages(python: str) -> list[str]:
    """The purelib and platlib folders of ``python`` (one where they are the same)."""
    code = "import sysconfig; print(*dict.fromkeys(sysconfig.get_paths()[k] for k in ('purelib', 'platlib')), sep='\\n')"
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--build", default=os.environ.get("TORCH_BUILD", "auto"), choices=["auto", "cpu", "cuda"]
    )
    parser.add_argument("--version", help="torch version (default: the lock's pin for this Python)")
    parser.add_argument("--lock", type=Path, default=LOCK)
    parser.add_argument("--target", default=f"{ROOT}[dev]", help="what to install beside torch")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to install into")
    parser.add_argument("--dry-run", action="store_true", help="print the decision and pip commands only")
    parser.add_argument("--gpu", choices=["yes", "no"], help="override GPU detection (tests)")
    parser.add_argument("--index-reachable", choices=["yes", "no"], help="override the probe (tests)")
    parser.add_argument("--locked-version", action="store_true", help="print the lock's torch and exit")
    args = parser.parse_args(argv)

    if args.locked_version:
        print(locked_torch(args.lock))
        return 0
    version = args.version or locked_torch(args.lock)
    system = platform.system()
    gpu = args.gpu == "yes" if args.gpu else system == "Linux" and nvidia_gpu_present()
    wants_index = system == "Linux" and choose(system, args.build, gpu, True).index is not None
    if args.index_reachable:
        index_ok = args.index_reachable == "yes"
    else:
        index_ok = wants_index and reachable(f"{CPU_INDEX}/torch/")
    plan = choose(system, args.build, gpu, index_ok)
    print(f"torch {version}: {'CPU-only index' if plan.index else 'configured indexes'} ({plan.reason})")

    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "constraints.txt"
        pins.write_text(constraints(args.lock, keep_torch_deps=version == locked_torch(args.lock)))
        commands = pip_commands(args.python, plan, version, str(pins), args.target)
        if args.dry_run:
            for command in commands:
                print(shlex.join(command).replace(str(pins), "CONSTRAINTS"))
            return 0
        fell_back = False
        if plan.index and _run(commands.pop(0), "--no-compile") != 0:
            plan, fell_back = choose(system, args.build, gpu, False), True
        cuda_wanted = plan.build == "default" and (args.build == "cuda" or gpu)
        installed = _installed(args.python) if cuda_wanted else None
        if installed and installed[0].endswith("+cpu"):  # a CPU build satisfies torch==VERSION: replace it
            _run([args.python, "-m", "pip", "uninstall", "--yes", "torch"])
        if _run(commands[-1], "--no-compile") != 0:
            return 1
    print("+ compileall (site-packages, every core)", flush=True)
    # Its exit status is 1 where a file does not compile; pip ignores those files too.
    subprocess.run(compile_command(args.python, site_packages(args.python)))
    installed = _installed(args.python)
    if installed is None:
        print("torch did not install: see pip's output above", file=sys.stderr)
        return 1
    build = f"CUDA {installed[1]} build" if installed[1] else "CPU build"
    if plan.index:
        source = "from PyTorch's CPU-only index"
    elif fell_back or "could not be reached" in plan.reason:
        source = "from the configured index: the CPU-only index could not be reached"
    else:
        source = f"from the configured index: {plan.reason}"
    print(f"installed torch {installed[0]} ({build}, {source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
