"""Sphinx configuration of the documentation site; `make site` (tools/site.py) builds with it.

Why Sphinx + myst-nb: Sphinx's own search index works offline (no service, no CDN); myst-nb renders
notebooks with their outputs and images and executes them through jupyter-cache, keyed on the code
cells, so a change to markdown alone executes nothing, and the cache can be seeded from the copies
`make test-wheel` already executed (tools/site.py). Mermaid: sphinxcontrib-mermaid draws the
```mermaid fences (MyST's myst_fence_as_directive) in the browser from the copy vendored into
_static/mermaid (site/package.json), never from a CDN.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tools.notebook_model, for the slugs

project = "torch.multiprocessing, by running it"
author = "the torch-mp-notebooks authors"
extensions = ["myst_nb", "sphinxcontrib.mermaid", "sphinx_copybutton"]
exclude_patterns = ["**.ipynb_checkpoints", "_static"]

# Sections: the notebooks link to `NN_name.ipynb#section-id`, the id being tools.notebook_model.slug of
# the heading (the `<a id>` above it says the same); MyST resolves such links to ## and ### headings and
# warns (an error here: -W) about one that names no heading.
myst_heading_anchors = 3
myst_heading_slug_func = "tools.notebook_model.slug"
myst_fence_as_directive = ["mermaid"]
myst_enable_extensions = ["colon_fence"]

# Execution: through jupyter-cache, every cell to the end, a failing cell fails the build.
nb_execution_mode = "cache"
nb_execution_cache_path = os.environ.get("SITE_JUPYTER_CACHE", str(ROOT / "build" / "jupyter-cache"))
nb_execution_timeout = int(os.environ.get("CELL_TIMEOUT", "180"))  # the Makefile's default
nb_execution_raise_on_error = True
nb_execution_show_tb = True

# Mermaid from _static/mermaid (tools/site.py copies it there from site/node_modules).
mermaid_use_local = "mermaid/mermaid.esm.min.mjs"
# Diagrams at their natural size (not shrunk to the column), so their text is as large as the body's;
# a wide one scrolls in its own box (site/series.css).
mermaid_init_config = {
    "startOnLoad": False,
    "flowchart": {"useMaxWidth": False},
    "sequence": {"useMaxWidth": False},
    "themeVariables": {"fontSize": "16px"},
}
STAGE = Path(os.environ.get("SITE_STAGE", ROOT / "build" / "site-src"))
html_static_path = [str(STAGE / "_static")]


# The theme: sphinx-book-theme (on pydata-sphinx-theme), made for books of notebooks and maintained by
# the Executable Books project that makes myst-nb: a right-hand table of contents, dark mode, launch
# links that open a page as a notebook (Colab, Binder) and a link to the repository, built from the one
# repository URL in pyproject.toml. Its fonts and icons are bundled: nothing is fetched from elsewhere.
# sphinx-copybutton puts a copy button on every code block (prompts and outputs left out).
def _repository() -> str:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["urls"]["Repository"]


html_theme = "sphinx_book_theme"
html_title = project
html_theme_options = {
    "repository_url": _repository(),
    "repository_branch": "main",
    "use_repository_button": True,
    "launch_buttons": {
        "colab_url": "https://colab.research.google.com",
        "binderhub_url": "https://mybinder.org",
    },
    "show_toc_level": 2,
}
html_show_sourcelink = False
html_css_files = ["series.css"]  # code at 100 characters without sideways scrolling (tools/site.py)
copybutton_exclude = ".linenos, .gp, .go"
# Widgets: myst-nb would load the widget manager and require.js from two CDNs; the site loads nothing
# from outside it. A widget's output is shown as it was when the notebook ran (an interact's plot at
# the default values): tools/site.py puts the outputs its Output widgets held, from the widget state
# JupyterLab saves in the browser run (saveState, jupyter-config/labconfig), in the widget's place.
nb_ipywidgets_js = {}


def _link_notebook_pages(app, doctree, docname):
    """A link to ``NN_name.ipynb#id`` inside an output (notebook 10 displays the error index as
    markdown) is left as written by myst-nb: point it at the notebook's page."""
    from docutils import nodes

    for reference in doctree.findall(nodes.reference):
        path, hash_, fragment = reference.get("refuri", "").partition("#")
        if path.endswith(".ipynb") and ":" not in path:
            reference["refuri"] = path.removesuffix(".ipynb") + ".html" + hash_ + fragment


def setup(app):
    app.connect("doctree-resolved", _link_notebook_pages)
