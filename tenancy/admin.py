"""Admin for tenants, memberships, API tokens and idempotency keys.

Tokens are issued by the commands and by POST /v1/tokens (the secret is shown once there);
the admin lists them without their digest and can revoke them.
"""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from tenancy.models import (
    ApiToken,
    ExternalIdentity,
    Invitation,
    Membership,
    OperationKey,
    Plan,
    SigninLink,
    SignupRequest,
    Tenant,
)
from web.admin import ReadOnlyModelAdmin


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """Plans are the operators' to define; a tenant's plan is chosen on the tenant (or with
    `manage.py set_plan`). A plan in use cannot be deleted."""

    list_display = [
        "name",
        "notifications_per_month",
        "messages_per_month",
        "webhook_endpoints",
        "members",
        "requests_per_minute",
        "deliveries_per_second",
        "retention_days",
    ]
    search_fields = ["name"]
    readonly_fields = ["created_at"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "plan", "created_at"]
    list_filter = ["plan"]
    list_select_related = ["plan"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__email", "tenant__name"]
    list_select_related = ["user", "tenant"]
    autocomplete_fields = ["user", "tenant"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # Every column the list shows, read-only: the digest never, the secret does not exist.
    list_display = fields = readonly_fields = (
        "prefix",
        "name",
        "kind",
        "user",
        "tenant",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ["kind", "revoked_at"]
    search_fields = ["prefix", "name", "user__email"]
    list_select_related = ["user", "tenant"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} token(s).")


@admin.register(OperationKey)
class OperationKeyAdmin(ReadOnlyModelAdmin):
    """The keys as recorded; the stored answers stay out of the list (they are the
    tenants' data), and purging them is `purge_operation_keys`' job."""

    list_display = ["key", "tenant", "resource", "response_status", "created_at", "expires_at"]
    search_fields = ["key", "resource"]
    list_select_related = ["tenant"]
    fields = ["key", "tenant", "resource", "response_status", "created_at", "expires_at"]


# --- External identity provider --------------------------------------------------------------


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(ReadOnlyModelAdmin):
    """Who signed in through the identity provider, as stored at first sight (no token is
    ever kept)."""

    list_display = ["subject", "issuer", "user", "created_at"]
    search_fields = ["subject", "user__email"]
    list_select_related = ["user"]
    fields = ["issuer", "subject", "user", "created_at"]


# --- The front door: readable, never editable; token digests are never shown --------------


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyModelAdmin):
    list_display = ["email", "tenant", "role", "status", "invited_by", "expires_at", "created_at"]
    list_filter = ["status", "role"]
    search_fields = ["email", "tenant__name"]
    list_select_related = ["tenant", "invited_by"]
    fields = [
        "id",
        "email",
        "tenant",
        "role",
        "status",
        "invited_by",
        "expires_at",
        "accepted_at",
        "created_at",
    ]


@admin.register(SignupRequest)
class SignupRequestAdmin(ReadOnlyModelAdmin):
    list_display = ["email", "tenant_name", "used_at", "expires_at", "sent_at", "created_at"]
    list_filter = ["used_at"]
    search_fields = ["email", "tenant_name"]
    fields = [
        "email",
        "tenant_name",
        "requester_address",
        "used_at",
        "expires_at",
        "sent_at",
        "created_at",
    ]


@admin.register(SigninLink)
class SigninLinkAdmin(ReadOnlyModelAdmin):
    list_display = ["user", "used_at", "expires_at", "created_at"]
    list_filter = ["used_at"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = ["user", "requester_address", "used_at", "expires_at", "created_at"]
