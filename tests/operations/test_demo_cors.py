"""The demo's API answers the front end the emailed links point to (http://localhost:3000)
across origins, unless the developer names other origins."""

import pytest
from django.core.management import call_command

from operations.management.commands import demo


class _Ending:
    died = None
    returncode = 0
    exit_code = 0


@pytest.fixture
def children_environment(monkeypatch, settings):
    """The environment `manage.py demo` would start its processes with (none is started)."""
    settings.DEBUG = True
    captured: dict[str, str] = {}

    class Supervisor:
        def __init__(self, processes, *, out, env, label):
            captured.update(env)

        def run(self):
            return _Ending()

    monkeypatch.setattr(demo, "Supervisor", Supervisor)
    monkeypatch.setattr(demo, "_check_port", lambda port: None)
    monkeypatch.setattr(demo, "_receiver_port", lambda wanted, port: (wanted, ""))
    return captured


@pytest.mark.django_db(transaction=True)
def test_the_demo_allows_the_front_end_origin(children_environment, monkeypatch, capsys):
    monkeypatch.delenv("CORS_ALLOWED_ORIGINS", raising=False)

    call_command("demo", port=18000)

    assert children_environment["CORS_ALLOWED_ORIGINS"] == "http://localhost:3000"


@pytest.mark.django_db(transaction=True)
def test_the_developer_may_name_other_origins(children_environment, monkeypatch, capsys):
    monkeypatch.setenv("CORS_ALLOWED_ORIGINS", "http://localhost:5173")

    call_command("demo", port=18000)

    assert children_environment["CORS_ALLOWED_ORIGINS"] == "http://localhost:5173"
