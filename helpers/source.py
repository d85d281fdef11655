"""Show the live source of a function or class in a notebook: the code you read is the code that runs.

Every worker a notebook starts in another process lives in ``helpers`` (spawn and forkserver
children import it by module and name). ``show_source`` displays that function's source, read from
the module at run time, right before the notebook runs it, so the listing can never drift from
what executes. The rule ``shown-before-started`` (``tests/notebook_rules.py``) checks every notebook.

Example::

    >>> from helpers.source import show_source
    >>> show_source(show_source)  # doctest: +ELLIPSIS
    # helpers.source.show_source · helpers/source.py, line ...
    def show_source(obj: object, docstring: bool = False) -> None:
        _display(_source_listing(obj, docstring))
    <BLANKLINE>
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["show_source", "source_text", "show_script"]


@dataclass(frozen=True)
class _SourceListing:
    """The source of one object and where it lives; displays highlighted in Jupyter, as text elsewhere."""

    name: str
    where: str
    text: str

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        code = highlight(self.text, PythonLexer(), HtmlFormatter(noclasses=True, style="default"))
        return f'<div style="font-size:90%;color:#555">{self.where}</div>{code}'

    def __str__(self) -> str:
        return f"# {self.where}\n{self.text}"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text form
        printer.text(str(self))


def _docstring_lines(source: str) -> set[int]:
    """Line numbers (1-based) of every docstring in ``source``: of the object and of what it defines."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and len(node.body) > 1:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _lines_and_start(obj: object) -> tuple[list[str], int]:
    try:
        return inspect.getsourcelines(obj)
    except (OSError, TypeError) as error:
        raise TypeError(
            f"cannot show the source of {obj!r}: show_source takes a function or class defined in a "
            "Python file (a helpers module), not a builtin or an object made at run time"
        ) from error


def source_text(obj: object, docstring: bool = False) -> str:
    """The live source of ``obj`` as ``show_source`` displays it: docstrings left out unless asked.

    A docstring (and its doctests) documents a function for instructors; the listing a learner
    reads is the code. Used by ``show_source`` in every notebook, and by the tests that bound a
    listing's length and a notebook's reading time.

    >>> print(source_text(_docstring_lines).splitlines()[1].strip())
    lines: set[int] = set()
    """
    lines, _ = _lines_and_start(obj)
    text = textwrap.dedent("".join(lines))
    if docstring:
        return text
    drop = _docstring_lines(text)
    return "".join(line for number, line in enumerate(text.splitlines(True), 1) if number not in drop)


def _source_listing(obj: object, docstring: bool = False) -> _SourceListing:
    """The live source of ``obj`` (a function, class or method) with its module, file and first line.

    >>> _source_listing(_SourceListing).name
    'helpers.source._SourceListing'
    """
    _, first = _lines_and_start(obj)
    name = f"{obj.__module__}.{obj.__qualname__}"
    path = Path(inspect.getsourcefile(obj) or "?")
    package_root = Path(__file__).resolve().parent.parent
    try:
        shown_path = path.resolve().relative_to(package_root)
    except ValueError:
        shown_path = path
    return _SourceListing(name, f"{name} · {shown_path}, line {first}", source_text(obj, docstring))


def show_source(obj: object, docstring: bool = False) -> None:
    """Display the live source of ``obj``, highlighted in a notebook (printed in a script).

    Every notebook calls it right before it starts a ``helpers`` worker in another process.
    Docstrings and their doctests are left out; ``docstring=True`` shows them where one teaches.

    >>> show_source(_source_listing)  # doctest: +ELLIPSIS
    # helpers.source._source_listing · helpers/source.py, line ...
    def _source_listing(obj: object, docstring: bool = False) -> _SourceListing:
        _, first = _lines_and_start(obj)
    ...
    """
    _display(_source_listing(obj, docstring))


def show_script(path: str | Path) -> None:
    """Display a script file, highlighted in a notebook (printed elsewhere): a pattern to copy.

    Each notebook ends its main path by showing its pattern script (``patterns/NN_*.py``) this way
    and then running it as a script, so what is shown is the file that runs.

    >>> show_script(Path(__file__).parent / "__init__.py")  # doctest: +ELLIPSIS
    # helpers/__init__.py
    ...
    """
    path = Path(path).resolve()
    package_root = Path(__file__).resolve().parent.parent
    try:
        shown_path = path.relative_to(package_root)
    except ValueError:
        shown_path = path
    _display(_SourceListing(path.name, str(shown_path), path.read_text()))


def _display(listing: _SourceListing) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python without IPython
        print(listing)
        return
    if get_ipython() is None:
        print(listing)
    else:
        display(listing)
