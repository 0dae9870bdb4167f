"""Every existing tenant gets the product's own event types (new tenants get them when they
are created)."""

from django.db import migrations
from django.utils import timezone

# As they were when this migration was written.
PRODUCT_EVENT_TYPES = {
    "project.created": "A project was created; it is being provisioned.",
    "project.active": "A project finished provisioning and is active.",
    "project.failed": "A project's provisioning failed for good.",
    "member.joined": "Someone joined the team.",
    "member.removed": "A member left or was removed from the team.",
    "invitation.accepted": "An invitation to the team was accepted.",
    "message.attempt.exhausted": "A message's delivery to an endpoint ran out of attempts.",
    "endpoint.disabled": "A webhook endpoint was disabled.",
}


def seed(apps, schema_editor):
    tenant_model = apps.get_model("tenancy", "Tenant")
    event_type_model = apps.get_model("notifications", "EventType")
    now = timezone.now()
    for tenant_id in tenant_model.objects.values_list("id", flat=True).iterator():
        event_type_model.objects.bulk_create(
            [
                event_type_model(
                    tenant_id=tenant_id,
                    name=name,
                    description=description,
                    product=True,
                    created_at=now,
                    updated_at=now,
                )
                for name, description in PRODUCT_EVENT_TYPES.items()
            ],
            ignore_conflicts=True,
        )


class Migration(migrations.Migration):
    dependencies = [("notifications", "0018_messages")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
