"""purge_operation_keys deletes exactly the expired keys."""

import json
from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from tenancy.models import OperationKey
from tests.projects.factories import make_project


def test_purge_deletes_only_expired_keys(alice):
    for _ in range(3):
        make_project(alice)
    expired = list(OperationKey.objects.values_list("pk", flat=True)[:2])
    OperationKey.objects.filter(pk__in=expired).update(expires_at=timezone.now())
    out = StringIO()

    call_command("purge_operation_keys", "--json", stdout=out)

    assert json.loads(out.getvalue()) == {"purged": 2}
    assert OperationKey.objects.count() == 1
    assert not OperationKey.objects.filter(pk__in=expired).exists()


def test_purge_plain_text_reports_the_count(alice):
    make_project(alice)
    OperationKey.objects.update(expires_at=timezone.now() - timedelta(days=1))
    out = StringIO()

    call_command("purge_operation_keys", stdout=out)

    assert "Purged 1 " in out.getvalue()
