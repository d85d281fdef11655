"""The series installed like a library, outside the repository (issue 42; ``make test-wheel``).

A copy of the checkout (its tracked and untracked, not ignored files: what a clean clone of this
working tree holds) is built into a wheel with ``pip wheel``; the wheel goes into a fresh virtual
environment in a temporary directory outside the repository; the notebooks alone are copied into an
empty folder there and every one runs under nbmake in that environment's kernel, on the path a macOS
or Windows learner takes (spawn as the kernel's default start method, ``HELPERS_PLATFORM=darwin``: the
series' one run of that path, which also replaced a separate forced-spawn run); an exercise checker
grades a learner's file written next to them. The notebooks' setup cell installs the package from
a local git repository standing in for the remote, with Kaggle's variable set.

What is borrowed, and why it is honest: torch and the other dependencies (about 3 GB) are not
downloaded again. The new environment reaches them through a ``.pth`` line pointing at a folder of
links to this project's site-packages *without* this project's own entries (its editable finder and
metadata), so ``helpers``, ``exercises`` and the pattern files can only come from what was installed
into the new environment. That the wheel's declared dependencies are satisfied there is checked by
``pip check``; that they resolve from the package index on their own, by ``pip install --dry-run``.
A probe notebook run beside the others asserts that its kernel imports ``helpers`` from the new
environment, not from the clone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from tools.clean_check import left_in
from tools.setup_cell import repository, setup_cell

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parent.parent
OWN_ENTRIES = ("__editable__", "torch_mp_notebooks", "helpers")
CHECK = (  # the learner's side, in the folder of the notebooks: the file the notebook wrote, graded
    "from helpers.checkers import CHECKERS, start_exercise\n"
    "import sys\n"
    "result = CHECKERS[sys.argv[1]](start_exercise(sys.argv[1]))\n"
    "print(result)\n"
)


# Notebooks run at once from the wheel (WHEEL_WORKERS overrides): 2 on CI's 2 cores. Four were no
# faster there (2026-12-02: 724 s wall, 1,290 CPU-s for the stage; two in a fresh clone the same day:
# 747 s, 1,307 CPU-s): the cores are busy either way.
WORKERS = int(os.environ.get("WHEEL_WORKERS") or 2)
# The notebooks that took longest on the macOS path, longest first (this stage's `--durations`,
# 2026-12-04: 07 135 s, 05 121, 10 109, 09 92, 11 80, 02 75, 06 74, 14 73; the rest 24-66 s). They are
# handed out first, one at a time (--maxschedchunk=1), so that the short ones fill the end instead of
# one long notebook running alone while the other core idles. A stale order costs seconds, not a result.
LONG_FIRST = ("07", "05", "10", "09", "11", "02", "06", "14")


def run_order(names: list[str]) -> list[str]:
    """``names`` (notebook files) with :data:`LONG_FIRST` first, in its order, then the rest sorted
    (the count of passed notebooks, asserted after the run, shows that none was left out)."""
    rank = {number: i for i, number in enumerate(LONG_FIRST)}
    return sorted(names, key=lambda name: (rank.get(name[:2], len(rank)), name))


def run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``command`` bounded by ``timeout``, its output captured; a failure shows the output's end."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, (
        f"{command[:4]} exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def copy_checkout(target: Path) -> Path:
    """The working tree's tracked and untracked, not ignored files, copied to ``target``."""
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], 60, cwd=ROOT).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment in ``folder`` that sees this project's dependencies, not the project.

    Returns its python. Its pip and setuptools are borrowed too (a venv's own, older setuptools would
    shadow the one torch requires). The ``.pth`` line makes a folder of links to this project's site-packages,
    less :data:`OWN_ENTRIES`, importable (only a site directory's own ``.pth`` files run, so the
    linked folder's editable finder would not run anyway; it is left out so no metadata of the
    clone's install is visible either).
    """
    run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], 300)  # pip: borrowed
    python = folder / "venv" / "bin" / "python"
    borrowed = folder / "borrowed-site-packages"
    borrowed.mkdir()
    project_site = Path(sysconfig.get_paths()["purelib"])
    for entry in project_site.iterdir():
        if not entry.name.startswith(OWN_ENTRIES) and entry.suffix != ".pth":
            (borrowed / entry.name).symlink_to(entry)
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60).stdout
    (Path(site.strip()) / "borrowed_dependencies.pth").write_text(f"{borrowed}\n")
    return python


def where_helpers_is(python: Path, cwd: Path) -> Path:
    probe = "import helpers, pathlib; print(pathlib.Path(helpers.__file__).resolve())"
    return Path(run([str(python), "-c", probe], 120, cwd=cwd, env=clean_env()).stdout.strip())


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would point a child at the clone."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def outside() -> Path:
    """A temporary directory outside the repository, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="wheel-test-")).resolve()
    try:
        assert not folder.is_relative_to(ROOT), f"{folder} is inside the repository: set TMPDIR elsewhere"
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(outside) -> Path:
    source = copy_checkout(outside / "checkout")
    run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-w", str(outside / "dist")], 600)
    (built,) = (outside / "dist").glob("torch_mp_notebooks-*.whl")
    return built


def test_the_wheel_carries_helpers_and_every_file_the_notebooks_read(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"helpers/_data/patterns/{p.name}" for p in (ROOT / "patterns").glob("*.py")}
    wanted |= {f"helpers/_data/transcripts/{p.name}" for p in (ROOT / "notebooks" / "transcripts").glob("*")}
    wanted |= {f"helpers/exercises/{p.name}" for p in (ROOT / "exercises").glob("ex*.py")}
    wanted |= {f"helpers/solutions/{p.name}" for p in (ROOT / "solutions").glob("ex*.py")}
    wanted |= {"helpers/coursework/digits_search.py", "helpers/coursework/digits_workers.py"}
    assert wanted - names == set()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"helpers"}, f"the wheel installs more than one top-level package: {top_level}"
    assert {"helpers/__init__.py", "helpers/resources.py", "helpers/checkers/core.py"} <= names
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    assert "Requires-Dist: torch>=2.11" in metadata and "Requires-Python: >=3.10" in metadata
    assert "License-Expression: MIT" in metadata and any(
        n.endswith(".dist-info/licenses/LICENSE") for n in names
    )


@pytest.mark.timeout(3600)
def test_every_notebook_runs_from_an_empty_folder_with_the_wheel_installed(wheel, outside, capsys):
    python = fresh_venv(outside / "env")
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], 300)
    learner = outside / "learner"
    learner.mkdir()
    installed = where_helpers_is(python, learner)
    assert installed.is_relative_to(outside / "env" / "venv"), installed
    run([str(python), "-m", "pip", "check"], 120, env=clean_env())  # every declared dependency satisfied
    # Every dependency resolved from the index, as a learner's `pip install` of the wheel would: about
    # 40 s on one core here (38 s wall, 31 CPU-s), so it runs while the notebooks do and is read after.
    report, resolve_log = outside / "resolved.json", outside / "resolve.log"
    with resolve_log.open("w") as log:
        resolving = subprocess.Popen(
            [str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report),
             str(wheel)], stdout=log, stderr=subprocess.STDOUT, env=clean_env()
        )  # fmt: skip
    try:
        _run_notebooks(python, outside, learner, capsys)
        resolving.wait(timeout=900)
    finally:
        if resolving.poll() is None:
            resolving.kill()
            resolving.wait(timeout=60)
    assert resolving.returncode == 0, resolve_log.read_text()[-3000:]
    resolved = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"torch", "numpy", "ipywidgets", "torch-mp-notebooks"} <= resolved

    # A learner's file next to the notebooks: the starter notebook 07's exercise cell wrote, then edited.
    if not os.environ.get("WHEEL_TEST_NOTEBOOKS"):
        starter = (ROOT / "exercises" / "ex07_iterable_sharding.py").read_text()
        assert (learner / "ex07_iterable_sharding.py").read_text() == starter
    untouched = run([str(python), "-c", CHECK, "ex07"], 300, cwd=learner, env=clean_env()).stdout
    assert (
        "ex07: not attempted yet" in untouched
        and f"graded: {learner / 'ex07_iterable_sharding.py'}" in untouched
    )
    shutil.copy2(ROOT / "solutions" / "ex07_iterable_sharding.py", learner / "ex07_iterable_sharding.py")
    graded = run([str(python), "-c", CHECK, "ex07"], 300, cwd=learner, env=clean_env()).stdout
    assert "ex07: passed" in graded and f"graded: {learner / 'ex07_iterable_sharding.py'}" in graded, graded


def _run_notebooks(python: Path, outside: Path, learner: Path, capsys) -> None:
    """The doctor, then every notebook (and the probe) under nbmake in ``learner``, on the macOS path."""
    run([str(python), "-m", "helpers.doctor", "--brief"], 300, cwd=learner, env=clean_env())

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if only := os.environ.get("WHEEL_TEST_NOTEBOOKS"):  # iterating: a few, e.g. "01,06"
        notebooks = [nb for nb in notebooks if nb.name[:2] in only.split(",")]
    for notebook in notebooks:
        shutil.copy2(notebook, learner / notebook.name)
    probe = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(PROBE.format(venv=str(outside / "env")))]
    )
    probe.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(probe, learner / "zz_installed_from.ipynb")
    (learner / "pytest.ini").write_text("[pytest]\n")  # this folder is pytest's root: no conftest of ours
    # The macOS (and Windows) learner's path: the kernel's default start method is spawn (the kernelspec
    # of `make test-spawn`, installed into the new environment), and HELPERS_PLATFORM=darwin makes
    # helpers choose as there (FAST_METHOD spawns, Linux-only cells skip). docs/testing.md.
    kernels = outside / "env" / "venv" / "share" / "jupyter" / "kernels"
    shutil.copytree(ROOT / "jupyter-config" / "kernels" / "python3-spawn", kernels / "python3-spawn")
    # Its kernels load helpers.kernel_shutdown, as `make setup` sets up .venv's (docs/install.md,
    # "Kernels exit when asked to"); without it a kernel that started a spawn child is SIGTERMed at
    # shutdown and leaves multiprocessing's temporary folder (pymp-*) behind.
    ipython = outside / "env" / "venv" / "etc" / "ipython"
    ipython.mkdir(parents=True)
    shutil.copy2(ROOT / "jupyter-config" / "ipython" / "ipython_kernel_config.json", ipython)
    run_tmp = outside / "tmp"  # the run's temporary directory: empty afterwards but for caches
    run_tmp.mkdir()
    order = run_order([nb.name for nb in notebooks] + ["zz_installed_from.ipynb"])
    command = [str(python), "-m", "pytest", *order, "--nbmake", "--nbmake-timeout=300", "-n", str(WORKERS)]
    command += ["--maxschedchunk=1"]
    command += ["--nbmake-kernel=python3-spawn", "-p", "no:cacheprovider", "-q", "--overwrite"]
    command += ["--durations=0"]
    done = run(command, 3000, cwd=learner, env=clean_env(HELPERS_PLATFORM="darwin", TMPDIR=str(run_tmp)))
    durations = done.stdout.rfind("\n", 0, done.stdout.find("slowest durations")) + 1
    with capsys.disabled():  # each notebook's time, in the stage's log
        print("\n" + done.stdout[durations:][-4000:])
    assert f"{len(notebooks) + 1} passed" in done.stdout
    assert left_in(run_tmp, wait=10) == []


PROBE = """\
import multiprocessing, pathlib, sys
import helpers
from helpers.launch import FAST_METHOD
from helpers.resources import checkout_root, pattern_path

venv = pathlib.Path({venv!r}).resolve()
assert pathlib.Path(sys.prefix).resolve().is_relative_to(venv), sys.prefix
assert pathlib.Path(helpers.__file__).resolve().is_relative_to(venv), helpers.__file__
assert pattern_path("01_start_a_process.py").resolve().is_relative_to(venv)
assert checkout_root() is None
assert multiprocessing.get_start_method() == "spawn" and FAST_METHOD == "spawn"  # the macOS path
print("kernel", sys.executable, "imports helpers from", helpers.__file__)
"""


@pytest.mark.timeout(1200)
def test_the_setup_cell_installs_from_the_repository_on_kaggle_only(outside):
    remote = copy_checkout(outside / "remote")  # a local repository standing in for the remote
    git = ["git", "-C", str(remote), "-c", "user.name=test", "-c", "user.email=test@localhost"]
    run(["git", "init", "-q", str(remote)], 60)
    run([*git, "add", "-A"], 60)
    run([*git, "commit", "-q", "-m", "the series"], 60)
    cell = setup_cell().replace(repository(), remote.as_uri())
    assert cell != setup_cell()  # the URL is the one constant, and the test replaced it
    python = fresh_venv(outside / "setup-env")
    shell = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "result = InteractiveShell.instance().run_cell(sys.stdin.read())\n"
        "print('error:', repr(result.error_in_exec))\n"
        "import helpers; print('helpers from', helpers.__file__)\n"
    )
    here = dict(cwd=outside, input=cell, capture_output=True, text=True, timeout=900)
    elsewhere = subprocess.run([str(python), "-c", shell], **here, env=clean_env())
    assert (
        "error: ModuleNotFoundError(\"No module named 'helpers': pip install git+file://" in elsewhere.stdout
    )
    assert elsewhere.returncode != 0  # nothing was installed: `import helpers` fails after the cell
    kaggle = subprocess.run(
        [str(python), "-c", shell], **here, env=clean_env(KAGGLE_KERNEL_RUN_TYPE="Interactive")
    )
    assert "error: None" in kaggle.stdout, kaggle.stdout[-2000:] + kaggle.stderr[-2000:]
    assert f"helpers from {outside / 'setup-env' / 'venv'}" in kaggle.stdout  # installed into the new venv
