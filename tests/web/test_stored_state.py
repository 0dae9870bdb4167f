"""The snapshot the "bad input writes nothing" tests compare: it must see every write they
guard against, or they would pass whatever the API wrote."""

import pytest
from django.contrib.auth import get_user_model

from delivery.models import Notification, WebhookEndpoint
from jobs.models import Job
from people.models import Recipient
from projects.models import Project
from tenancy.models import Membership, Tenant
from tests.web.write_endpoints import seed_targets, stored_state

pytestmark = pytest.mark.django_db


def test_the_same_rows_give_the_same_snapshot(alice):
    targets = seed_targets(alice)

    assert stored_state(targets) == stored_state(targets)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: get_user_model().objects.filter(pk=t.user).update(first_name="Changed"),
        lambda t: Tenant.objects.filter(pk=t.tenant).update(name="Changed"),
        lambda t: Notification.objects.filter(pk=t.notification).update(subject="Changed"),
        lambda t: WebhookEndpoint.objects.filter(pk=t.endpoint).update(enabled=False),
        lambda t: Job.objects.filter(pk=t.job).update(attempts=3),
        lambda t: Project.objects.filter(pk=t.project).update(name="Changed"),
        lambda t: Membership.objects.filter(user_id=t.member).update(role="owner"),
        lambda t: Recipient.objects.filter(tenant_id=t.tenant).update(email="c@example.com"),
    ],
    ids=["user", "tenant", "notification", "endpoint", "job", "project", "member", "recipient"],
)
def test_a_change_to_an_aimed_row_changes_the_snapshot(alice, change):
    targets = seed_targets(alice)
    before = stored_state(targets)

    assert change(targets) == 1

    assert stored_state(targets) != before


def test_a_new_row_changes_the_counts(alice):
    targets = seed_targets(alice)
    counts, rows = stored_state(targets)

    Project.objects.create(tenant=alice.tenant, name="New")

    assert stored_state(targets) == ({**counts, "Project": counts["Project"] + 1}, rows)
