"""How our processes print their log records: our own progress lines as plain text
(``epoch 1: loss 0.2534 test accuracy 0.9300 (0.68 s)``), every other record, and our
warnings, with its level and source."""

from __future__ import annotations

import logging

_SOURCED = "%(levelname)s %(name)s: %(message)s"


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ours = record.name == "__main__" or record.name.startswith("mlflow_dlaas")
        if ours and record.levelno == logging.INFO:
            return record.getMessage()
        return super().format(record)


def configure_console_logging() -> None:
    """INFO and above to stderr, in the console format (once a process)."""
    handler = logging.StreamHandler()
    handler.setFormatter(_ConsoleFormatter(_SOURCED))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
