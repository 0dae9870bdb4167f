"""One-line structured records: the workers' summary lines and, with LOG_FORMAT=json, every
log record, so log shippers and `grep` alike pick the numbers out without a custom parser.

LOG_FORMAT=logfmt (the default) writes `key=value` lines; LOG_FORMAT=json writes one JSON
object per line."""

import json
import logging
from collections.abc import Mapping

from django.conf import settings


def logfmt_line(event: str, values: Mapping[str, object]) -> str:
    """`event=<event> k1=v1 …` (floats to three decimals), or the same as one JSON object
    under LOG_FORMAT=json. Values are our own counters and names, never client input, so
    they hold no spaces or quotes to escape."""
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in values.items()}
    if settings.LOG_FORMAT == "json":
        return json.dumps({"event": event, **rounded})
    parts = [f"event={event}"]
    parts.extend(
        f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
        for key, value in rounded.items()
    )
    return " ".join(parts)


def _traceback(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    # exc_text when set: a traceback prepared (redacted) when the record was made.
    if record.exc_text:
        return record.exc_text
    return formatter.formatException(record.exc_info) if record.exc_info else ""


class LogfmtFormatter(logging.Formatter):
    """`time=… level=… logger=… msg="…"`, the message quoted and escaped as a JSON string;
    a traceback, when there is one, follows on the next lines for the humans reading it."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"time={self.formatTime(record, '%Y-%m-%dT%H:%M:%S%z')} level={record.levelname} "
            f"logger={record.name} msg={json.dumps(record.getMessage())}"
        )
        if record.exc_info:
            line += "\n" + _traceback(self, record)
        return line


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: time, level, logger, message, and the traceback
    (as one string) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = _traceback(self, record)
        return json.dumps(entry)


class ServerErrorsOnly(logging.Filter):
    """For `django.request`: only the answers that are the server's fault (5xx). A 4xx is
    already one line of the access log (gunicorn's, runserver's `django.server`); Django's
    own "Not Found: …" warning would log it a second time."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        return not isinstance(status, int) or status >= 500
