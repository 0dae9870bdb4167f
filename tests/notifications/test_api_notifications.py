"""POST/GET/PATCH/DELETE /v1/notifications and POST /v1/notifications/{id}/retry."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import Notification
from tests.delivery.factories import make_endpoint, make_notification
from tests.projects.factories import make_project
from web.fields import LINE_BREAK_RULE

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}


def _create(actor, **overrides):
    return actor.client().post(
        "/v1/notifications",
        {**EMAIL, **overrides},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )


def test_create_answers_201_with_location_and_the_first_occurrence(alice):
    fire_at = "2031-05-01T09:00:00+02:00"

    response = _create(alice, fire_at=fire_at, rrule="FREQ=DAILY", timezone="Europe/Paris")

    assert response.status_code == 201
    body = response.json()
    assert response["Location"] == f"/v1/notifications/{body['id']}"
    assert body["next_fire_at"] == body["fire_at"] == "2031-05-01T07:00:00Z"
    assert body["occurrence"] == 1
    assert body["state"] == "scheduled"
    assert body["error_count"] == 0
    assert body["last_error"] is None
    assert body["rrule"] == "FREQ=DAILY"
    assert body["timezone"] == "Europe/Paris"
    row = Notification.objects.get(pk=body["id"])
    assert row.tenant == alice.tenant
    assert row.recurrence_anchor == row.next_fire_at == datetime(2031, 5, 1, 7, tzinfo=UTC)


MONDAYS_AT_NINE = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0"
SUNDAY_EVENING_BERLIN = "2031-06-01T20:15:00+02:00"


def test_a_rule_created_on_a_sunday_evening_is_first_due_on_monday_morning(alice):
    response = _create(
        alice, fire_at=SUNDAY_EVENING_BERLIN, rrule=MONDAYS_AT_NINE, timezone="Europe/Berlin"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["fire_at"] == "2031-06-01T18:15:00Z"
    assert body["next_fire_at"] == "2031-06-02T07:00:00Z"  # Monday 09:00 in Berlin
    assert (body["occurrence"], body["state"]) == (1, "scheduled")


def test_a_fire_at_that_matches_the_rule_is_its_first_occurrence(alice):
    monday_nine = "2031-06-02T09:00:00+02:00"

    body = _create(
        alice, fire_at=monday_nine, rrule=MONDAYS_AT_NINE, timezone="Europe/Berlin"
    ).json()

    assert body["next_fire_at"] == body["fire_at"] == "2031-06-02T07:00:00Z"


def test_a_rule_without_time_parts_keeps_the_time_of_fire_at(alice):
    body = _create(
        alice, fire_at=SUNDAY_EVENING_BERLIN, rrule="FREQ=WEEKLY;BYDAY=MO", timezone="Europe/Berlin"
    ).json()

    assert body["next_fire_at"] == "2031-06-02T18:15:00Z"  # Monday 20:15 in Berlin


@pytest.mark.parametrize(
    "rrule", ["FREQ=DAILY;UNTIL=20310501T000000Z", "FREQ=WEEKLY;BYDAY=MO;UNTIL=20310601"]
)
def test_a_rule_that_ends_before_fire_at_is_a_400_problem(alice, rrule):
    response = _create(alice, fire_at="2031-06-01T00:00:00Z", rrule=rrule)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "no occurrence at or after fire_at" in response.json()["errors"]["rrule"][0]
    assert not Notification.objects.exists()


def test_patching_the_rule_moves_the_first_occurrence_to_the_rules_first_instance(alice):
    created = _create(alice, fire_at=SUNDAY_EVENING_BERLIN, timezone="Europe/Berlin").json()

    response = alice.client().patch(
        f"/v1/notifications/{created['id']}", {"rrule": MONDAYS_AT_NINE}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["next_fire_at"] == "2031-06-02T07:00:00Z"


def test_a_patch_whose_rule_ends_before_fire_at_is_a_400_that_changes_nothing(alice):
    created = _create(alice, fire_at="2031-06-01T00:00:00Z").json()

    response = alice.client().patch(
        f"/v1/notifications/{created['id']}",
        {"rrule": "FREQ=DAILY;UNTIL=20310501T000000Z"},
        format="json",
    )

    assert response.status_code == 400
    assert "rrule" in response.json()["errors"]
    row = Notification.objects.get(pk=created["id"])
    assert (row.rrule, row.next_fire_at) == ("", datetime(2031, 6, 1, tzinfo=UTC))


def test_fire_at_defaults_to_now_and_a_naive_time_is_wall_clock_in_the_default_utc(alice):
    before = timezone.now().replace(microsecond=0)  # fire_at is whole seconds
    default = _create(alice).json()
    naive = _create(alice, fire_at="2030-01-01T08:30:00").json()

    assert before <= datetime.fromisoformat(default["next_fire_at"]) <= timezone.now()
    assert default["timezone"] == "UTC"
    assert naive["next_fire_at"] == "2030-01-01T08:30:00Z"


def test_webhook_notification_with_own_endpoint_and_project(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    project = make_project(alice)

    response = _create(
        alice,
        channels=["webhook"],
        email_to=[],
        webhook_endpoint=str(endpoint.id),
        project_id=str(project.id),
    )

    assert response.status_code == 201
    assert response.json()["webhook_endpoint"] == str(endpoint.id)
    assert response.json()["project_id"] == str(project.id)


def test_another_tenants_endpoint_is_rejected_like_a_missing_one(alice, charlie):
    foreign = make_endpoint(tenant=charlie.tenant, url="https://hooks.example.com/b")

    theirs = _create(alice, channels=["webhook"], webhook_endpoint=str(foreign.id))
    missing = _create(alice, channels=["webhook"], webhook_endpoint=str(Notification().id))

    assert theirs.status_code == missing.status_code == 400
    assert theirs.json()["errors"] == missing.json()["errors"]
    assert "webhook_endpoint" in theirs.json()["errors"]


def test_a_disabled_endpoint_is_a_409_at_create_that_creates_and_keeps_nothing(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in", enabled=False)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    body = {**EMAIL, "channels": ["webhook"], "email_to": [], "webhook_endpoint": str(endpoint.id)}

    refused = alice.client().post("/v1/notifications", body, format="json", headers=key)

    assert refused.status_code == 409
    assert refused.json()["type"].endswith("/webhook-endpoint-disabled")
    assert "Enable it first" in refused.json()["detail"]
    assert not Notification.objects.exists()
    # Nothing was kept under the key: once enabled, the same request creates.
    endpoint.enabled = True
    endpoint.save(update_fields=["enabled"])
    again = alice.client().post("/v1/notifications", body, format="json", headers=key)
    assert again.status_code == 201


def test_bad_input_naming_a_disabled_endpoint_is_still_a_400(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in", enabled=False)

    response = _create(alice, channels=["webhook"], webhook_endpoint=str(endpoint.id), rrule="X")

    assert response.status_code == 400
    assert "rrule" in response.json()["errors"]


def test_patch_naming_another_disabled_endpoint_is_a_409_but_one_disabled_since_stays(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    off = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/off", enabled=False)
    created = _create(alice, channels=["webhook"], email_to=[], webhook_endpoint=str(endpoint.id))
    path = f"/v1/notifications/{created.json()['id']}"

    moved = alice.client().patch(path, {"webhook_endpoint": str(off.id)}, format="json")
    endpoint.enabled = False
    endpoint.save(update_fields=["enabled"])
    renamed = alice.client().patch(path, {"subject": "Renamed"}, format="json")

    assert moved.status_code == 409
    assert moved.json()["type"].endswith("/webhook-endpoint-disabled")
    assert renamed.status_code == 200
    stored = Notification.objects.get()
    assert (stored.webhook_endpoint_id, stored.subject) == (endpoint.id, "Renamed")


def test_another_tenants_project_is_rejected(alice, charlie):
    response = _create(alice, project_id=str(make_project(charlie).id))

    assert response.status_code == 400
    assert "project_id" in response.json()["errors"]
    assert not Notification.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"channels": []}, "channels"),
        ({"channels": ["sms"]}, "channels"),
        ({"channels": ["email", "email"]}, "channels"),
        ({"channels": "email"}, "channels"),
        ({"email_to": []}, "email_to"),
        ({"email_to": ["not-an-address"]}, "email_to"),
        ({"email_to": [f"u{i}@example.com" for i in range(51)]}, "email_to"),
        ({"channels": ["webhook"]}, "webhook_endpoint"),
        ({"webhook_endpoint": "not-a-uuid"}, "webhook_endpoint"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": "localtime"}, "timezone"),
        ({"timezone": "posix/Europe/Berlin"}, "timezone"),
        ({"timezone": "right/UTC"}, "timezone"),
        ({"timezone": "Factory"}, "timezone"),
        ({"timezone": "posixrules"}, "timezone"),
        ({"webhook_endpoint": "\u0661" * 8 + "-1111-1111-1111-111111111111"}, "webhook_endpoint"),
        ({"project_id": "\u0661" * 32}, "project_id"),
        ({"rrule": "FREQ=SOMETIMES"}, "rrule"),
        ({"subject": "x" * 201}, "subject"),
        ({"body": "x" * 10_001}, "body"),
        ({"subject": None}, "subject"),
        ({"fire_at": "tomorrow-ish"}, "fire_at"),
        ({"fire_at": None}, "fire_at"),
        ({"project_id": 12}, "project_id"),
    ],
)
def test_invalid_bodies_answer_400_problems_naming_the_field(alice, overrides, field):
    response = _create(alice, **overrides)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in response.json()["errors"]
    assert not Notification.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        42,
        None,
        {"channels": [{"a": 1}]},
        {"email_to": "x" * 100_000},
        {**EMAIL, "subject": "a\x00b"},
        {**EMAIL, "fire_at": "0001-01-01T00:00:00+05:00"},
        {**EMAIL, "rrule": "FREQ=DAILY;DTSTART=20200101T000000Z"},
        {**EMAIL, "timezone": "x" * 65},
    ],
)
def test_junk_never_causes_a_server_error(alice, body):
    response = alice.client().post(
        "/v1/notifications", body, format="json", headers={"Idempotency-Key": "junk"}
    )

    assert 400 <= response.status_code < 500
    assert response["Content-Type"] == "application/problem+json"


def test_detail_of_a_missing_or_malformed_id_is_404(alice):
    for path in ("/v1/notifications/not-a-uuid", f"/v1/notifications/{Notification().id}"):
        response = alice.client().get(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/problem+json"


def test_patch_changes_content(alice):
    notification = make_notification(
        tenant=alice.tenant,
        next_fire_at=timezone.now(),
        channels=["email"],
        email_to=["a@example.com"],
    )

    response = alice.client().patch(
        f"/v1/notifications/{notification.id}",
        {"subject": "New", "email_to": ["b@example.com"]},
        format="json",
    )

    assert response.status_code == 200
    notification.refresh_from_db()
    assert (notification.subject, notification.email_to) == ("New", ["b@example.com"])


def test_patch_schedule_restarts_from_the_new_fire_at_and_keeps_the_occurrence(alice):
    notification = make_notification(
        tenant=alice.tenant,
        next_fire_at=timezone.now(),
        channels=["email"],
        email_to=["a@example.com"],
        rrule="FREQ=DAILY",
        occurrence=7,
    )

    response = alice.client().patch(
        f"/v1/notifications/{notification.id}",
        {"fire_at": "2032-02-02T10:00:00Z", "rrule": "FREQ=WEEKLY"},
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["next_fire_at"] == response.json()["fire_at"] == "2032-02-02T10:00:00Z"
    notification.refresh_from_db()
    assert notification.recurrence_anchor == datetime(2032, 2, 2, 10, tzinfo=UTC)
    assert (notification.rrule, notification.occurrence) == ("FREQ=WEEKLY", 7)


@pytest.mark.parametrize("zone", ["localtime", "right/Europe/Berlin", "Factory"])
def test_patch_to_a_zone_that_is_no_iana_name_is_400_and_keeps_the_zone(alice, zone):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())

    response = alice.client().patch(
        f"/v1/notifications/{notification.id}", {"timezone": zone}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"]["timezone"] == [f"unknown time zone '{zone}'"]
    notification.refresh_from_db()
    assert notification.timezone == "UTC"


def test_patch_that_breaks_a_rule_of_the_whole_row_is_400(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())

    response = alice.client().patch(
        f"/v1/notifications/{notification.id}", {"channels": ["email"]}, format="json"
    )

    assert response.status_code == 400
    assert "email_to" in response.json()["errors"]


def test_patch_or_retry_of_a_claimed_row_is_409_and_changes_nothing(alice):
    notification = make_notification(
        tenant=alice.tenant,
        next_fire_at=timezone.now(),
        error_count=2,
        claimed_until=timezone.now() + timedelta(seconds=30),
        claim_token=5,
    )
    client = alice.client()

    patched = client.patch(f"/v1/notifications/{notification.id}", {"subject": "X"}, format="json")
    retried = client.post(f"/v1/notifications/{notification.id}/retry")

    assert patched.status_code == retried.status_code == 409
    assert patched["Content-Type"] == "application/problem+json"
    notification.refresh_from_db()
    assert (notification.subject, notification.error_count, notification.claim_token) == (
        "Standup",
        2,
        5,
    )


def test_retry_rearms_a_dead_lettered_row(alice):
    notification = make_notification(
        tenant=alice.tenant,
        endpoint=make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in"),
        next_fire_at=None,
        error_count=3,
        last_error="HTTP 500",
        dead_letter_reason="exhausted",
        unfinished_claims=2,
    )
    before = timezone.now()

    response = alice.client().post(f"/v1/notifications/{notification.id}/retry")

    assert response.status_code == 200
    assert response.json()["state"] == "scheduled"
    notification.refresh_from_db()
    assert (notification.error_count, notification.last_error) == (0, None)
    assert (notification.dead_letter_reason, notification.unfinished_claims) == ("", 0)
    assert before <= notification.next_fire_at <= timezone.now()


def test_delete_is_for_owners(alice, bob):
    notification = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
    path = f"/v1/notifications/{notification.id}"

    assert bob.client().delete(path).status_code == 403
    assert Notification.objects.filter(pk=notification.pk).exists()
    assert alice.client().delete(path).status_code == 204
    assert not Notification.objects.filter(pk=notification.pk).exists()
    assert alice.client().delete(path).status_code == 404


def test_member_may_create_patch_and_retry(bob):
    created = _create(bob)
    path = f"/v1/notifications/{created.json()['id']}"

    assert created.status_code == 201
    assert bob.client().patch(path, {"body": "x"}, format="json").status_code == 200
    Notification.objects.filter(pk=created.json()["id"]).update(error_count=1, state="backing_off")
    assert bob.client().post(f"{path}/retry").status_code == 200


def test_list_is_newest_first_tenant_scoped_and_filterable_by_state(alice, charlie):
    now = timezone.now()
    parked = make_notification(tenant=alice.tenant, next_fire_at=None, created_at=now)
    backing_off = make_notification(
        tenant=alice.tenant, next_fire_at=now, error_count=1, created_at=now - timedelta(minutes=1)
    )
    make_notification(tenant=charlie.tenant, next_fire_at=now)
    client = alice.client()

    everything = client.get("/v1/notifications").json()
    only_backing_off = client.get("/v1/notifications?state=backing_off").json()
    bad_state = client.get("/v1/notifications?state=sleeping")

    assert [n["id"] for n in everything["results"]] == [str(parked.id), str(backing_off.id)]
    assert [n["state"] for n in everything["results"]] == ["parked", "backing_off"]
    assert [n["id"] for n in only_backing_off["results"]] == [str(backing_off.id)]
    assert bad_state.status_code == 400
    assert "state" in bad_state.json()["errors"]


def test_list_and_detail_query_counts_are_pinned(alice, django_assert_num_queries):
    notifications = [
        make_notification(tenant=alice.tenant, next_fire_at=timezone.now()) for _ in range(5)
    ]
    client = alice.client()
    client.get("/v1/notifications")  # first use of the token records last_used_at

    # the token with its membership, the rate-limit count, page
    with django_assert_num_queries(3):
        assert len(client.get("/v1/notifications").json()["results"]) == 5
    with django_assert_num_queries(3):
        assert client.get(f"/v1/notifications/{notifications[0].id}").status_code == 200


@pytest.mark.parametrize(
    "subject", ["Hi\r\nBcc: all@example.com", "Hi\n", "\rHi", "Hi\r", "Hi\u2028", "Hi\x85"]
)
def test_a_subject_with_a_line_break_is_400_at_create_and_patch(alice, subject):
    created = _create(alice, subject=subject)
    assert created.status_code == 400
    assert created.json()["errors"] == {"subject": [LINE_BREAK_RULE]}
    assert Notification.objects.count() == 0

    path = _create(alice)["Location"]
    patched = alice.client().patch(path, {"subject": subject}, format="json")
    assert patched.status_code == 400
    assert "subject" in patched.json()["errors"]
    assert Notification.objects.get().subject == "Hi"


def test_a_subject_with_nul_is_400_at_create_and_patch(alice):
    # NUL is refused anywhere in a body, before the fields are read (web.parsers).
    assert _create(alice, subject="Hi\x00there").status_code == 400
    assert Notification.objects.count() == 0
    path = _create(alice)["Location"]
    patched = alice.client().patch(path, {"subject": "Hi\x00"}, format="json")
    assert patched.status_code == 400
    assert Notification.objects.get().subject == "Hi"


def test_retrying_a_row_whose_endpoint_was_deleted_is_409_and_changes_nothing(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    notification = make_notification(
        tenant=alice.tenant,
        endpoint=endpoint,
        next_fire_at=None,
        error_count=5,
        last_error="endpoint missing",
        dead_letter_reason="exhausted",
    )
    client = alice.client()
    assert client.delete(f"/v1/webhook-endpoints/{endpoint.id}").status_code == 204

    response = client.post(f"/v1/notifications/{notification.id}/retry")

    assert response.status_code == 409
    problem = response.json()
    assert problem["type"].endswith("/webhook-endpoint-deleted")
    assert problem["title"] == "Webhook endpoint deleted"
    assert "webhook_endpoint" in problem["detail"]
    stored = Notification.objects.get(pk=notification.pk)
    assert (stored.state, stored.error_count) == ("dead_lettered", 5)


def test_a_row_whose_webhook_went_before_its_endpoint_was_deleted_may_be_retried(alice):
    notification = make_notification(
        tenant=alice.tenant,
        channels=["email", "webhook"],
        email_to=["ops@example.com"],
        channel_state={"webhook": "delivered"},
        next_fire_at=None,
        error_count=5,
        dead_letter_reason="exhausted",
    )

    response = alice.client().post(f"/v1/notifications/{notification.id}/retry")

    assert response.status_code == 200
    assert response.json()["state"] == "scheduled"


def test_a_new_endpoint_makes_the_row_retryable_again(alice):
    notification = make_notification(
        tenant=alice.tenant, next_fire_at=None, error_count=5, dead_letter_reason="exhausted"
    )
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/new")
    client = alice.client()
    assert client.post(f"/v1/notifications/{notification.id}/retry").status_code == 409

    patched = client.patch(
        f"/v1/notifications/{notification.id}",
        {"webhook_endpoint": str(endpoint.id)},
        format="json",
    )
    assert patched.status_code == 200

    assert client.post(f"/v1/notifications/{notification.id}/retry").status_code == 200
