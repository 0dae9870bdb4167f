"""GET /healthz: the database answers and every migration is applied."""

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    try:
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return JsonResponse({"status": "error", "database": "unreachable"}, status=503)
    if unapplied:
        return JsonResponse(
            {"status": "error", "database": "ok", "migrations": "pending"}, status=503
        )
    return JsonResponse({"status": "ok", "database": "ok", "migrations": "applied"})
