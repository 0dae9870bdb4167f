"""/v1/event-types: owners create, change and archive; members read; the product's own
types are in every tenant and cannot be changed; names are unique per tenant."""

import pytest

from tests.delivery.factories import make_tenant
from webhooks.models import PRODUCT_EVENT_TYPES, EventType


def _create(actor, name, **fields):
    return actor.client().post("/v1/event-types", {"name": name, **fields}, format="json")


def test_every_tenant_has_the_product_s_own_types(alice):
    listed = alice.client().get("/v1/event-types?limit=100").json()["results"]

    product = {row["name"] for row in listed if row["product"]}
    assert product == set(PRODUCT_EVENT_TYPES)
    assert EventType.objects.filter(tenant=make_tenant("New"), product=True).count() == len(
        PRODUCT_EVENT_TYPES
    )


def test_an_owner_creates_a_type_a_member_reads_it(alice, bob):
    response = _create(alice, "invoice.paid", description="Paid")

    assert response.status_code == 201
    body = response.json()
    assert {k: body[k] for k in ("name", "description", "archived", "product")} == {
        "name": "invoice.paid",
        "description": "Paid",
        "archived": False,
        "product": False,
    }
    assert response["Location"] == f"/v1/event-types/{body['id']}"
    assert bob.client().get(f"/v1/event-types/{body['id']}").json()["name"] == "invoice.paid"
    assert _create(bob, "invoice.voided").status_code == 403


@pytest.mark.parametrize("name", ["", "has space", "a/b", "é", "x" * 257, 5, None])
def test_a_bad_name_is_400_and_writes_nothing(alice, name):
    before = EventType.objects.count()
    response = _create(alice, name)
    assert response.status_code == 400
    assert "name" in response.json()["errors"]
    assert EventType.objects.count() == before


@pytest.mark.parametrize("name", ["invoice.paid", "project.active"])
def test_a_name_the_tenant_has_is_409(alice, name):
    _create(alice, "invoice.paid")
    response = _create(alice, name)
    assert response.status_code == 409
    assert response.json()["type"].endswith("/event-type-exists")


def test_the_same_name_in_two_tenants_is_two_types(alice, charlie):
    assert _create(alice, "invoice.paid").status_code == 201
    assert _create(charlie, "invoice.paid").status_code == 201


def test_patch_changes_the_description_and_delete_archives(alice):
    created = _create(alice, "invoice.paid").json()
    path = f"/v1/event-types/{created['id']}"

    patched = alice.client().patch(path, {"description": "Now"}, format="json")
    assert patched.json()["description"] == "Now"
    renamed = alice.client().patch(path, {"name": "other"}, format="json")
    assert renamed.status_code == 400
    deleted = alice.client().delete(path)
    assert deleted.status_code == 200
    assert deleted.json()["archived"] is True
    active = alice.client().get("/v1/event-types?archived=false&limit=100").json()["results"]
    assert "invoice.paid" not in {row["name"] for row in active}
    restored = alice.client().patch(path, {"archived": False}, format="json")
    assert restored.json()["archived"] is False


def test_the_product_s_own_types_cannot_be_changed_or_archived(alice):
    product = EventType.objects.get(tenant=alice.tenant, name="project.active")
    path = f"/v1/event-types/{product.id}"

    for response in (
        alice.client().patch(path, {"description": "mine"}, format="json"),
        alice.client().delete(path),
    ):
        assert response.status_code == 409
        assert response.json()["type"].endswith("/product-event-type")
    product.refresh_from_db()
    assert (product.archived, product.description) == (False, PRODUCT_EVENT_TYPES[product.name])


def test_another_tenant_s_type_is_404(alice, charlie):
    theirs = _create(charlie, "theirs.only").json()["id"]
    for method in ("get", "patch", "delete"):
        response = getattr(alice.client(), method)(
            f"/v1/event-types/{theirs}", {"description": "x"}, format="json"
        )
        assert response.status_code == 404
    assert EventType.objects.get(pk=theirs).description == ""
