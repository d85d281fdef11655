"""tools/site.py (``make site``) without Sphinx: the staged sources and the seeding of the execution cache.

The build itself, and its pages in a browser, are ``make site`` and ``make test-site``. Here: the
notebook ``make test-wheel`` executed seeds the cache so that myst-nb's lookup (``match_cache_notebook``,
what its ``cache`` mode calls) finds it, with the executed outputs, as long as the code cells are the
same (a markdown change included), and not once a code cell changed.
"""

from __future__ import annotations

import doctest

import nbformat
import pytest
from jupyter_cache import get_cache

import tools.site as site


def test_doctests():
    assert doctest.testmod(site).failed == 0


def notebook(code: str, text: str = "# A title") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(text), nbformat.v4.new_code_cell(code)]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def executed_copy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """What nbmake's --overwrite leaves: outputs, counts, and timing metadata on each cell."""
    ran = nbformat.from_dict(nb)
    ran.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    ran.cells[1].execution_count = 1
    ran.cells[1].metadata["execution"] = {"iopub.execute_input": "2026-11-27T21:00:00Z"}
    return ran


@pytest.mark.parametrize(
    "staged_text, staged_code, hit",
    [
        ("# A title", "print(42)", True),
        ("# Another title", "print(42)", True),
        ("# A title", "print(43)", False),
    ],
    ids=["same", "markdown-changed", "code-changed"],
)
def test_the_cache_is_seeded_from_the_executed_copy_when_the_code_is_the_same(
    tmp_path, staged_text, staged_code, hit
):
    executed, staged = tmp_path / "executed", tmp_path / "stage"
    executed.mkdir(), staged.mkdir()
    nbformat.write(executed_copy(notebook("print(42)")), executed / "01_x.ipynb")
    nbformat.write(notebook(staged_code, staged_text), staged / "01_x.ipynb")
    outcome = site.seed_cache([staged / "01_x.ipynb"], executed, tmp_path / "cache")
    assert outcome == {"01_x.ipynb": "seeded" if hit else "code differs"}
    report = site.cache_report([staged / "01_x.ipynb"], tmp_path / "cache")
    assert report == {"01_x.ipynb": f"seeded from {executed / '01_x.ipynb'}" if hit else "not in the cache"}

    cache = get_cache(str(tmp_path / "cache"))
    later = notebook(staged_code, staged_text + "\n\nMore text, written after the build.")
    if hit:
        merged = cache.merge_match_into_notebook(later)[1]
        assert (
            merged.cells[1].outputs[0]["text"] == "42\n" and merged.cells[0].source == later.cells[0].source
        )
    else:
        with pytest.raises(KeyError):
            cache.match_cache_notebook(later)


def test_a_notebook_without_an_executed_copy_is_left_to_the_build(tmp_path):
    nbformat.write(notebook("print(42)"), tmp_path / "01_x.ipynb")
    outcome = site.seed_cache([tmp_path / "01_x.ipynb"], tmp_path / "none", tmp_path / "cache")
    assert outcome == {"01_x.ipynb": "no executed copy"}


def test_a_widget_is_cached_as_the_plot_its_output_widget_held_when_saved(tmp_path):
    # an interact's view (a VBox whose last child is an Output widget holding the plot), as JupyterLab
    # saves it with saveState: the site shows the plot, which no widget manager is needed to draw
    executed, staged = tmp_path / "executed", tmp_path / "stage"
    executed.mkdir(), staged.mkdir()
    ran = executed_copy(notebook("interact(f, x=1)"))
    ran.cells[1].outputs = [
        nbformat.v4.new_output(
            "display_data", data={site.WIDGET_VIEW: {"model_id": "box"}, "text/plain": "x"}
        )
    ]
    plot = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}
    ran.metadata["widgets"] = {
        site.WIDGET_STATE: {
            "state": {
                "box": {
                    "model_name": "VBoxModel",
                    "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]},
                },
                "slider": {"model_name": "IntSliderModel", "state": {"value": 1}},
                "out": {"model_name": "OutputModel", "state": {"outputs": [plot]}},
            }
        }
    }
    nbformat.write(ran, executed / "01_x.ipynb")
    nbformat.write(notebook("interact(f, x=1)"), staged / "01_x.ipynb")
    assert site.seed_cache([staged / "01_x.ipynb"], executed, tmp_path / "cache") == {"01_x.ipynb": "seeded"}
    merged = get_cache(str(tmp_path / "cache")).merge_match_into_notebook(notebook("interact(f, x=1)"))[1]
    assert [list(o["data"]) for o in merged.cells[1].outputs] == [["image/png"]]


def test_the_staged_sources_link_patterns_to_their_pages_and_nothing_to_a_missing_page(tmp_path):
    mermaid = tmp_path / "dist"  # stands in for site/node_modules/mermaid/dist (`npm ci`)
    (mermaid / "chunks" / "mermaid.esm.min").mkdir(parents=True)
    (mermaid / "mermaid.esm.min.mjs").write_text("export default {};\n")
    (mermaid / "chunks" / "mermaid.esm.min" / "chunk-1.mjs").write_text("export {};\n")
    notebooks = site.stage(tmp_path / "stage", mermaid)
    tmp_path = tmp_path / "stage"
    assert [p.name for p in notebooks] == sorted(
        p.name for p in (site.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
    )
    text = "\n".join(p.read_text() for p in tmp_path.rglob("*") if p.suffix in (".md", ".ipynb"))
    patterns = (tmp_path / "patterns" / "README.md").read_text()
    assert "](06_ddp_spawn.md)" in patterns and "](06_ddp_spawn.py)" not in patterns
    assert "```{literalinclude} 06_ddp_spawn.py" in (tmp_path / "patterns" / "06_ddp_spawn.md").read_text()
    assert "(../docs/doctor.md" not in text and "/blob/main/docs/doctor.md" in text
    assert (tmp_path / "_static" / "mermaid" / "chunks" / "mermaid.esm.min" / "chunk-1.mjs").is_file()
    index = (tmp_path / "index.md").read_text()
    assert (
        index.index("notebooks/00_overview")
        < index.index("notebooks/01_start_methods")
        < index.index("docs/errors")
    )
