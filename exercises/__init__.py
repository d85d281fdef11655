"""Exercise starter files: edit these, then run the matching checker in ``helpers.checkers``.

Each ``exNN_*.py`` file holds a docstring with the task and function stubs that raise
``NotImplementedError``. Worker code must live in an importable file like these (not in a notebook
cell), because spawn and forkserver children re-import it by module and name. Reference solutions,
with the same names, are in the ``solutions`` package: try first, peek later.
"""
