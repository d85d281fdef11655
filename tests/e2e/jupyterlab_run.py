"""Every notebook, run where learners run it: JupyterLab in a real (headless) Chromium.

The driver and the module-scoped fixtures of the browser test (``test_jupyterlab_browser.py`` and
``test_jupyterlab_browser_odd.py`` import them, so each module gets its own JupyterLab and Chromium).

In ``make test`` this is the notebooks' only run (``make test-spawn`` and ``make test-forkserver``
run them under nbmake): it proves they work as a learner runs them, in the UI: Run > Run All Cells
from the menu, every code cell executed, no error output, widgets rendered as live controls (one of
them moved, and its output changes), plots rendered as images, and every Mermaid diagram of the
markdown cells drawn (an SVG image, not the diagram's source text). Select with ``-m browser``,
leave out with ``-m 'not browser'``.

One JupyterLab server and one Chromium serve the notebooks of a module (starting them took about as
long as running a short notebook): ``test_jupyterlab_browser.py`` runs the even-indexed notebooks, its twin
``test_jupyterlab_browser_odd.py`` the others, so that pytest-xdist's ``--dist loadscope`` runs the
halves on two workers. Each test gets its own copy of the notebooks folder, a fresh JupyterLab
workspace and a page of its own, and must leave no kernel (nor anything a kernel started) behind when
its notebook is closed. The pages share one browser context, so after the first test JupyterLab's
scripts come from the browser's cache. Screenshots go to pytest's temporary directory (the path is
printed with a failure; pytest keeps the last three runs' directories).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from tests.e2e.lab import CHROMIUM_ARGS, chromium, lab_server
from tools.notebook_model import notebooks, read_notebook

# Every notebook of the series; E2E_NOTEBOOKS (paths separated by os.pathsep) picks others.
NOTEBOOKS = (
    [Path(p) for p in os.environ["E2E_NOTEBOOKS"].split(os.pathsep)]
    if os.environ.get("E2E_NOTEBOOKS")
    else [nb.path for nb in notebooks()]
)
# Seconds for Run All, per notebook: a deadline, not a measurement. Under `make test` on CI's 2 cores
# (load about 6) 01 and 09 passed 240 s (2026-11-25); alone, 01 takes about 60 s. E2E_RUN_TIMEOUT
# overrides.
RUN_TIMEOUT = float(os.environ.get("E2E_RUN_TIMEOUT", "480"))
WIDGET_TIMEOUT = 90.0  # seconds for a moved control's output to change
DIAGRAM_TIMEOUT = 60.0  # seconds for the Mermaid diagrams to be drawn once Run All has finished

# The notebook's model, read through the app JupyterLab exposes (--expose-app-in-browser): exact
# output types and execution counts, which the DOM does not distinguish (errors and stderr both
# render as application/vnd.jupyter.stderr).
STATE_JS = """() => {
  if (!window.jupyterapp) return null;
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session?.kernel;
  const cells = [];
  for (const cell of panel.content.widgets) {
    const m = cell.model;
    if (m.type !== 'code') continue;
    const outputs = [];
    for (let i = 0; i < m.outputs.length; i++) {
      const o = m.outputs.get(i).toJSON();
      outputs.push({type: o.output_type, ename: o.ename || '', evalue: o.evalue || '',
                    traceback: (o.traceback || []).join('\\n'), mimes: Object.keys(o.data || {}),
                    text: [].concat(o.text || []).join('').slice(-600)});
    }
    cells.push({count: m.executionCount, state: m.executionState || '', outputs});
  }
  return {kernel: kernel ? kernel.status : 'none', cells};
}"""

# What the browser shows: live widget controls and images that decoded.
DOM_JS = """() => {
  const out = '.jp-Notebook .jp-OutputArea-output';
  const controls = document.querySelectorAll(
    `${out} .jupyter-widgets:is(.widget-dropdown, .widget-slider, .widget-checkbox, .widget-toggle-buttons,
     .widget-radio, .widget-select, .widget-text, .widget-button, .widget-play, .widget-toggle-button)`);
  const imgs = [...document.querySelectorAll(`${out} img`)];
  const views = document.querySelectorAll(
    `${out}[data-mime-type="application/vnd.jupyter.widget-view+json"]`);
  const broken = [...views].filter(v => !v.querySelector('.jupyter-widgets')
    || /Error displaying widget|Loading widget/.test(v.textContent));
  return {controls: controls.length, views: views.length, broken_views: broken.length,
          images: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
          broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length};
}"""


# Mermaid diagrams in markdown cells, as JupyterLab 4.6 (@jupyterlab/mermaid) draws them: a fenced
# ```mermaid block becomes <div class="jp-RenderedMermaid"><figure><img src="data:image/svg+xml,...">
# (plus the source in a visually hidden <pre><code class="mermaid">); a diagram Mermaid cannot parse
# becomes <div class="jp-RenderedMermaid jp-mod-warning"><details class="jp-RenderedMermaid-Details">
# with the parse error. Without the Mermaid renderer the block stays <pre><code class="language-mermaid">.
MERMAID_JS = """() => {
  const markdown = '.jp-Notebook .jp-MarkdownCell .jp-RenderedMarkdown';
  const figures = [...document.querySelectorAll(`${markdown} .jp-RenderedMermaid`)];
  const drawn = figures.filter(f => !f.classList.contains('jp-mod-warning')
    && [...f.querySelectorAll('figure img')].some(i => i.src.startsWith('data:image/svg+xml')));
  const failed = figures.filter(f => f.classList.contains('jp-mod-warning'));
  return {drawn: drawn.length, failed: failed.length,
          errors: failed.map(f => (f.querySelector('details > pre')?.textContent || '').slice(0, 200)),
          as_text: document.querySelectorAll(`${markdown} pre > code.language-mermaid`).length};
}"""

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of a traceback
# A folder to keep each notebook as JupyterLab saved it after Run All (the Makefile's `test` sets it to
# build/executed): `make site` seeds its execution cache from them, so the site shows the outputs of
# the learner's setting and executes nothing again.
EXECUTED_NOTEBOOKS = "EXECUTED_NOTEBOOKS"

COMMS_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.commsOverSubshells"


def _code(path: Path) -> str:
    return "\n".join(cell.source for cell in read_notebook(path).code_cells)


def _diagrams(path: Path) -> int:
    return len(read_notebook(path).diagrams)


def _wait_for_state(page, predicate, timeout: float, what: str, polls: int = 1) -> dict:
    """The notebook's state once ``predicate`` held for ``polls`` polls in a row (0.5 s apart)."""
    deadline, held, state = time.monotonic() + timeout, 0, None
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS)
        held = held + 1 if state is not None and predicate(state) else 0
        if held >= polls:
            return state
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not reached within {timeout:.0f} s; last state: {_summary(state)}")


def _summary(state: dict | None) -> str:
    if not state:
        return "JupyterLab (window.jupyterapp) or the notebook panel not loaded"
    prompts = ["*" if c["state"] == "running" else (c["count"] or " ") for c in state["cells"]]
    return f"kernel {state['kernel']}, prompts {prompts}"


def _finished(state: dict) -> bool:
    return state["kernel"] == "idle" and not any(c["state"] == "running" for c in state["cells"])


def _keep_saved(page, saved: Path, keep: Path) -> None:
    """Save the notebook from JupyterLab (File > Save), then copy the file it wrote into ``keep``."""
    before = saved.stat().st_mtime_ns
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + 30
    while saved.stat().st_mtime_ns == before and time.monotonic() < deadline:
        time.sleep(0.2)
    executed = nbformat.read(saved, as_version=4)
    assert any(cell.get("outputs") for cell in executed.cells), f"{saved.name} was saved without outputs"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy2(saved, keep / saved.name)


def _run_all_from_menu(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()


def _move_a_control(page) -> str | None:
    """Change the first dropdown (else slider) of an ``interact``; return what moved, or None.

    Asserts that the interact's output area changes afterwards.
    """
    interacts = page.locator(".jp-OutputArea-output .widget-interact")
    for i in range(interacts.count()):
        box = interacts.nth(i)
        output = box.locator(".widget-output").first
        if output.count() == 0:
            continue
        before = output.inner_html()
        dropdown = box.locator(".widget-dropdown select").first
        slider = box.locator(".widget-slider .noUi-handle, .widget-slider .slider-handle").first
        if dropdown.count():
            # By index: labels render spaces as no-break spaces, so text comparisons mislead.
            options = dropdown.locator("option").all_inner_texts()
            current = dropdown.evaluate("select => select.selectedIndex")
            if len(options) < 2:
                continue
            target = (current + 1) % len(options)
            dropdown.select_option(index=target)
            moved = f"dropdown {options[current]!r} -> {options[target]!r}"
        elif slider.count():
            slider.focus()
            slider.press("ArrowRight")
            moved = "slider one step right"
        else:
            continue
        run_button = box.locator(".widget-button", has_text=re.compile("Run Interact"))
        if run_button.count():  # interact_manual: the output changes on the button only
            run_button.first.click()
        box.scroll_into_view_if_needed()
        deadline, settled = time.monotonic() + WIDGET_TIMEOUT, 0
        while time.monotonic() < deadline:
            done = output.inner_html() != before and page.evaluate(STATE_JS)["kernel"] == "idle"
            settled = settled + 1 if done else 0
            if settled >= 3:  # changed, and the kernel idle for three polls in a row: the callback ended
                return moved
            time.sleep(0.5)
        raise AssertionError(
            f"moved a control ({moved}) but its output did not change in {WIDGET_TIMEOUT:.0f} s"
        )
    return None


def _wait_for_diagrams(page, expected: int) -> dict:
    """The Mermaid counts once ``expected`` diagrams are drawn or failed (drawing is asynchronous:
    JupyterLab loads Mermaid on the first diagram), or what there is after ``DIAGRAM_TIMEOUT``."""
    deadline = time.monotonic() + DIAGRAM_TIMEOUT
    while True:
        found = page.evaluate(MERMAID_JS)
        if found["drawn"] + found["failed"] >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _new_children(before: set[int]) -> list[int]:
    import psutil

    return [c.pid for c in psutil.Process().children() if c.pid not in before]


def _children() -> set[int]:
    import psutil

    return {c.pid for c in psutil.Process().children()}


@pytest.fixture(scope="module")
def browser(long_lived_processes):
    """Headless Chromium driven by Playwright, one for the module (:func:`tests.e2e.lab.chromium`)."""
    from playwright.sync_api import sync_playwright

    before = _children()
    with sync_playwright() as playwright:
        driver = _new_children(before)  # Playwright's driver, parent of Chromium's processes
        long_lived_processes.update(dict.fromkeys(driver, True))
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            for pid in driver:
                long_lived_processes.pop(pid, None)


@pytest.fixture(scope="module")
def context(browser):
    """One browser context for the module: with its cache, a test after the first loads JupyterLab
    for about 2.5 CPU-seconds less (server and renderer, measured on a 2-core machine)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context
    context.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, long_lived_processes):
    """The project's JupyterLab, one for the module; its kernels are checked after every test."""
    with lab_server(tmp_path_factory.mktemp("jupyterlab")) as server:
        long_lived_processes[server.process.pid] = False  # its descendants are not exempt
        try:
            yield server
        finally:
            long_lived_processes.pop(server.process.pid, None)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e-screenshots")


def run_in_jupyterlab(path: Path, context, lab, shots: Path) -> None:
    code = _code(path)
    # The whole folder, as a learner has it: relative links between notebooks resolve, and 00's map
    # check sees every notebook. Only ``path`` is opened and run, in a workspace of its own (a
    # shared one would reopen the previous test's notebook).
    folder = lab.add_folder(path.stem, sorted(path.parent.glob("*.ipynb")))
    page = context.new_page()
    try:
        url = lab.url(f"lab/workspaces/{path.stem}/tree/{folder}/{path.name}")
        page.goto(url, wait_until="domcontentloaded", timeout=60_000)
        _wait_for_state(page, lambda s: s["kernel"] == "idle", 90, "kernel ready")
        # Comm messages served on a kernel subshell (JupyterLab's default with ipykernel 7) flush
        # pyplot figures from a second thread while a widget callback draws: half-drawn figures
        # (docs/install.md). The venv's JupyterLab settings turn that off.
        comms = page.evaluate(COMMS_JS)
        assert comms == "disabled", f"commsOverSubshells is {comms!r}: venv settings not installed"
        started = time.monotonic()
        _run_all_from_menu(page)
        _wait_for_state(
            page,
            lambda s: any(c["state"] == "running" for c in s["cells"]) or all(c["count"] for c in s["cells"]),
            30,
            "Run All started",
        )
        state = _wait_for_state(page, _finished, RUN_TIMEOUT, "Run All finished", polls=3)
        seconds = time.monotonic() - started
        page.wait_for_timeout(1000)  # let widget views and images attach
        diagrams = _wait_for_diagrams(page, _diagrams(path))
        page.screenshot(path=str(shots / f"{path.stem}.png"))
        dom = page.evaluate(DOM_JS)
        if keep := os.environ.get(EXECUTED_NOTEBOOKS):  # saved before a control moves: default outputs
            _keep_saved(page, lab.root_dir / folder / path.name, Path(keep))

        printed = ["".join(o["text"] for o in c["outputs"] if o["type"] == "stream") for c in state["cells"]]
        errors = [  # with what the cell and the one before it printed (a failed check's figures)
            f"code cell {i} (printed before: {printed[i - 1][-300:]!r}; here: {printed[i][-300:]!r}):\n"
            f"{ANSI.sub('', o['traceback'])}"
            for i, c in enumerate(state["cells"])
            for o in c["outputs"]
            if o["type"] == "error"
        ]
        assert not errors, f"{path.name} shows error outputs:\n" + "\n".join(errors)
        unexecuted = [i for i, c in enumerate(state["cells"]) if not c["count"]]
        assert not unexecuted, f"{path.name}: code cells {unexecuted} did not execute"
        model_images = sum(
            any(m.startswith("image/") for m in o["mimes"]) for c in state["cells"] for o in c["outputs"]
        )
        assert dom["broken_images"] == 0, f"{dom['broken_images']} images did not render"
        assert dom["images"] >= model_images, f"model has {model_images} images, browser shows {dom}"
        if re.search(r"matplotlib|new_figure|bar_chart|plt\.", code):
            assert dom["images"] >= 1, f"{path.name} plots, but no image rendered: {dom}"
        assert not diagrams["failed"], f"{path.name}: Mermaid could not draw: {diagrams['errors']}"
        shown_as_text = diagrams["as_text"]
        assert not shown_as_text, f"{path.name}: {shown_as_text} Mermaid blocks shown as source text"
        assert diagrams["drawn"] == _diagrams(path), (
            f"{path.name} has {_diagrams(path)} Mermaid diagrams, JupyterLab drew {diagrams['drawn']}"
        )
        assert dom["broken_views"] == 0, f"{dom['broken_views']} widget views did not render: {dom}"
        moved = None
        if re.search(r"ipywidgets|interact\(", code):
            assert dom["controls"] >= 1, f"{path.name} uses ipywidgets, but no live control rendered: {dom}"
            moved = _move_a_control(page)
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"{path.stem}-widget.png"))
        after = page.evaluate(STATE_JS)
        late_errors = [o for c in after["cells"] for o in c["outputs"] if o["type"] == "error"]
        assert not late_errors, f"moving a control raised: {late_errors}"
        print(
            f"{path.name}: Run All {seconds:.1f} s, {len(state['cells'])} code cells, "
            f"{dom['controls']} widget controls, {dom['images']} images, "
            f"{diagrams['drawn']}/{_diagrams(path)} diagrams drawn, moved: {moved or 'none'}"
        )
    except BaseException:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(shots / f"{path.stem}-FAILED.png"))
        print(f"screenshots: {shots}")
        raise
    finally:
        page.close()
        left = lab.shutdown_kernels()
    assert not left, f"{path.name}: processes left after its kernel shut down: {left}"
