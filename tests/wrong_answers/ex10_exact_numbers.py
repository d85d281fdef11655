"""Wrong: looks the message up word for word, numbers included (ports and pids vary)."""

from helpers.solutions.ex10_diagnose import diagnose as _right

from helpers.field_guide import ERROR_INDEX

KNOWN = {entry.message: entry.case for entry in ERROR_INDEX}


def diagnose(message: str) -> str:
    return (
        KNOWN.get(message.strip().splitlines()[-1], "worker_raised")
        if len(message) < 300
        else _right(message)
    )
