"""The index of error messages (docs/errors.md, notebook 10 appendix E) is true.

Each linked section exists (the notebook and its heading), and docs/errors.md and notebook 10 show
the table as ``helpers.error_index`` renders it. The index is a view of the catalog: that each
message is what this torch and Python print is ``tests/test_catalog.py``'s job (it runs every
entry's reproduction).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch.multiprocessing as mp

from helpers.field_guide import ERROR_INDEX, error_index_markdown
from tools.notebook_model import read_notebook

ROOT = Path(__file__).resolve().parents[1]
LINUX_FORK = sys.platform == "linux" and "fork" in mp.get_all_start_methods()
needs_fork = pytest.mark.skipif(not LINUX_FORK, reason="the ranks are forked (Linux)")


@pytest.mark.parametrize("entry", ERROR_INDEX, ids=lambda e: f"{e.notebook[:2]} {e.section}")
def test_each_message_links_a_section_that_exists(entry):
    assert (ROOT / "notebooks" / entry.notebook).exists(), entry.notebook
    assert entry.section in {s.id for s in read_notebook(ROOT / "notebooks" / entry.notebook).sections}, (
        f"{entry.notebook}: no #{entry.section}"
    )


def test_docs_errors_and_notebook_10_show_the_index():
    assert error_index_markdown("../notebooks/") in (ROOT / "docs" / "errors.md").read_text()
    cells = nbformat.read(ROOT / "notebooks" / "10_field_guide.ipynb", as_version=4).cells
    (at,) = [i for i, c in enumerate(cells) if re.search(r"^## Appendix E", c.source, re.MULTILINE)]
    shown = cells[at + 1]  # rendered live from ERROR_INDEX, links relative to notebooks/
    assert shown.cell_type == "code" and 'Markdown(fg.error_index_markdown(prefix=""))' in shown.source
