"""Every problem type is spelled one way (kebab-case) and titled with the problem it names."""

import re
from pathlib import Path

import pytest
from django.apps import apps

from web.errors import DomainError
from web.problems import _TYPES, problem_body

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ROOT = Path(__file__).resolve().parents[2]
_LITERAL_KIND = re.compile(r"""\bkind\s*=\s*["']([^"']+)["']""")


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _source_files():
    for config in apps.get_app_configs():
        path = Path(config.path)
        if path.is_relative_to(ROOT):
            yield from (p for p in path.rglob("*.py") if "migrations" not in p.parts)
    yield from (ROOT / "web").rglob("*.py")


def test_every_domain_error_kind_is_kebab_case_and_titled():
    classes = list(_subclasses(DomainError))

    assert len(classes) > 10
    for cls in classes:
        assert KEBAB.match(cls.kind), (cls, cls.kind)
        assert cls.title, cls


def test_every_kind_written_in_the_code_is_kebab_case():
    kinds = {
        (path.name, kind)
        for path in _source_files()
        for kind in _LITERAL_KIND.findall(path.read_text())
        if kind != "provision"  # a job kind, not a problem type
    }

    assert kinds
    assert [found for found in kinds if not KEBAB.match(found[1])] == []


@pytest.mark.parametrize("status", sorted(_TYPES))
def test_every_status_problem_type_is_kebab_case(status):
    body = problem_body(status, "detail")

    assert KEBAB.match(body["type"].rsplit("/", 1)[1])
    assert body["title"]


def test_a_renamed_problem_answers_its_new_type_and_title(alice):
    response = alice.client().post(
        "/v1/notifications",
        {
            "channels": ["email"],
            "email_to": ["a@example.com"],
            "subject": "S",
            "body": "B",
            "rrule": "FREQ=MINUTELY;COUNT=10000;BYHOUR=5;BYMINUTE=3",
            "fire_at": "1970-01-01T00:00:00Z",
        },
        format="json",
        headers={"Idempotency-Key": "k"},
    )

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "https://tickwork.dev/problems/rrule-too-costly"
    assert body["title"] == "Recurrence rule too costly"
