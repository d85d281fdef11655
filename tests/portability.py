"""Run code, tests and notebooks as if the platform's default start method were another one.

The default start method differs by platform: ``fork`` on Linux up to Python 3.13, ``forkserver``
on Linux from 3.14, ``spawn`` on macOS and Windows. Code that works under one default can break
under another (a worker defined in ``__main__``, a tensor that relies on fork's copy). Set the
environment variable ``MP_DEFAULT_START_METHOD`` to ``spawn`` or ``forkserver`` and:

- the test session (``conftest.py``) calls :func:`apply_forced_start_method` at start-up;
- notebook kernels started by nbmake get an IPython start-up file (:func:`make_ipython_dir`,
  pointed to by ``IPYTHONDIR``) that does the same before the first cell runs.

``make test-spawn`` / ``make test-forkserver`` run the whole suite that way.

Example::

    >>> from tests.portability import forced_start_method
    >>> forced_start_method({"MP_DEFAULT_START_METHOD": "spawn"})
    'spawn'
    >>> forced_start_method({}) is None
    True
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ENV_VAR", "forced_start_method", "apply_forced_start_method", "make_ipython_dir"]

ENV_VAR = "MP_DEFAULT_START_METHOD"

STARTUP_FILE = "00-mp-default-start-method.py"


def forced_start_method(environ: Mapping[str, str] | None = None) -> str | None:
    """The start method ``MP_DEFAULT_START_METHOD`` asks for, or None when it is unset or empty.

    Raises ``ValueError`` for a method this platform does not have.

    >>> forced_start_method({"MP_DEFAULT_START_METHOD": "thread"})
    Traceback (most recent call last):
    ...
    ValueError: MP_DEFAULT_START_METHOD='thread' is not a start method of this platform ...
    """
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not value:
        return None
    if value not in mp.get_all_start_methods():
        raise ValueError(
            f"{ENV_VAR}={value!r} is not a start method of this platform "
            f"(choose from {mp.get_all_start_methods()}, or unset it for the platform default)"
        )
    return value


def apply_forced_start_method(environ: Mapping[str, str] | None = None) -> str | None:
    """Make ``MP_DEFAULT_START_METHOD`` this process's default start method; return it (None: unset).

    Uses ``set_start_method(..., force=True)``: right for a test session or a kernel start-up file,
    which own the process. Notebooks and library code use ``get_context(method)`` instead.

    >>> apply_forced_start_method({}) is None  # unset: nothing changes
    True
    """
    method = forced_start_method(environ)
    if method is not None:
        mp.set_start_method(method, force=True)
    return method


def make_ipython_dir(directory: str | os.PathLike, method: str) -> Path:
    """Create an IPython directory whose start-up file sets ``method`` as the default; return it.

    Point ``IPYTHONDIR`` at it, and every IPython kernel started from then on (nbmake, nbclient,
    JupyterLab) runs with that default start method before the notebook's first cell.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = make_ipython_dir(tmp, "spawn")
    ...     print(sorted(p.name for p in (path / "profile_default" / "startup").iterdir()))
    ['00-mp-default-start-method.py']
    """
    if method not in mp.get_all_start_methods():
        raise ValueError(f"unknown start method {method!r}; this platform has {mp.get_all_start_methods()}")
    root = Path(directory)
    startup = root / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / STARTUP_FILE).write_text(
        f"# Written by tests/portability.py: run this kernel with the {method!r} default start method.\n"
        "import multiprocessing\n\n"
        f"multiprocessing.set_start_method({method!r}, force=True)\n"
    )
    return root
