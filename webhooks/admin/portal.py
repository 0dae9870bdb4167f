"""Portal sessions in the admin: read-only, never their token or digest, and a revoke
action that ends them at once."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from webhooks.models import PortalSession


@admin.register(PortalSession)
class PortalSessionAdmin(admin.ModelAdmin):
    list_display = fields = readonly_fields = (
        "id",
        "application",
        "tenant",
        "capabilities",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ["revoked_at"]
    search_fields = ["=id", "application__uid", "tenant__name"]
    list_select_related = ["application", "tenant", "created_by"]
    ordering = ["-created_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Revoke the selected portal sessions")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PortalSession]) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} portal session(s).")
