"""A claim statement is compiled once per shape of claim and only its parameters are bound
per call: a cached statement must claim exactly what a freshly compiled one would."""

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.db.models.sql.query import Query

from dbqueue import claims, ranking
from delivery.models import Notification
from delivery.scheduler.tick import DUE
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=45)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    ranking._COMPILED.clear()
    yield
    ranking._COMPILED.clear()


@pytest.fixture
def compiles(monkeypatch) -> Counter:
    """How many times Django compiled a query (each claim statement compiles its ranking)."""
    counted: Counter = Counter()
    real = Query.get_compiler

    def get_compiler(self, *args, **kwargs):
        counted["compiles"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Query, "get_compiler", get_compiler)
    return counted


def claimed_pks(**options) -> set:
    options = {"now": NOW, "lease": LEASE, "limit": 50, **options}
    return {row.pk for row in claims.claim(DUE, **options)}


def pks(rows) -> set:
    return {row.pk for row in rows}


def test_the_second_claim_of_a_shape_compiles_nothing(compiles):
    tenant = make_tenant()
    make_notifications(3, tenant=tenant, next_fire_at=NOW)

    with transaction.atomic():
        assert len(claimed_pks(limit=1)) == 1
        first = compiles["compiles"]
        assert first > 0
        # Another time, another batch size: the same statement, other parameters.
        assert len(claimed_pks(now=NOW + timedelta(seconds=5), limit=2)) == 2
        assert compiles["compiles"] == first


def test_a_cached_statement_claims_at_the_time_it_is_given():
    tenant = make_tenant()
    due_now = pks(make_notifications(1, tenant=tenant, next_fire_at=NOW))
    later = NOW + timedelta(seconds=30)
    due_later = pks(make_notifications(1, tenant=tenant, next_fire_at=later))

    assert claimed_pks() == due_now
    # Same shape, so the cached statement; its time is this call's.
    assert claimed_pks(now=later) == due_later
    # The first lease ends at NOW + 45 s: at NOW + 46 s that row is claimable again.
    assert claimed_pks(now=NOW + timedelta(seconds=46)) == due_now


def test_a_cached_statement_skips_the_endpoints_of_this_call():
    tenant = make_tenant()
    first = make_endpoint(tenant=tenant, url="https://first.example.com/hook")
    second = make_endpoint(tenant=tenant, url="https://second.example.com/hook")
    of_first = pks(make_notifications(2, tenant=tenant, endpoint=first, next_fire_at=NOW))
    of_second = pks(make_notifications(2, tenant=tenant, endpoint=second, next_fire_at=NOW))

    with transaction.atomic():
        assert claimed_pks(skip={first.pk}) == of_second
        transaction.set_rollback(True)
    assert claimed_pks(skip={second.pk}) == of_first


def test_a_cached_statement_caps_with_the_numbers_of_this_call():
    tenant = make_tenant()
    first = make_endpoint(tenant=tenant, url="https://first.example.com/hook")
    second = make_endpoint(tenant=tenant, url="https://second.example.com/hook")
    make_notifications(5, tenant=tenant, endpoint=first, next_fire_at=NOW)
    make_notifications(5, tenant=tenant, endpoint=second, next_fire_at=NOW)
    mails = pks(
        make_notifications(
            2, tenant=tenant, channels=("email",), email_to=("a@example.com",), next_fire_at=NOW
        )
    )

    def per_endpoint(**options) -> Counter:
        with transaction.atomic():
            rows = claims.claim(DUE, now=NOW, lease=LEASE, limit=50, **options)
            transaction.set_rollback(True)
        assert mails <= pks(rows)  # rows without an endpoint are never capped
        return Counter(row.webhook_endpoint_id for row in rows if row.webhook_endpoint_id)

    assert per_endpoint(cap=1) == {first.pk: 1, second.pk: 1}
    assert per_endpoint(cap=3) == {first.pk: 3, second.pk: 3}
    assert per_endpoint(cap=1, caps={first.pk: 4}) == {first.pk: 4, second.pk: 1}
    assert per_endpoint(cap=2, caps={second.pk: 5}) == {first.pk: 2, second.pk: 5}


def test_a_changed_predicate_is_never_served_the_old_statement():
    tenant = make_tenant()
    wanted = pks(make_notifications(1, tenant=tenant, next_fire_at=NOW, subject="b"))

    def ready_with(subject):
        return claims.ClaimSpec(
            ready=lambda now: DUE.ready(now).filter(subject=subject),
            order_by=DUE.order_by,
            fair_by=DUE.fair_by,
        )

    assert claims.claim(ready_with("a"), now=NOW, lease=LEASE, limit=5) == []
    claimed = claims.claim(ready_with("b"), now=NOW, lease=LEASE, limit=5)
    assert {row.pk for row in claimed} == wanted


def test_the_statement_cache_stays_bounded():
    tenant = make_tenant()
    make_notifications(1, tenant=tenant, next_fire_at=NOW, subject="kept")

    for n in range(ranking.COMPILED_MAX + 5):
        # Each ready predicate is a shape of its own.
        spec = claims.ClaimSpec(
            ready=lambda now, n=n: DUE.ready(now).exclude(subject=f"other {n}"),
            order_by=DUE.order_by,
            fair_by=DUE.fair_by,
        )
        with transaction.atomic():
            assert len(claims.claim(spec, now=NOW, lease=LEASE, limit=5)) == 1
            transaction.set_rollback(True)

    assert len(ranking._COMPILED) == ranking.COMPILED_MAX


def test_any_number_of_skipped_endpoints_is_one_shape_and_caps_a_shape_per_distinct_cap():
    tenant = make_tenant()
    endpoints = [make_endpoint(tenant=tenant, url=f"https://e{n}.example.com/") for n in range(9)]
    for endpoint in endpoints:
        make_notifications(2, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    make_notifications(
        2, tenant=tenant, channels=["email"], email_to=["a@example.com"], next_fire_at=NOW
    )

    for count in range(9):  # none skipped, then 1 to 8 in one list: two shapes
        with transaction.atomic():
            skipped = [endpoint.pk for endpoint in endpoints[:count]]
            claimed = claimed_pks(skip=skipped)
            # The two email rows name no endpoint: never skipped.
            assert len(claimed) == 18 - 2 * count + 2
            transaction.set_rollback(True)
    assert len(ranking._COMPILED) == 2

    with transaction.atomic():  # three endpoints capped at 1 and two at 0: two distinct caps
        caps = {endpoint.pk: 1 for endpoint in endpoints[:3]}
        caps |= {endpoint.pk: 0 for endpoint in endpoints[3:5]}
        rows = claims.claim(DUE, now=NOW, lease=LEASE, limit=30, skip=(), cap=2, caps=caps)
        transaction.set_rollback(True)
    assert Counter(row.webhook_endpoint_id for row in rows) == {
        None: 2,
        **{endpoint.pk: caps.get(endpoint.pk, 2) for endpoint in endpoints[:3] + endpoints[5:]},
    }
    assert len(ranking._COMPILED) == 3


def test_a_claim_naming_thousands_of_endpoints_compiles_once_and_takes_what_it_should():
    tenant = make_tenant()
    endpoints = [make_endpoint(tenant=tenant, url=f"https://e{n}.example.com/") for n in range(3)]
    for endpoint in endpoints:
        make_notifications(3, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
    # Endpoints a tick has seen: thousands, most with no due row left.
    seen = [uuid.uuid4() for _ in range(2000)]
    caps = {value: 1 + n % 2 for n, value in enumerate(seen)} | {endpoints[0].pk: 1}

    with transaction.atomic():
        rows = claims.claim(
            DUE, now=NOW, lease=LEASE, limit=30, skip=[*seen, endpoints[2].pk], cap=3, caps=caps
        )
        transaction.set_rollback(True)

    assert Counter(row.webhook_endpoint_id for row in rows) == {
        endpoints[0].pk: 1,
        endpoints[1].pk: 3,
    }
    # One ranking compiled, whatever the number of values (its size is in parameters).
    assert len(ranking._COMPILED) == 1


def test_skip_and_cap_need_a_capped_field():
    spec = claims.ClaimSpec(ready=DUE.ready, order_by=DUE.order_by, fair_by=DUE.fair_by)

    with pytest.raises(ValueError, match="capped_by"):
        claims.claim(spec, now=NOW, lease=LEASE, limit=1, cap=1)
    assert Notification.objects.count() == 0
