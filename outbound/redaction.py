"""URL query strings out of every log record, at every level and from every logger.

A webhook URL's query string is often a secret (`?token=…`), and at DEBUG urllib3 logs each
request line ("POST /hook?token=… HTTP/1.1") while requests' exceptions embed the URL in
their message. Redacting where records are made, rather than in one handler, covers every
handler (the console, a test's capture, one an operator adds) and every traceback.
"""

import logging
import re
from typing import Any

REDACTED = "[redacted]"
# A query string after a URL (`scheme://…`) or after an absolute path that starts a word
# (urllib3's request line, requests' "url: /path?…").
_QUERY = re.compile(
    r"(?P<target>(?:\b[a-z][a-z0-9+.-]*://|(?<![\w.~/%:-])/)[^\s?#\"'<>]*)\?[^\s#\"'<>]*",
    re.IGNORECASE,
)


def redact_url_queries(text: str) -> str:
    """`text` with the query string of every URL or path replaced by [redacted]."""
    return _QUERY.sub(rf"\g<target>?{REDACTED}", text)


_ERROR_MAX = 500
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")


def safe_error_text(text: str) -> str:
    """`text` without URLs (an origin names a host), IP addresses or e-mail addresses, cut
    to 500 characters: what a tenant may read of an error (a job's `last_error`, the
    delivery log's `error`). An internal service's address is none of its business."""
    text = _URL.sub("<url>", text)
    text = _IPV4.sub("<ip>", text)
    text = _EMAIL.sub("<address>", text)
    return text[:_ERROR_MAX]


def install_log_redaction() -> None:
    """Make every log record of this process carry its message and traceback redacted.
    Idempotent: installing twice wraps the record factory once."""
    current = logging.getLogRecordFactory()
    if getattr(current, "redacts_url_queries", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = current(*args, **kwargs)
        _redact(record)
        return record

    factory.redacts_url_queries = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def _redact(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed call is logging's to report, when it formats the record
        return
    redacted = redact_url_queries(message)
    if redacted != message:
        record.msg, record.args = redacted, None
    if record.exc_info and record.exc_info[0] is not None:
        # Formatters use exc_text when it is set, so the traceback is written redacted.
        record.exc_text = redact_url_queries(logging.Formatter().formatException(record.exc_info))
