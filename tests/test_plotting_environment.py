"""helpers.plotting and helpers.environment."""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from helpers.environment import cuda_report, environment_report, format_report
from helpers.plotting import METHOD_COLORS, bar_chart, interact_quietly, new_figure
from helpers.processes import run_python_script


def test_new_figure_and_bar_chart_label_every_bar():
    fig, axes = new_figure("title", xlabel="x", ylabel="y", ncols=2)
    assert len(axes) == 2 and axes[0].get_xlabel() == "x"
    bars = bar_chart(axes[0], ["fork", "spawn"], [1.0, 2.0], fmt="{:.0f} ms")
    assert [t.get_text() for t in axes[0].texts] == ["1 ms", "2 ms"]
    assert bars[0].get_facecolor()[:3] == matplotlib.colors.to_rgb(METHOD_COLORS["fork"])


def test_default_start_method_does_not_fix_the_context():
    # In a pristine interpreter: reading the default must leave set_start_method usable.
    done = run_python_script(
        "import multiprocessing as mp\n"
        "from helpers.environment import default_start_method\n"
        "print(default_start_method() == mp.get_all_start_methods()[0])\n"
        "mp.set_start_method('spawn')\n"
        "print('set_start_method still works')\n"
    )
    assert done.stdout.splitlines() == ["True", "set_start_method still works"], done.stderr


@pytest.mark.default_start_method
def test_environment_report_has_the_facts_a_reader_compares():
    report = environment_report()
    assert report["torch"] == torch.__version__
    # The platform default, unless this process's default was set (e.g. MP_DEFAULT_START_METHOD).
    assert report["default_start_method"] == (
        mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]
    )
    assert report["sharing_strategy"] in report["sharing_strategies"]
    assert report["torch_threads"] == torch.get_num_threads()
    assert report["parallel_backend"] != "unknown"
    assert isinstance(report["cuda_devices"], list)
    assert not torch.cuda.is_initialized()  # the CUDA probe ran elsewhere


def test_cuda_report_on_this_build():
    report = cuda_report()
    if torch.version.cuda is None:
        assert report["cuda_devices"] == []
    else:
        assert len(report["cuda_devices"]) == torch.cuda.device_count()


def test_format_report_aligns_keys_and_joins_lists():
    text = format_report({"a": 1, "long_key": ["x", "y"], "empty": []})
    assert text.splitlines() == ["a        : 1", "long_key : x, y", "empty    : none"]


def test_every_new_figure_is_displayed_in_a_notebook_kernel():
    # Regression: a style context around figure creation stopped the inline backend from showing
    # every figure after the first.
    import nbclient
    import nbformat

    cells = ["from helpers.plotting import new_figure"] + [f"new_figure('{t}')" for t in "abc"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    images = [any("image/png" in o.get("data", {}) for o in c.outputs) for c in nb.cells[1:]]
    assert images == [True, True, True]


@pytest.mark.parametrize("quiet", [False, True])
def test_interact_quietly_runs_the_callback_but_does_not_display_its_return_value(quiet):
    from ipywidgets import IntSlider, interact

    calls = []

    def callback(n):
        calls.append(n)
        return "RETURNED-VALUE"

    shown = io.StringIO()  # outside Jupyter, display() prints
    with contextlib.redirect_stdout(shown):
        (interact_quietly if quiet else interact)(callback, n=IntSlider(value=3, max=5))
    assert calls == [3]
    # plain interact displays the return value: the reason interact_quietly exists
    assert ("RETURNED-VALUE" in shown.getvalue()) is not quiet


def test_a_widget_callback_off_the_main_thread_says_so_once():
    # A widget message that a kernel subshell serves (JupyterLab 4.4+, ipykernel 7) sets the control's
    # value on that thread, and the callback runs there: here a plain thread does the same.
    done = run_python_script(
        "import threading\n"
        "from ipywidgets import IntSlider\n"
        "from helpers.plotting import interact_quietly\n"
        "calls = []\n"
        "slider = IntSlider(value=1, max=9)\n"
        "interact_quietly(lambda n: calls.append((n, threading.current_thread().name)), n=slider)\n"
        "print('--- main thread done')\n"
        "def move():\n"
        "    for n in (2, 3):\n"
        "        slider.value = n\n"
        "        print('--- moved to', n)\n"
        "t = threading.Thread(target=move, name='subshell-test')\n"
        "t.start(); t.join(30)\n"
        "slider.value = 4\n"
        "print(calls)\n"
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("Note: this widget runs its code on a kernel subshell thread") == 1, out
    # not on the main thread's first call; on the thread's first change, before its callback ends
    assert out.index("--- main thread done") < out.index("Note: this widget") < out.index("--- moved to 2")
    assert "'Kernel Comms over subshells' > Disabled" in out and "DataLoader" in out
    threads = "[(1, 'MainThread'), (2, 'subshell-test'), (3, 'subshell-test'), (4, 'MainThread')]"
    assert out.rstrip().endswith(threads), out
