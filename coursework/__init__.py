"""A sample assignment an instructor can hand out: see coursework/README.md.

Run it as a plain script: ``python -m helpers.coursework.digits_search``.
"""
