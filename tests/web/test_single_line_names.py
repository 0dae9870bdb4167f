"""A name that can reach an e-mail's Subject (a tenant's, a project's) refuses every line break
and NUL (400, nothing stored), and a name stored before the check is made single-line where
it enters a header, so the e-mail still goes out."""

import uuid

import pytest
from django.core import mail
from django.core.management import call_command

from projects.models import Project
from tenancy.models import Tenant
from web.fields import LINE_BREAK_RULE, single_line

pytestmark = pytest.mark.django_db

# Inside the name: a break at either end is trimmed away with the white space around it.
BROKEN = [
    "Team\r\nBcc: all@example.com",
    "Te\nam",
    "Te\ram",
    "Team\u2028Bcc: all@example.com",
    "Te\u2029am",
    "Te\x85am",
    "Te\x0bam",
    "Te\x0cam",
]


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


@pytest.mark.parametrize("name", BROKEN)
def test_a_tenant_name_with_a_line_break_is_400_and_the_name_stays(alice, name):
    response = alice.client().patch("/v1/tenant", {"name": name}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"name": [LINE_BREAK_RULE]}
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Tenant A"


@pytest.mark.parametrize("name", BROKEN)
def test_a_project_name_with_a_line_break_is_400_at_create_and_rename(alice, name):
    created = alice.client().post("/v1/projects", {"name": name}, format="json", headers=_key())
    project = Project.objects.create(tenant=alice.tenant, name="Kept")
    renamed = alice.client().patch(f"/v1/projects/{project.id}", {"name": name}, format="json")

    assert (created.status_code, renamed.status_code) == (400, 400)
    assert created.json()["errors"] == {"name": [LINE_BREAK_RULE]}
    assert list(Project.objects.values_list("name", flat=True)) == ["Kept"]


def test_a_name_stored_with_line_breaks_reaches_the_subject_on_one_line_and_is_sent(
    alice, local_mail
):
    Tenant.objects.filter(pk=alice.tenant.pk).update(name="Evil\r\nBcc: all@example.com\u2028")

    invited = alice.client().post(
        "/v1/invitations",
        {"email": "dana@example.com", "role": "member"},
        format="json",
        headers=_key(),
    )
    call_command("run_tick")

    assert invited.status_code == 201
    [sent] = mail.outbox
    assert sent.subject == 'You are invited to the team "Evil  Bcc: all@example.com " on Tickwork'
    assert sent.to == ["dana@example.com"] and not sent.bcc


def test_a_name_with_nul_is_400_too(alice):
    response = alice.client().patch("/v1/tenant", {"name": "Te\x00am"}, format="json")

    assert response.status_code == 400
    assert Tenant.objects.get(pk=alice.tenant.pk).name == "Tenant A"


def test_single_line_replaces_each_break_with_a_space():
    assert single_line("a\r\nb\u2028c\x00d") == "a  b c d"
