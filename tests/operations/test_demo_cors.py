"""The demo's API answers the front end the emailed links point to (http://localhost:3000),
and the same page under the address the demo prints (http://127.0.0.1:3000), across origins,
unless the developer names other origins; the links follow the front end's
port; the per-address signup and signin limits are raised for a developer trying the pages."""

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
    monkeypatch.setattr(demo, "_front_end_port", lambda wanted, taken: (wanted, ""))
    return captured


@pytest.mark.django_db(transaction=True)
def test_the_demo_allows_the_front_end_origin(children_environment, monkeypatch, capsys):
    monkeypatch.delenv("CORS_ALLOWED_ORIGINS", raising=False)

    call_command("demo", port=18000)

    assert children_environment["CORS_ALLOWED_ORIGINS"] == (
        "http://localhost:3000,http://127.0.0.1:3000"
    )


@pytest.mark.django_db(transaction=True)
def test_the_developer_may_name_other_origins(children_environment, monkeypatch, capsys):
    monkeypatch.setenv("CORS_ALLOWED_ORIGINS", "http://localhost:5173")

    call_command("demo", port=18000)

    assert children_environment["CORS_ALLOWED_ORIGINS"] == "http://localhost:5173"


@pytest.mark.django_db(transaction=True)
def test_the_emailed_links_open_the_front_end_on_its_port(
    children_environment, monkeypatch, capsys
):
    for name in (
        "CORS_ALLOWED_ORIGINS",
        "SIGNUP_VERIFY_URL",
        "INVITATION_ACCEPT_URL",
        "SIGNIN_URL",
    ):
        monkeypatch.delenv(name, raising=False)

    call_command("demo", port=18000, frontend_port=13000)

    assert children_environment["CORS_ALLOWED_ORIGINS"] == (
        "http://localhost:13000,http://127.0.0.1:13000"
    )
    assert children_environment["SIGNUP_VERIFY_URL"] == (
        "http://localhost:13000/signup/verify?token={token}"
    )
    assert children_environment["INVITATION_ACCEPT_URL"] == (
        "http://localhost:13000/invitations/accept?token={token}"
    )
    assert (
        children_environment["SIGNIN_URL"] == "http://localhost:13000/signin/verify?token={token}"
    )
    assert (
        "Front end: http://localhost:13000/?api=http://localhost:18000 " in capsys.readouterr().out
    )


@pytest.mark.django_db(transaction=True)
def test_the_signup_and_signin_limits_are_raised_unless_the_developer_set_them(
    children_environment, monkeypatch, capsys
):
    monkeypatch.delenv("SIGNUP_RATE_IP", raising=False)
    monkeypatch.setenv("SIGNIN_RATE_IP", "3/hour")

    call_command("demo", port=18000)

    assert children_environment["SIGNUP_RATE_IP"] == "100/hour"
    assert children_environment["SIGNIN_RATE_IP"] == "3/hour"
