"""The projects admin: no project without its tenant and job, no status set by hand."""

import re

from django.urls import reverse

from projects.models import Project, ProjectStatus
from tests.projects.factories import make_project


def test_the_admin_cannot_add_a_project(admin_client, alice):
    page = admin_client.get(reverse("admin:projects_project_add"))
    posted = admin_client.post(reverse("admin:projects_project_add"), {"name": "Orphan"})
    changelist = admin_client.get(reverse("admin:projects_project_changelist"))

    assert (page.status_code, posted.status_code) == (403, 403)
    assert not Project.objects.filter(name="Orphan").exists()
    assert changelist.status_code == 200
    assert reverse("admin:projects_project_add") not in changelist.text


def hidden_fields(page) -> dict[str, str]:
    """The change form's hidden inputs (its jobs inline's management form and ids)."""
    found = re.findall(r'<input type="hidden" name="(jobs-[^"]+)" value="([^"]*)"', page.text)
    return dict(found)


def test_a_change_cannot_set_the_status_by_hand(admin_client, alice):
    project = make_project(alice, name="Atlas")
    change = reverse("admin:projects_project_change", args=[project.pk])

    page = admin_client.get(change)
    saved = admin_client.post(
        change, {**hidden_fields(page), "name": "Atlas 2", "status": ProjectStatus.ACTIVE}
    )

    assert page.status_code == 200
    assert 'name="status"' not in page.text
    assert saved.status_code == 302
    project.refresh_from_db()
    assert (project.name, project.status) == ("Atlas 2", ProjectStatus.PROVISIONING)
