"""The example front end (examples/frontend) in a real browser, served by `manage.py demo`
on its own origin and calling the demo's API on another: a team signs up, signs out and back
in, creates, renames and deletes projects, invites someone, who previews and accepts the
invitation and sees the members, and signs out. The emailed links are read from the demo's
output (the console e-mail backend, under `tick |`), as a developer reads them.

The same page opened on an origin the API does not allow shows the page's network error:
the journey fails when CORS breaks.

Skipped only when no chromium executable exists (`.ci/run` installs it); Playwright's own
browser download is not used. With FRONTEND_SCREENSHOTS=<directory>, each step is saved
there as a PNG."""

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support.browser import CHROMIUM, TIMEOUT_MS
from tests.support.demo import Demo, free_port, running_demo

SCREENSHOTS = os.environ.get("FRONTEND_SCREENSHOTS", "")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"no chromium executable at {CHROMIUM}: apt-get install chromium (see .ci/run)",
    ),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Demo]:
    """One demo for the module: API, workers, Turnstile stand-in and the page's server."""
    with running_demo(tmp_path_factory.mktemp("demo"), free_port()) as demo:
        demo.wait_for(r"page \| serving examples/frontend at ", timeout=30)
        demo.wait_healthy(timeout=20)
        yield demo


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        expect.set_options(timeout=TIMEOUT_MS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    yield context.new_page()
    context.close()


class Journey:
    """The page as a person uses it, and the demo's printed e-mails as they read them."""

    def __init__(self, demo: Demo, page: Page) -> None:
        self.demo, self.page = demo, page
        self.origin = f"http://localhost:{demo.frontend_port}"
        self.steps = 0

    def open(self, origin: str = "") -> None:
        api = f"http://localhost:{self.demo.port}"
        self.page.goto(f"{origin or self.origin}/?api={api}")

    def links_so_far(self, path: str) -> list[str]:
        """The links to `path` the demo printed so far (the console backend, under tick |)."""
        pattern = rf"tick \| ({re.escape(self.origin)}/{path}\?token=[A-Za-z0-9_-]+)"
        return re.findall(pattern, self.demo.output)

    def wait_for_new_link(self, path: str, before: list[str]) -> str:
        """The first link to `path` printed after `before` (the tick sends within seconds)."""
        deadline = time.monotonic() + 20
        while len(links := self.links_so_far(path)) <= len(before):
            assert time.monotonic() < deadline, f"no new {path} link in:\n{self.demo.output}"
            time.sleep(0.2)
        return links[len(before)]

    def fill(self, section: str, fields: dict[str, str]) -> None:
        region = self.page.get_by_role("region", name=section)
        for label, value in fields.items():
            region.get_by_label(label, exact=True).fill(value)

    def click(self, name: str) -> None:
        self.page.get_by_role("button", name=name, exact=True).click()

    def shows(self, who: str) -> None:
        expect(self.page.locator("#who")).to_have_text(who)

    def notice(self, text: str) -> None:
        try:
            expect(self.page.get_by_role("status")).to_contain_text(text)
        except AssertionError:
            problem = self.page.locator("#problem")
            shown = problem.inner_text() if problem.is_visible() else "no problem shown"
            raise AssertionError(f"no notice {text!r}; the page shows: {shown}") from None

    def shot(self, name: str) -> None:
        self.steps += 1
        if SCREENSHOTS:
            path = Path(SCREENSHOTS) / f"{self.steps:02d}-{name}.png"
            self.page.screenshot(path=path, full_page=True)


def test_a_team_signs_up_signs_in_invites_and_the_invitee_joins(demo, page):
    journey = Journey(demo, page)
    journey.open()
    journey.shows("Signed out.")
    journey.shot("signed-out")

    # Sign a team up; the verification link arrives by e-mail.
    before = journey.links_so_far("signup/verify")
    journey.fill("Sign a team up", {"E-mail": "founder@example.com", "Team name": "Rocket team"})
    journey.click("Sign up")
    journey.notice("Check founder@example.com for a link to confirm your signup")
    journey.shot("signup-sent")
    page.goto(journey.wait_for_new_link("signup/verify", before))
    expect(page.get_by_role("heading", name="Confirm your signup")).to_be_visible()
    journey.shot("signup-link")
    journey.click("Create my team")
    journey.shows("Signed in as founder@example.com · Rocket team (owner)")
    journey.notice("Your team is ready.")
    expect(page).to_have_url(f"{journey.origin}/")  # the token left the address bar
    members = page.get_by_role("region", name="Members")
    expect(members.get_by_role("row")).to_have_count(2)  # the header and the founder
    expect(members).to_contain_text("founder@example.com")
    expect(page.get_by_role("button", name="Switch")).to_be_hidden()  # one team: no choice
    journey.shot("signed-up")

    # Sign out, then back in with an e-mailed link.
    journey.click("Sign out")
    journey.shows("Signed out.")
    journey.notice("You are signed out.")
    assert page.evaluate("sessionStorage.getItem('tickwork.session')") is None
    before = journey.links_so_far("signin/verify")
    journey.fill("Sign in", {"E-mail": "founder@example.com"})
    journey.click("Send me a sign-in link")
    journey.notice("If founder@example.com has an account, a sign-in link is on its way")
    signin_link = journey.wait_for_new_link("signin/verify", before)
    page.goto(signin_link)
    expect(page.get_by_role("heading", name="Finish signing in")).to_be_visible()
    journey.click("Sign in")
    journey.shows("Signed in as founder@example.com · Rocket team (owner)")
    assert page.evaluate("JSON.parse(sessionStorage.getItem('tickwork.session')).token")
    journey.shot("signed-in")

    # A project, created and renamed.
    journey.fill("Projects", {"Project name": "Website"})
    journey.click("Create project")
    journey.notice("Project Website created.")
    projects = page.get_by_role("region", name="Projects")
    expect(projects.get_by_role("listitem")).to_have_count(1)
    projects.get_by_label("New name for Website").fill("Website relaunch")
    journey.click("Rename")
    journey.notice("Project renamed to Website relaunch.")
    expect(projects.get_by_role("listitem")).to_contain_text("Website relaunch")
    journey.fill("Projects", {"Project name": "Scratch"})
    journey.click("Create project")
    journey.notice("Project Scratch created.")
    expect(projects.get_by_role("listitem")).to_have_count(2)
    journey.click("Delete Scratch")
    journey.notice("Project deleted.")
    expect(projects.get_by_role("listitem")).to_have_count(1)
    journey.shot("project-renamed")

    # An invitation, listed as pending.
    before = journey.links_so_far("invitations/accept")
    journey.fill("Invite someone", {"E-mail": "teammate@example.com"})
    journey.click("Send invitation")
    journey.notice("Invitation sent to teammate@example.com")
    invitations = page.get_by_role("region", name="Invite someone")
    expect(invitations.get_by_role("row", name=re.compile("teammate@example.com"))).to_contain_text(
        "pending"
    )
    journey.shot("invited")
    journey.click("Sign out")
    journey.shows("Signed out.")

    # The invitee opens the link: a preview first, then the accept signs them in.
    page.goto(journey.wait_for_new_link("invitations/accept", before))
    expect(page.get_by_role("heading", name="You are invited")).to_be_visible()
    expect(page.get_by_role("region", name="You are invited")).to_contain_text(
        "founder@example.com invites teammate@example.com to join Rocket team as member."
    )
    journey.shot("invitation-preview")
    journey.click("Accept invitation")
    journey.shows("Signed in as teammate@example.com · Rocket team (member)")
    journey.notice("You joined Rocket team.")
    expect(members.get_by_role("row")).to_have_count(3)
    expect(members.get_by_role("row", name=re.compile("founder@example.com"))).to_contain_text(
        "owner"
    )
    expect(members.get_by_role("row", name=re.compile("teammate@example.com"))).to_contain_text(
        "member"
    )
    expect(page.get_by_role("region", name="Invite someone")).to_be_hidden()  # owners only
    expect(projects).to_contain_text("Website relaunch")
    journey.shot("invitee-members")
    journey.click("Sign out")
    journey.shows("Signed out.")
    assert page.evaluate("sessionStorage.getItem('tickwork.session')") is None

    # A used link is the API's problem, shown with its title and detail.
    page.goto(signin_link)
    journey.click("Sign in")
    problem = page.get_by_role("alert")
    expect(problem).to_contain_text("Invalid or expired token (HTTP 400)")
    expect(problem).to_contain_text("The token is invalid, expired or already used.")
    journey.shows("Signed out.")
    expect(page.get_by_role("heading", name="Finish signing in")).to_be_hidden()
    expect(page).to_have_url(f"{journey.origin}/")
    journey.shot("used-link-problem")


def test_on_an_origin_the_api_does_not_allow_the_page_shows_a_network_error(demo, page):
    journey = Journey(demo, page)
    journey.open(origin=f"http://127.0.0.1:{demo.frontend_port}")  # allowed: localhost only

    journey.fill("Sign a team up", {"E-mail": "cors@example.com", "Team name": "Elsewhere"})
    journey.click("Sign up")

    problem = page.get_by_role("alert")
    expect(problem).to_contain_text("Network error")
    expect(problem).to_contain_text(
        f"does its CORS_ALLOWED_ORIGINS allow this page's origin (http://127.0.0.1:{demo.frontend_port})"
    )
    journey.shot("cors-refused")
