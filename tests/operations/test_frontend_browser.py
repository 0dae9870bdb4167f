"""The example front end (examples/frontend) in a real browser, served by `manage.py demo`
on its own origin and calling the demo's API on another: a team signs up, signs out and back
in, creates, renames and deletes projects, invites someone, who previews and accepts the
invitation and sees the members, and signs out. The emailed links are read from the demo's
output (the console e-mail backend, under `tick |`), as a developer reads them.

The page calls the API from both origins the demo serves it on, localhost and 127.0.0.1;
the same page served on an origin the API does not allow shows the page's network error:
the journey fails when CORS breaks.

Skipped only when no chromium executable exists (`.ci/run` installs it); Playwright's own
browser download is not used. With FRONTEND_SCREENSHOTS=<directory>, each step is saved
there as a PNG."""

import os
import re
import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from operations.demo.frontend import front_end_server
from tests.support.browser import CHROMIUM, TIMEOUT_MS
from tests.support.demo import Demo, free_port
from tests.support.frontend import Journey, chromium, frontend_demo
from tests.support.processes import ROOT

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
    with frontend_demo(tmp_path_factory.mktemp("demo")) as demo:
        yield demo


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    yield context.new_page()
    context.close()


def test_a_team_signs_up_signs_in_invites_and_the_invitee_joins(demo, page):
    journey = Journey(demo, page, SCREENSHOTS)
    journey.open()
    journey.shows("Signed out.")
    journey.shot("signed-out")

    # Sign a team up; the verification link arrives by e-mail.
    before = journey.front_door.links_so_far("signup/verify")
    journey.fill("Sign a team up", {"E-mail": "founder@example.com", "Team name": "Rocket team"})
    journey.click("Sign up")
    journey.notice("Check founder@example.com for a link to confirm your signup")
    journey.shot("signup-sent")
    page.goto(journey.front_door.wait_for_new_link("signup/verify", before))
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
    assert journey.kept_session() is None
    before = journey.front_door.links_so_far("signin/verify")
    journey.fill("Sign in", {"E-mail": "founder@example.com"})
    journey.click("Send me a sign-in link")
    journey.notice("If founder@example.com has an account, a sign-in link is on its way")
    signin_link = journey.front_door.wait_for_new_link("signin/verify", before)
    page.goto(signin_link)
    expect(page.get_by_role("heading", name="Finish signing in")).to_be_visible()
    journey.click("Sign in")
    journey.shows("Signed in as founder@example.com · Rocket team (owner)")
    assert journey.kept_session()["token"]
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
    journey.click("Confirm delete Scratch")
    journey.notice("Project Scratch deleted.")
    expect(projects.get_by_role("listitem")).to_have_count(1)
    journey.shot("project-renamed")

    # An invitation, listed as pending.
    before = journey.front_door.links_so_far("invitations/accept")
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
    page.goto(journey.front_door.wait_for_new_link("invitations/accept", before))
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
    assert journey.kept_session() is None

    # A used link is the API's problem, shown with its title and detail.
    page.goto(signin_link)
    journey.click("Sign in")
    problem = page.get_by_role("alert")
    expect(problem.get_by_role("heading")).to_have_text("Invalid or expired token")
    expect(problem).to_contain_text("The token is invalid, expired or already used.")
    expect(problem).not_to_contain_text("HTTP 400")
    journey.shows("Signed out.")
    expect(page.get_by_role("heading", name="Finish signing in")).to_be_hidden()
    expect(page).to_have_url(f"{journey.origin}/")
    journey.shot("used-link-problem")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_the_page_calls_the_api_from_localhost_and_from_127_0_0_1(demo, page, host):
    journey = Journey(demo, page, SCREENSHOTS)
    journey.open(origin=f"http://{host}:{demo.frontend_port}")

    journey.fill("Sign a team up", {"E-mail": f"from-{host}@example.com", "Team name": host})
    journey.click("Sign up")

    journey.notice(f"Check from-{host}@example.com for a link to confirm your signup")
    expect(page.get_by_role("alert")).to_be_hidden()


@pytest.fixture
def elsewhere() -> Iterator[str]:
    """The same page served on an origin the demo's API does not allow."""
    port = free_port()
    server = front_end_server(host="127.0.0.1", port=port, root=ROOT / "examples" / "frontend")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"http://localhost:{port}"
    server.shutdown()
    server.server_close()


def test_on_an_origin_the_api_does_not_allow_the_page_shows_a_network_error(demo, page, elsewhere):
    journey = Journey(demo, page, SCREENSHOTS)
    journey.open(origin=elsewhere)

    journey.fill("Sign a team up", {"E-mail": "cors@example.com", "Team name": "Elsewhere"})
    journey.click("Sign up")

    problem = page.get_by_role("alert")
    expect(problem).to_contain_text("Network error")
    expect(problem).to_contain_text(
        f"does its CORS_ALLOWED_ORIGINS allow this page's origin ({elsewhere})"
    )
    journey.shot("cors-refused")
