from django.utils import timezone

from dbqueue.models import WorkerTotal
from dbqueue.totals import worker_totals_add


def test_worker_totals_are_listed_read_only(admin_client, db):
    worker_totals_add("run_tick", {"delivered": 7}, now=timezone.now())
    total = WorkerTotal.objects.get(worker="run_tick", name="delivered")

    listing = admin_client.get("/admin/dbqueue/workertotal/")
    change = admin_client.post(f"/admin/dbqueue/workertotal/{total.pk}/change/", {"total": 0})

    assert listing.status_code == 200
    assert b"delivered" in listing.content
    assert change.status_code == 403
    assert admin_client.get("/admin/dbqueue/workertotal/add/").status_code == 403
    assert WorkerTotal.objects.get(pk=total.pk).total == 7
