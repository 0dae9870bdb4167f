"""Representation renders rows exactly as their DRF serializer does, faster."""

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from rest_framework import serializers

from notifications.serializers import NOTIFICATIONS, NotificationSerializer
from notifications.services import notification_pages
from projects.models import Project
from projects.serializers import PROJECTS, ProjectSerializer
from projects.services import project_pages, project_queryset
from tests.delivery.factories import make_endpoint, make_notification
from tests.projects.factories import make_project
from web.representation import Representation

pytestmark = pytest.mark.django_db

FIRE_AT = datetime(2030, 1, 7, 8, 0, 0, 123456, tzinfo=UTC)


def varied_notifications(tenant):
    """Rows with every kind of value the resource renders: nulls, lists, errors, states."""
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    project = make_project_row(tenant)
    make_notification(
        tenant=tenant,
        next_fire_at=FIRE_AT,
        channels=["email", "webhook"],
        endpoint=endpoint,
        email_to=["a@example.com", "b@example.com"],
        rrule="FREQ=WEEKLY;BYDAY=MO",
        timezone="Europe/Berlin",
        project=project,
        last_fired_at=FIRE_AT - timedelta(days=7),
    )
    make_notification(tenant=tenant, next_fire_at=FIRE_AT, error_count=2, last_error="timeout")
    make_notification(tenant=tenant, next_fire_at=None, dead_letter_reason="exhausted")
    make_notification(tenant=tenant, next_fire_at=None, subject="", body="")
    return list(tenant.notifications.order_by("-created_at", "-id"))


def make_project_row(tenant):
    """A project without a provision job."""
    return Project.objects.create(tenant=tenant, name="P")


def test_notifications_render_as_their_serializer_does(alice):
    rows = varied_notifications(alice.tenant)

    assert NOTIFICATIONS.many(rows) == NotificationSerializer(rows, many=True).data
    assert [list(row) for row in NOTIFICATIONS.many(rows)] == [
        list(NotificationSerializer().fields) for _ in rows
    ]
    assert NOTIFICATIONS.one(rows[0]) == NotificationSerializer(rows[0]).data


def test_projects_render_with_and_without_their_job(alice):
    make_project(alice, name="with its job")
    make_project_row(alice.tenant)  # no provision job
    rows = list(project_queryset(tenant=alice.tenant).order_by("-created_at"))

    rendered = PROJECTS.many(rows)

    assert rendered == ProjectSerializer(rows, many=True).data
    assert [row["job"] is None for row in rendered] == [True, False]


def first_page(pages) -> list:
    return list(pages.order_by("-created_at", "-id")[0:10])


def test_list_pages_rows_of_its_attributes_render_as_the_instances_do(alice):
    # The project with its job first: made once an endpoint exists, its project.created
    # message would queue a delivery, a notification the instances below do not hold.
    make_project(alice, name="with its job")
    instances = varied_notifications(alice.tenant)  # with a project without its job
    projects = list(project_queryset(tenant=alice.tenant).order_by("-created_at", "-id"))

    notifications = first_page(
        notification_pages(tenant=alice.tenant, fields=NOTIFICATIONS.attributes)
    )
    listed = first_page(project_pages(tenant=alice.tenant, fields=PROJECTS.attributes))

    assert NOTIFICATIONS.many(notifications) == NotificationSerializer(instances, many=True).data
    assert PROJECTS.many(listed) == ProjectSerializer(projects, many=True).data
    assert "recurrence_anchor" in NOTIFICATIONS.attributes
    assert "channel_state" not in NOTIFICATIONS.attributes
    assert PROJECTS.attributes == ("id", "name", "status", "created_at", "updated_at")


def test_datetimes_follow_the_current_time_zone_as_drf_does(alice):
    rows = varied_notifications(alice.tenant)

    with timezone.override("America/New_York"):
        rendered = NOTIFICATIONS.many(rows)
        expected = NotificationSerializer(rows, many=True).data

    assert rendered == expected
    [recurring] = [row for row in rendered if row["rrule"]]
    assert recurring["fire_at"] == "2030-01-07T03:00:00.123456-05:00"
    assert recurring["last_fired_at"] == "2029-12-31T03:00:00.123456-05:00"
    assert NOTIFICATIONS.one(rows[-1])["fire_at"] == "2030-01-07T08:00:00.123456Z"


def test_plain_fields_render_as_drfs_own_whatever_the_value():
    class Plain(serializers.Serializer):
        text = serializers.CharField()
        email = serializers.EmailField()
        number = serializers.IntegerField()
        big = serializers.BigIntegerField(coerce_to_string=True)
        verbose = serializers.UUIDField()
        short = serializers.UUIDField(format="hex")
        listed = serializers.ListField(child=serializers.IntegerField())
        chosen = serializers.ChoiceField(choices=[(1, "one")])

    some = uuid.uuid4()
    rows = [
        SimpleNamespace(
            text=5, email="a@example.com", number="7", big=2**70, verbose=some, short=some,
            listed=["1", None, True], chosen="1",
        ),
        SimpleNamespace(
            text=None, email=None, number=None, big=None, verbose=None, short=None,
            listed=[], chosen=None,
        ),
    ]  # fmt: skip

    assert Representation(Plain).many(rows) == Plain(rows, many=True).data


def test_a_field_it_cannot_compile_is_refused():
    class Related(serializers.Serializer):
        tenant = serializers.PrimaryKeyRelatedField(read_only=True)

    with pytest.raises(ImproperlyConfigured):
        Representation(Related).many([])
