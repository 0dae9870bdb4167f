"""The support flow in a real browser (Playwright driving Debian's chromium): log in, filter
the dead-lettered notifications, open one, retry it, read the queue-health page.

Skipped only when no chromium executable exists (`.ci/run` installs it); Playwright's own
browser download is not used."""

import os
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect, sync_playwright

from tests.delivery.factories import make_notification, make_tenant
from tests.support.browser import CHROMIUM, TIMEOUT_MS

PASSWORD = "correct horse battery staple"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"no chromium executable at {CHROMIUM}: apt-get install chromium (see .ci/run)",
    ),
]


@pytest.fixture
def page(live_server, queue):
    """A browser on the live server. The rows are written first: inside Playwright's event
    loop the ORM would refuse to run (async-unsafe) or take a second connection."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        context = browser.new_context(base_url=live_server.url)
        context.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        yield context.new_page()
        browser.close()


@pytest.fixture
def queue(transactional_db) -> None:
    """A support login, one dead-lettered notification and one scheduled for later."""
    get_user_model().objects.create_superuser("support", "support@example.com", PASSWORD)
    tenant = make_tenant("Acme Corp")
    make_notification(
        tenant=tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        subject="Nightly export",
        next_fire_at=None,
        error_count=5,
        last_error="HTTP 503 from the mail relay",
        dead_letter_reason="exhausted",
    )
    make_notification(
        tenant=tenant, subject="Daily standup", next_fire_at=timezone.now() + timedelta(hours=1)
    )


def _log_in(page: Page) -> None:
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("support")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Queue health")).to_be_visible()


def test_support_retries_a_dead_lettered_notification_and_reads_queue_health(page):
    _log_in(page)

    page.locator("tr.model-notification").get_by_role("link", name="Notifications").click()
    page.locator("#changelist-filter").get_by_role("link", name="Dead-lettered").click()
    results = page.locator("#result_list")
    expect(results).to_contain_text("Nightly export")
    expect(results).not_to_contain_text("Daily standup")
    expect(results).to_contain_text("Acme Corp")

    results.get_by_role("link", name="Nightly export").click()
    expect(page.locator(".field-state")).to_contain_text("Dead-lettered")
    page.get_by_role("button", name="Retry now").click()

    expect(page.locator(".messagelist")).to_contain_text("The notification was retried.")
    expect(page.locator(".field-state")).to_contain_text("Scheduled")
    expect(page.locator(".field-error_count")).to_contain_text("0")

    page.goto("/admin/")
    page.get_by_role("link", name="Queue health").click()
    figures = page.locator("#notification-figures")
    expect(figures.get_by_role("row", name="Due now")).to_contain_text("1")
    expect(figures.get_by_role("row", name="Dead-lettered")).to_contain_text("0")
    expect(page.locator("#deliveries-chart svg")).to_be_visible()
    expect(page.locator("#lateness-chart svg")).to_have_count(1)


@pytest.fixture
def deliveries(queue) -> None:
    """A page of delivery-log rows with the longest values their columns show."""
    from delivery.models import Delivery, Notification

    row = Notification.objects.get(subject="Nightly export")
    for occurrence in range(1, 30):
        Delivery.objects.create(
            tenant=row.tenant,
            notification_id=row.pk,
            occurrence=occurrence,
            channel="email",
            outcome="failed",
            http_status=503,
            error_category="transient",
            error="HTTP 503 from the mail relay: service unavailable, try again later " * 3,
            duration_ms=10_000,
            late_ms=123_456,
        )


def _overflow(page: Page) -> tuple[int, int]:
    """Pixels the page and the list's table run past their width (0, 0 when they fit)."""
    page_overflow, table_overflow = page.evaluate(
        "[document.documentElement.scrollWidth - window.innerWidth,"
        " (r => r.scrollWidth - r.clientWidth)(document.querySelector('#changelist .results'))]"
    )
    return page_overflow, table_overflow


@pytest.mark.parametrize("listed", ["?state=dead_lettered", ""], ids=["dead letters", "all"])
def test_the_notifications_fit_a_1366_pixel_window_last_error_included(queue, page, listed):
    page.set_viewport_size({"width": 1366, "height": 768})
    _log_in(page)

    page.goto(f"/admin/delivery/notification/{listed}")
    expect(page.locator("#result_list")).to_contain_text("HTTP 503 from the mail relay")

    assert _overflow(page) == (0, 0)


def test_the_delivery_log_fits_a_1366_pixel_window(deliveries, page):
    page.set_viewport_size({"width": 1366, "height": 768})
    _log_in(page)

    page.goto("/admin/delivery/delivery/")
    expect(page.locator("#result_list")).to_contain_text("Nightly export")

    assert _overflow(page) == (0, 0)
