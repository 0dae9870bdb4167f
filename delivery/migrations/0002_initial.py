import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """The moved rows' relations and indexes, as they already are in the database."""


    initial = True

    dependencies = [
        ('delivery', '0001_initial'),
        ('projects', '0003_idempotency'),
        ('tenancy', '0009_operation_key_tenant_index_dropped'),
        ('webhooks', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables exist already under their first names: only Django's state moves.
            state_operations=[
                migrations.AddField(
                    model_name='notification',
                    name='message',
                    field=models.ForeignKey(blank=True, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='webhooks.message'),
                ),
                migrations.AddField(
                    model_name='notification',
                    name='project',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='notifications', to='projects.project'),
                ),
                migrations.AddField(
                    model_name='notification',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to='tenancy.tenant'),
                ),
                migrations.AddField(
                    model_name='webhookendpoint',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_endpoints', to='tenancy.tenant'),
                ),
                migrations.AddField(
                    model_name='notification',
                    name='webhook_endpoint',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='notifications', to='delivery.webhookendpoint'),
                ),
                migrations.AddIndex(
                    model_name='delivery',
                    index=models.Index(fields=['tenant', 'notification_id', '-attempted_at'], name='delivery_notification_idx'),
                ),
                migrations.AddIndex(
                    model_name='delivery',
                    index=models.Index(fields=['tenant', '-attempted_at'], name='delivery_tenant_idx'),
                ),
                migrations.AddIndex(
                    model_name='delivery',
                    index=models.Index(fields=['attempted_at'], name='delivery_attempted_idx'),
                ),
                migrations.AddIndex(
                    model_name='webhookendpoint',
                    index=models.Index(fields=['tenant', '-created_at'], name='endpoint_tenant_created_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(condition=models.Q(('state__in', ['scheduled', 'backing_off'])), fields=['next_fire_at'], name='notification_due_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(condition=models.Q(('state', 'completed')), fields=['last_fired_at'], name='notification_completed_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(fields=['tenant', '-created_at'], name='notification_tenant_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(condition=models.Q(('message__isnull', False)), fields=['message'], name='notification_message_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(condition=models.Q(('state__in', ['dead_lettered', 'parked'])), fields=['webhook_endpoint', 'created_at', 'id'], name='notification_recover_idx'),
                ),
                migrations.AddIndex(
                    model_name='notification',
                    index=models.Index(condition=models.Q(('email_batch__isnull', False)), fields=['email_batch'], name='notification_email_batch_idx'),
                ),
                migrations.AddConstraint(
                    model_name='notification',
                    constraint=models.UniqueConstraint(fields=('tenant', 'source_key'), name='notification_unique_tenant_source_key'),
                ),
            ],
        ),
    ]
