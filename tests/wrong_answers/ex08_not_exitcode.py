"""Wrong: `if not exitcode` lumps None (still running) together with 0."""

import signal


def explain_exitcode(exitcode: int | None) -> str:
    if not exitcode:
        return "ok"
    if exitcode > 0:
        return f"error {exitcode}"
    return f"killed by {signal.Signals(-exitcode).name}"
