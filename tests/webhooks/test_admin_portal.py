"""Portal sessions in the admin: listed and shown without their token or digest, never added
or changed there, and revoked by an action that stops the token at once."""

from django.urls import reverse
from django.utils import timezone

from tests.webhooks.portal_support import make_application, portal_client
from webhooks.models import PortalSession
from webhooks.portal.sessions import portal_session_create


def _session(alice):
    application = make_application(alice.tenant, "acme")
    return portal_session_create(
        tenant=alice.tenant, application=application.uid, now=timezone.now()
    )


def test_pages_show_sessions_without_token_or_digest(admin_client, alice):
    session = _session(alice)

    for page in (
        reverse("admin:webhooks_portalsession_changelist"),
        reverse("admin:webhooks_portalsession_change", args=[session.pk]),
    ):
        html = admin_client.get(page).content.decode()
        assert "Acme" in html, page
        assert session.plaintext not in html and session.digest not in html, page
        assert session.prefix not in html, page
    assert admin_client.get(reverse("admin:webhooks_portalsession_add")).status_code == 403


def test_the_revoke_action_stops_the_token(admin_client, alice):
    session = _session(alice)
    portal = portal_client(session.plaintext)
    assert portal.get("/v1/webhook-endpoints").status_code == 200

    response = admin_client.post(
        reverse("admin:webhooks_portalsession_changelist"),
        {"action": "revoke", "_selected_action": [str(session.pk)]},
    )

    assert response.status_code == 302
    assert PortalSession.objects.get(pk=session.pk).revoked_at is not None
    assert portal.get("/v1/webhook-endpoints").status_code == 401
