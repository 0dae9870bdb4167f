"""Rate limits in one process: anonymous requests per address, failed authentication per
address, users per user, Retry-After and the window's end.

Every rate here is per hour: a window starts at its key's first request, so none can end
within a test that lasts seconds. A window's end is reached by moving the row's end into
the past, never by waiting.
"""

import pytest
from rest_framework.test import APIClient

from dbtools.models import RateWindow
from tenancy.models import ApiToken
from tests.support.problems import assert_problem

pytestmark = pytest.mark.django_db

ELSEWHERE = "198.51.100.7"


def end_window(key: str) -> None:
    RateWindow.objects.filter(key=key).update(expires_us=0)


def assert_throttled(response) -> None:
    assert_problem(response, 429)
    assert 1 <= int(response["Retry-After"]) <= 3600


def wrong_token(client: APIClient, **extra):
    return client.get("/v1/me", HTTP_AUTHORIZATION="Bearer tkw_0123456789ab_wrong", **extra)


def test_public_routes_share_the_anonymous_limit_of_an_address(settings):
    settings.THROTTLE_RATE_ANON = "3/hour"
    client = APIClient()

    answers = [client.get(path).status_code for path in ("/v1/docs", "/v1/docs", "/v1/schema")]
    refused = client.get("/v1/schema")
    other_address = client.get("/v1/docs", REMOTE_ADDR=ELSEWHERE)

    assert answers == [200, 200, 200]
    assert_throttled(refused)
    assert other_address.status_code == 200


def test_the_window_ends_and_counting_starts_again(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    client = APIClient()
    assert client.get("/v1/docs").status_code == 200
    assert client.get("/v1/docs").status_code == 429

    end_window("anon:127.0.0.1")

    assert client.get("/v1/docs").status_code == 200
    assert RateWindow.objects.get(key="anon:127.0.0.1").count == 1


def test_an_anonymous_request_to_a_private_route_is_401_and_counts_nothing(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    client = APIClient()

    assert [client.get("/v1/projects").status_code for _ in range(3)] == [401, 401, 401]
    assert not RateWindow.objects.exists()


def test_failed_authentications_lock_the_address_out_even_with_a_good_token(alice, settings):
    settings.THROTTLE_RATE_AUTH_FAILURES = "3/hour"
    client = APIClient()
    revoked = alice.client()
    failures = [
        wrong_token(client),
        client.get("/v1/me", HTTP_AUTHORIZATION="Bearer not-one-of-ours"),
        client.get("/v1/me", HTTP_AUTHORIZATION="Bearer two parts"),
    ]
    ApiToken.objects.update(revoked_at="2020-01-01T00:00:00Z")
    revoked_failure = revoked.get("/v1/me")
    ApiToken.objects.update(revoked_at=None)

    assert [response.status_code for response in failures] == [401, 401, 401]
    assert_throttled(revoked_failure)  # the fourth failure is over the limit
    assert_throttled(alice.client().get("/v1/me"))
    assert_throttled(wrong_token(client))


def test_a_good_token_from_another_address_is_unaffected(alice, settings):
    settings.THROTTLE_RATE_AUTH_FAILURES = "2/hour"
    client = APIClient()
    for _ in range(3):
        wrong_token(client)

    assert_throttled(alice.client().get("/v1/me"))
    assert alice.client().get("/v1/me", REMOTE_ADDR=ELSEWHERE).status_code == 200
    assert wrong_token(client, REMOTE_ADDR=ELSEWHERE).status_code == 401


def test_a_blocked_address_is_refused_before_its_token_is_checked(alice, settings):
    settings.THROTTLE_RATE_AUTH_FAILURES = "1/hour"
    client = alice.client()
    wrong_token(APIClient())
    wrong_token(APIClient())

    response = client.get("/v1/me")

    assert_throttled(response)
    # The good token was not taken: its first use would have recorded last_used_at.
    assert ApiToken.objects.get(user=alice.user).last_used_at is None


def test_the_user_limit_counts_per_user_whatever_the_address(alice, charlie, settings):
    settings.THROTTLE_RATE_USER = "2/hour"
    client = alice.client()

    answers = [client.get("/v1/me", REMOTE_ADDR=address).status_code for address in
               ("192.0.2.1", "192.0.2.2")]  # fmt: skip
    refused = client.get("/v1/me", REMOTE_ADDR="192.0.2.3")

    assert answers == [200, 200]
    assert_throttled(refused)
    assert charlie.client().get("/v1/me").status_code == 200


def test_forwarded_for_is_ignored_unless_proxies_are_trusted(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    client = APIClient()
    assert client.get("/v1/docs", HTTP_X_FORWARDED_FOR="203.0.113.1").status_code == 200

    assert client.get("/v1/docs", HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 429


def test_a_trusted_proxy_names_the_client(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    settings.TRUSTED_PROXY_COUNT = 1
    client = APIClient()
    spoofed_then_real = "6.6.6.6, 203.0.113.1"
    assert client.get("/v1/docs", HTTP_X_FORWARDED_FOR=spoofed_then_real).status_code == 200

    assert client.get("/v1/docs", HTTP_X_FORWARDED_FOR="7.7.7.7, 203.0.113.1").status_code == 429
    assert client.get("/v1/docs", HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 200


def test_an_ipv6_client_is_counted_by_its_64_network(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    client = APIClient()
    assert client.get("/v1/docs", REMOTE_ADDR="2001:db8:1:2::1").status_code == 200

    assert client.get("/v1/docs", REMOTE_ADDR="2001:db8:1:2:ffff::9").status_code == 429
    assert client.get("/v1/docs", REMOTE_ADDR="2001:db8:1:3::1").status_code == 200
    assert RateWindow.objects.filter(key="anon:2001:db8:1:2::/64").exists()


def test_ended_windows_are_deleted_when_a_key_starts_a_new_one(settings):
    settings.THROTTLE_RATE_ANON = "5/hour"
    client = APIClient()
    client.get("/v1/docs", REMOTE_ADDR="192.0.2.1")
    end_window("anon:192.0.2.1")

    client.get("/v1/docs", REMOTE_ADDR="192.0.2.2")

    assert list(RateWindow.objects.values_list("key", flat=True)) == ["anon:192.0.2.2"]
