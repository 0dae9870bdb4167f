"""No live link token at rest (README: Account emails and secrets at rest): the signup and invitation emails queued before
link tokens were derived at send time (tenancy.link_tokens) hold their token in plain text,
in their stored body and in any Resend batch recorded for them. This replaces each such link
with a placeholder; nothing else in those bodies changes.

The links cannot be rebuilt (those tokens were random, not derived), so an email of these
not yet sent goes out with the placeholder, and a recorded batch sent again under its key is
refused by Resend as a changed payload (its rows dead-letter). Those invitations can be
re-sent (`POST /v1/invitations` for the same address issues a new link; the old one stops
working), and a signup asked for again.
"""

import json
import re

from django.db import migrations

# tenancy.front_door.ACCOUNT_MAIL_TENANT_ID; a migration keeps the value it was written with.
ACCOUNT_MAIL_TENANT_ID = "00000000-0000-4000-8000-00000000a11c"
# The whole link around a token of the old kind: secrets.token_urlsafe(32), 43 characters.
LIVE_LINK = re.compile(r"\S*(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])\S*")
PLACEHOLDER = "[link removed: ask for a new one]"


def without_links(text: str) -> str:
    return LIVE_LINK.sub(PLACEHOLDER, text)


def remove_live_links(apps, schema_editor) -> None:
    notification = apps.get_model("notifications", "Notification")
    email_batch = apps.get_model("notifications", "EmailBatch")
    mails = notification.objects.filter(tenant_id=ACCOUNT_MAIL_TENANT_ID)
    ids = set()
    for row in mails.only("id", "body").iterator():
        ids.add(str(row.pk))
        if (body := without_links(row.body)) != row.body:
            notification.objects.filter(pk=row.pk).update(body=body)
    for batch in email_batch.objects.iterator():
        emails = json.loads(batch.body)
        for index, member in enumerate(batch.members):
            if member.split("/")[0] in ids:
                emails[index]["text"] = without_links(emails[index]["text"])
        body = json.dumps(emails, separators=(",", ":"), ensure_ascii=False)
        if body != batch.body:
            email_batch.objects.filter(pk=batch.pk).update(body=body)


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0010_stored_state"),
    ]

    operations = [
        migrations.RunPython(remove_live_links, migrations.RunPython.noop, elidable=True),
    ]
