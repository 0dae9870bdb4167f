import delivery.models
import django.db.models.deletion
import django.utils.timezone
import uuid
import web.sealed
from django.db import migrations, models


class Migration(migrations.Migration):
    """The engine's rows move from notifications; their tables keep their names."""


    initial = True

    dependencies = [
        ('notifications', '0023_people'),
        ('tenancy', '0009_operation_key_tenant_index_dropped'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables exist already under their first names: only Django's state moves.
            state_operations=[
                migrations.CreateModel(
                    name='WebhookEndpoint',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('url', models.URLField(max_length=2000, verbose_name='URL')),
                        ('secret', web.sealed.SealedCharField(editable=False, max_length=255)),
                        ('retired_secrets', web.sealed.SealedSecretsField(blank=True, default=list, editable=False)),
                        ('enabled', models.BooleanField(default=True)),
                        ('disabled_reason', models.CharField(blank=True, default='', max_length=200)),
                        ('consecutive_failures', models.PositiveIntegerField(default=0)),
                        ('circuit_open_until', models.DateTimeField(blank=True, null=True)),
                        ('circuit_interval_seconds', models.PositiveIntegerField(default=0)),
                        ('last_failure_at', models.DateTimeField(blank=True, null=True)),
                        ('failed_deliveries', models.PositiveIntegerField(default=0)),
                        ('event_types', models.JSONField(blank=True, default=None, null=True)),
                        ('failing_since', models.DateTimeField(blank=True, null=True)),
                        ('rate_limit', models.PositiveIntegerField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        'db_table': 'notifications_webhookendpoint',
                    },
                ),
                migrations.CreateModel(
                    name='Delivery',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('notification_id', models.UUIDField()),
                        ('endpoint_id', models.UUIDField(blank=True, null=True)),
                        ('attempt', models.PositiveIntegerField(blank=True, null=True)),
                        ('occurrence', models.PositiveIntegerField()),
                        ('channel', models.CharField(max_length=16)),
                        ('outcome', models.CharField(choices=[('delivered', 'Delivered'), ('failed', 'Failed'), ('timeout', 'Timeout'), ('deferred', 'Deferred (not attempted)'), ('skipped', 'Skipped'), ('dead_lettered', 'Dead-lettered')], max_length=16)),
                        ('http_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                        ('error_category', models.CharField(blank=True, default='', max_length=32)),
                        ('error', models.CharField(blank=True, default='', max_length=500)),
                        ('duration_ms', models.PositiveIntegerField(default=0)),
                        ('attempted_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('late_ms', models.PositiveBigIntegerField(blank=True, null=True)),
                        ('skipped_count', models.PositiveIntegerField(default=0)),
                        ('skipped_first', models.DateTimeField(blank=True, null=True)),
                        ('skipped_last', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='tenancy.tenant')),
                    ],
                    options={
                        'verbose_name_plural': 'deliveries',
                        'db_table': 'notifications_delivery',
                    },
                ),
                migrations.CreateModel(
                    name='EmailBatch',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('body', models.TextField()),
                        ('members', models.JSONField(default=list)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                    ],
                    options={
                        'db_table': 'notifications_emailbatch',
                        'indexes': [models.Index(fields=['created_at'], name='email_batch_created_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='Notification',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('channels', models.JSONField(default=list)),
                        ('email_to', models.JSONField(blank=True, default=list)),
                        ('recipients', models.JSONField(blank=True, db_default=models.Value([], output_field=models.JSONField()), default=list)),
                        ('category', models.CharField(blank=True, db_default='', default='', max_length=64)),
                        ('digest_key', models.CharField(blank=True, db_default='', default='', editable=False, max_length=64)),
                        ('subject', models.CharField(blank=True, default='', max_length=200)),
                        ('body', models.TextField(blank=True, default='')),
                        ('channel_state', models.JSONField(blank=True, default=dict)),
                        ('webhook_event', models.JSONField(blank=True, null=True)),
                        ('rrule', models.CharField(blank=True, default='', max_length=500)),
                        ('timezone', models.CharField(default='UTC', max_length=64)),
                        ('recurrence_anchor', models.DateTimeField(blank=True, null=True)),
                        ('next_fire_at', models.DateTimeField(blank=True, null=True)),
                        ('due_at', models.DateTimeField(blank=True, null=True)),
                        ('occurrence', models.PositiveIntegerField(default=1)),
                        ('last_fired_at', models.DateTimeField(blank=True, null=True)),
                        ('error_count', models.PositiveIntegerField(default=0)),
                        ('max_attempts', models.PositiveIntegerField(default=delivery.models.default_max_attempts, editable=False)),
                        ('state', models.CharField(choices=[('scheduled', 'Scheduled'), ('backing_off', 'Backing off'), ('dead_lettered', 'Dead-lettered'), ('parked', 'Parked'), ('completed', 'Completed')], default='scheduled', editable=False, max_length=16)),
                        ('last_error', models.CharField(blank=True, max_length=500, null=True)),
                        ('dead_letter_reason', models.CharField(blank=True, choices=[('exhausted', 'Retries exhausted'), ('permanent', 'Permanent error'), ('crashed', 'Crashed the worker repeatedly'), ('rate_limited', 'Rate limited past the deferral horizon'), ('invalid_schedule', 'Next occurrence could not be computed')], default='', max_length=16)),
                        ('claimed_until', models.DateTimeField(blank=True, null=True)),
                        ('claim_token', models.BigIntegerField(default=0)),
                        ('unfinished_claims', models.PositiveIntegerField(default=0)),
                        ('source_key', models.CharField(blank=True, editable=False, max_length=200, null=True)),
                        ('source', models.CharField(choices=[('api', 'API'), ('system', 'System')], db_default='api', default='api', editable=False, max_length=8)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('email_batch', models.ForeignKey(blank=True, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='delivery.emailbatch')),
                    ],
                    options={
                        'db_table': 'notifications_notification',
                    },
                ),
            ],
        ),
    ]
