"""Support staff see retired endpoints and recovery tasks: queue health counts the disabled
endpoints and links to them, the endpoint list filters on why they were disabled, and a
recovery task (a job of no project) is listed among the jobs."""

from datetime import timedelta

from django.utils import timezone

from delivery.models import DISABLED_FAILING
from tests.delivery.factories import make_endpoint, make_tenant
from webhooks.recovery import RECOVER_KIND, endpoint_recover

URL = "https://hooks.example.com/in"


def test_queue_health_counts_and_links_the_disabled_endpoints(admin_client):
    tenant = make_tenant("Acme")
    make_endpoint(tenant=tenant, url=URL)
    retired = make_endpoint(tenant=tenant, url=URL, enabled=False)
    retired.disabled_reason = DISABLED_FAILING
    retired.save()

    response = admin_client.get("/admin/queue-health/")

    assert response.context["notifications"]["disabled_endpoints"] == 1
    assert "?enabled__exact=0" in response.content.decode()


def test_the_endpoint_list_filters_the_retired_ones(admin_client):
    tenant = make_tenant("Acme")
    make_endpoint(tenant=tenant, url="https://hooks.example.com/up")
    retired = make_endpoint(tenant=tenant, url="https://hooks.example.com/retired", enabled=False)
    retired.disabled_reason = DISABLED_FAILING
    retired.save()

    response = admin_client.get(
        "/admin/delivery/webhookendpoint/", {"disabled_reason": DISABLED_FAILING}
    )

    assert response.status_code == 200
    assert [row.pk for row in response.context["cl"].result_list] == [retired.pk]


def test_a_recovery_task_is_listed_among_the_jobs(admin_client):
    tenant = make_tenant("Acme")
    endpoint = make_endpoint(tenant=tenant, url=URL)
    task = endpoint_recover(
        tenant=tenant, endpoint_id=endpoint.id, since=timezone.now() - timedelta(hours=1)
    )

    listed = admin_client.get("/admin/jobs/job/", {"kind": RECOVER_KIND})
    shown = admin_client.get(f"/admin/jobs/job/{task.pk}/change/")

    assert listed.status_code == 200
    assert [job.pk for job in listed.context["cl"].result_list] == [task.pk]
    assert shown.status_code == 200
