"""Execute the notebooks and render a static, browsable site: an index page plus one page per notebook.

    python tools/build_site.py                 # all of notebooks/ into _site/ (what `make html` runs)
    python tools/build_site.py --out /tmp/site notebooks/01_start_methods.ipynb

Each notebook runs on a temporary copy (nothing is written into the repository) with a per-cell
timeout; plots are embedded in the pages as data URIs, so the site is a folder of self-contained
HTML files to open in a browser or serve statically. A notebook that fails still gets its page (with
the error shown) and is marked in the index; the script then exits with status 1.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".built-by-build_site"  # the output folder is only ever wiped when it carries this file

__all__ = ["Page", "build_site", "discover_notebooks", "notebook_title", "main"]


@dataclass
class Page:
    """One rendered notebook: its source, output file, title, summary line, run time and error."""

    source: Path
    filename: str
    title: str
    summary: str
    seconds: float | None
    error: str | None = None


def discover_notebooks(folder: Path) -> list[Path]:
    """The series' notebooks in reading order: ``NN_topic.ipynb`` in ``folder``.

    >>> all(p.name[:2].isdigit() and p.suffix == ".ipynb" for p in discover_notebooks(ROOT / "notebooks"))
    True
    """
    return sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))


def notebook_title(nb) -> tuple[str, str]:
    """The title (the first cell's ``# `` heading) and the line after it, from a notebook node.

    >>> import nbformat
    >>> cell = nbformat.v4.new_markdown_cell("# 01 · Start\\n\\nFork it,\\nthen spawn.\\n\\n- **Needs:** CPU")
    >>> notebook_title(nbformat.v4.new_notebook(cells=[cell]))
    ('01 · Start', 'Fork it, then spawn.')
    """
    first = nb.cells[0].source if nb.cells and nb.cells[0].cell_type == "markdown" else ""
    lines = [line.strip() for line in first.strip().splitlines()]
    if not lines or not lines[0].startswith("#"):
        return "", ""
    paragraph = []  # the first paragraph after the title, unless it is a list or a heading
    for line in lines[1:]:
        if not line and paragraph:
            break
        if line.startswith(("- ", "* ", "#")):
            break
        if line:
            paragraph.append(line)
    return lines[0].lstrip("#").strip(), " ".join(paragraph)


def link_pages(body: str) -> str:
    """A page's links to a notebook of the series (``03_queues_and_pipes.ipynb#keep-the-producer-alive``)
    pointed at that notebook's page, so a link to a section works on the site as in JupyterLab.

    >>> link_pages('<a href="03_queues.ipynb#keep-alive">x</a> <a href="notes.ipynb">y</a>')
    '<a href="03_queues.html#keep-alive">x</a> <a href="notes.ipynb">y</a>'
    """
    return re.sub(r'href="(\d\d_\w+)\.ipynb(#[^"]*)?"', r'href="\1.html\2"', body)


def _execute(nb, workdir: Path, timeout: int) -> str | None:
    """Run ``nb`` in place in a fresh python3 kernel whose cwd is ``workdir``; the error, if any."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    # The kernel imports this checkout's helpers, whatever the caller's environment says.
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    )
    env.pop("MPLBACKEND", None)
    try:
        client.execute(env=env)
    except (CellExecutionError, CellTimeoutError) as exc:
        return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    return None


def build_site(notebooks: list[Path], out: Path, timeout: int = 180, execute: bool = True) -> list[Page]:
    """Render ``notebooks`` (executed first unless ``execute=False``) into ``out``; return the pages.

    ``out`` is emptied first if an earlier build made it; any other non-empty folder is refused.
    """
    import nbformat
    from nbconvert import HTMLExporter

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise FileExistsError(f"{out} is not empty and was not made by this script; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by tools/build_site.py; the next build empties this folder\n")
    # The lab template turns a ```mermaid block of a markdown cell into <div class="jp-Mermaid"><pre
    # class="mermaid"> and adds the script that draws it with Mermaid, loaded from a CDN
    # (HTMLExporter.mermaid_js_url) when the page is opened; offline the diagram shows as its source.
    exporter = HTMLExporter(template_name="lab")
    pages = []
    with tempfile.TemporaryDirectory(prefix="build-site-") as tmp:
        # One copy of each notebook's folder, as a learner has it (00 checks its siblings).
        workdir = Path(tmp) / "notebooks"
        workdir.mkdir()
        for sibling in {p for source in notebooks for p in source.parent.glob("*.ipynb")}:
            shutil.copy2(sibling, workdir / sibling.name)
        for source in notebooks:
            nb = nbformat.read(workdir / source.name, as_version=4)
            title, summary = notebook_title(nb)
            title = title or source.stem
            started = time.monotonic()
            error = _execute(nb, workdir, timeout) if execute else None
            seconds = time.monotonic() - started if execute else None
            body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
            page = Page(source, f"{source.stem}.html", title, summary, seconds, error)
            (out / page.filename).write_text(link_pages(body), encoding="utf-8")
            pages.append(page)
            status = f"FAILED: {error}" if error else "ok"
            ran = f"{seconds:.1f} s" if seconds is not None else "not executed"
            print(f"{source.name}: {ran}, {status} -> {out / page.filename}", flush=True)
    (out / "index.html").write_text(_index(pages), encoding="utf-8")
    print(f"site: {out / 'index.html'}")
    return pages


def _index(pages: list[Page]) -> str:
    rows = []
    for page in pages:
        ran = f"ran in {page.seconds:.0f} s" if page.seconds is not None else "not executed"
        flag = f' <strong class="failed">failed: {html.escape(page.error)}</strong>' if page.error else ""
        rows.append(
            f'<li><a href="{html.escape(page.filename)}">{html.escape(page.title)}</a>'
            f"<br><span>{html.escape(page.summary)}</span> <small>({ran})</small>{flag}</li>"
        )
    built = time.strftime("%Y-%m-%d %H:%M %Z")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Learn torch.multiprocessing by running it</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 50em; margin: 2em auto; line-height: 1.5; }}
li {{ margin: 0.8em 0; }} small {{ color: #666; }} .failed {{ color: #b00; }}
</style></head>
<body>
<h1>Learn <code>torch.multiprocessing</code> by running it</h1>
<p>The notebooks as executed on {html.escape(built)}, with their outputs and plots, for reading
without running anything. To run them yourself: <code>make lab</code>.</p>
<ol>
{chr(10).join(rows)}
</ol>
</body></html>
"""


def main(argv: list[str] | None = None) -> int:
    """Command line: ``build_site.py [--out DIR] [--timeout S] [--no-execute] [NOTEBOOK ...]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--out", type=Path, default=ROOT / "_site", help="output folder (default: _site)")
    parser.add_argument("--timeout", type=int, default=180, help="seconds per cell (default: 180)")
    parser.add_argument("--no-execute", action="store_true", help="render the notebooks as committed")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or discover_notebooks(ROOT / "notebooks")
    if not notebooks:
        parser.error("no notebooks found")
    pages = build_site(notebooks, args.out, timeout=args.timeout, execute=not args.no_execute)
    return 1 if any(page.error for page in pages) else 0


if __name__ == "__main__":
    sys.exit(main())
