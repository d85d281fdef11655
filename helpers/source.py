"""Show the live source of a function or class in a notebook: the code you read is the code that runs.

Every worker a notebook starts in another process lives in ``helpers`` (spawn and forkserver
children import it by module and name). ``show_source`` displays that function's source, read from
the module at run time, right before the notebook runs it, so the listing can never drift from
what executes. ``tests/test_shown_code.py`` checks that every notebook does this.

Example::

    >>> from helpers.source import show_source
    >>> show_source(show_source)  # doctest: +ELLIPSIS
    # helpers.source.show_source · helpers/source.py, line ...
    def show_source(obj: object) -> None:
    ...
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["show_source"]


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


def _source_listing(obj: object) -> _SourceListing:
    """The live source of ``obj`` (a function, class or method) with its module, file and first line.

    Used by ``show_source`` in every notebook that starts a worker.

    >>> _source_listing(_SourceListing).name
    'helpers.source._SourceListing'
    """
    target = obj
    try:
        lines, first = inspect.getsourcelines(target)
    except (OSError, TypeError) as error:
        raise TypeError(
            f"cannot show the source of {obj!r}: show_source takes a function or class defined in a "
            "Python file (a helpers module), not a builtin or an object made at run time"
        ) from error
    name = f"{target.__module__}.{target.__qualname__}"
    path = Path(inspect.getsourcefile(target) or "?")
    package_root = Path(__file__).resolve().parent.parent
    try:
        shown_path = path.resolve().relative_to(package_root)
    except ValueError:
        shown_path = path
    return _SourceListing(name, f"{name} · {shown_path}, line {first}", textwrap.dedent("".join(lines)))


def show_source(obj: object) -> None:
    """Display the live source of ``obj``, highlighted in a notebook (printed in a script).

    Every notebook calls it right before it starts a ``helpers`` worker in another process (notebook
    00 section 1 first, then notebooks 01-09 wherever a worker is shown).

    >>> show_source(_source_listing)  # doctest: +ELLIPSIS
    # helpers.source._source_listing · helpers/source.py, line ...
    def _source_listing(obj: object) -> _SourceListing:
    ...
    """
    listing = _source_listing(obj)
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
