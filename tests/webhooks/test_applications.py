"""Applications (webhooks.applications, and their deletion in webhooks.lifecycle): create
with a unique live uid, look up by id or uid, change, delete (endpoints disabled, pending
deliveries parked, history kept, uid free again), and what a message to one reaches."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification, NotificationState, WebhookEndpoint
from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_tenant
from tests.support.http_server import recording_server
from web.errors import InvalidInput
from webhooks.applications import (
    ApplicationExists,
    application_create,
    application_get,
    application_pages,
    application_update,
)
from webhooks.endpoints import ApplicationDeleted, webhook_endpoint_create, webhook_endpoint_update
from webhooks.event_types import event_type_create
from webhooks.lifecycle import DISABLED_APPLICATION_DELETED, application_delete
from webhooks.messages import message_resend, product_event_publish, publish_message
from webhooks.models import Application, Message

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _invoice_paid(tenant):
    event_type_create(tenant=tenant, name="invoice.paid")


def _app(tenant, uid="acme", **fields):
    return application_create(tenant=tenant, uid=uid, name=uid.title(), now=NOW, **fields)


def _publish(tenant, application=None, **fields):
    return publish_message(
        tenant=tenant,
        event_type="invoice.paid",
        payload=fields.pop("payload", {}),
        application=application,
        now=fields.pop("now", NOW),
        **fields,
    )


def _queued(message):
    return set(
        Notification.objects.filter(message=message).values_list("webhook_endpoint_id", flat=True)
    )


def test_a_repeated_live_uid_is_refused_and_another_tenant_may_have_it(tenant):
    first = _app(tenant, metadata={"plan": "gold"})

    with pytest.raises(ApplicationExists):
        _app(tenant)
    other = _app(make_tenant("Other"))

    assert Application.objects.filter(tenant=tenant).count() == 1
    assert first.metadata == {"plan": "gold"}
    assert other.uid == first.uid and other.pk != first.pk


@pytest.mark.parametrize("uid", ["", "a b", "ü", "x" * 257, "a/b"])
def test_a_uid_outside_the_pattern_is_refused(tenant, uid):
    with pytest.raises(InvalidInput):
        _app(tenant, uid=uid)


def test_an_application_is_found_by_its_id_or_its_uid_in_its_tenant_only(tenant):
    application = _app(tenant)

    assert application_get(tenant=tenant, key=str(application.pk)) == application
    assert application_get(tenant=tenant, key="acme") == application
    with pytest.raises(Application.DoesNotExist):
        application_get(tenant=make_tenant("Other"), key=str(application.pk))
    with pytest.raises(Application.DoesNotExist):
        application_get(tenant=tenant, key="nobody")


def test_an_id_is_found_before_a_uid_that_spells_it(tenant):
    target = _app(tenant, uid="target")
    impostor = _app(tenant, uid=str(target.pk))

    assert application_get(tenant=tenant, key=str(target.pk)) == target
    assert impostor.uid == str(target.pk)


def test_update_changes_name_metadata_and_uid_but_not_to_a_uid_in_use(tenant):
    application = _app(tenant)
    _app(tenant, uid="taken")

    changed = application_update(
        tenant=tenant, key="acme", changes={"uid": "acme-2", "name": "Acme", "metadata": {}}
    )
    with pytest.raises(ApplicationExists):
        application_update(tenant=tenant, key="acme-2", changes={"uid": "taken"})

    application.refresh_from_db()
    assert (application.uid, application.name) == ("acme-2", "Acme") == (changed.uid, changed.name)
    assert [a.uid for a in application_pages(tenant=tenant, uid="acme-2")] == ["acme-2"]


def test_a_message_to_an_application_reaches_its_subscribed_endpoints_only(tenant):
    acme, globex = _app(tenant), _app(tenant, uid="globex")
    acme_all = make_endpoint(tenant=tenant, url="https://a.example.com/1", application_id=acme.pk)
    acme_paid = make_endpoint(
        tenant=tenant,
        url="https://a.example.com/2",
        application_id=acme.pk,
        event_types=["invoice.paid"],
    )
    make_endpoint(
        tenant=tenant, url="https://a.example.com/3", application_id=acme.pk, event_types=["x"]
    )
    make_endpoint(
        tenant=tenant, url="https://a.example.com/4", application_id=acme.pk, enabled=False
    )
    globex_endpoint = make_endpoint(
        tenant=tenant, url="https://g.example.com/", application_id=globex.pk
    )
    own = make_endpoint(tenant=tenant, url="https://own.example.com/")

    to_acme = _publish(tenant, application="acme")
    to_globex = _publish(tenant, application=str(globex.pk))
    to_own = _publish(tenant)

    assert _queued(to_acme) == {acme_all.pk, acme_paid.pk}
    assert (to_acme.application_id, to_globex.application_id) == (acme.pk, globex.pk)
    assert _queued(to_globex) == {globex_endpoint.pk}
    assert _queued(to_own) == {own.pk}
    assert to_own.application_id is None


def test_the_product_s_own_events_reach_the_tenant_s_own_endpoints_only(tenant):
    acme = _app(tenant)
    make_endpoint(tenant=tenant, url="https://a.example.com/", application_id=acme.pk)
    own = make_endpoint(tenant=tenant, url="https://own.example.com/")

    message = product_event_publish(
        tenant_id=tenant.pk, event_type="member.joined", data={"user_id": 1}
    )

    assert _queued(message) == {own.pk}


def test_an_unknown_deleted_or_other_tenant_s_application_is_refused_and_writes_nothing(tenant):
    theirs = _app(make_tenant("Other"), uid="theirs")
    _app(tenant, uid="gone")
    application_delete(tenant=tenant, key="gone")

    for key in ("nobody", str(theirs.pk), "gone", "a b"):
        with pytest.raises(InvalidInput) as refused:
            _publish(tenant, application=key)
        assert "application" in refused.value.errors
        with pytest.raises(InvalidInput):
            webhook_endpoint_create(tenant=tenant, url="https://a.example.com/", application=key)
    assert not Message.objects.filter(tenant=tenant).exists()
    assert not WebhookEndpoint.objects.filter(tenant=tenant).exists()


def test_an_event_id_deduplicates_within_one_application_only(tenant):
    _app(tenant)
    _app(tenant, uid="globex")

    first = _publish(tenant, application="acme", event_id="evt-1")
    repeat = _publish(tenant, application="acme", event_id="evt-1", now=NOW + timedelta(1 / 24))
    to_globex = _publish(tenant, application="globex", event_id="evt-1")
    to_own = _publish(tenant, event_id="evt-1")
    own_repeat = _publish(tenant, event_id="evt-1", now=NOW + timedelta(1 / 24))

    assert repeat == first
    assert own_repeat == to_own
    assert len({first.pk, to_globex.pk, to_own.pk}) == 3
    assert Message.objects.filter(tenant=tenant).count() == 3


def test_resend_never_reaches_an_endpoint_of_another_application(tenant):
    acme, globex = _app(tenant), _app(tenant, uid="globex")
    make_endpoint(tenant=tenant, url="https://a.example.com/", application_id=acme.pk)
    theirs = make_endpoint(tenant=tenant, url="https://g.example.com/", application_id=globex.pk)
    own = make_endpoint(tenant=tenant, url="https://own.example.com/")
    message = _publish(tenant, application="acme")

    for endpoint in (theirs, own):
        with pytest.raises(WebhookEndpoint.DoesNotExist):
            message_resend(tenant=tenant, message_id=message.pk, endpoint_id=endpoint.pk)

    assert not Notification.objects.filter(webhook_endpoint__in=[theirs, own]).exists()


def test_deleting_disables_its_endpoints_parks_their_deliveries_and_frees_the_uid(tenant):
    acme, globex = _app(tenant), _app(tenant, uid="globex")
    endpoint = make_endpoint(tenant=tenant, url="https://a.example.com/", application_id=acme.pk)
    kept = make_endpoint(tenant=tenant, url="https://g.example.com/", application_id=globex.pk)
    message = _publish(tenant, application="acme")
    _publish(tenant, application="globex")

    application_delete(tenant=tenant, key="acme", now=NOW + timedelta(minutes=1))

    endpoint.refresh_from_db()
    kept.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, DISABLED_APPLICATION_DELETED)
    assert kept.enabled
    states = dict(
        Notification.objects.filter(tenant=tenant).values_list("webhook_endpoint_id", "state")
    )
    assert states == {endpoint.pk: NotificationState.PARKED, kept.pk: NotificationState.SCHEDULED}
    with pytest.raises(Application.DoesNotExist):
        application_get(tenant=tenant, key="acme")
    with pytest.raises(Application.DoesNotExist):
        application_delete(tenant=tenant, key=str(acme.pk))
    # Its history stays; its uid names a new application.
    assert Message.objects.get(pk=message.pk).application_id == acme.pk
    again = _app(tenant)
    assert again.pk != acme.pk
    assert set(application_pages(tenant=tenant)) == {globex, again}


@pytest.mark.usefixtures("public_dns")
def test_an_endpoint_of_a_deleted_application_cannot_be_enabled_again(tenant):
    acme = _app(tenant)
    endpoint = webhook_endpoint_create(
        tenant=tenant, url="https://a.example.com/", application="acme"
    )
    application_delete(tenant=tenant, key="acme")

    with pytest.raises(ApplicationDeleted):
        webhook_endpoint_update(tenant=tenant, endpoint_id=endpoint.pk, enabled=True)

    endpoint.refresh_from_db()
    assert endpoint.application_id == acme.pk
    assert not endpoint.enabled


@pytest.mark.usefixtures("local_channels")
def test_a_deleted_application_s_endpoint_is_sent_nothing(tenant):
    with recording_server() as server:
        _app(tenant)
        webhook_endpoint_create(tenant=tenant, url=f"{server.url}/acme", application="acme")
        _publish(tenant, application="acme")
        application_delete(tenant=tenant, key="acme", now=NOW)

        assert run_tick(now=NOW + timedelta(seconds=1)).claimed == 0
        assert server.received() == []
