"""Wrong: a QueueHandler, but the level stays WARNING in a spawn worker: INFO records are dropped."""

import logging
import logging.handlers


def configure_worker_logging(queue) -> None:
    logging.getLogger().handlers = [logging.handlers.QueueHandler(queue)]
