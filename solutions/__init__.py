"""Reference solutions to the exercises in ``exercises`` (same module and function names).

``helpers.checkers.check_exNN("helpers.solutions.exNN_...")`` checks a solution exactly as it checks the
learner's file.
"""
