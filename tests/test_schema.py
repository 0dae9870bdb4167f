"""The OpenAPI document and the offline docs page."""

import re

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

OPENAPI_JSON = "application/vnd.oai.openapi+json"


@pytest.fixture
def schema(client):
    response = client.get("/v1/schema", HTTP_ACCEPT=OPENAPI_JSON)
    assert response.status_code == 200
    return response.json()


def header_names(operation):
    return {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}


def test_schema_is_public_and_declares_bearer_auth(schema):
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    assert schema["paths"]["/v1/projects"]["get"]["security"] == [{"bearerAuth": []}]


def test_create_documents_idempotency_headers_and_expiry(schema, settings):
    create = schema["paths"]["/v1/projects"]["post"]
    key = next(p for p in create["parameters"] if p["name"] == "Idempotency-Key")

    assert key["in"] == "header" and key["required"] is True
    assert "24 hours" in key["description"]
    assert {"Location", "Idempotent-Replayed"} <= set(create["responses"]["202"]["headers"])
    assert "422" in create["responses"]


REQUIRED_KEY = {"/v1/projects", "/v1/notifications", "/v1/invitations", "/v1/messages"}
# Public routes: Idempotency-Key is scoped to a tenant, and these have none.


def test_every_post_documents_the_idempotency_key_its_replay_header_and_problems(schema):
    posts = {path: ops["post"] for path, ops in schema["paths"].items() if "post" in ops}

    assert len(posts) == 21
    for path, operation in posts.items():
        key = next(p for p in operation["parameters"] if p["name"] == "Idempotency-Key")
        assert key["in"] == "header"
        assert key.get("required", False) is (path in REQUIRED_KEY), path
        success = [code for code in operation["responses"] if code.startswith("2")]
        assert success, path
        for code in success:
            assert "Idempotent-Replayed" in operation["responses"][code]["headers"], path
        assert {"409", "422"} <= set(operation["responses"]), path


def test_tenant_views_document_x_tenant_id_and_me_does_not(schema):
    for path in ("/v1/projects", "/v1/jobs"):
        assert "X-Tenant-ID" in header_names(schema["paths"][path]["get"])
    assert "X-Tenant-ID" not in header_names(schema["paths"]["/v1/me"]["get"])


@pytest.mark.parametrize(
    "status", ["400", "401", "403", "404", "405", "413", "415", "429", "500", "503"]
)
def test_every_operation_documents_problem_responses(schema, status):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            response = operation["responses"].get(status)
            assert response, (method, path, status)
            assert list(response["content"]) == ["application/problem+json"]
    assert {"type", "title", "status", "detail"} <= set(
        schema["components"]["schemas"]["Problem"]["properties"]
    )


def test_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", tmp_path / "s.yaml")

    assert (tmp_path / "s.yaml").read_text().startswith("openapi:")


def test_docs_render_offline(client):
    response = client.get("/v1/docs")

    assert response.status_code == 200
    html = response.content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist" in html
    assert "cdn." not in html and "unpkg" not in html and "jsdelivr" not in html


def test_docs_assets_are_served_by_the_app_itself(client):
    html = client.get("/v1/docs").content.decode()
    bundle = re.search(r'src="(/static/[^"]+swagger-ui-bundle\.js)"', html)

    assert bundle is not None
    asset = client.get(bundle.group(1))
    assert asset.status_code == 200
    assert "javascript" in asset["Content-Type"]


def test_input_limits_are_in_the_schema(schema):
    create = schema["paths"]["/v1/projects"]["post"]
    key = next(p for p in create["parameters"] if p["name"] == "Idempotency-Key")
    channels = schema["components"]["schemas"]["NotificationWriteRequest"]["properties"]["channels"]
    category = schema["components"]["schemas"]["Job"]["properties"]["last_error_category"]

    assert (key["schema"]["minLength"], key["schema"]["maxLength"]) == (1, 257)
    assert channels["minItems"] == 1
    assert category["nullable"] is True
    assert "406" in schema["paths"]["/v1/me"]["get"]["responses"]


def test_a_jobs_next_attempt_is_declared_nullable(schema):
    next_attempt = schema["components"]["schemas"]["Job"]["properties"]["next_attempt_at"]

    assert next_attempt["nullable"] is True


def test_members_and_tokens_are_documented_with_their_problems(schema):
    members, member = schema["paths"]["/v1/members"], schema["paths"]["/v1/members/{id}"]
    tokens, token = schema["paths"]["/v1/tokens"], schema["paths"]["/v1/tokens/{id}"]

    assert "X-Tenant-ID" in header_names(members["get"])
    assert "X-Tenant-ID" not in header_names(tokens["get"])
    assert "X-Tenant-ID" not in header_names(tokens["post"])
    assert {"409"} <= set(member["patch"]["responses"]) & set(member["delete"]["responses"])
    assert "Location" in tokens["post"]["responses"]["201"]["headers"]
    created = schema["components"]["schemas"]["TokenSecret"]["properties"]
    assert {
        *("id", "name", "prefix", "created_at", "last_used_at", "expires_at", "token"),
        "tenant_id",
    } == set(created)
    for operation in (member["patch"], member["delete"], token["delete"]):
        path_id = next(p for p in operation["parameters"] if p["in"] == "path")
        assert path_id["schema"]["type"] == "integer"
    assert "204" in token["delete"]["responses"]
    assert "Retry-After" in token["delete"]["responses"]["503"]["headers"]


def test_public_front_door_routes_need_no_token_and_declare_their_problems(schema):
    signup = schema["paths"]["/v1/signup"]["post"]
    accept = schema["paths"]["/v1/invitations/accept"]["post"]

    assert {} in signup["security"] and {} in accept["security"]
    assert "X-Tenant-ID" not in header_names(signup)
    assert "Retry-After" in signup["responses"]["503"]["headers"]
    assert list(signup["responses"]["202"]["content"]) == ["application/json"]
    assert "409" in schema["paths"]["/v1/invitations"]["post"]["responses"]
    assert "409" in schema["paths"]["/v1/invitations/{id}"]["delete"]["responses"]


def test_the_front_end_routes_are_documented(schema):
    """README: Signing in and sessions: identity, sessions, signing in and invitation previews."""
    paths = schema["paths"]
    me = paths["/v1/me"]
    assert {"get", "patch"} <= set(me)
    me_shape = schema["components"]["schemas"]["Me"]["properties"]
    assert set(me_shape) == {"id", "email", "name", "tenants"}
    assert "X-Tenant-ID" in header_names(paths["/v1/tenant"]["patch"])
    assert "204" in paths["/v1/tokens/current"]["delete"]["responses"]
    for path in ("/v1/signin", "/v1/signin/verify", "/v1/invitations/preview"):
        assert {} in paths[path]["post"]["security"], path
    assert "202" in paths["/v1/signin"]["post"]["responses"]
    assert "503" in paths["/v1/signin"]["post"]["responses"]
    signed_in = schema["components"]["schemas"]["SignedIn"]["properties"]
    assert set(signed_in) == {"token", "expires_at", "user"}
    preview = schema["components"]["schemas"]["InvitationPreview"]["properties"]
    assert set(preview) == {"tenant_name", "email", "role", "invited_by", "expires_at"}
    created = schema["components"]["schemas"]["TokenCreateRequest"]["properties"]
    assert set(created) == {"name", "expires_in_days", "tenant_id"}


def test_no_component_publishes_a_docstring_written_for_the_code(schema):
    described = {
        name: component["description"]
        for name, component in schema["components"]["schemas"].items()
        if "description" in component and "enum" not in component
    }

    assert "Me" not in described
    assert described["Problem"] == "RFC 9457 problem details."
    assert described["Project"] == "A project with its provisioning job."
    internals = ("serializer", "annotat", "queryset", "Mix into", "partial=True", '{"')
    for name, text in described.items():
        assert not any(word in text for word in internals), (name, text)


def test_recovering_an_endpoint_declares_its_409(schema):
    recover = schema["paths"]["/v1/webhook-endpoints/{id}/recover"]["post"]

    assert {"202", "409"} <= set(recover["responses"])


def test_a_message_s_delivery_refused_through_notifications_is_a_declared_409(schema):
    notification = schema["paths"]["/v1/notifications/{id}"]
    retry = schema["paths"]["/v1/notifications/{id}/retry"]["post"]

    for operation in (notification["patch"], notification["delete"], retry):
        assert "409" in operation["responses"]
