"""Log set-up of every process: level and format (`text` or one JSON object per line) from settings.

A line about a job carries its id as `job_id`: pass `extra={"job_id": job_id}`, or run the code
inside `job_context(job_id)` (a context variable, so concurrent requests never mix them up).
The text of a job is never logged above DEBUG.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
# Attributes every LogRecord has: whatever else a record holds came from `extra=` and is logged.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}

# The fields every JSON line has (and an extra of the same name cannot replace).
_FIXED = frozenset({"ts", "level", "logger", "pid", "message", "exception", "stack"})

_job_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("job_id", default=None)


@contextlib.contextmanager
def job_context(job_id: str) -> Iterator[None]:
    """Every line logged inside (in this task or thread) names `job_id`."""
    token = _job_id.set(job_id)
    try:
        yield
    finally:
        _job_id.reset(token)


class JobIdFilter(logging.Filter):
    """Adds the context's job id to records that do not name one already."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "job_id"):
            job_id = _job_id.get()
            if job_id is not None:
                record.job_id = job_id
        return True


class DemoteToDebug(logging.Filter):
    """For a library's logger: its lines that quote a job's text become DEBUG lines (dropped
    unless DEBUG is on). ChatTTS logs the characters it drops and the homophones it replaces."""

    def __init__(self, *starts: str) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not str(record.msg).startswith(self.starts):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


class TextFormatter(logging.Formatter):
    """The classic line, with ` [job_id=...]` when the record is about a job."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        job_id = getattr(record, "job_id", None)
        return f"{line} [job_id={job_id}]" if job_id else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, pid, message, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc.setdefault(key, value)  # an extra never replaces a field above
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        try:
            return orjson.dumps(doc, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # what orjson cannot write (integers past 64 bits): as text
            return orjson.dumps({k: v if k in _FIXED else repr(v) for k, v in doc.items()}).decode()


def configure(level: str, fmt: str) -> None:
    """Replace the root logger's handlers with one stderr handler of this level and format."""
    if fmt not in FORMATS:
        raise ValueError(f"CHATTTS_LOG_FORMAT={fmt!r}: choose {' or '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(JobIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
