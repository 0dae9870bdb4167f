"""The fake Resend API answers like the real one: its rate limit and headers, /emails and
/emails/batch with strict and permissive validation, idempotency keys, auth, and the
failures a test can script. Every request goes over real HTTP; a ManualClock moves time."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from urllib3.util import SKIP_HEADER

from tests.support.fake_resend import FakeResend, ManualClock, fake_resend

KEY = "re_test_key"


def email(to: str | list[str] = "ada@example.com", **fields: Any) -> dict[str, Any]:
    return {"from": "Tickwork <noreply@tickwork.test>", "to": to, "subject": "Hi", **fields}


def post(
    fake: FakeResend,
    path: str,
    payload: Any,
    *,
    key: str | None = None,
    headers: dict[str, str | None] | None = None,
    timeout: float = 10,
) -> requests.Response:
    sent_headers: dict[str, str | None] = {
        "Authorization": f"Bearer {fake.api_key}",
        "Content-Type": "application/json",
    }
    if key is not None:
        sent_headers["Idempotency-Key"] = key
    sent_headers.update(headers or {})
    # json.dumps once, here: the idempotency tests rely on equal payloads being equal bytes.
    return requests.post(
        f"{fake.url}{path}", data=json.dumps(payload), headers=sent_headers, timeout=timeout
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake(clock: ManualClock):
    """A fake whose bucket never gets in the way (the rate tests build their own)."""
    with fake_resend(rate=1000, clock=clock) as started:
        yield started


# -- rate limit ------------------------------------------------------------------------------


def rate_headers(answer: requests.Response) -> dict[str, str]:
    names = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "retry-after")
    return {name: answer.headers[name] for name in names if name in answer.headers}


def test_a_burst_is_answered_then_429_with_every_header_and_nothing_sent(clock):
    with fake_resend(rate=2, clock=clock) as fake:
        first = post(fake, "/emails", email("a@example.com"))
        second = post(fake, "/emails", email("b@example.com"))
        refused = post(fake, "/emails", email("c@example.com"), key="k-1")

        assert [first.status_code, second.status_code] == [200, 200]
        assert rate_headers(first) == {
            "ratelimit-limit": "2",
            "ratelimit-remaining": "1",
            "ratelimit-reset": "1",
        }
        assert rate_headers(second) == {
            "ratelimit-limit": "2",
            "ratelimit-remaining": "0",
            "ratelimit-reset": "1",
        }
        assert refused.status_code == 429
        assert rate_headers(refused) == {
            "ratelimit-limit": "2",
            "ratelimit-remaining": "0",
            "ratelimit-reset": "1",
            "retry-after": "1",
        }
        body = refused.json()
        assert (body["statusCode"], body["name"]) == (429, "rate_limit_exceeded")
        assert set(body) == {"statusCode", "message", "name"}
        assert len(fake.sent) == 2
        assert fake.sent_to["c@example.com"] == 0
        assert (fake.answered(200), fake.answered(429)) == (2, 1)

        # The refused request stored no key: the same key with another body is a new send.
        clock.advance(1)
        assert post(fake, "/emails", email("d@example.com"), key="k-1").status_code == 200


def test_retry_after_and_reset_follow_a_slow_rate(clock):
    with fake_resend(rate=0.5, clock=clock) as fake:
        assert post(fake, "/emails", email()).status_code == 200
        refused = post(fake, "/emails", email())

        assert refused.status_code == 429
        assert rate_headers(refused) == {
            "ratelimit-limit": "0.5",
            "ratelimit-remaining": "0",
            "ratelimit-reset": "2",
            "retry-after": "2",
        }


def test_the_bucket_refills_with_the_clock_up_to_its_burst(clock):
    with fake_resend(rate=2, clock=clock) as fake:
        statuses = [post(fake, "/emails", email()).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]

        clock.advance(0.5)  # one token at 2/s
        assert [post(fake, "/emails", email()).status_code for _ in range(2)] == [200, 429]

        clock.advance(60)  # refills to the burst, not beyond
        statuses = [post(fake, "/emails", email()).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        assert len(fake.sent) == 5


def test_burst_sets_the_bucket_capacity(clock):
    with fake_resend(rate=2, burst=5, clock=clock) as fake:
        statuses = [post(fake, "/emails", email()).status_code for _ in range(6)]

        assert statuses == [200] * 5 + [429]


def test_concurrent_requests_share_one_bucket(clock):
    with fake_resend(rate=10, clock=clock) as fake:
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = pool.map(
                lambda i: post(fake, "/emails", email(f"u{i}@example.com")), range(40)
            )
            statuses = [answer.status_code for answer in answers]

        assert statuses.count(200) == 10
        assert (fake.answered(200), fake.answered(429), len(fake.sent)) == (10, 30, 10)


# -- /emails ---------------------------------------------------------------------------------


def test_emails_sends_and_counts(fake):
    answer = post(fake, "/emails", email(["ada@example.com", "Bob <bob@example.com>"], text="t"))
    again = post(fake, "/emails", email("ada@example.com", html="<p>h</p>"))

    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    [first, second] = fake.sent
    assert answer.json() == {"id": first.id}
    assert again.json() == {"id": second.id}
    assert first.to == ["ada@example.com", "Bob <bob@example.com>"]
    assert (first.subject, first.text, first.html) == ("Hi", "t", None)
    assert (first.batch_index, first.idempotency_key, first.request_number) == (None, None, 1)
    assert second.html == "<p>h</p>"
    assert fake.sent_to == {"ada@example.com": 2, "bob@example.com": 1}
    assert fake.duplicates() == {"ada@example.com": 2}

    [request, _] = fake.requests
    assert (request.number, request.method, request.path, request.status) == (
        1,
        "POST",
        "/emails",
        200,
    )
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["to"] == ["ada@example.com", "Bob <bob@example.com>"]
    assert request.response == {"id": first.id}
    assert request.answered_at == 0.0


@pytest.mark.parametrize(
    ("payload", "name", "message_part"),
    [
        (email(subject=None), "missing_required_field", "`subject`"),
        ({"to": "a@example.com", "subject": "s"}, "missing_required_field", "`from`"),
        (email(to=[]), "missing_required_field", "`to`"),
        (email(to=[f"r{i}@example.com" for i in range(51)]), "validation_error", "50"),
        (email(to="not-an-address"), "validation_error", "`to`"),
        (email(to=["ok@example.com", "also@bad"]), "validation_error", "`to`"),
        (email(cc="nope"), "validation_error", "`cc`"),
        ({**email(), "from": "Tickwork"}, "validation_error", "`from`"),
    ],
)
def test_an_invalid_email_is_422_and_not_sent(fake, payload, name, message_part):
    answer = post(fake, "/emails", payload)

    assert answer.status_code == 422
    body = answer.json()
    assert (body["statusCode"], body["name"]) == (422, name)
    assert message_part in body["message"]
    assert fake.sent == []


def test_fifty_recipients_are_allowed(fake):
    answer = post(fake, "/emails", email([f"r{i}@example.com" for i in range(50)]))

    assert answer.status_code == 200
    assert len(fake.sent_to) == 50


def test_unknown_paths_methods_and_bodies(fake):
    assert post(fake, "/domains", email()).json()["name"] == "not_found"
    auth = {"Authorization": f"Bearer {KEY}"}
    listed = requests.get(f"{fake.url}/emails", headers=auth, timeout=10)
    assert (listed.status_code, listed.json()["name"]) == (405, "method_not_allowed")
    broken = requests.post(f"{fake.url}/emails", data=b"{not json", headers=auth, timeout=10)
    assert (broken.status_code, broken.json()["name"]) == (400, "validation_error")
    assert fake.sent == []


# -- /emails/batch ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 100])
def test_a_batch_of_1_to_100_is_sent(fake, size):
    answer = post(fake, "/emails/batch", [email(f"r{i}@example.com") for i in range(size)])

    assert answer.status_code == 200
    assert answer.json() == {"data": [{"id": sent.id} for sent in fake.sent]}
    assert [sent.batch_index for sent in fake.sent] == list(range(size))
    assert {sent.request_number for sent in fake.sent} == {1}
    assert len(fake.sent_to) == size


@pytest.mark.parametrize("size", [0, 101])
@pytest.mark.parametrize("mode", ["strict", "permissive"])
def test_an_empty_or_oversized_batch_is_422(fake, size, mode):
    payload = [email(f"r{i}@example.com") for i in range(size)]
    answer = post(fake, "/emails/batch", payload, headers={"x-batch-validation": mode})

    assert answer.status_code == 422
    assert answer.json()["name"] == "validation_error"
    assert fake.sent == []


@pytest.mark.parametrize(
    "extra",
    [
        {"attachments": [{"filename": "a.txt", "content": "aGk="}]},
        {"scheduled_at": "in 1 min"},
    ],
)
def test_attachments_and_scheduled_at_are_refused_in_a_batch(fake, extra):
    answer = post(fake, "/emails/batch", [email(), email("b@example.com", **extra)])

    assert answer.status_code == 422
    body = answer.json()
    assert body["name"] == "validation_error"
    assert next(iter(extra)) in body["message"]
    assert fake.sent == []
    # The same fields are fine on /emails.
    assert post(fake, "/emails", email(**extra)).status_code == 200


@pytest.mark.parametrize("header", [{}, {"x-batch-validation": "strict"}])
def test_strict_mode_refuses_the_whole_batch_for_one_invalid_email(fake, header):
    payload = [email("a@example.com"), email("not-an-address"), email("c@example.com")]
    answer = post(fake, "/emails/batch", payload, headers=header)

    assert answer.status_code == 422
    body = answer.json()
    assert (body["statusCode"], body["name"]) == (422, "validation_error")
    assert "emails[1]" in body["message"]
    assert fake.sent == []
    assert fake.sent_to == {}


def test_permissive_mode_sends_the_valid_emails_and_lists_the_errors_by_index(fake):
    payload = [
        email("a@example.com"),
        {"from": "noreply@tickwork.test", "subject": "no to"},
        email("c@example.com"),
        email("not-an-address"),
        email("e@example.com", attachments=[]),
    ]
    answer = post(fake, "/emails/batch", payload, headers={"x-batch-validation": "permissive"})

    assert answer.status_code == 200
    body = answer.json()
    assert [sent.batch_index for sent in fake.sent] == [0, 2]
    assert body["data"] == [{"id": sent.id} for sent in fake.sent]
    assert [error["index"] for error in body["errors"]] == [1, 3, 4]
    assert "`to`" in body["errors"][0]["message"]
    assert fake.sent_to == {"a@example.com": 1, "c@example.com": 1}


def test_permissive_mode_with_nothing_wrong_answers_an_empty_errors_list(fake):
    answer = post(fake, "/emails/batch", [email()], headers={"x-batch-validation": "permissive"})

    assert answer.json() == {"data": [{"id": fake.sent[0].id}], "errors": []}


# -- idempotency -----------------------------------------------------------------------------


def test_same_key_and_body_replay_the_first_answer_without_sending_again(fake):
    first = post(fake, "/emails", email(), key="welcome/1")
    replay = post(fake, "/emails", email(), key="welcome/1")
    batch = post(fake, "/emails/batch", [email("b@example.com")], key="batch/1")
    batch_replay = post(fake, "/emails/batch", [email("b@example.com")], key="batch/1")

    assert (first.status_code, replay.status_code) == (200, 200)
    assert replay.json() == first.json()
    assert batch_replay.json() == batch.json()
    assert len(fake.sent) == 2
    assert fake.sent[0].idempotency_key == "welcome/1"
    assert fake.duplicates() == {}
    # A replay still goes through the rate limiter.
    assert "ratelimit-remaining" in replay.headers


def test_same_key_with_another_body_or_path_is_409_invalid_idempotent_request(fake):
    assert post(fake, "/emails", email("a@example.com"), key="k").status_code == 200
    other_body = post(fake, "/emails", email("b@example.com"), key="k")
    other_path = post(fake, "/emails/batch", [email("a@example.com")], key="k")

    for answer in (other_body, other_path):
        assert answer.status_code == 409
        assert answer.json()["name"] == "invalid_idempotent_request"
    assert len(fake.sent) == 1


def test_same_key_while_the_first_is_processed_is_409_concurrent_idempotent_requests(fake):
    fake.hang_next(1, seconds=30)
    answers: dict[str, requests.Response] = {}
    first = threading.Thread(
        target=lambda: answers.setdefault("first", post(fake, "/emails", email(), key="k"))
    )
    first.start()
    try:
        fake.wait_until_hanging(1)
        concurrent = post(fake, "/emails", email(), key="k")
        assert fake.sent == []
    finally:
        fake.release_hung()
        first.join(10)

    assert concurrent.status_code == 409
    assert concurrent.json()["name"] == "concurrent_idempotent_requests"
    assert answers["first"].status_code == 200
    replay = post(fake, "/emails", email(), key="k")
    assert replay.json() == answers["first"].json()
    assert len(fake.sent) == 1


def test_a_key_expires_after_its_ttl(clock):
    with fake_resend(rate=1000, key_ttl_seconds=60, clock=clock) as fake:
        first = post(fake, "/emails", email(), key="k")
        clock.advance(59)
        assert post(fake, "/emails", email(), key="k").json() == first.json()

        clock.advance(1)
        after = post(fake, "/emails", email(), key="k")

        assert after.status_code == 200
        assert after.json() != first.json()
        assert len(fake.sent) == 2
        assert fake.duplicates() == {"ada@example.com": 2}


def test_a_rejected_request_keeps_no_key(fake):
    assert post(fake, "/emails", email("bad"), key="k").status_code == 422

    assert post(fake, "/emails", email("good@example.com"), key="k").status_code == 200


def test_an_idempotency_key_longer_than_256_chars_is_400(fake):
    answer = post(fake, "/emails", email(), key="k" * 257)

    assert answer.status_code == 400
    assert answer.json()["name"] == "invalid_idempotency_key"
    assert post(fake, "/emails", email(), key="k" * 256).status_code == 200


# -- scripted failures -----------------------------------------------------------------------


def test_a_lost_answer_then_a_retry_with_the_same_key_is_a_replay(fake):
    fake.fail_next(1, status=500, after_processing=True)

    lost = post(fake, "/emails", email(), key="k")
    retry = post(fake, "/emails", email(), key="k")

    assert lost.status_code == 500
    assert lost.json() == {
        "statusCode": 500,
        "message": lost.json()["message"],
        "name": "internal_server_error",
    }
    assert retry.status_code == 200
    assert retry.json() == {"id": fake.sent[0].id}
    assert len(fake.sent) == 1
    assert fake.answered(500) == 1


def test_a_failure_before_processing_sends_nothing_and_keeps_no_key(fake):
    fake.fail_next(2, status=503, name="application_error", headers={"Retry-After": "7"})

    failed = [post(fake, "/emails", email(), key="k") for _ in range(2)]
    retry = post(fake, "/emails", email(), key="k")

    assert [answer.status_code for answer in failed] == [503, 503]
    assert failed[0].json()["name"] == "application_error"
    assert failed[0].headers["retry-after"] == "7"
    assert "ratelimit-limit" in failed[0].headers
    assert retry.status_code == 200
    assert len(fake.sent) == 1


def test_an_injected_429_carries_retry_after(fake):
    fake.fail_next(1, status=429)

    answer = post(fake, "/emails", email())

    assert answer.status_code == 429
    assert (answer.json()["name"], answer.headers["retry-after"]) == ("rate_limit_exceeded", "1")


def test_a_hung_answer_makes_the_client_time_out_and_the_email_is_still_sent(fake):
    fake.hang_next(1, seconds=30)

    with pytest.raises(requests.Timeout):
        post(fake, "/emails", email(), key="k", timeout=0.3)
    fake.release_hung()
    fake.wait_until_answered(1)
    retry = post(fake, "/emails", email(), key="k")

    assert fake.requests[0].status == 200
    assert retry.json() == {"id": fake.sent[0].id}
    assert len(fake.sent) == 1


def test_refuse_until_answers_every_request_until_the_moment(clock):
    with fake_resend(rate=2, clock=clock) as fake:
        fake.refuse_until(300)

        first = post(fake, "/emails", email())
        clock.advance(299.5)
        last = post(fake, "/emails", email())
        clock.advance(0.5)
        after = [post(fake, "/emails", email()) for _ in range(3)]

        assert first.status_code == 429
        assert first.json()["name"] == "rate_limit_exceeded"
        assert rate_headers(first) == {
            "ratelimit-limit": "2",
            "ratelimit-remaining": "0",
            "ratelimit-reset": "300",
            "retry-after": "300",
        }
        assert last.headers["retry-after"] == "1"
        # Refused requests used no tokens: the full burst is there once the moment passes.
        assert [answer.status_code for answer in after] == [200, 200, 429]
        assert len(fake.sent) == 2


def test_refuse_until_with_another_status_and_retry_after(clock):
    with fake_resend(clock=clock) as fake:
        fake.refuse_until(60, status=503, retry_after=30)

        answer = post(fake, "/emails", email())

        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "30"
        assert fake.sent == []


# -- auth and the edge -----------------------------------------------------------------------


def test_auth_and_user_agent_are_checked_before_anything_else(clock):
    with fake_resend(rate=1, clock=clock) as fake:
        missing = post(fake, "/emails", email(), headers={"Authorization": None})
        wrong = post(fake, "/emails", email(), headers={"Authorization": "Bearer re_wrong"})
        no_agent = post(fake, "/emails", email(), headers={"User-Agent": SKIP_HEADER})

        assert (missing.status_code, missing.json()["name"]) == (401, "missing_api_key")
        assert missing.json()["statusCode"] == 401
        assert (wrong.status_code, wrong.json()["name"]) == (403, "invalid_api_key")
        # Resend's edge answers this one, in Cloudflare's words rather than a JSON error.
        assert (no_agent.status_code, no_agent.text) == (403, "error code: 1010")
        assert "ratelimit-limit" not in missing.headers
        assert fake.sent == []
        # None of them used the single token.
        assert post(fake, "/emails", email()).status_code == 200


# -- the module ------------------------------------------------------------------------------


def test_manual_clock_moves_only_forward():
    clock = ManualClock(10)
    clock.advance(2.5)

    assert clock() == 12.5
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_the_url_exists_only_once_started():
    fake = FakeResend()
    with pytest.raises(RuntimeError):
        _ = fake.url
    fake.start()
    try:
        assert fake.url.startswith("http://127.0.0.1:")
    finally:
        fake.stop()
