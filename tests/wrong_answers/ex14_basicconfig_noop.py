"""Wrong: basicConfig does nothing in a fork worker, whose root logger already has the parent's handlers."""

import logging
import logging.handlers


def configure_worker_logging(queue) -> None:
    logging.basicConfig(level=logging.INFO, handlers=[logging.handlers.QueueHandler(queue)])
