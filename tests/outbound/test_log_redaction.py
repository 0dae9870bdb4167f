"""A webhook URL's query string (often a secret) is in no log record at any level: not in
urllib3's DEBUG request lines, not in our messages, not in tracebacks (the README's
"Configuration": LOG_LEVEL)."""

import logging
from datetime import UTC, datetime

import pytest
import requests

from dbtools.logfmt import JsonFormatter, LogfmtFormatter
from delivery.scheduler.tick import run_tick
from outbound.redaction import redact_url_queries
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.http_server import Reply, recording_server

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SECRET = "s3cret"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("https://h.example/hook?token=s3cret", "https://h.example/hook?[redacted]"),
        (
            'http://127.0.0.1:8080 "POST /hook?token=s3cret&a=1 HTTP/1.1" 200 2',
            'http://127.0.0.1:8080 "POST /hook?[redacted] HTTP/1.1" 200 2',
        ),
        (
            "Max retries exceeded with url: /in?key=s3cret (Caused by x)",
            "Max retries exceeded with url: /in?[redacted] (Caused by x)",
        ),
        ("'https://h/?s3cret'", "'https://h/?[redacted]'"),
        ("is it due? yes", "is it due? yes"),
        ("a/b?c stays, 50% of /x stays", "a/b?c stays, 50% of /x stays"),
    ],
)
def test_query_strings_of_urls_and_paths_are_redacted(text, redacted):
    assert redact_url_queries(text) == redacted


def _written(record: logging.LogRecord) -> str:
    """Everything a handler could write of `record`: message, traceback, both formats."""
    return "\n".join(
        [record.getMessage(), record.exc_text or ""]
        + [formatter.format(record) for formatter in (LogfmtFormatter(), JsonFormatter())]
    )


@pytest.fixture
def debug_logs(caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="urllib3")
    return caplog


def test_a_delivery_at_debug_logs_no_query_string(alice, settings, debug_logs):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    tenant = alice.tenant
    with recording_server(lambda request: Reply(500)) as server:
        url = f"{server.url}/hook?token={SECRET}"
        make_notification(
            tenant=tenant, endpoint=make_endpoint(tenant=tenant, url=url), next_fire_at=NOW
        )

        run_tick(now=NOW)

        [request] = server.received()
    assert request.path == f"/hook?token={SECRET}"  # the receiver still gets its URL
    request_lines = [r for r in debug_logs.records if r.name.startswith("urllib3")]
    assert any('"POST /hook?[redacted] HTTP/1.1" 500' in r.getMessage() for r in request_lines)
    assert not [r for r in debug_logs.records if SECRET in _written(r)]


def test_a_traceback_naming_the_url_is_logged_redacted(debug_logs):
    logger = logging.getLogger("delivery.transports.webhook")
    try:
        raise requests.ConnectionError(f"Max retries exceeded with url: /hook?token={SECRET}")
    except requests.ConnectionError:
        logger.exception("delivery to %s failed", f"https://h.example/hook?token={SECRET}")

    [record] = debug_logs.records
    assert record.getMessage() == "delivery to https://h.example/hook?[redacted] failed"
    assert "url: /hook?[redacted]" in record.exc_text
    assert SECRET not in _written(record)
