"""Tenants, memberships and API tokens (hashed at rest)."""

import hmac
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenancy import link_tokens, token_format


class Plan(models.Model):
    """What a tenant may use (README: Plans and quotas). Each limit is null for unlimited.
    Operators define plans in the admin; `DEFAULT_PLAN` names the plan of tenants without one."""

    name = models.CharField(max_length=100, unique=True)
    notifications_per_month = models.PositiveIntegerField(
        null=True, blank=True, help_text="Notifications created through the API per month (UTC)."
    )
    messages_per_month = models.PositiveIntegerField(
        null=True, blank=True, help_text="Webhook messages sent per month (UTC)."
    )
    webhook_endpoints = models.PositiveIntegerField(
        null=True, blank=True, help_text="Webhook endpoints at any one time."
    )
    members = models.PositiveIntegerField(
        null=True, blank=True, help_text="Members (owners included) at any one time."
    )
    requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="API requests per minute for the whole tenant."
    )
    deliveries_per_second = models.PositiveIntegerField(
        null=True, blank=True, help_text="Deliveries per second across every tick process."
    )
    retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Days finished rows and the delivery log are kept."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tenant(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    # Null: the plan DEFAULT_PLAN names (unlimited when it is unset).
    plan = models.ForeignKey(
        Plan, on_delete=models.PROTECT, null=True, blank=True, related_name="tenants"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    MEMBER = "member", "Member"


class Membership(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "user"], name="membership_unique_tenant_user"
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


def _digest(secret: str) -> str:
    return token_format.digest(secret)


class TokenKind(models.TextChoices):
    # Made by POST /v1/tokens or an operator's command: lives until it expires (if ever) or
    # is revoked.
    API = "api", "API token"
    # Handed out by signin, signup verify and an anonymous invitation accept: always
    # expires (SESSION_TTL_SECONDS).
    SESSION = "session", "Session"


class ApiToken(models.Model):
    """A bearer token (tenancy.token_format); only its lookup prefix and a digest are kept.
    A token with a `tenant` acts in that tenant only (403 in any other). `default_tenant` is
    where a request without X-Tenant-ID acts while its user is still a member there: the
    tenant the token was made for, or the user's only one when it was made, so a script
    keeps working the day its user joins another team."""

    # Set on a token just issued (tenancy.tokens), never stored: the one time it is shown.
    plaintext: str

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, default="default")
    kind = models.CharField(max_length=16, choices=TokenKind.choices, default=TokenKind.API)
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="bound_tokens"
    )
    default_tenant = models.ForeignKey(
        Tenant,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
        # Read with the token, never looked up by: an index would only cost its inserts.
        db_index=False,
    )
    prefix = models.CharField(max_length=32, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=TokenKind.values), name="api_token_kind_valid"
            ),
            # A session always ends.
            models.CheckConstraint(
                condition=~models.Q(kind=TokenKind.SESSION) | models.Q(expires_at__isnull=False),
                name="api_token_session_expires",
            ),
        ]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @classmethod
    def issue(
        cls,
        *,
        user: models.Model,
        name: str = "default",
        expires_at: datetime | None = None,
        now: datetime | None = None,
        kind: str = TokenKind.API,
        tenant: Tenant | None = None,
        default_tenant: Tenant | None = None,
    ) -> tuple["ApiToken", str]:
        """Create a token and return it with its plaintext, which is never stored. Its
        default tenant is `default_tenant`, else the user's only tenant, if they have one."""
        plaintext = token_format.mint()
        if default_tenant is None and tenant is None:
            default_tenant = _only_tenant(user)
        token = cls.objects.create(
            user=user,
            name=name,
            kind=kind,
            tenant=tenant,
            default_tenant=default_tenant,
            created_at=now or timezone.now(),
            prefix=plaintext[: token_format.LOOKUP_LENGTH],
            digest=_digest(plaintext),
            expires_at=expires_at,
        )
        return token, plaintext

    @staticmethod
    def prefix_of(plaintext: str) -> str | None:
        """The lookup prefix of a presented token, or None when it is not one of ours."""
        return token_format.lookup_prefix(plaintext)

    def matches(self, plaintext: str) -> bool:
        return hmac.compare_digest(self.digest, _digest(plaintext))

    def is_usable(self, *, now: datetime) -> bool:
        return self.revoked_at is None and not self.has_expired(now=now)

    def has_expired(self, *, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def _only_tenant(user: models.Model) -> Tenant | None:
    memberships = list(Membership.objects.filter(user_id=user.pk).select_related("tenant")[:2])
    return memberships[0].tenant if len(memberships) == 1 else None


class OperationKey(models.Model):
    """An Idempotency-Key a tenant sent with a POST, with the answer to replay for it: the
    status, the headers and the exact bytes first sent. `response_body` is NULL when that
    answer showed a secret once: a secret is never kept here, so such a key replays as a
    409 naming `resource` instead.

    A key of a request made outside any tenant (a user's own tokens) has no tenant and is
    scoped by `scope` instead (`user:<id>`)."""

    # No index of its own: the unique (tenant, key) index leads with it. With one, a cached
    # generic plan of the lookup could read every key of a tenant through it.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="operation_keys", null=True, db_index=False
    )
    scope = models.CharField(max_length=64, default="", blank=True)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    resource = models.CharField(max_length=255)
    response_status = models.PositiveSmallIntegerField()
    response_headers = models.JSONField(default=dict)
    response_body = models.BinaryField(null=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "key"], name="operation_key_tenant_key_unique"
            ),
            models.UniqueConstraint(
                fields=["scope", "key"],
                condition=models.Q(tenant__isnull=True),
                name="operation_key_scope_key_unique",
            ),
        ]
        indexes = [models.Index(fields=["expires_at"], name="operation_key_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.key} ({self.tenant_id})"


# --- External identity provider (OIDC bearer JWTs) -----------------------------------------


class ExternalIdentity(models.Model):
    """A user as the configured identity provider names them: its issuer and the token's
    `sub`, stored the first time a valid JWT of theirs is seen."""

    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name_plural = "external identities"
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="external_identity_issuer_subject_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


# --- The front door: invitations and signup requests ----------------------------------------
# Their single-use link tokens are kept as digests (tenancy.link_tokens) only; the token is
# derived with SECRET_KEY when the email carrying it is sent, and stored nowhere.


def token_digest(plaintext: str) -> str:
    """The digest a presented link token is looked up by."""
    return link_tokens.digest(plaintext)


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    # A pending invitation past its expires_at reads as expired; no job rewrites the rows.
    EXPIRED = "expired", "Expired"


class Invitation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()  # lower-cased
    role = models.CharField(max_length=16, choices=Role.choices)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="invitations_sent",
    )
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    status = models.CharField(
        max_length=16, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "email"],
                condition=models.Q(status="pending"),
                name="invitation_one_pending_per_email",
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="invitation_role_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=InvitationStatus.values),
                name="invitation_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="invitation_tenant_new_idx")
        ]

    def __str__(self) -> str:
        return f"{self.email} to {self.tenant_id} ({self.status})"

    def status_at(self, now: datetime) -> str:
        if self.status == InvitationStatus.PENDING and self.expires_at <= now:
            return InvitationStatus.EXPIRED
        return self.status


class SignupRequest(models.Model):
    """A pending or used signup (not tenant-scoped: the tenant is made when it is verified).
    At most one unused request per email address: a repeat reuses it with a new token."""

    email = models.EmailField()  # lower-cased
    tenant_name = models.CharField(max_length=200)
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField()
    requester_address = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["email"],
                condition=models.Q(used_at__isnull=True),
                name="signup_one_pending_per_email",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({'used' if self.used_at else 'pending'})"


class SigninLink(models.Model):
    """A single-use link that signs an existing user in (README: Signing in and sessions), valid for
    minutes. Only the digest of its token is kept (tenancy.link_tokens, purpose `signin`)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="signin_links"
    )
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    requester_address = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"], name="signin_link_user_idx")]

    def __str__(self) -> str:
        return f"signin of {self.user_id} ({'used' if self.used_at else 'unused'})"


class UsageCounter(models.Model):
    """One of the `tenancy.quotas.SHARDS` slots counting a tenant's use of a periodic limit
    in one period; the use is the sum of the slots. Each slot may count up to its `cap`, its
    part of the limit, so a create increments one slot and never waits on a row every other
    create of the tenant writes too (README: Plans and quotas). `planned_limit` is the limit
    the caps were shared out for (NULL: none yet, or unlimited); when the plan's limit
    changes, the caps are shared out again so that they never add up past it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usage_counters")
    limit_name = models.CharField(max_length=32)
    period_start = models.DateTimeField()
    shard = models.PositiveSmallIntegerField()
    used = models.PositiveIntegerField(default=0)
    cap = models.PositiveIntegerField(null=True, blank=True)
    planned_limit = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "limit_name", "period_start", "shard"],
                name="usage_counter_slot_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.limit_name} of {self.tenant_id} from {self.period_start} [{self.shard}]"
