"""Admin pages of tokens made through the API and of external identities: readable, and never
showing a token's secret or digest, nor a JWT."""

from tenancy.models import ApiToken, ExternalIdentity


def test_tokens_made_through_the_api_list_by_prefix_name_and_dates_only(admin_client, alice):
    made = alice.client().post(
        "/v1/tokens", {"name": "deploy-bot", "expires_in_days": 7}, format="json"
    )
    secret = made.json()["token"]
    token = ApiToken.objects.get(pk=made.json()["id"])

    listed = admin_client.get("/admin/tenancy/apitoken/").content.decode()
    page = admin_client.get(f"/admin/tenancy/apitoken/{token.pk}/change/").content.decode()

    assert token.prefix in listed and "deploy-bot" in listed
    for html in (listed, page):
        assert secret not in html
        assert secret[len(token.prefix) :] not in html
        assert token.digest not in html


def test_external_identities_are_listed_read_only(admin_client, alice):
    identity = ExternalIdentity.objects.create(
        issuer="https://login.example.com", subject="idp-42", user=alice.user
    )

    listed = admin_client.get("/admin/tenancy/externalidentity/")
    page = admin_client.get(f"/admin/tenancy/externalidentity/{identity.pk}/change/")

    assert listed.status_code == page.status_code == 200
    assert "idp-42" in listed.content.decode()
    assert admin_client.get("/admin/tenancy/externalidentity/add/").status_code == 403
