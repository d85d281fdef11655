"""Wrong: basicConfig(force=True) gives the QueueHandler a formatter: records reach the queue formatted."""

import logging
import logging.handlers


def configure_worker_logging(queue) -> None:
    logging.basicConfig(level=logging.INFO, handlers=[logging.handlers.QueueHandler(queue)], force=True)
