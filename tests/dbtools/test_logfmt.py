"""Structured output: summary lines and log records, as logfmt (default) or JSON."""

import json
import logging
import sys

from dbtools.logfmt import JsonFormatter, LogfmtFormatter, logfmt_line


def record(message: str, *args: object, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("tickwork.test", logging.WARNING, __file__, 1, message, args, exc_info)


def test_summary_line_is_logfmt_by_default(settings):
    settings.LOG_FORMAT = "logfmt"

    line = logfmt_line("run_tick", {"claimed": 3, "fenced_out": 0, "duration_s": 0.12345})

    assert line == "event=run_tick claimed=3 fenced_out=0 duration_s=0.123"


def test_summary_line_is_one_json_object_under_log_format_json(settings):
    settings.LOG_FORMAT = "json"

    line = logfmt_line("consume_jobs", {"claimed": 1, "duration_s": 0.5})

    assert json.loads(line) == {"event": "consume_jobs", "claimed": 1, "duration_s": 0.5}


def test_logfmt_records_quote_and_escape_the_message():
    line = LogfmtFormatter().format(record('fenced out on %s for "row" %s', "delete", 7))

    assert line.endswith(
        ' level=WARNING logger=tickwork.test msg="fenced out on delete for \\"row\\" 7"'
    )
    assert line.startswith("time=")


def test_json_records_are_one_line_with_the_traceback_inside():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failing = record("tick failed", exc_info=sys.exc_info())

    line = JsonFormatter().format(failing)

    assert "\n" not in line
    entry = json.loads(line)
    assert (entry["level"], entry["logger"], entry["message"]) == (
        "WARNING",
        "tickwork.test",
        "tick failed",
    )
    assert "RuntimeError: boom" in entry["exception"]
