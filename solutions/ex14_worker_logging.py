"""Reference solution of exercise 14: the worker's root logger gets one QueueHandler, and its level."""

from __future__ import annotations

import logging
import logging.handlers


def configure_worker_logging(queue) -> None:
    root = logging.getLogger()
    root.handlers = [logging.handlers.QueueHandler(queue)]  # replaces what a fork child inherited
    root.setLevel(logging.INFO)  # a spawn child starts at WARNING
