"""GET /v1/notifications pages of 50: pinned SQL, cursor semantics through the compiled page
query (newest first, stable when rows share created_at), tenant scoping."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Notification
from tests.delivery.factories import make_notifications

pytestmark = pytest.mark.django_db(transaction=True)


def warmed_client(actor):
    """A client whose token's last_used_at is fresh, so no UPDATE joins the count."""
    client = actor.client()
    assert client.get("/v1/me").status_code == 200
    return client


def test_a_page_of_50_and_the_next_are_three_statements_each(
    alice, charlie, django_assert_num_queries
):
    make_notifications(60, tenant=alice.tenant, next_fire_at=timezone.now(), email_to=["a@x.io"])
    make_notifications(3, tenant=charlie.tenant, next_fire_at=timezone.now())
    client = warmed_client(alice)

    # the token with its membership, the rate-limit count, the page
    with django_assert_num_queries(3) as context:
        first = client.get("/v1/notifications?limit=50").json()
    with django_assert_num_queries(3):
        second = client.get(first["next"]).json()
    with django_assert_num_queries(3):
        parked = client.get("/v1/notifications?limit=50&state=scheduled").json()

    page_sql = context.captured_queries[2]["sql"]
    assert "tenant_id" in page_sql and "LIMIT 51" in page_sql
    # only the columns the page shows: no claim, lease or delivery state
    assert "recurrence_anchor" in page_sql and "channel_state" not in page_sql
    assert (len(first["results"]), len(second["results"])) == (50, 10)
    assert len(parked["results"]) == 50
    ids = {n["id"] for n in first["results"] + second["results"]}
    assert ids == {str(pk) for pk in alice.tenant.notifications.values_list("id", flat=True)}


def walk(client, first_page):
    """Every page's ids following next links, then following previous links back."""
    pages = [client.get(first_page).json()]
    while pages[-1]["next"]:
        pages.append(client.get(pages[-1]["next"]).json())
    forward = [[n["id"] for n in page["results"]] for page in pages]
    backward = []
    while pages[-1]["previous"]:
        pages.append(client.get(pages[-1]["previous"]).json())
        backward.append([n["id"] for n in pages[-1]["results"]])
    return forward, backward


def test_rows_sharing_created_at_page_as_drfs_own_cursor_pagination_does(alice):
    at = timezone.now() - timedelta(hours=1)
    make_notifications(3, tenant=alice.tenant, next_fire_at=at, created_at=at)
    make_notifications(
        4, tenant=alice.tenant, next_fire_at=at, created_at=at - timedelta(minutes=1)
    )
    newest_first = Notification.objects.order_by("-created_at", "-id").values_list("id", flat=True)
    client = alice.client()

    compiled = walk(client, "/v1/notifications?limit=2")
    # Every row is scheduled: the state filter's queryset goes through DRF as a plain queryset.
    plain = walk(client, "/v1/notifications?limit=2&state=scheduled")

    forward, backward = compiled
    assert [pk for page in forward for pk in page] == [str(pk) for pk in newest_first]
    assert backward
    assert compiled == plain
