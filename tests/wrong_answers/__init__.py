"""Typical wrong answers to the exercises: the checker tests prove each one is rejected with the right hint.

Each module is named ``exNN_<mistake>`` and has the names of the matching starter file.
"""
