"""Bearer JWTs of the configured identity provider, against a local issuer on 127.0.0.1
(discovery document and JWKS served for real, keys made in the test): what is accepted,
what is refused (401 + WWW-Authenticate, counted as a failed authentication), the user by
`sub` or verified email, no membership from a JWT, and the key cache's refetch pacing under
a clock the test controls."""

import base64
import json
import logging

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from dbtools.models import RateWindow
from tenancy.api import oidc
from tenancy.models import ExternalIdentity
from tests.support.addresses import address
from tests.support.oidc_issuer import ec_key, local_issuer, rsa_key
from tests.web.write_endpoints import assert_problem
from web.fields import MAX_EMAIL_LENGTH

pytestmark = pytest.mark.django_db


@pytest.fixture
def issuer(settings):
    with local_issuer(rsa_key("rsa-1"), ec_key("ec-1")) as served:
        settings.OIDC_ISSUER, settings.OIDC_AUDIENCE = served.url, served.audience
        oidc._verifier.cache_clear()
        yield served
    oidc._verifier.cache_clear()


def bearer(token: str, **headers: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", **headers)
    return client


def failures_counted() -> int:
    row = RateWindow.objects.filter(key="authfail:127.0.0.1").first()
    return 0 if row is None else row.count


def assert_refused(response) -> None:
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert_problem(response)


@pytest.mark.parametrize("kid", ["rsa-1", "ec-1"])
def test_a_valid_jwt_authenticates_and_its_subject_is_stored(issuer, kid):
    key = next(key for key in issuer.published if key.kid == kid)

    response = bearer(issuer.token(key)).get("/v1/me")

    assert response.status_code == 200
    assert response.json()["tenants"] == []
    assert response.json()["email"] == "jo@example.com"
    identity = ExternalIdentity.objects.get()
    assert (identity.issuer, identity.subject) == (issuer.url, "idp-user-1")
    assert identity.user.email == "jo@example.com"


def test_a_known_subject_is_found_by_sub_whatever_its_email_says(issuer):
    bearer(issuer.token()).get("/v1/me")

    again = bearer(issuer.token(email="other@example.com", email_verified=False)).get("/v1/me")

    assert again.json()["email"] == "jo@example.com"
    assert get_user_model().objects.count() == 1
    assert ExternalIdentity.objects.count() == 1


def test_a_verified_email_links_the_existing_user_with_their_memberships(issuer, alice):
    token = issuer.token(sub="alice-at-idp", email="Alice@Example.com")

    response = bearer(token, HTTP_X_TENANT_ID=str(alice.tenant.id)).get("/v1/projects")

    assert response.status_code == 200
    assert ExternalIdentity.objects.get(subject="alice-at-idp").user == alice.user


def test_a_jwt_grants_no_membership(issuer, alice):
    client = bearer(issuer.token())

    assert client.get("/v1/me").status_code == 200
    assert client.get("/v1/tokens").status_code == 200
    for path in ("/v1/projects", "/v1/members", "/v1/notifications"):
        assert client.get(path).status_code == 403, path
    outsider = bearer(issuer.token(), HTTP_X_TENANT_ID=str(alice.tenant.id))
    assert outsider.get("/v1/projects").status_code == 403


def test_an_unverified_email_of_a_new_subject_is_401_and_creates_nothing(issuer, alice):
    for claims in (
        {"email_verified": False},
        {"email_verified": "true"},
        {"email_verified": None},
        {"email": None},
        {"email": "alice@example.com", "email_verified": False},
    ):
        assert_refused(bearer(issuer.token(**claims)).get("/v1/me"))
    assert not ExternalIdentity.objects.exists()
    assert list(get_user_model().objects.values_list("email", flat=True)) == ["alice@example.com"]


def test_a_verified_email_the_columns_cannot_hold_is_refused_and_the_longest_is_taken(issuer):
    overlong = address(MAX_EMAIL_LENGTH + 1)
    assert_refused(bearer(issuer.token(sub="long", email=overlong)).get("/v1/me"))
    assert not get_user_model().objects.exists()

    longest = address(MAX_EMAIL_LENGTH)
    response = bearer(issuer.token(sub="longest", email=longest)).get("/v1/me")
    assert response.status_code == 200, response.content
    assert response.json()["email"] == longest


def _b64(document: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def test_alg_none_is_refused_without_asking_the_issuer(issuer):
    unsigned = f"{_b64({'alg': 'none', 'kid': 'rsa-1'})}.{_b64(issuer.claims())}."

    assert_refused(bearer(unsigned).get("/v1/me"))
    assert issuer.jwks_fetches() == 0


def test_hs256_signed_with_the_public_key_is_refused(issuer):
    """The classic confusion: the RSA public key used as an HMAC secret."""
    public_pem = (
        issuer.published[0]
        .private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = _b64({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"})
    payload = _b64(issuer.claims())
    signing_input = f"{header}.{payload}".encode()
    hs256 = jwt.get_algorithm_by_name("HS256")
    signature = hs256.sign(signing_input, public_pem)
    forged = f"{header}.{payload}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"

    assert_refused(bearer(forged).get("/v1/me"))
    assert issuer.jwks_fetches() == 0


def test_a_key_used_with_another_keys_algorithm_is_refused(issuer):
    rsa = issuer.published[0]
    # An RS256 signature presented as the EC key's: each key verifies only its own algorithm.
    token = jwt.encode(issuer.claims(), rsa.private, "RS256", headers={"kid": "ec-1"})

    assert_refused(bearer(token).get("/v1/me"))


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "someone-else"},
        {"iss": "https://other-issuer.example.com"},
        {"exp": -61},
        {"exp": None},
        {"iss": None},
        {"aud": None},
        {"sub": None},
    ],
    ids=["wrong-audience", "wrong-issuer", "expired", "no-exp", "no-iss", "no-aud", "no-sub"],
)
def test_claims_that_do_not_hold_are_401_and_count_as_failures(issuer, claims):
    if claims.get("exp") == -61:
        claims = {"exp": issuer.claims()["iat"] - 61}

    response = bearer(issuer.token(**claims)).get("/v1/me")

    assert_refused(response)
    assert failures_counted() == 1
    assert not ExternalIdentity.objects.exists()


def test_sixty_seconds_of_leeway_on_expiry(issuer):
    token = issuer.token(exp=issuer.claims()["iat"] - 30)

    assert bearer(token).get("/v1/me").status_code == 200


def test_a_signature_of_another_key_with_a_known_kid_is_refused(issuer):
    impostor = rsa_key("rsa-1")

    assert_refused(bearer(issuer.token(impostor)).get("/v1/me"))


def test_an_unknown_kid_is_refused(issuer):
    assert_refused(bearer(issuer.token(rsa_key("not-published"))).get("/v1/me"))


def test_opaque_tokens_keep_working_beside_jwts(issuer, alice):
    assert alice.client().get("/v1/projects").status_code == 200
    assert bearer(issuer.token()).get("/v1/me").status_code == 200


def test_without_an_identity_provider_a_jwt_is_just_a_wrong_token(settings):
    settings.OIDC_ISSUER = settings.OIDC_AUDIENCE = ""
    with local_issuer(rsa_key("k")) as served:
        response = bearer(served.token()).get("/v1/me")

        assert_refused(response)
        assert served.jwks_fetches() == 0


@pytest.mark.parametrize("trouble", ["down", "another-issuer"])
def test_an_issuer_whose_keys_cannot_be_had_is_503_with_retry_after(issuer, trouble):
    token = issuer.token()
    issuer.failing = trouble == "down"
    issuer.discovery_issuer = "https://impostor.example.com" if trouble != "down" else None

    response = bearer(token).get("/v1/me")

    assert response.status_code == 503
    assert response["Retry-After"] == "60"
    assert assert_problem(response)["type"].endswith("/identity-provider-unavailable")
    assert failures_counted() == 0


def test_no_jwt_reaches_a_log_line_or_a_problem_body(issuer, caplog):
    caplog.set_level(logging.DEBUG)
    good = issuer.token()
    bad = issuer.token(aud="someone-else")

    answers = [bearer(token).get(path) for token in (good, bad) for path in ("/v1/me", "/v1/x")]

    for token in (good, bad):
        for part in token.split("."):
            assert part not in caplog.text
            for answer in answers:
                assert part not in answer.content.decode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_rotated_key_is_accepted_after_one_refetch():
    with local_issuer(rsa_key("old")) as served:
        clock = Clock()
        verifier = oidc.JwtVerifier(
            issuer=served.url,
            audience=served.audience,
            keys=oidc.IssuerKeys(served.url, clock=clock),
        )
        assert verifier.claims(served.token())["sub"] == "idp-user-1"
        new = ec_key("new")
        served.publish(served.published[0], new)
        clock.now += oidc.REFETCH_INTERVAL_SECONDS

        assert verifier.claims(served.token(new))["sub"] == "idp-user-1"
        assert served.jwks_fetches() == 2
        assert verifier.claims(served.token(new))["sub"] == "idp-user-1"
        assert served.jwks_fetches() == 2  # cached from then on


def test_a_flood_of_unknown_kids_refetches_at_most_once_a_minute():
    with local_issuer(rsa_key("only")) as served:
        clock = Clock()
        keys = oidc.IssuerKeys(served.url, clock=clock)
        keys.key("only")
        fetches = [served.jwks_fetches()]

        for minute in range(3):
            clock.now += oidc.REFETCH_INTERVAL_SECONDS
            for second in range(50):
                clock.now += 0.5
                with pytest.raises(oidc.JwtRejected):
                    keys.key(f"made-up-{minute}-{second}")
            fetches.append(served.jwks_fetches())

        assert fetches == [1, 2, 3, 4]


def test_keys_older_than_an_hour_are_fetched_again_and_kept_if_that_fails():
    with local_issuer(rsa_key("k")) as served:
        clock = Clock()
        keys = oidc.IssuerKeys(served.url, clock=clock)
        keys.key("k")
        clock.now += oidc.KEYS_MAX_AGE_SECONDS
        served.failing = True

        assert keys.key("k").key_id == "k"  # the issuer is down: the known keys still serve
        served.failing = False
        keys.key("k")
        assert served.jwks_fetches() == 1
        clock.now += oidc.REFETCH_INTERVAL_SECONDS
        keys.key("k")
        assert served.jwks_fetches() == 2


@pytest.mark.parametrize(
    "bearer_value",
    ["a.b.c", "a.b.", "eyJ.eyJ.sig", "tkw_x", "a.b", "a.b.c.d", "a..c"],
)
def test_the_jwt_shape_is_three_base64url_parts(bearer_value):
    assert oidc.looks_like_jwt(bearer_value) is (bearer_value in ("a.b.c", "a.b.", "eyJ.eyJ.sig"))


def test_signing_out_with_a_jwt_is_409_the_provider_ends_it(issuer):
    token = issuer.token(issuer.published[0])

    response = bearer(token).delete("/v1/tokens/current")

    assert response.status_code == 409
    assert assert_problem(response)["type"].endswith("/token-not-revocable")
    assert bearer(token).get("/v1/me").status_code == 200


def test_a_jwt_user_names_themself(issuer):
    token = issuer.token(issuer.published[0])

    response = bearer(token).patch("/v1/me", {"name": "Jo"}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "Jo"
