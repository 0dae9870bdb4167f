"""Failed-authentication counts are kept on the primary only (an unlogged table on
PostgreSQL, which replicas do not hold): a JWT's user and its address's count are read
there even while the request's reads are routed to a replica."""

from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from dbtools import replicas
from dbtools.ratelimit import count_request
from dbtools.rates import parse_rate
from tenancy.api.identities import jwt_user
from tenancy.models import ExternalIdentity
from tenancy.services import AddressBlocked, FailureLimit
from tests.conftest import requires_postgres
from tests.support.concurrency import run_together

# transaction=True: outside a transaction reads follow the request's routing.
pytestmark = pytest.mark.django_db(transaction=True)

User = get_user_model()
ISSUER = "https://login.example.com"
FAILURES = FailureLimit(key="authfail:192.0.2.7", limit=2)


@contextmanager
def reads_routed_to_a_replica():
    """A replica alias no connection exists for: a read sent there fails the test."""
    token = replicas.routing.set(replicas.Routing("replica_missing", replicas.Lsn(0)))
    try:
        yield
    finally:
        replicas.routing.reset(token)


def claims(subject: str) -> dict:
    return {"sub": subject, "email": f"{subject}@example.com", "email_verified": True}


def test_a_known_subject_and_its_count_are_read_on_the_primary(alice):
    ExternalIdentity.objects.create(issuer=ISSUER, subject="alice", user=alice.user)

    with reads_routed_to_a_replica():
        user = jwt_user(claims=claims("alice"), issuer=ISSUER, failures=FAILURES)

    assert user == alice.user


def test_an_address_over_its_limit_is_refused_from_the_primarys_count(db):
    for _ in range(2):
        count_request(FAILURES.key, parse_rate("2/min"))

    with reads_routed_to_a_replica(), pytest.raises(AddressBlocked) as refused:
        jwt_user(claims=claims("new"), issuer=ISSUER, failures=FAILURES)

    assert 0 < refused.value.seconds_left <= 60
    assert not ExternalIdentity.objects.exists()


@requires_postgres
def test_on_postgresql_the_counts_are_not_written_ahead():
    with connection.cursor() as cursor:
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = 'dbtools_ratewindow'")
        assert cursor.fetchone() == ("u",)


@requires_postgres
def test_a_subject_another_request_stored_first_is_read_back_on_the_primary(monkeypatch):
    create = ExternalIdentity.objects.create

    def stored_first_elsewhere(**fields):
        # The concurrent first request commits the same subject on its own connection ...
        def other_request():
            other = User.objects.create(username="first@example.com", email="first@example.com")
            create(issuer=fields["issuer"], subject=fields["subject"], user=other)

        run_together([other_request])
        return create(**fields)  # ... so this one breaks the unique constraint

    monkeypatch.setattr(ExternalIdentity.objects, "create", stored_first_elsewhere)

    with reads_routed_to_a_replica():
        user = jwt_user(claims=claims("racer"), issuer=ISSUER, failures=FAILURES)

    assert user.username == "first@example.com"
    assert ExternalIdentity.objects.get(subject="racer").user == user
