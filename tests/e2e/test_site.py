"""The documentation site in headless Chromium, offline (``make test-site``, after ``make site``).

``_site/`` is served on 127.0.0.1 by ``http.server`` in a thread; every request to another host is
aborted and counted (none may happen: Mermaid and everything else come from the site). Each page is
opened: it has a title, no Sphinx error box (docutils' system messages), no traceback output; every
Mermaid block holds a drawn ``<svg>`` and no source text; every plot its notebook's execution made
(read back from the execution cache ``make site`` used) is an ``<img>`` that loaded. The search page
finds an error message from the error index and lists the error index page. Every link to a page of
the site resolves, its ``#fragment`` included. The layout serves a reader: at 1280 px no code block of
at most 100 characters scrolls sideways and a diagram's text is drawn at least as large as the body
text; at 390 px no paragraph, list item or heading runs past the window (a test on a made-up page
shows the checks fail where they should). A screenshot of each page goes to a temporary folder
(printed), and of six pages at both widths.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
import urllib.parse
from pathlib import Path

import nbformat
import pytest

from tests.e2e.jupyterlab_run import browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_DIR", ROOT / "_site"))  # `python -m tools.site --out DIR` builds elsewhere
STAGED = ROOT / "build" / "site-src" / "notebooks"
CACHE = ROOT / "build" / "jupyter-cache"
# An error index message to search for, and the page the search must list.
SEARCHED, ERRORS_PAGE = "received 0 items of ancdata", "docs/errors.html"

# What the layout must give a reader (issue 53), measured in the page: a visible code block whose lines
# are at most 100 characters does not scroll sideways (at 1280 px); a diagram's text is drawn at least
# as large as the body text; on a narrow screen no paragraph, list item or heading runs past the window.
LAYOUT_JS = """const LAYOUT = () => {
    const body = parseFloat(getComputedStyle(document.querySelector('article') || document.body).fontSize);
    const shown = e => e.checkVisibility() && e.innerText.trim() !== '';
    const longest = e => Math.max(...e.innerText.split('\\n').map(line => line.length));
    const scrolling = [...document.querySelectorAll('div.highlight pre')].filter(
        p => shown(p) && longest(p) <= 100 && p.scrollWidth > p.clientWidth + 1);
    const diagrams = [...document.querySelectorAll('.mermaid svg')].map(svg => {
        const label = svg.querySelector('.nodeLabel, text');
        const box = svg.viewBox.baseVal;
        const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;
        return label ? parseFloat(getComputedStyle(label).fontSize) * scale : body;
    });
    const prose = [...document.querySelectorAll('article p, article li, article h1, article h2, article h3')];
    return {
        bodyText: body,
        scrollingCode: scrolling.map(p => p.innerText.split('\\n')[0].slice(0, 80)),
        diagramText: diagrams,
        proseOutside: prose.filter(e => shown(e) && !e.closest('table, .highlight, .mermaid')
            && e.getBoundingClientRect().right > innerWidth + 1)
            .map(e => e.innerText.slice(0, 60)),
    };
};"""

PAGE_STATE = (
    "() => { "
    + LAYOUT_JS
    + """ return {
    title: document.title,
    systemMessages: document.querySelectorAll('.system-message, .problematic').length,
    tracebacks: document.querySelectorAll('.output.traceback, .cell_output .traceback').length,
    mermaid: [...document.querySelectorAll('.mermaid')].map(e => ({
        drawn: !!e.querySelector('svg') && !e.querySelector('svg').textContent.includes('Syntax error'),
        loose: [...e.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim()).length,
    })),
    images: [...document.querySelectorAll('.cell_output img')].map(i => i.complete && i.naturalWidth > 0),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ...LAYOUT(),
}; }"""
)
DRAWN = "() => [...document.querySelectorAll('.mermaid')].every(e => e.getAttribute('data-processed'))"


@pytest.fixture(scope="module")
def served():
    """``_site`` on 127.0.0.1, a free port, for the module; its URL."""
    if not (SITE / "index.html").exists():
        pytest.fail("no _site/index.html: run `make site` first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def offline(browser):  # noqa: F811
    """A browser context that aborts every request not to 127.0.0.1; the aborted URLs."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    refused: list[str] = []

    def route(request_route) -> None:
        if urllib.parse.urlsplit(request_route.request.url).hostname == "127.0.0.1":
            request_route.continue_()
        else:
            refused.append(request_route.request.url)
            request_route.abort()

    context.route("**/*", route)
    yield context, refused
    context.close()


def expected_plots(name: str) -> int | None:
    """How many images the executed notebook ``name`` shows (from the cache the build used); None
    where the cache does not hold it (a site built from another tree, or without executing)."""
    from jupyter_cache import get_cache

    try:
        executed = get_cache(str(CACHE)).merge_match_into_notebook(
            nbformat.read(STAGED / name, as_version=4)
        )[1]
    except KeyError:
        return None
    outputs = [o for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs]
    return sum("image/png" in o.get("data", {}) for o in outputs)


@pytest.mark.timeout(900)
def test_every_page_renders_offline_and_every_internal_link_resolves(served, offline, tmp_path_factory):
    context, refused = offline
    shots = tmp_path_factory.mktemp("site-screenshots")
    pages = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if "_static" not in p.parts)
    assert {"index.html", ERRORS_PAGE, "docs/API.html", "patterns/README.html"} <= set(pages)
    page, states, problems = context.new_page(), {}, []  # closed with the context
    for name in pages:
        page.goto(served + name, wait_until="load", timeout=60_000)
        page.wait_for_function(DRAWN, timeout=60_000)
        states[name] = state = page.evaluate(PAGE_STATE)
        shot = shots / name.replace("/", "__")
        page.screenshot(path=f"{shot}.png")
        for what, selector in (("diagram", ".mermaid"), ("plot", ".cell_output img")):
            if page.locator(selector).count():  # the first of each, scrolled into view
                page.locator(selector).first.screenshot(path=f"{shot}-first-{what}.png", timeout=30_000)
        if not state["title"].strip() or state["systemMessages"] or state["tracebacks"]:
            problems.append(f"{name}: title {state['title']!r}, {state['systemMessages']} error boxes, "
                            f"{state['tracebacks']} tracebacks")  # fmt: skip
        if not all(m["drawn"] and not m["loose"] for m in state["mermaid"]):
            problems.append(f"{name}: a Mermaid block not drawn: {state['mermaid']}")
        if state["scrollingCode"]:
            problems.append(
                f"{name}: code of at most 100 characters scrolls at 1280 px: {state['scrollingCode']}"
            )
        small = [round(size, 1) for size in state["diagramText"] if size < state["bodyText"] - 0.5]
        if small:
            problems.append(f"{name}: diagram text of {small} px, under the body's {state['bodyText']} px")
        if name.startswith("notebooks/"):
            want = expected_plots(Path(name).with_suffix(".ipynb").name)
            if want is None or len(state["images"]) < want or not all(state["images"]):
                problems.append(f"{name}: {want} plots executed, images shown/loaded {state['images']}")
    print(f"screenshots of {len(pages)} pages at 1280 px: {shots}")
    assert sum(len(s["mermaid"]) for s in states.values()) >= 15  # one diagram per notebook at least
    for name, state in states.items():
        for href in state["links"]:
            problems += broken(href, name, served, states)
    assert problems == [], "\n".join(problems[:40])
    assert refused == [], f"requests that left 127.0.0.1: {refused[:10]}"


def broken(href: str, page: str, served: str, states: dict[str, dict]) -> list[str]:
    """What is wrong with the link ``href`` on ``page``: its target missing, or its fragment."""
    if not href.startswith(served):
        return []
    path, _, fragment = href[len(served) :].partition("#")
    path = path or "index.html"
    if path.endswith("/"):
        path += "index.html"
    if path not in states:
        return [] if (SITE / urllib.parse.unquote(path)).is_file() else [f"{page}: {href}: no such file"]
    target = urllib.parse.unquote(fragment)
    if target and target not in states[path]["ids"]:
        return [f"{page}: {href}: no id {target!r} on {path}"]
    return []


@pytest.mark.timeout(300)
def test_search_finds_an_error_message_on_the_error_index(served, offline):
    context, refused = offline
    page = context.new_page()  # closed with the context, after the leak check (a closing renderer races it)
    page.goto(f"{served}search.html?q={urllib.parse.quote(SEARCHED)}", wait_until="load", timeout=60_000)
    results = "document.querySelectorAll('#search-results ul.search li a')"
    page.wait_for_function(f"() => {results}.length > 0", timeout=60_000)
    found = page.evaluate(f"() => [...{results}].map(a => a.href)")
    assert any(href.split("#")[0].endswith(ERRORS_PAGE) for href in found), found
    assert refused == []


NARROW_PAGES = ("index.html", "notebooks/00_overview.html", "notebooks/06_ddp_mp_spawn.html",
                "notebooks/11_collectives_and_ddp.html", "notebooks/12_sharding.html", ERRORS_PAGE)  # fmt: skip


@pytest.mark.timeout(300)
def test_a_phone_reads_the_prose_without_sideways_scrolling(served, browser, tmp_path_factory):  # noqa: F811
    """At 390 px (a phone), no paragraph, list item or heading runs past the window (code, tables and
    diagrams scroll in their own boxes); screenshots of the pages the issue named, at both widths."""
    shots = tmp_path_factory.mktemp("site-screenshots-390-and-1280")
    problems = []
    for width in (390, 1280):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        for name in NARROW_PAGES:
            page.goto(served + name, wait_until="load", timeout=60_000)
            page.wait_for_function(DRAWN, timeout=60_000)
            page.screenshot(path=str(shots / f"{width}-{name.replace('/', '__')}.png"))
            outside = page.evaluate("() => { " + LAYOUT_JS + " return LAYOUT().proseOutside; }")
            problems += [f"{width} px {name}: {text!r} runs past the window" for text in outside]
        context.close()
    print(f"screenshots at 390 and 1280 px: {shots}")
    assert problems == [], "\n".join(problems[:20])


def test_the_layout_checks_catch_a_wide_block_and_a_wide_paragraph(browser):  # noqa: F811
    """The checks above fail where they should: a 100-character line in a narrow code box, a diagram
    shrunk to half its size, a paragraph wider than the window."""
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.set_content(
        "<article style='font-size:16px'><div class='highlight' style='width:200px'>"
        f"<pre style='overflow-x:auto'>{'x' * 100}</pre></div>"
        "<div class='mermaid'><svg viewBox='0 0 400 100' style='width:200px'>"
        "<text style='font-size:16px'>label</text></svg></div>"
        f"<p style='width:800px'>{'word ' * 100}</p></article>"
    )
    state = page.evaluate("() => { " + LAYOUT_JS + " return LAYOUT(); }")
    context.close()
    assert len(state["scrollingCode"]) == 1 and state["diagramText"] == [8.0], state
    assert len(state["proseOutside"]) == 1, state
