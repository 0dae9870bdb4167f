"""The provision handler, local part: project active, invitations and events, idempotent."""

import pytest

from dbqueue.clock import Clock
from delivery.models import Channel, Notification
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import JobStatus
from jobs.processing import jobs_process
from jobs.services import Outcome
from projects.models import ProjectStatus
from projects.provisioning import provision_activate
from tenancy.front_door import ACCOUNT_MAIL_TENANT_ID
from tenancy.models import Invitation
from tests.jobs.factories import NOW, make_endpoint, make_job, reload


@pytest.fixture(autouse=True)
def _local_provisioning(settings):
    settings.PROVISIONING_URL = ""


def drain() -> None:
    jobs_drain(clock=Clock(now=NOW), limit=100, max_seconds=60)


def test_provisioning_activates_the_project_and_invites_every_address(alice, bob):
    invite = ["ann@example.com", "ben@example.com", bob.user.email]
    job = make_job(alice.tenant, user=alice.user, invite=invite)

    drain()

    job = reload(job)
    assert job.status == JobStatus.COMPLETED
    assert job.completed_at == NOW
    assert job.claimed_until is None
    assert job.project.status == ProjectStatus.ACTIVE
    assert job.project.updated_at == NOW
    # Those who are not members yet get invitations, their accept links emailed apart.
    invitations = Invitation.objects.filter(tenant=alice.tenant).order_by("email")
    assert [(i.email, i.role, i.invited_by) for i in invitations] == [
        ("ann@example.com", "member", alice.user),
        ("ben@example.com", "member", alice.user),
    ]
    links = Notification.objects.filter(tenant_id=ACCOUNT_MAIL_TENANT_ID).order_by("email_to")
    assert [n.email_to for n in links] == [["ann@example.com"], ["ben@example.com"]]
    assert all("token=" in n.body and n.next_fire_at == NOW for n in links)
    # A member gets the plain email about the project.
    [plain] = Notification.objects.filter(tenant=alice.tenant, channels=[Channel.EMAIL])
    assert plain.email_to == [bob.user.email]
    assert plain.project_id == job.project_id
    assert plain.next_fire_at == NOW
    assert plain.recurrence_anchor == NOW
    assert plain.occurrence == 1
    assert plain.rrule == ""
    assert plain.timezone == "UTC"
    assert "Website relaunch" in plain.subject
    assert "Website relaunch" in plain.body


def test_each_enabled_endpoint_gets_one_activation_event_and_disabled_ones_none(alice, charlie):
    first, second = make_endpoint(alice.tenant), make_endpoint(alice.tenant)
    disabled = make_endpoint(alice.tenant, enabled=False)
    make_endpoint(charlie.tenant)
    job = make_job(alice.tenant, user=alice.user)

    drain()

    events = Notification.objects.filter(channels=[Channel.WEBHOOK])
    assert {n.webhook_endpoint_id for n in events} == {first.id, second.id}
    assert not events.filter(webhook_endpoint=disabled).exists()
    for event in events:
        assert event.tenant_id == alice.tenant.id
        assert event.next_fire_at == NOW
        assert event.webhook_event == {
            "type": "project.active",
            "timestamp": "2026-03-02T09:00:00Z",
        }
        assert event.message.payload == {
            "project_id": str(job.project_id),
            "tenant_id": str(alice.tenant.id),
            "name": "Website relaunch",
        }


def test_without_an_invite_list_nobody_is_emailed_not_even_the_creator(alice):
    job = make_job(alice.tenant, user=alice.user)

    drain()

    assert reload(job).project.status == ProjectStatus.ACTIVE
    assert not Notification.objects.exists()
    assert not Invitation.objects.exists()


def test_an_invitation_a_project_makes_names_the_team_and_the_project(alice):
    make_job(alice.tenant, user=alice.user, invite=["ann@example.com"])

    drain()

    [email] = Notification.objects.filter(tenant_id=ACCOUNT_MAIL_TENANT_ID)
    assert email.subject == 'You are invited to the team "Tenant A" on Tickwork'
    assert 'join the team "Tenant A"' in email.body
    assert 'the project "Website relaunch"' in email.body
    assert "alice@example.com invited you" in email.body


def test_without_an_invite_list_or_a_creator_nobody_is_invited(alice):
    job = make_job(alice.tenant, user=None)

    drain()

    assert reload(job).project.status == ProjectStatus.ACTIVE
    assert not Notification.objects.exists()


def test_running_the_handler_again_creates_no_second_invitation_or_event(alice):
    make_endpoint(alice.tenant)
    job = make_job(alice.tenant, invite=["ann@example.com", "ANN@example.com"])

    provision_activate(job, now=NOW)
    provision_activate(job, now=NOW)

    assert Notification.objects.filter(channels=[Channel.EMAIL]).count() == 1
    assert Notification.objects.filter(channels=[Channel.WEBHOOK]).count() == 1


def test_a_reclaimed_duplicate_run_creates_nothing_new(alice):
    make_endpoint(alice.tenant)
    job = make_job(alice.tenant, invite=["ann@example.com"])
    # A first run applied its writes, then its worker died before the job was marked done.
    provision_activate(job, now=NOW)
    created = set(Notification.objects.values_list("id", flat=True))

    drain()

    assert reload(job).status == JobStatus.COMPLETED
    assert set(Notification.objects.values_list("id", flat=True)) == created


def test_completing_a_provision_job_takes_a_fixed_number_of_queries(
    alice, django_assert_num_queries
):
    make_endpoint(alice.tenant)
    # Members only: each address that is not one costs its invitation's statements.
    make_job(alice.tenant, invite=[alice.user.email])
    [job] = jobs_claim(now=NOW, limit=1)

    # savepoint, fenced update, project update, project read, members among the invited,
    # the event id's earlier message, endpoints, the message, the messages that landed,
    # the e-mails and deliveries, release
    with django_assert_num_queries(11):
        outcomes = jobs_process([job], clock=Clock(now=NOW), should_stop=lambda: False)

    assert outcomes == [Outcome.COMPLETED]


def test_a_dead_lettered_provision_reports_project_failed_then_a_retry_reports_activation(
    alice, settings
):
    from datetime import timedelta

    import responses

    from jobs.services import job_retry

    api = "https://provisioning.example.com/v1/workspaces"
    settings.PROVISIONING_URL = api
    endpoint, disabled = make_endpoint(alice.tenant), make_endpoint(alice.tenant, enabled=False)
    job = make_job(alice.tenant, user=alice.user, max_attempts=1)
    with responses.RequestsMock() as mock:
        mock.add(responses.POST, api, status=422)
        drain()
        drain()  # told once, however often the dead letter is seen

    job = reload(job)
    assert (job.status, job.project.status) == (JobStatus.DEAD_LETTERED, ProjectStatus.FAILED)
    [event] = Notification.objects.filter(channels=[Channel.WEBHOOK])
    assert event.webhook_endpoint_id == endpoint.id
    assert event.webhook_event["type"] == "project.failed"
    assert event.message.payload == {
        "project_id": str(job.project_id),
        "tenant_id": str(alice.tenant.id),
        "name": "Website relaunch",
    }
    [email] = Notification.objects.filter(channels=[Channel.EMAIL])
    assert email.email_to == [alice.user.email]
    assert "could not be set up" in email.subject
    assert not Notification.objects.filter(webhook_endpoint=disabled).exists()

    job_retry(tenant=alice.tenant, job_id=job.id, now=NOW)
    assert reload(job).project.status == ProjectStatus.PROVISIONING
    with responses.RequestsMock() as mock:
        mock.add(responses.POST, api, status=201)
        jobs_drain(clock=Clock(now=NOW + timedelta(minutes=1)), limit=100, max_seconds=60)

    job = reload(job)
    assert (job.status, job.project.status) == (JobStatus.COMPLETED, ProjectStatus.ACTIVE)
    types = sorted(
        n.webhook_event["type"] for n in Notification.objects.filter(channels=[Channel.WEBHOOK])
    )
    assert types == ["project.active", "project.failed"]
