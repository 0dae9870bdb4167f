"""Every 4xx is logged once (the access log's line), not a second time by django.request;
a 5xx still is."""

import logging

from dbtools.logfmt import ServerErrorsOnly


def test_a_4xx_adds_no_django_request_line(alice, caplog):
    caplog.set_level(logging.DEBUG)
    client = alice.client()

    assert client.get(f"/v1/projects/{'0' * 8}-0000-4000-8000-{'0' * 12}").status_code == 404
    assert client.get("/v1/notifications?nope=1").status_code == 400
    assert client.delete("/v1/projects").status_code == 405

    assert [r for r in caplog.records if r.name == "django.request"] == []


def test_a_5xx_is_still_logged():
    keep = ServerErrorsOnly()

    def record(status):
        made = logging.makeLogRecord({"name": "django.request", "msg": "x"})
        made.status_code = status
        return made

    assert keep.filter(record(500)) and keep.filter(record(503))
    assert not keep.filter(record(404)) and not keep.filter(record(400))
    assert keep.filter(logging.makeLogRecord({"msg": "no status"}))
