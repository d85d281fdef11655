"""Wrong: treats a negative exit code as an ordinary error status."""


def explain_exitcode(exitcode: int | None) -> str:
    if exitcode is None:
        return "running"
    return "ok" if exitcode == 0 else f"error {exitcode}"
