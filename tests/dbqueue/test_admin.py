from django.utils import timezone

from dbqueue.models import ConcurrencySlot, WorkerTotal
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


def test_endpoint_slots_are_listed_read_only_with_their_holder_and_lease(admin_client, db):
    held = ConcurrencySlot.objects.create(
        scope="webhook:42", slot=0, holder="a" * 32, held_until_us=1_700_000_000_000_000
    )
    ConcurrencySlot.objects.create(scope="webhook:42", slot=1)

    listing = admin_client.get("/admin/dbqueue/concurrencyslot/?q=webhook:42")
    change = admin_client.post(f"/admin/dbqueue/concurrencyslot/{held.pk}/change/", {"holder": ""})

    assert listing.status_code == 200
    assert b"a" * 32 in listing.content
    assert b"2023-11-14T22:13:20+00:00" in listing.content
    assert b"free" in listing.content
    assert change.status_code == 403
    assert ConcurrencySlot.objects.get(pk=held.pk).holder == "a" * 32
