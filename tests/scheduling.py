"""Plugin (registered in the root conftest.py): under `make test`'s pytest-xdist (``--dist loadscope``)
the longest work starts first, and the browser test runs on two workers.

xdist hands out whole scopes (a test module, a notebook, a helpers module's doctests) to whichever
worker is free, by default the scopes with most tests first. That put the browser test (ten notebooks
in JupyterLab, about six minutes on one worker) and the notebooks (one test each, up to a minute and
a half) at the end, where they decided the run's length. Here the collection is put in this order,
and xdist keeps it:

1. the browser test, as two scopes (even- and odd-numbered notebooks: two JupyterLab servers);
2. the notebooks and the test modules that declare a long ``timeout`` mark, longest timeout first,
   then the last first (the later notebooks run longest: 09, 08 and 06 take the most time);
3. everything else, most tests first (xdist's own rule).

Each scope's tests keep their order; a run without xdist runs the same tests in the same order.
"""

from __future__ import annotations

import re

import pytest

BROWSER_MODULE = "tests/e2e/test_jupyterlab_browser.py"


def scope_of(nodeid: str) -> str:
    """The unit of work that one xdist worker runs as a whole: xdist's own, the browser test in two."""
    scope = nodeid.rsplit("::", 1)[0]
    number = re.search(r"\[(\d+)_", nodeid)
    if scope == BROWSER_MODULE and number:
        return f"{scope}::{'odd' if int(number[1]) % 2 else 'even'}"
    return scope


def _timeout(item, default: float) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return default
    return float(marker.kwargs.get("timeout", marker.args[0] if marker.args else default))


@pytest.hookimpl(trylast=True)  # after conftest.py has given the notebooks their timeout
def pytest_collection_modifyitems(config, items):
    default = float(config.getini("timeout") or 0)
    scopes: dict[str, list] = {}
    for item in items:
        scopes.setdefault(scope_of(item.nodeid), []).append(item)

    def order(entry: tuple[int, tuple[str, list]]) -> tuple:
        position, (scope, members) = entry
        if scope.startswith(BROWSER_MODULE):
            return (0, position)
        longest = max(_timeout(item, default) for item in members)
        if longest > default or members[0].nodeid.endswith(".ipynb"):
            return (1, -longest, -position)
        return (2, -len(members), position)

    items[:] = [item for _, (_, members) in sorted(enumerate(scopes.items()), key=order) for item in members]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LongestFirstScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # the collection is in order already

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return LongestFirstScheduling(config, log)
