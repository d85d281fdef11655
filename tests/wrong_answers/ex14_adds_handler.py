"""Wrong: adds a QueueHandler next to what a fork worker inherited: the parent's handlers write too."""

import logging
import logging.handlers


def configure_worker_logging(queue) -> None:
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(queue))
    root.setLevel(logging.INFO)
