"""The odd-indexed half of the browser test (``test_jupyterlab_browser.py`` runs the others): a module
of its own, so that pytest-xdist's ``--dist loadscope`` runs it on another worker, with its own
JupyterLab and Chromium (``tests/e2e/jupyterlab_run.py`` holds the driver and the fixtures)."""

import pytest

from tests.e2e.jupyterlab_run import (  # noqa: F401 (the fixtures, one set per module)
    NOTEBOOKS,
    RUN_TIMEOUT,
    browser,
    context,
    lab,
    run_in_jupyterlab,
    shots,
)

pytestmark = pytest.mark.browser


@pytest.mark.timeout(RUN_TIMEOUT + 150)
@pytest.mark.parametrize("path", NOTEBOOKS[1::2], ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(path, context, lab, shots):  # noqa: F811
    run_in_jupyterlab(path, context, lab, shots)
