"""The portal page at /portal/: served by the app with its script and style, embeddable only
by PORTAL_FRAME_ANCESTORS, and never framed by the admin's X-Frame-Options: DENY."""

import pytest


def test_the_page_is_served_with_its_assets_and_the_default_frame_ancestors(client):
    response = client.get("/portal/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/portal/portal.js" in html and "/static/portal/portal.css" in html
    policy = response["Content-Security-Policy"]
    assert policy.endswith("; frame-ancestors 'self'")
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "X-Frame-Options" not in response
    assert response["Referrer-Policy"] == "no-referrer"
    assert client.get("/static/portal/portal.js").status_code == 200


def test_frame_ancestors_come_from_the_setting(client, settings):
    settings.PORTAL_FRAME_ANCESTORS = "'self' https://app.example.com"

    response = client.get("/portal/")

    assert response["Content-Security-Policy"].endswith(
        "; frame-ancestors 'self' https://app.example.com"
    )


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_page_only_reads(client, method):
    assert getattr(client, method)("/portal/").status_code == 405
