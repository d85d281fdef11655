"""The build steps pyproject.toml cannot declare: the run-time files go into the wheel as package data,
and three folders of the repository go in as subpackages of ``helpers``.

The notebooks read pattern scripts and GPU transcripts through ``helpers.resources``. Those files
live where learners see them in the repository (``patterns/``, ``notebooks/transcripts/``); building
a wheel (``pip wheel .``, ``python -m build``, ``pip install .``) copies each folder of
``helpers.resources.SOURCE_FOLDERS`` to ``helpers/_data/<kind>/`` inside it. An editable install
copies nothing: ``helpers.resources`` reads the clone's folders. The mapping is read from
``helpers/resources.py`` by path, so building does not import ``helpers`` (nor torch).
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _source_folders() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("_resources", HERE / "helpers" / "resources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SOURCE_FOLDERS


class BuildPyWithData(build_py):
    """``build_py``, then the run-time files copied into ``helpers/_data/`` of the build (not when editable)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for kind, folder in _source_folders().items():
            target = Path(self.build_lib) / "helpers" / "_data" / kind
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


# One top-level import package: the exercises' starters, their reference solutions and the sample
# coursework stay in the repository's folders, where learners and instructors see them, and install as
# subpackages of helpers (helpers.exercises, helpers.solutions, helpers.coursework), so that no generic
# top-level name lands in site-packages beside a course's own.
SUBPACKAGES = {
    "helpers.exercises": "exercises",
    "helpers.solutions": "solutions",
    "helpers.coursework": "coursework",
}

setup(
    cmdclass={"build_py": BuildPyWithData},
    packages=find_packages(include=["helpers", "helpers.*"]) + list(SUBPACKAGES),
    package_dir=SUBPACKAGES,
)
