import django.db.models.deletion
import django.utils.timezone
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):
    """Event types and messages move from notifications; their tables keep their names."""


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
                    name='EventType',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('name', models.CharField(max_length=256)),
                        ('description', models.CharField(blank=True, default='', max_length=1000)),
                        ('archived', models.BooleanField(default=False)),
                        ('product', models.BooleanField(default=False, editable=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='event_types', to='tenancy.tenant')),
                    ],
                    options={
                        'db_table': 'notifications_eventtype',
                        'indexes': [models.Index(fields=['tenant', '-created_at'], name='event_type_tenant_idx')],
                        'constraints': [models.UniqueConstraint(fields=('tenant', 'name'), name='event_type_unique_name')],
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('event_type', models.CharField(max_length=256)),
                        ('event_id', models.CharField(blank=True, max_length=256, null=True)),
                        ('dedup_key', models.CharField(blank=True, editable=False, max_length=256, null=True)),
                        ('payload', models.JSONField(default=dict)),
                        ('endpoint_ids', models.JSONField(default=list, editable=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='tenancy.tenant')),
                    ],
                    options={
                        'db_table': 'notifications_message',
                        'indexes': [models.Index(fields=['tenant', '-created_at'], name='message_tenant_idx')],
                        'constraints': [models.UniqueConstraint(fields=('tenant', 'dedup_key'), name='message_unique_tenant_dedup_key')],
                    },
                ),
            ],
        ),
    ]
