import django.db.models.deletion
import django.utils.timezone
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):
    """Recipients and digests move from notifications; their tables keep their names."""


    initial = True

    dependencies = [
        ('delivery', '0002_initial'),
        ('notifications', '0023_people'),
        ('delivery', '0001_initial'),
        ('tenancy', '0009_operation_key_tenant_index_dropped'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables exist already under their first names: only Django's state moves.
            state_operations=[
                migrations.CreateModel(
                    name='Digest',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('recipient_key', models.CharField(max_length=255)),
                        ('key', models.CharField(max_length=64)),
                        ('items', models.JSONField(default=list)),
                        ('count', models.PositiveIntegerField(default=0)),
                        ('is_open', models.BooleanField(default=True)),
                        ('closes_at', models.DateTimeField()),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('notification', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='digest', to='delivery.notification')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.tenant')),
                    ],
                    options={
                        'db_table': 'notifications_digest',
                        'constraints': [models.UniqueConstraint(condition=models.Q(('is_open', True)), fields=('tenant', 'recipient_key', 'key'), name='digest_one_open_per_key')],
                    },
                ),
                migrations.CreateModel(
                    name='Recipient',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=255)),
                        ('email', models.CharField(max_length=254)),
                        ('name', models.CharField(blank=True, default='', max_length=200)),
                        ('timezone', models.CharField(default='UTC', max_length=64)),
                        ('send_window', models.JSONField(blank=True, null=True)),
                        ('preferences', models.JSONField(blank=True, default=dict)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='recipients', to='tenancy.tenant')),
                    ],
                    options={
                        'db_table': 'notifications_recipient',
                        'indexes': [models.Index(fields=['tenant', '-created_at'], name='recipient_tenant_created_idx')],
                        'constraints': [models.UniqueConstraint(fields=('tenant', 'key'), name='recipient_unique_tenant_key')],
                    },
                ),
            ],
        ),
    ]
