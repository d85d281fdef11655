"""Before and after a test run: the repository, /dev/shm and the run's temporary directory must be
as they were.

    python tools/clean_check.py save DIR      # before the run: also empties DIR/tmp
    TMPDIR=DIR/tmp pytest ...                   # the run, with a temporary directory of its own
    python tools/clean_check.py compare DIR   # after it; exit 1 with the difference

Run around pytest, not inside it: a spawn or forkserver child killed at a deadline leaves its named
semaphores in /dev/shm until multiprocessing's resource tracker unlinks them, which it does when the
test process exits. So /dev/shm is compared after the run, allowing the trackers a few seconds.
The temporary directory must then be empty, but for the caches kept there by design (:data:`KEPT`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

SHM = Path("/dev/shm")
# torch.compile's cache (torchinductor_USER); pytest's tmp_path folders, of which pytest keeps the
# last three runs (pytest-of-USER; the browser test's screenshots are there).
KEPT = ("torchinductor_", "pytest-of-")


def _git_status() -> str:
    done = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def _shm() -> set[str]:
    return {p.name for p in SHM.iterdir()} if SHM.is_dir() else set()


# The folder of torch_shm_manager's socket (file_system sharing), which the manager removes when it
# exits, a moment after its last client: a kernel that shut down just before the check leaves it
# for that moment (seen once in `make test-wheel`, notebook 00 among the last to finish).
LINGERING = "torch-shm-dir-"


def left_in(tmp: Path, wait: float = 0.0) -> list[str]:
    """What ``tmp`` holds beside the caches kept there by design (:data:`KEPT`); with ``wait``, once
    nothing but a torch_shm_manager folder (:data:`LINGERING`) is left, up to ``wait`` seconds for
    that to go too."""
    deadline = time.monotonic() + wait
    while True:
        left = sorted(p.name for p in tmp.iterdir() if not p.name.startswith(KEPT)) if tmp.is_dir() else []
        if not left or not all(name.startswith(LINGERING) for name in left) or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("save", "compare"):
        print(__doc__)
        return 2
    folder = Path(argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    if argv[0] == "save":
        (folder / "status-before").write_text(_git_status())
        (folder / "shm-before").write_text("\n".join(sorted(_shm())))
        shutil.rmtree(folder / "tmp", ignore_errors=True)
        (folder / "tmp").mkdir()
        return 0
    problems = []
    if _git_status() != (folder / "status-before").read_text():
        problems.append(f"the test run changed the repository:\n{_git_status()}")
    before = set(filter(None, (folder / "shm-before").read_text().splitlines()))
    deadline = time.monotonic() + 10
    while (new := _shm() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    if new:
        problems.append(f"new /dev/shm entries after the run: {sorted(new)}")
    if left := left_in(folder / "tmp", wait=10):
        problems.append(f"left in the run's temporary directory {folder / 'tmp'}: {left}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
