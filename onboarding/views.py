"""The front door's API: public signup and verify, invitations (owners), and the public or
signed-in accept. Thin views: parse, call one service, render."""

import uuid
from typing import Any, cast

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from onboarding.serializers import (
    InvitationAcceptedSerializer,
    InvitationCreateSerializer,
    InvitationPreviewRequestSerializer,
    InvitationPreviewSerializer,
    InvitationSerializer,
    SignedInSerializer,
    SigninAcceptedSerializer,
    SigninSerializer,
    SigninVerifySerializer,
    SignupAcceptedSerializer,
    SignupSerializer,
    SignupVerifiedSerializer,
    TokenSerializer,
)
from onboarding.services import (
    invitation_accept_announced,
    invitation_send,
    signin_captcha_check,
    signin_request,
    signup_captcha_check,
    signup_request,
)
from onboarding.signins import signin_verify
from onboarding.signups import signup_verify
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import bound_tenant_of, tenant_of, user_of
from tenancy.api.schema import location_header
from tenancy.api.throttling import (
    AddressRateThrottle,
    AttemptThrottle,
    SigninAddressThrottle,
    SignupAddressThrottle,
    UserRateThrottle,
    client_address,
)
from tenancy.invitations import (
    invitation_preview,
    invitation_revoke,
    invitations_of,
)
from tenancy.models import Invitation, InvitationStatus
from web.pagination import NewestFirstCursorPagination
from web.query import single_query_param


class _PublicView(APIView):
    """Answers without credentials (a wrong token is still a 401); never reads a tenant."""

    permission_classes = [AllowAny]

    def idempotency_scope(self, request: Request) -> str:
        """A public route's keys are its own: (route, key), as no tenant is known."""
        return f"route:{request.path}"


class _SignupView(_PublicView):
    """Off (404, before anything is counted) unless SIGNUP_ENABLED."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if not settings.SIGNUP_ENABLED:
            raise exceptions.NotFound("No resource matches this URL.")
        super().initial(request, *args, **kwargs)


class _LinkRequestView(_SignupView):
    """E-mails a link, limited per client address; a request refused as malformed (400) is
    taken back from that limit (tenancy.api.throttling.AttemptThrottle)."""

    def get_throttles(self) -> list[BaseThrottle]:
        self._throttles = super().get_throttles()
        return self._throttles

    def finalize_response(
        self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any
    ) -> Response:
        if response.status_code == status.HTTP_400_BAD_REQUEST:
            for throttle in getattr(self, "_throttles", ()):
                if isinstance(throttle, AttemptThrottle):
                    throttle.take_back()
        # DRF finalizes any HttpResponseBase (answer_once's replies are plain HttpResponses);
        # the stubs narrow the argument to Response.
        return super().finalize_response(request, cast(Response, response), *args, **kwargs)


class SignupView(_LinkRequestView):
    throttle_classes = [AddressRateThrottle, UserRateThrottle, SignupAddressThrottle]
    extra_problem_statuses = {"POST": (503,)}

    @extend_schema(
        operation_id="signup_create",
        request=SignupSerializer,
        responses={202: SignupAcceptedSerializer},
        description=(
            "Sends a verification email. The answer is the same whether or not the address "
            "is known. 400 `captcha-failed` when the Turnstile check fails; 503 with "
            "Retry-After when it cannot be made. 404 while SIGNUP_ENABLED is off."
        ),
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = SignupSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data, address = serializer.validated_data, client_address(request)

        def check_captcha() -> None:
            signup_captcha_check(captcha_token=data["captcha_token"], address=address)

        def sign_up() -> Answer:
            signup_request(
                email=data["email"],
                tenant_name=data["tenant_name"],
                address=address,
                now=timezone.now(),
            )
            body = {"status": "verification_sent"}
            return Answer.of(status.HTTP_202_ACCEPTED, body, resource="/v1/signup")

        return answer_once(
            request,
            sign_up,
            body=data,
            scope=self.idempotency_scope(request),
            prepare=check_captcha,
        )


class SignupVerifyView(_SignupView):
    @extend_schema(
        operation_id="signup_verify",
        request=TokenSerializer,
        responses={201: SignupVerifiedSerializer},
        description="Creates the tenant, its owner and a session token (shown once; it ends "
        "at `expires_at`, SESSION_TTL_SECONDS later). A used, expired or unknown token is "
        "400 `invalid-token`.",
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = TokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def verify() -> Answer:
            grant = signup_verify(token=serializer.validated_data["token"], now=timezone.now())
            body = {"tenant_id": grant.tenant.id, "user_email": grant.user.email}
            data = SignupVerifiedSerializer(
                {**body, "token": grant.token, "expires_at": grant.expires_at}
            ).data
            # The answer shows the owner's API token once: a replay names the membership.
            resource = f"/v1/members/{grant.user.pk}"
            return Answer.of(status.HTTP_201_CREATED, data, resource=resource, shows_secret=True)

        return answer_once(
            request, verify, body=serializer.validated_data, scope=self.idempotency_scope(request)
        )


class InvitationListView(ListAPIView):
    owner_methods = ("*",)
    idempotency_key_required = ("POST",)
    extra_problem_statuses = {"POST": (409,)}
    serializer_class = InvitationSerializer
    pagination_class = NewestFirstCursorPagination
    query_filters = (OpenApiParameter("status", enum=InvitationStatus.values, required=False),)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now()}

    def get_queryset(self) -> QuerySet[Invitation]:
        state = single_query_param(self.request, "status")
        return invitations_of(tenant_of(self.request), status=state, now=timezone.now())

    @extend_schema(
        operation_id="invitations_list",
        responses={200: InvitationSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    @extend_schema(
        operation_id="invitations_create",
        request=InvitationCreateSerializer,
        parameters=[location_header("Path of the invitation, `/v1/invitations/{id}`.")],
        responses={201: InvitationSerializer},
        description="Emails an accept link (one-shot, run_tick delivers it). A pending "
        "address is sent a new link (the old one stops working); a member's is 409.",
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = InvitationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = serializer.validated_data

        def invite() -> Answer:
            now = timezone.now()
            invitation = invitation_send(
                tenant=tenant_of(request), invited_by=user_of(request), now=now, **body
            )
            data = InvitationSerializer(invitation, context={"now": now}).data
            path = f"/v1/invitations/{invitation.id}"
            return Answer.of(status.HTTP_201_CREATED, data, resource=path, location=True)

        return answer_once(request, invite, body=body, required=True)


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class InvitationDetailView(APIView):
    owner_methods = ("*",)
    extra_problem_statuses = {"DELETE": (409,)}

    @extend_schema(responses={200: InvitationSerializer})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        invitation = Invitation.objects.select_related("invited_by").get(
            pk=id, tenant=tenant_of(request)
        )
        return Response(InvitationSerializer(invitation, context={"now": timezone.now()}).data)

    @extend_schema(responses={204: OpenApiResponse(description="Revoked; a second delete is 404.")})
    def delete(self, request: Request, id: uuid.UUID) -> Response:
        invitation_revoke(tenant=tenant_of(request), invitation_id=id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationAcceptView(_PublicView):
    @extend_schema(
        operation_id="invitations_accept",
        request=TokenSerializer,
        responses={200: InvitationAcceptedSerializer},
        description="Public with the emailed token (the answer carries a session token of "
        "the invitee, shown once, ending at `expires_at`), or signed in as the invited "
        "address (403 otherwise; no token in the answer). Used, revoked, expired or "
        "unknown: 400 `invalid-token`.",
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = TokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = request.user if request.user is not None and request.user.is_authenticated else None

        def accept() -> Answer:
            accepted = invitation_accept_announced(
                token=serializer.validated_data["token"],
                user=user,
                now=timezone.now(),
                bound_tenant_id=bound_tenant_of(request),
            )
            data = InvitationAcceptedSerializer(accepted).data
            resource = f"/v1/members/{accepted.user.pk}"
            # An anonymous accept shows the invitee's API token once: not kept for replay.
            shown = accepted.token is not None
            return Answer.of(status.HTTP_200_OK, data, resource=resource, shows_secret=shown)

        scope = self.idempotency_scope(request)
        return answer_once(request, accept, body=serializer.validated_data, scope=scope)


class InvitationPreviewView(_PublicView):
    @extend_schema(
        operation_id="invitations_preview",
        request=InvitationPreviewRequestSerializer,
        responses={200: InvitationPreviewSerializer},
        description="What an invitation's emailed token opens, for a page to show before "
        "the invitee accepts: the token is not used. Used, revoked, expired or unknown: "
        "400 `invalid-token`, as accept answers.",
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = InvitationPreviewRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def preview() -> Answer:
            invitation = invitation_preview(
                token=serializer.validated_data["token"], now=timezone.now()
            )
            data = InvitationPreviewSerializer(invitation).data
            return Answer.of(status.HTTP_200_OK, data, resource="/v1/invitations/preview")

        scope = self.idempotency_scope(request)
        return answer_once(request, preview, body=serializer.validated_data, scope=scope)


# --- Signing back in (README: Signing in and sessions) --------------------------------------------


class SigninView(_LinkRequestView):
    """Served with the front door (SIGNUP_ENABLED), which guarantees a Turnstile secret."""

    throttle_classes = [AddressRateThrottle, UserRateThrottle, SigninAddressThrottle]
    extra_problem_statuses = {"POST": (503,)}

    @extend_schema(
        operation_id="signin_create",
        request=SigninSerializer,
        responses={202: SigninAcceptedSerializer},
        description=(
            "Emails a single-use sign-in link (SIGNIN_URL, valid 15 minutes) when the "
            "address has an account. The answer is the same bytes whether or not it has. "
            "400 `captcha_failed` when the Turnstile check fails; 503 with Retry-After when "
            "it cannot be made. 404 while SIGNUP_ENABLED is off."
        ),
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = SigninSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data, address = serializer.validated_data, client_address(request)

        def check_captcha() -> None:
            signin_captcha_check(captcha_token=data["captcha_token"], address=address)

        def sign_in() -> Answer:
            signin_request(email=data["email"], address=address, now=timezone.now())
            body = {"status": "link_sent"}
            return Answer.of(status.HTTP_202_ACCEPTED, body, resource="/v1/signin")

        return answer_once(
            request,
            sign_in,
            body=data,
            scope=self.idempotency_scope(request),
            prepare=check_captcha,
        )


class SigninVerifyView(_SignupView):
    @extend_schema(
        operation_id="signin_verify",
        request=SigninVerifySerializer,
        responses={201: SignedInSerializer},
        description="Trades the emailed sign-in token for a session token (shown once; it "
        "ends at `expires_at`, SESSION_TTL_SECONDS later). Used, expired or unknown: 400 "
        "`invalid-token`.",
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = SigninVerifySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def verify() -> Answer:
            signed_in = signin_verify(token=serializer.validated_data["token"], now=timezone.now())
            data = SignedInSerializer(signed_in).data
            # The answer shows a session token once: a replay names the account instead.
            return Answer.of(status.HTTP_201_CREATED, data, resource="/v1/me", shows_secret=True)

        return answer_once(
            request, verify, body=serializer.validated_data, scope=self.idempotency_scope(request)
        )
