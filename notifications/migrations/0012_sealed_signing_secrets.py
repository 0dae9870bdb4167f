"""Webhook signing secrets are stored sealed (web.sealed; README: Account emails and secrets at rest): the column first
widens for the sealed form, the stored secrets are sealed under SECRET_KEY, then the fields
become the sealed kinds that read them back plain. Reversed, the secrets are unsealed."""

from django.db import migrations, models

import web.sealed


def _convert(apps, change) -> None:
    endpoints = apps.get_model("notifications", "WebhookEndpoint")
    for endpoint in endpoints.objects.only("secret", "retired_secrets").iterator(chunk_size=500):
        endpoint.secret = change(endpoint.secret)
        endpoint.retired_secrets = [
            {**entry, "secret": change(entry["secret"])} for entry in endpoint.retired_secrets
        ]
        endpoint.save(update_fields=["secret", "retired_secrets"])


def seal_secrets(apps, schema_editor) -> None:
    _convert(apps, lambda s: s if web.sealed.is_sealed(s) else web.sealed.seal(s))


def unseal_secrets(apps, schema_editor) -> None:
    _convert(apps, lambda s: web.sealed.unseal(s) if web.sealed.is_sealed(s) else s)


class Migration(migrations.Migration):
    dependencies = [("notifications", "0011_account_mail_links_removed")]

    operations = [
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret",
            field=models.CharField(editable=False, max_length=255),
        ),
        migrations.RunPython(seal_secrets, unseal_secrets),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret",
            field=web.sealed.SealedCharField(editable=False, max_length=255),
        ),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="retired_secrets",
            field=web.sealed.SealedSecretsField(blank=True, default=list, editable=False),
        ),
    ]
