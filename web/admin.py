"""Admin building blocks: pages support staff may read but never edit, change pages whose
state changes are buttons that call a service, and readable JSON."""

import json
from typing import Any, Generic, TypeVar, cast

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST


class ReadOnlyModelAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


_M = TypeVar("_M", bound=Model)


class StateButtonsAdmin(admin.ModelAdmin, Generic[_M]):
    """A change page with POST buttons (CSRF-protected admin URLs) for state changes.

    Subclasses list the buttons that apply to a row in `state_buttons` and perform one in
    `press_state_button`, through the same service as the API, reporting the result with
    `message_user`. The queue's own columns stay read-only on the form.
    """

    change_form_template = "admin/queue_change_form.html"

    def has_state_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """May the user press the buttons (and run the list actions that change state)?"""
        return self.has_change_permission(request, obj)

    def state_buttons(self, obj: _M) -> list[tuple[str, str]]:
        """(name, label) of the buttons shown for `obj`."""
        return []

    def press_state_button(self, request: HttpRequest, obj: _M, name: str) -> None:
        raise NotImplementedError

    def get_urls(self) -> list[URLPattern]:
        button = path(
            "<path:object_id>/state/<slug:name>/",
            self.admin_site.admin_view(require_POST(self.state_button_view)),
            name=self._state_button_url_name(),
        )
        return [button, *super().get_urls()]

    def state_button_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        if obj is None or name not in dict(self.state_buttons(obj)):
            raise Http404("No such row or button.")
        if not self.has_state_change_permission(request, obj):
            raise PermissionDenied
        self.press_state_button(request, obj, name)
        opts = self.opts
        change_url = reverse(
            f"admin:{opts.app_label}_{opts.model_name}_change",
            args=[quote(obj.pk)],
            current_app=self.admin_site.name,
        )
        return HttpResponseRedirect(change_url)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: _M | None = None,
    ) -> TemplateResponse:
        if obj is not None and self.has_state_change_permission(request, obj):
            context["state_buttons"] = [
                (label, self._state_button_url(obj, name))
                for name, label in self.state_buttons(obj)
            ]
        response = super().render_change_form(request, context, add, change, form_url, obj)
        return cast(TemplateResponse, response)

    def _state_button_url_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_state_button"

    def _state_button_url(self, obj: Model, name: str) -> str:
        return reverse(
            f"admin:{self._state_button_url_name()}",
            args=[quote(obj.pk), name],
            current_app=self.admin_site.name,
        )


class ServiceSaveAdmin(admin.ModelAdmin):
    """A change page whose `save_model` calls a service. The service's refusals (the
    exception types in `refusals`) roll the admin's transaction back and come back as an
    error message on the same page instead of a server error."""

    refusals: tuple[type[Exception], ...] = ()

    def refusal_message(self, exc: Exception) -> str:
        errors = getattr(exc, "errors", None)
        if errors:
            details = "; ".join(
                f"{field}: {' '.join(map(str, msgs))}" for field, msgs in errors.items()
            )
            return f"Nothing was saved: {details}"
        return f"Nothing was saved: {exc}"

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except self.refusals as exc:
            self.message_user(request, self.refusal_message(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


def pretty_json(value: Any) -> str:
    """`value` as indented JSON in a <pre>, for a read-only admin field."""
    if value in (None, "", [], {}):
        return "-"
    return format_html(
        '<pre style="margin:0;white-space:pre-wrap">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False),
    )
