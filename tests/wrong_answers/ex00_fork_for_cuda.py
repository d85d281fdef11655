"""Wrong: picks fork for the CUDA scenario (everything else right)."""

from solutions.ex00_choose_tool import choose_tool as _right


def choose_tool(scenario: str) -> str:
    return "fork" if "CUDA kernels" in scenario else _right(scenario)
