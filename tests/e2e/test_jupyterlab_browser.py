"""The even-indexed half of the browser test (``test_jupyterlab_browser_odd.py`` runs the others): every
notebook run through JupyterLab's UI in headless Chromium; what a run checks is
``tests/e2e/jupyterlab_run.py``'s docstring."""

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
@pytest.mark.parametrize("path", NOTEBOOKS[0::2], ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(path, context, lab, shots):  # noqa: F811
    run_in_jupyterlab(path, context, lab, shots)
