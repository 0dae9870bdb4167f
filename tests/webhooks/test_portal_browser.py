"""The portal page in a real browser (Playwright driving Debian's chromium) against the live
server: a full session walks every control (an endpoint created with its event types, its
secret revealed and rotated, disabled and enabled; a message's attempts with the reason the
failed one failed; a resend), a read-only session shows no write control and its API calls
answer 403, an expired link shows the expired screen, the page is framed by an allowed
origin and refused by another, and it fits 390 px and 1366 px without horizontal scrolling.

Skipped only when no chromium executable exists (`.ci/run` installs it); Playwright's own
browser download is not used."""

import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect, sync_playwright

from delivery.models import Delivery, Notification
from tests.delivery.factories import make_notification
from tests.support.browser import CHROMIUM, TIMEOUT_MS
from tests.webhooks.portal_support import URL, application_endpoint, make_application
from webhooks.event_types import event_type_create
from webhooks.models import Message, PortalSession
from webhooks.portal.sessions import portal_session_create

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"no chromium executable at {CHROMIUM}: apt-get install chromium (see .ci/run)",
    ),
]

RECEIVER = URL
READ_ONLY_CONTROLS = (
    "Edit",
    "Disable",
    "Enable",
    "Delete",
    "Reveal secret",
    "Rotate secret",
    "Recover",
    "Add endpoint",
)


@pytest.fixture
def world(transactional_db, alice, local_channels) -> dict:
    """Acme's application with one endpoint and one message whose first attempt failed
    (HTTP 500) and second was delivered; tokens of a full, a read-only and an expired
    session. Written before Playwright starts: inside its event loop the ORM refuses to
    run."""
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    event_type_create(tenant=alice.tenant, name="invoice.voided")
    acme = make_application(alice.tenant, "acme")
    endpoint = application_endpoint(acme)
    message = Message.objects.create(
        tenant=alice.tenant,
        application=acme,
        event_type="invoice.paid",
        payload={"invoice": 1},
        endpoint_ids=[str(endpoint.id)],
    )
    delivery = make_notification(
        tenant=alice.tenant,
        channels=["webhook"],
        webhook_endpoint=endpoint,
        next_fire_at=None,
    )
    Notification.objects.filter(pk=delivery.pk).update(message=message, state="completed")
    for attempt, outcome, status, category, error in (
        (1, "failed", 500, "http_5xx", "The endpoint answered HTTP 500."),
        (2, "delivered", 200, "", ""),
    ):
        Delivery.objects.create(
            tenant=alice.tenant,
            notification_id=delivery.id,
            endpoint_id=endpoint.id,
            attempt=attempt,
            occurrence=1,
            channel="webhook",
            outcome=outcome,
            http_status=status,
            error_category=category,
            error=error,
        )

    def token(capabilities=None) -> str:
        now = timezone.now()
        return portal_session_create(
            tenant=alice.tenant, application=acme.uid, capabilities=capabilities, now=now
        ).plaintext

    expired = token()
    PortalSession.objects.filter(expires_at__gt=timezone.now()).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    return {
        "full": token(),
        "read_only": token([]),
        "expired": expired,
        "owner": alice.token,
        "message": message,
        "endpoint": endpoint,
    }


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        expect.set_options(timeout=TIMEOUT_MS)
        yield browser
        browser.close()


def _page(browser: Browser, base_url: str, width: int = 1366) -> Page:
    context = browser.new_context(base_url=base_url, viewport={"width": width, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def _button(page: Page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def _notice(page: Page, text: str) -> None:
    expect(page.get_by_role("status")).to_contain_text(text)


def _fits(page: Page) -> None:
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], widths


def test_a_full_session_walks_every_control(live_server, world, browser):
    page = _page(browser, live_server.url)
    page.goto(f"/portal/#token={world['full']}")

    expect(page.get_by_role("heading", name="Endpoints")).to_be_visible()
    expect(page).to_have_url(f"{live_server.url}/portal/")  # the token left the address bar
    endpoints = page.get_by_role("region", name="Endpoints")
    expect(endpoints.get_by_role("listitem")).to_have_count(1)

    # A new endpoint subscribed to one type.
    endpoints.get_by_label("Endpoint URL").fill("http://127.0.0.1:9/hooks/new")
    endpoints.get_by_label("Description", exact=True).fill("Voided invoices to the ledger")
    endpoints.get_by_label("invoice.voided").check()
    _button(page, "Add endpoint").click()
    _notice(page, "Endpoint http://127.0.0.1:9/hooks/new added.")
    new = endpoints.get_by_role("listitem").filter(has_text="hooks/new")
    expect(new).to_contain_text("invoice.voided")
    expect(new).to_contain_text("Voided invoices to the ledger")

    # Its secret, revealed and rotated.
    _button(page, "Reveal the secret of http://127.0.0.1:9/hooks/new").click()
    shown = new.locator(".secret")
    expect(shown).to_contain_text("Signing secret: whsec_")
    first = shown.inner_text()
    _button(page, "Rotate the secret of http://127.0.0.1:9/hooks/new").click()
    _notice(page, "Secret rotated")
    expect(shown).not_to_have_text(first)

    # Disabled, then enabled again.
    _button(page, "Disable http://127.0.0.1:9/hooks/new").click()
    _notice(page, "Endpoint disabled.")
    expect(endpoints.get_by_role("listitem").filter(has_text="hooks/new")).to_contain_text(
        "disabled"
    )
    _button(page, "Enable http://127.0.0.1:9/hooks/new").click()
    _notice(page, "Endpoint enabled.")

    # The message, its attempts and why the first failed; then a resend.
    messages = page.get_by_role("region", name="Messages")
    expect(messages.get_by_role("listitem")).to_have_count(1)
    message = world["message"]
    _button(page, f"Attempts of invoice.paid {message.id}").click()
    attempts = messages.get_by_role("table")
    expect(attempts.get_by_role("row")).to_have_count(3)  # the header and two attempts
    expect(attempts).to_contain_text("http_5xx: The endpoint answered HTTP 500.")
    expect(attempts).to_contain_text("delivered")
    _button(page, f"Resend invoice.paid {message.id} to {RECEIVER}").click()
    _notice(page, f"Message resent to {RECEIVER}.")

    # The filter by type finds it, and by another type nothing.
    messages.get_by_label("Event type").select_option("invoice.voided")
    _button(page, "Filter").click()
    expect(messages.get_by_role("listitem")).to_have_text("No messages.")

    # Deleted at last.
    _button(page, "Delete http://127.0.0.1:9/hooks/new").click()
    _notice(page, "Endpoint deleted.")
    expect(endpoints.get_by_role("listitem")).to_have_count(1)


def test_every_control_is_reachable_by_keyboard(live_server, world, browser):
    page = _page(browser, live_server.url)
    page.goto(f"/portal/#token={world['full']}")
    expect(page.get_by_role("heading", name="Endpoints")).to_be_visible()
    expect(_button(page, f"Rotate the secret of {RECEIVER}")).to_be_visible()

    focusable = page.evaluate(
        """[...document.querySelectorAll('button, input, select')]
        .filter((node) => node.offsetParent !== null)
        .map((node) => [node.tabIndex, node.labels && node.labels.length
          || node.getAttribute('aria-label') || node.textContent.trim()])"""
    )

    assert focusable
    for tab_index, label in focusable:
        assert tab_index >= 0 and label, (tab_index, label)


def test_a_read_only_session_shows_no_write_control_and_its_writes_are_403(
    live_server, world, browser
):
    page = _page(browser, live_server.url)
    page.goto(f"/portal/#token={world['read_only']}")
    endpoints = page.get_by_role("region", name="Endpoints")
    expect(endpoints.get_by_role("listitem")).to_have_count(1)
    expect(_button(page, "Attempts of invoice.paid " + str(world["message"].id))).to_be_visible()

    for name in READ_ONLY_CONTROLS:
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.get_by_role("button", name="Resend")).to_have_count(0)
    statuses = page.evaluate(
        """async ([token, endpoint]) => {
          const headers = {Authorization: `Bearer ${token}`, 'Content-Type': 'application/json'};
          const calls = [
            ['POST', '/v1/webhook-endpoints', {url: 'http://127.0.0.1:9/x'}],
            ['PATCH', `/v1/webhook-endpoints/${endpoint}`, {disabled: true}],
            ['GET', `/v1/webhook-endpoints/${endpoint}/secret`, undefined],
            ['POST', `/v1/webhook-endpoints/${endpoint}/rotate-secret`, undefined],
          ];
          const answers = [];
          for (const [method, path, body] of calls) {
            const response = await fetch(path, {method, headers, body: JSON.stringify(body)});
            answers.push(response.status);
          }
          return answers;
        }""",
        [world["read_only"], str(world["endpoint"].id)],
    )
    assert statuses == [403, 403, 403, 403]


def test_an_expired_link_shows_the_expired_screen(live_server, world, browser):
    page = _page(browser, live_server.url)
    page.goto(f"/portal/#token={world['expired']}")

    expect(page.get_by_role("heading", name="This link has expired")).to_be_visible()
    expect(page.get_by_role("region", name="Endpoints")).to_be_hidden()


def test_an_owner_token_opens_the_tenant_s_console(live_server, world, browser):
    page = _page(browser, live_server.url)
    page.goto(f"/portal/#token={world['owner']}")

    expect(page.locator("#who")).to_have_text("The tenant's console: every application.")
    expect(page.get_by_role("region", name="Endpoints")).to_contain_text(RECEIVER)


@pytest.mark.parametrize("width", [390, 1366])
def test_the_page_fits_without_horizontal_scrolling(live_server, world, browser, width):
    page = _page(browser, live_server.url, width=width)
    page.goto(f"/portal/#token={world['full']}")
    expect(_button(page, f"Rotate the secret of {RECEIVER}")).to_be_visible()
    _button(page, f"Attempts of invoice.paid {world['message'].id}").click()
    expect(page.get_by_role("table")).to_be_visible()
    _button(page, f"Edit {RECEIVER}").click()

    _fits(page)


class _Framing(BaseHTTPRequestHandler):
    """A page of another origin that frames the portal."""

    portal = ""

    def do_GET(self) -> None:
        body = f'<!doctype html><title>Host</title><iframe src="{self.portal}"></iframe>'.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def framing_host(live_server, world) -> Iterator[int]:
    handler = type(
        "Framing", (_Framing,), {"portal": f"{live_server.url}/portal/#token={world['full']}"}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_allowed_origin_frames_the_page_and_another_is_refused(
    live_server, world, browser, framing_host, settings
):
    settings.PORTAL_FRAME_ANCESTORS = f"'self' http://127.0.0.1:{framing_host}"

    allowed = _page(browser, live_server.url)
    allowed.goto(f"http://127.0.0.1:{framing_host}/")
    framed = allowed.frame_locator("iframe")
    expect(framed.get_by_role("heading", name="Endpoints")).to_be_visible()

    refused = _page(browser, live_server.url)
    refused.goto(f"http://localhost:{framing_host}/")
    refused.wait_for_load_state("load")
    portal_frames = [frame for frame in refused.frames if "/portal/" in frame.url]
    assert not portal_frames or all(frame.locator("h1").count() == 0 for frame in portal_frames), [
        frame.url for frame in refused.frames
    ]
