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
extensions = ["myst_nb", "sphinxcontrib.mermaid"]
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
STAGE = Path(os.environ.get("SITE_STAGE", ROOT / "build" / "site-src"))
html_static_path = [str(STAGE / "_static")]

html_theme = "alabaster"
html_title = project
html_theme_options = {"description": "a notebook series", "fixed_sidebar": True}
html_show_sourcelink = False


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
