"""Admin: token list without secrets, the revoke action; tenants and projects render."""

import pytest

from tenancy.models import ApiToken
from tests.delivery.factories import make_endpoint
from tests.projects.factories import make_project


def test_token_list_shows_prefix_but_never_digest_or_secret(admin_client, alice):
    token = ApiToken.objects.get(user=alice.user)

    response = admin_client.get("/admin/tenancy/apitoken/")

    html = response.content.decode()
    assert response.status_code == 200
    assert token.prefix in html
    assert token.digest not in html
    assert alice.token not in html


def test_token_change_page_hides_the_digest_and_tokens_cannot_be_added(admin_client, alice):
    token = ApiToken.objects.get(user=alice.user)

    page = admin_client.get(f"/admin/tenancy/apitoken/{token.pk}/change/")

    assert page.status_code == 200
    assert token.digest not in page.content.decode()
    assert admin_client.get("/admin/tenancy/apitoken/add/").status_code == 403


def test_revoke_action_revokes_and_the_token_stops_working(admin_client, alice):
    token = ApiToken.objects.get(user=alice.user)

    admin_client.post(
        "/admin/tenancy/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert alice.client().get("/v1/projects").status_code == 401


@pytest.mark.parametrize("page", ["tenancy/tenant/", "tenancy/membership/", "projects/project/"])
def test_changelists_render(admin_client, alice, page):
    make_project(alice)

    assert admin_client.get(f"/admin/{page}").status_code == 200


def test_project_page_shows_its_jobs_read_only(admin_client, alice):
    project = make_project(alice)
    job = project.jobs.get()

    response = admin_client.get(f"/admin/projects/project/{project.pk}/change/")

    assert response.status_code == 200
    assert str(job.id) in response.content.decode()


def test_the_admin_names_its_models_and_fields_in_plain_english(admin_client, alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    index = admin_client.get("/admin/").content.decode()
    endpoint_page = admin_client.get(
        f"/admin/delivery/webhookendpoint/{endpoint.pk}/change/"
    ).content.decode()

    assert "API tokens" in index and "Api tokens" not in index
    assert "External identities" in index and "identitys" not in index
    assert ">URL" in endpoint_page and ">Url" not in endpoint_page
