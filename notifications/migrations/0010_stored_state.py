"""A stored state and a per-row attempt limit.

Existing rows get MAX_ATTEMPTS as it is now for their own limit (the field's default), and
the state the model used to derive from their columns: off the schedule with a dead-letter
reason is dead_lettered, off it without one or at its attempt limit is parked, with
failures backing_off, else scheduled. No row is completed yet: finished rows used to be
deleted. The due index then follows the state."""

import delivery.models
from django.db import migrations, models
from django.db.models import Case, F, Q, Value, When


def fill_state(apps, schema_editor):
    notification = apps.get_model("notifications", "Notification")
    notification.objects.update(
        state=Case(
            When(Q(next_fire_at__isnull=True) & ~Q(dead_letter_reason=""), then=Value("dead_lettered")),
            When(next_fire_at__isnull=True, then=Value("parked")),
            When(error_count__gte=F("max_attempts"), then=Value("parked")),
            When(error_count__gt=0, then=Value("backing_off")),
            default=Value("scheduled"),
        )
    )


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0009_invalid_schedule'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='notification',
            name='notification_due_idx',
        ),
        migrations.AddField(
            model_name='notification',
            name='max_attempts',
            field=models.PositiveIntegerField(default=delivery.models.default_max_attempts, editable=False),
        ),
        migrations.AddField(
            model_name='notification',
            name='state',
            field=models.CharField(choices=[('scheduled', 'Scheduled'), ('backing_off', 'Backing off'), ('dead_lettered', 'Dead-lettered'), ('parked', 'Parked'), ('completed', 'Completed')], default='scheduled', editable=False, max_length=16),
        ),
        migrations.RunPython(fill_state, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(condition=models.Q(('state__in', ['scheduled', 'backing_off'])), fields=['next_fire_at'], name='notification_due_idx'),
        ),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(condition=models.Q(('state', 'completed')), fields=['last_fired_at'], name='notification_completed_idx'),
        ),
    ]
