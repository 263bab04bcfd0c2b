"""Log lines: the library's loggers, the two line formats, and the entry points' set-up.

Library modules log under ``actae`` with fields in ``extra`` (``worker``, ``run_id``) and
never add handlers; only the entry points do, through :func:`configure` (docs/logging.md).
An object given ``out=`` (``Worker``, ``Projector``, the drill) also writes its own lines
there, whatever logging is configured: :class:`Lines`.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

ROOT = "actae"
"""The logger every Actae logger is a child of."""

_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",  # Python 3.12 and later
}


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a call added to ``record`` with ``extra`` (``worker``, ``run_id``, ...)."""
    return {
        name: value
        for name, value in vars(record).items()
        if name not in _RECORD_ATTRIBUTES and not name.startswith("_")
    }


def timestamp(record: logging.LogRecord) -> str:
    """When ``record`` was made: ISO 8601 in UTC, to the millisecond (``...T12:00:00.123Z``)."""
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (an exception's traceback under ``exception``)."""
        entry: dict[str, Any] = {
            "time": timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in fields_of(record).items():
            entry.setdefault(name, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """The message first (it reads and greps as it always did), then when, how bad, who.

    ``caught up: 3 events, position 9  [2026-01-05T12:00:00.123Z INFO actae.cli worker=w1]``
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (an exception's traceback follows it)."""
        context = " ".join(
            [
                timestamp(record),
                record.levelname,
                record.name,
                *(f"{name}={value}" for name, value in fields_of(record).items()),
            ]
        )
        line = f"{record.getMessage()}  [{context}]"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class _EntryPointHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure` installs (and replaces when called again)."""


def configure(*, json: bool = False, **fields: object) -> logging.Handler:
    """Write the ``actae`` loggers' lines (INFO and up) to stderr; for entry points.

    ``json`` writes one JSON object per line, else text. ``fields`` go on every line that
    lacks them (``worker=name``). A second call replaces the first one's handler.
    """
    logger = logging.getLogger(ROOT)
    for handler in list(logger.handlers):
        if isinstance(handler, _EntryPointHandler):
            logger.removeHandler(handler)
    installed = _EntryPointHandler(sys.stderr)
    installed.setFormatter(JsonFormatter() if json else TextFormatter())
    if fields:

        def defaults(record: logging.LogRecord) -> bool:
            for name, value in fields.items():
                if not hasattr(record, name):
                    setattr(record, name, value)
            return True

        installed.addFilter(defaults)
    logger.addHandler(installed)
    logger.setLevel(logging.INFO)
    return installed


class Lines:
    """One object's log lines: to its logger with the object's fields, and to ``out`` if given.

    ``out`` gets every line whatever logging lets through, in ``formatter``'s form (plain
    text by default); with ``out`` and no handler anywhere, Python's last resort is not used.
    """

    def __init__(
        self,
        logger: logging.Logger,
        out: TextIO | None = None,
        *,
        formatter: logging.Formatter | None = None,
        **fields: object,
    ) -> None:
        self.logger = logger
        self.fields = fields
        self._out: logging.Handler | None = None
        if out is not None:
            self._out = logging.StreamHandler(out)
            self._out.setFormatter(formatter or logging.Formatter("%(message)s"))

    def say(self, message: str, *, level: int = logging.INFO, **fields: object) -> None:
        """Log ``message`` with this object's fields and ``fields`` (those not None)."""
        extra = {
            name: value if isinstance(value, str | int | float) else str(value)
            for name, value in {**self.fields, **fields}.items()
            if value is not None
        }
        if self._out is None:
            self.logger.log(level, message, extra=extra, stacklevel=2)
            return
        path, line, function, _ = self.logger.findCaller(stacklevel=2)
        record = self.logger.makeRecord(
            self.logger.name, level, path, line, message, (), None, function, extra
        )
        if self.logger.isEnabledFor(level) and self.logger.hasHandlers():
            self.logger.handle(record)
        self._out.handle(record)
