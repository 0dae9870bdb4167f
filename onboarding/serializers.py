"""Input and output shapes of signup and invitations (README: API overview)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from onboarding.turnstile import TOKEN_MAX_LENGTH
from tenancy.models import Invitation, InvitationStatus, Role
from web.fields import EmailAddressField, SingleLineCharField, StrictCharField
from web.serializers import RejectsUndeclaredFields

# Our own tokens are 43 characters; anything much longer is not one.
SINGLE_USE_TOKEN_MAX = 128


class SignupAcceptedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["verification_sent"])


class SignupSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = SignupAcceptedSerializer

    email = EmailAddressField()
    tenant_name = SingleLineCharField(max_length=200)
    captcha_token = StrictCharField(
        max_length=TOKEN_MAX_LENGTH, help_text="The Turnstile widget's response token."
    )


class TokenSerializer(RejectsUndeclaredFields, serializers.Serializer):
    token = StrictCharField(max_length=SINGLE_USE_TOKEN_MAX, help_text="From the emailed link.")


class SignupVerifiedSerializer(serializers.Serializer):
    tenant_id = serializers.UUIDField()
    user_email = serializers.EmailField()
    token = serializers.CharField(help_text="A session token of the new owner, shown once.")
    expires_at = serializers.DateTimeField(help_text="When the session token ends.")


class InvitationSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    email = serializers.EmailField(read_only=True)
    role = serializers.ChoiceField(choices=Role.choices, read_only=True)
    status = serializers.SerializerMethodField()
    expires_at = serializers.DateTimeField(read_only=True)
    invited_by = serializers.EmailField(
        source="invited_by.email", read_only=True, default=None, allow_null=True
    )
    created_at = serializers.DateTimeField(read_only=True)

    @extend_schema_field(serializers.ChoiceField(choices=InvitationStatus.choices))
    def get_status(self, invitation: Invitation) -> str:
        return invitation.status_at(self.context["now"])


class InvitationCreateSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = InvitationSerializer

    email = EmailAddressField()
    role = serializers.ChoiceField(choices=Role.choices)


class InvitationAcceptedSerializer(serializers.Serializer):
    tenant_id = serializers.UUIDField(source="tenant.id")
    user_email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Role.choices)
    token = serializers.CharField(
        allow_null=True,
        help_text="A session token of the invitee, shown once; null when signed in.",
    )
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When the session token ends; null when signed in."
    )


# --- Signing in and invitation previews (README: Signing in and sessions) -------------------------


class SigninAcceptedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["link_sent"])


class SigninSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = SigninAcceptedSerializer

    email = EmailAddressField()
    captcha_token = StrictCharField(
        max_length=TOKEN_MAX_LENGTH, help_text="The Turnstile widget's response token."
    )


class SignedInUserSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    name = serializers.CharField(source="first_name")


class SignedInSerializer(serializers.Serializer):
    token = serializers.CharField(
        source="session.plaintext", help_text="A session token, shown once."
    )
    expires_at = serializers.DateTimeField(
        source="session.expires_at", help_text="When the session token ends."
    )
    user = SignedInUserSerializer()


class SigninVerifySerializer(TokenSerializer):
    representation = SignedInSerializer


class InvitationPreviewSerializer(serializers.Serializer):
    tenant_name = serializers.CharField(source="tenant.name")
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices)
    invited_by = serializers.EmailField(source="invited_by.email", default=None, allow_null=True)
    expires_at = serializers.DateTimeField()


class InvitationPreviewRequestSerializer(TokenSerializer):
    representation = InvitationPreviewSerializer
