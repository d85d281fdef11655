"""One plotting style for the series, so every figure reads the same way; and the notebooks' widgets.

Example::

    >>> from helpers.plotting import new_figure
    >>> fig, ax = new_figure("Start-up latency", xlabel="method", ylabel="ms")
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer

__all__ = ["METHOD_COLORS", "new_figure", "bar_chart", "interact_quietly"]

_STYLE = {
    "figure.figsize": (7.0, 3.6),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titleweight": "bold",
    "font.size": 10,
}

# The same start method has the same colour in every notebook.
METHOD_COLORS = {
    "fork": "#1b9e77",
    "spawn": "#d95f02",
    "forkserver": "#7570b3",
    "forkserver+preload": "#e7298a",
}


def new_figure(title: str, xlabel: str = "", ylabel: str = "", ncols: int = 1) -> tuple:
    """A figure in the series style with ``ncols`` axes side by side; returns ``(fig, ax_or_axes)``.

    The style is applied to this figure only, never through ``plt.style.context``: leaving that
    context restores every rcParam, which stops Jupyter's inline backend from showing later figures.

    Every notebook's plots (e.g.
    [07 · What workers buy](../notebooks/07_dataloader_workers.ipynb#what-workers-buy-loading-in-parallel-with-training)).

    >>> fig, (left, right) = new_figure("two panels", ncols=2)
    """
    width, height = _STYLE["figure.figsize"]
    if ncols > 1:
        width *= 0.75 * ncols
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), dpi=_STYLE["figure.dpi"])
    for ax in axes if ncols > 1 else [axes]:
        ax.grid(True, alpha=_STYLE["grid.alpha"])
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    fig.suptitle(title, fontweight=_STYLE["axes.titleweight"])
    return fig, axes


def bar_chart(
    ax: Axes,
    labels: Sequence[str],
    values: Sequence[float],
    fmt: str = "{:.1f}",
    colors: Sequence[str] | None = None,
) -> BarContainer:
    """Bars with their value written on top (numbers a reader should not have to estimate).

    Notebooks 02, 05 and 07 (e.g.
    [07 · What workers buy](../notebooks/07_dataloader_workers.ipynb#what-workers-buy-loading-in-parallel-with-training)).

    >>> fig, ax = new_figure("demo")
    >>> bars = bar_chart(ax, ["a", "b"], [1.0, 2.5])
    >>> len(bars)
    2
    """
    colors = colors or [METHOD_COLORS.get(label, "#666666") for label in labels]
    bars = ax.bar(list(labels), list(values), color=colors)
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], padding=2)
    ax.margins(y=0.15)
    return bars


def interact_quietly(callback: Callable, **controls) -> Callable:
    """``ipywidgets.interact(callback, **controls)``, without displaying what ``callback`` returns.

    The notebooks' widget callbacks draw and print their own result and return the raw figures for
    scripts; plain ``interact`` would also display that return value (a long dataclass repr, say)
    under every plot. Returns ``callback``, as ``interact`` does.

    Each call first checks its thread: where the front end runs widgets on a kernel subshell
    (JupyterLab 4.4+ with ipykernel 7), it prints once what that changes and how to turn it off
    (``helpers.environment.warn_if_off_main_thread``).

    >>> import contextlib, io
    >>> from ipywidgets import IntSlider
    >>> shown = io.StringIO()  # outside Jupyter, display() prints
    >>> with contextlib.redirect_stdout(shown):
    ...     f = interact_quietly(lambda n: {"n_was": n}, n=IntSlider(value=2, max=4))
    >>> "n_was" in shown.getvalue()
    False
    """
    from ipywidgets import interact

    from helpers.environment import warn_if_off_main_thread

    @functools.wraps(callback)
    def checked(*args, **kwargs):
        warn_if_off_main_thread()
        return callback(*args, **kwargs)

    interact.options(auto_display=False)(checked, **controls)
    return callback
