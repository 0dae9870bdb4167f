"""Every problem type is spelled one way (kebab-case) and has one title, the one
web.problem_types gives it, wherever it is raised."""

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps

from web.errors import DomainError
from web.problem_types import TITLES
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


def test_every_domain_error_kind_is_kebab_case_and_titled_by_the_registry():
    classes = [DomainError, *_subclasses(DomainError)]

    assert len(classes) > 10
    for cls in classes:
        assert KEBAB.match(cls.kind), (cls, cls.kind)
        assert cls.kind in TITLES, cls


def test_no_problem_writes_a_title_of_its_own():
    """A title written where an error is raised could differ from its type's: none is,
    neither as an error class's attribute nor as an argument."""
    own_titles = []
    for path in _source_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {
                    target.id
                    for statement in node.body
                    if isinstance(statement, ast.Assign | ast.AnnAssign)
                    for target in (
                        statement.targets
                        if isinstance(statement, ast.Assign)
                        else [statement.target]
                    )
                    if isinstance(target, ast.Name)
                }
                if {"kind", "title"} <= names:
                    own_titles.append((path.name, node.name))
            if (
                isinstance(node, ast.Call)
                and any(keyword.arg == "kind" for keyword in node.keywords)
                and any(keyword.arg == "title" for keyword in node.keywords)
            ):
                own_titles.append((path.name, node.lineno))

    assert own_titles == []


def test_every_kind_written_in_the_code_is_kebab_case():
    kinds = {
        (path.name, kind)
        for path in _source_files()
        for kind in _LITERAL_KIND.findall(path.read_text())
        if kind != "provision"  # a job kind, not a problem type
    }

    assert kinds
    assert [found for found in kinds if not KEBAB.match(found[1])] == []
    assert [found for found in kinds if found[1] not in TITLES] == []


def test_every_registered_type_is_documented_and_every_documented_one_registered():
    api = (ROOT / "docs" / "api.md").read_text()
    table = api[api.index("### Problem types") : api.index("## Verifying a webhook signature")]
    documented = {
        kind
        for row in table.splitlines()
        if row.startswith("| `")
        for kind in re.findall(r"`([a-z0-9-]+)`", row.split("|")[1])
    }
    # The families' own kinds: every error of theirs the API raises names a type of its own.
    families = {"domain-error", "exhausted"}

    assert documented == TITLES.keys() - families


@pytest.mark.parametrize("kind", sorted(TITLES))
def test_a_problem_of_any_status_is_titled_by_its_type(kind):
    titles = {problem_body(status, "detail", kind=kind)["title"] for status in (400, 403, 409)}

    assert titles == {TITLES[kind]}


@pytest.mark.parametrize("status", sorted(_TYPES))
def test_every_status_problem_type_is_kebab_case_and_registered(status):
    body = problem_body(status, "detail")

    kind = body["type"].rsplit("/", 1)[1]
    assert KEBAB.match(kind)
    assert body["title"] == TITLES[kind]


def test_forbidden_has_one_title_from_a_permission_class_and_from_a_service(alice, bob):
    """A member on an owner's route (DRF's permission check) and a member removing an owner
    (the service's Forbidden) answer the same type with the same title."""
    by_permission = bob.client().post(
        "/v1/event-types",
        {"name": "invoice.paid"},
        format="json",
        headers={"Idempotency-Key": "k"},
    )
    by_service = bob.client().delete(f"/v1/members/{alice.user.id}")

    assert (by_permission.status_code, by_service.status_code) == (403, 403)
    for response in (by_permission, by_service):
        body = response.json()
        assert (body["type"], body["title"]) == (
            "https://tickwork.dev/problems/forbidden",
            "Forbidden",
        )


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
