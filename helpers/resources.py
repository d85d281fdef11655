"""The files the notebooks read at run time, found through the package: pattern scripts and GPU transcripts.

A notebook never opens ``../patterns/...`` or ``transcripts/...`` by a path relative to itself: it
asks this module, so it runs from any folder where ``helpers`` is installed (a clone, a course
server, Colab, Kaggle). In a wheel the files are package data, ``helpers/_data/<kind>/``, copied
there from the repository's folders (:data:`SOURCE_FOLDERS`) when the wheel is built (``setup.py``);
in a clone (an editable install) they are read where they live in the repository, so git holds one
copy of each. Either way the answer is a real file on disk: a pattern can be run with
``subprocess.run([sys.executable, path])``.

Example::

    >>> pattern_path("01_start_a_process.py").name
    '01_start_a_process.py'
    >>> transcript("06_ddp_nccl.txt").startswith("#")
    True
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["SOURCE_FOLDERS", "checkout_root", "data_folder", "pattern_path", "transcript_path", "transcript"]

SOURCE_FOLDERS = {"patterns": "patterns", "transcripts": "notebooks/transcripts"}
"""Each kind of run-time file and the repository folder it comes from (``setup.py`` copies these)."""


def checkout_root() -> Path | None:
    """The repository ``helpers`` is imported from (a clone, installed editable), or None (a wheel).

    >>> (checkout_root() / "pyproject.toml").is_file()  # the doctests run in the clone
    True
    """
    root = Path(str(files("helpers"))).resolve().parent
    return root if (root / "pyproject.toml").is_file() and (root / "patterns").is_dir() else None


def data_folder(kind: str) -> Path:
    """The folder of one kind of run-time file (a key of :data:`SOURCE_FOLDERS`): packaged, or the clone's.

    >>> data_folder("patterns").name
    'patterns'
    """
    if kind not in SOURCE_FOLDERS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(SOURCE_FOLDERS)}")
    packaged = files("helpers") / "_data" / kind
    if packaged.is_dir():
        return Path(str(packaged))
    root = checkout_root()
    if root is None:
        raise FileNotFoundError(
            f"helpers/_data/{kind} is missing from this installation: reinstall the package from a "
            "wheel built with `pip wheel .` or `python -m build` (docs/install.md)"
        )
    return root / SOURCE_FOLDERS[kind]


def _file(kind: str, name: str) -> Path:
    path = data_folder(kind) / name
    if not path.is_file():
        known = sorted(p.name for p in data_folder(kind).iterdir() if p.is_file())
        raise FileNotFoundError(f"no {kind} file {name!r}: one of {', '.join(known)}")
    return path


def pattern_path(name: str) -> Path:
    """The pattern script ``name`` (``"06_ddp_spawn.py"``), a file to show and to run as a script.

    Every notebook ends its main path with ``PATTERN = pattern_path("NN_x.py")``, then
    ``show_script(PATTERN)`` and ``subprocess.run([sys.executable, PATTERN, ...])``.

    >>> pattern_path("06_ddp_spawn.py").read_text().count('if __name__ == "__main__":')
    1
    """
    return _file("patterns", name)


def transcript_path(name: str) -> Path:
    """The GPU transcript ``name`` (``"06_ddp_nccl.txt"``), recorded on a real GPU and committed.

    >>> transcript_path("04_fork_and_cuda.txt").suffix
    '.txt'
    """
    return _file("transcripts", name)


def transcript(name: str) -> str:
    """The text of the GPU transcript ``name``; notebooks print it where no GPU is present.

    >>> "recorded" in transcript("06_ddp_nccl.txt").lower()
    True
    """
    return transcript_path(name).read_text()
