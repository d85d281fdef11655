"""Exercise 14 (notebook 14, launches, ranks and signals): logs from every worker.

Write ``configure_worker_logging(queue)``, the first call in a worker process. Afterwards every
record of level INFO and above that the worker logs (with any logger: ``logging.getLogger("train")``)
goes onto ``queue`` exactly once, as a ``logging.handlers.QueueHandler`` puts it there, and DEBUG
records do not. It must work whatever the start method:

- a spawn or forkserver worker starts with a root logger that has no handler and the level WARNING
  ([14 · Log lines missing](../notebooks/14_field_guide_launches_and_ranks.ipynb#log-lines-missing-in-spawn-workers));
- a fork worker starts with the parent's handlers and level: a record it logs would also be
  written by them, from the worker, past the parent's listener.

The parent reads the queue with one ``logging.handlers.QueueListener``
([08 · Appendix D](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-d-logs-from-children)).

Check with::

    from helpers.checkers import check_ex14; check_ex14()
"""

from __future__ import annotations

import logging  # noqa: F401  (you will need it)
import logging.handlers  # noqa: F401


def configure_worker_logging(queue) -> None:
    """Send this process's log records of level INFO and above to ``queue``, and nowhere else."""
    raise NotImplementedError("exercise 14: write configure_worker_logging")
