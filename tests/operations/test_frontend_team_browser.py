"""The example front end (examples/frontend) in a real browser, past the first journey: it
follows a new project's job and the pending invitations without a reload, asks before it
deletes, keeps the session per browser until it ends, names its dates' zone, clears a stale
notice on a team switch, fits a 390-pixel phone, and runs a team: revoking invitations,
changing roles, removing members, leaving, and listing and revoking API tokens, each
owner-only control hidden from members.

Teams are set up through the demo's API and its printed e-mails (`FrontDoor`), the page is
then opened with the session kept as signing in keeps it; each outcome is checked on the page
and through the API. Every wait is on a condition of the page (Playwright's `expect`), never
on a guess of how long something takes: the provisioning API's answer is held by the test
(`ProvisioningStandIn`) until the page has shown the project provisioning.

Skipped only when no chromium executable exists (`.ci/run` installs it)."""

import itertools
import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.support.browser import CHROMIUM, TIMEOUT_MS
from tests.support.demo import Demo
from tests.support.frontend import (
    FrontDoor,
    Journey,
    ProvisioningStandIn,
    Session,
    chromium,
    frontend_demo,
    overflowing,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"no chromium executable at {CHROMIUM}: apt-get install chromium (see .ci/run)",
    ),
]

_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def provisioning() -> Iterator[ProvisioningStandIn]:
    with ProvisioningStandIn().running() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def demo(tmp_path_factory, provisioning) -> Iterator[Demo]:
    with frontend_demo(tmp_path_factory.mktemp("demo"), env=provisioning.environment) as demo:
        yield demo


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(locale="en-US", timezone_id="America/New_York")
    context.set_default_timeout(TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def front_door(demo) -> FrontDoor:
    return FrontDoor(demo)


@pytest.fixture
def journey(demo, page) -> Journey:
    return Journey(demo, page)


def unique(name: str) -> str:
    """`name` made unique in this demo: each test signs up teams and people of its own."""
    return f"{name}{next(_numbers)}"


@pytest.fixture
def owner(front_door) -> Session:
    return front_door.sign_up(f"{unique('owner')}@example.com", unique("Rocket"))


def create_project(front_door: FrontDoor, owner: Session, name: str) -> dict:
    status, project = front_door.call(
        "POST", "/v1/projects", session=owner, tenant_id=owner.tenant_id, body={"name": name}
    )
    assert status == 202, project
    return project


def project_item(page: Page, name: str):
    return (
        page.get_by_role("region", name="Projects")
        .get_by_role("listitem")
        .filter(has=page.get_by_text(name, exact=True))
    )


# --- 1. Following what finishes later ------------------------------------------------------


def test_a_new_project_turns_active_on_the_page_when_its_job_completes(
    journey, page, owner, provisioning, front_door
):
    provisioning.hold()
    journey.open_signed_in(owner)

    journey.fill("Projects", {"Project name": "Held launch"})
    journey.click("Create project")
    journey.notice("Project Held launch created.")
    status = project_item(page, "Held launch").locator(".status")
    expect(status).to_have_text("provisioning")

    provisioning.release()

    expect(status).to_have_text("active")  # no reload
    projects = front_door.call("GET", "/v1/projects", session=owner)[1]["results"]
    assert [(p["name"], p["status"]) for p in projects] == [("Held launch", "active")]


def test_a_project_whose_provisioning_is_refused_turns_failed_on_the_page(
    journey, page, owner, provisioning
):
    provisioning.hold()
    journey.open_signed_in(owner)

    journey.fill("Projects", {"Project name": "Doomed site"})
    journey.click("Create project")
    item = project_item(page, "Doomed site")
    expect(item.locator(".status")).to_have_text("provisioning")

    provisioning.release()

    expect(item.locator(".status")).to_have_text("failed")
    expect(item).to_contain_text("provisioning API answered HTTP 400")


def test_the_owner_sees_the_invitee_join_without_a_reload(journey, owner, front_door):
    journey.open_signed_in(owner)
    invitee = f"{unique('invitee')}@example.com"
    before = front_door.links_so_far("invitations/accept")
    journey.fill("Invite someone", {"E-mail": invitee})
    journey.click("Send invitation")
    expect(journey.row("Invite someone", invitee)).to_contain_text("pending")
    expect(journey.row("Members", invitee)).to_have_count(0)

    link = front_door.wait_for_new_link("invitations/accept", before)
    accepted = front_door.call(
        "POST", "/v1/invitations/accept", body={"token": front_door.token_of(link)}
    )
    assert accepted[0] == 200

    expect(journey.row("Members", invitee)).to_contain_text("member")
    expect(journey.row("Invite someone", invitee)).to_have_count(0)
    expect(journey.row("Invite someone", "No pending invitations.")).to_have_count(1)


# --- 2. Deleting asks first ----------------------------------------------------------------


def test_deleting_a_project_asks_to_confirm_and_cancel_keeps_it(journey, page, owner, front_door):
    project = create_project(front_door, owner, "Keeper")
    journey.open_signed_in(owner)
    expect(project_item(page, "Keeper")).to_have_count(1)

    journey.click("Delete Keeper")
    expect(page.get_by_role("button", name="Confirm delete Keeper")).to_be_focused()
    journey.click("Cancel")

    expect(page.get_by_role("button", name="Confirm delete Keeper")).to_have_count(0)
    expect(project_item(page, "Keeper")).to_have_count(1)
    assert front_door.call("GET", f"/v1/projects/{project['id']}", session=owner)[0] == 200

    journey.click("Delete Keeper")
    journey.click("Confirm delete Keeper")

    journey.notice("Project Keeper deleted.")
    expect(project_item(page, "Keeper")).to_have_count(0)
    assert front_door.call("GET", f"/v1/projects/{project['id']}", session=owner)[0] == 404


# --- 3. One session per browser, until it ends ----------------------------------------------


def test_a_link_opened_in_a_new_tab_signs_the_browser_in_for_every_tab(
    context, journey, owner, front_door
):
    journey.open()
    before = front_door.links_so_far("signin/verify")
    journey.fill("Sign in", {"E-mail": owner.email})
    journey.click("Send me a sign-in link")
    link = front_door.wait_for_new_link("signin/verify", before)

    mail_tab = context.new_page()  # the e-mail's link opens a tab of its own
    mail_tab.goto(link)
    mail_tab.get_by_role("button", name="Sign in", exact=True).click()
    expect(mail_tab.locator("#who")).to_contain_text(f"Signed in as {owner.email}")

    another_tab = context.new_page()
    another_tab.goto(journey.origin)
    expect(another_tab.locator("#who")).to_contain_text(f"Signed in as {owner.email}")
    expect(another_tab.get_by_role("region", name="Members")).to_contain_text(owner.email)
    journey.shows_signed_in(owner.email)  # the first tab follows too


def test_a_kept_session_past_its_end_shows_signed_out_and_is_dropped(journey, owner):
    journey.open_signed_in(owner)

    ended = json.dumps({"token": owner.token, "expires_at": "2020-01-01T00:00:00Z"})
    journey.page.evaluate("ended => localStorage.setItem('tickwork.session', ended)", ended)
    journey.page.reload()

    journey.shows("Signed out.")
    assert journey.kept_session() is None


# --- 4. Problems and dates -----------------------------------------------------------------


def test_dates_show_the_browsers_zone_by_name(journey, page, owner, front_door):
    journey.open_signed_in(owner)

    joined = journey.row("Members", owner.email).locator("time")
    expect(joined).to_have_text(re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2} E[SD]T$"))
    [member] = front_door.call("GET", "/v1/members", session=owner)[1]["results"]
    in_new_york = datetime.fromisoformat(member["joined_at"]).astimezone(
        ZoneInfo("America/New_York")
    )
    assert joined.inner_text() == in_new_york.strftime("%Y-%m-%d %H:%M %Z")


def test_a_refused_request_shows_the_problems_title_and_detail(journey, page, owner):
    journey.open_signed_in(owner)

    journey.fill("Invite someone", {"E-mail": owner.email})  # already a member
    journey.click("Send invitation")

    problem = page.get_by_role("alert")
    expect(problem.get_by_role("heading")).to_have_text("Already a member")
    expect(problem).to_contain_text("This address already belongs to a member of the tenant.")
    expect(problem).not_to_contain_text("HTTP 409")


# --- 5. Notices belong to the team they were about ----------------------------------------


def test_switching_teams_clears_the_notice_of_the_team_before(journey, page, front_door):
    email = f"{unique('switcher')}@example.com"
    other_team = unique("Beta")
    owner_of_other = front_door.sign_up(f"{unique('other')}@example.com", other_team)
    front_door.join(owner_of_other, email)
    journey.open()
    before = front_door.links_so_far("signup/verify")
    journey.fill("Sign a team up", {"E-mail": email, "Team name": "Alpha"})
    journey.click("Sign up")
    page.goto(front_door.wait_for_new_link("signup/verify", before))
    journey.click("Create my team")
    journey.notice("Your team is ready.")
    journey.shows(f"Signed in as {email} · Alpha (owner)")

    page.get_by_role("combobox", name="Team").select_option(label=other_team)
    journey.click("Switch")

    journey.shows(f"Signed in as {email} · {other_team} (member)")
    expect(page.get_by_role("status")).to_have_text("")
    expect(page.get_by_role("alert")).to_be_hidden()


# --- 6. A phone's width --------------------------------------------------------------------


def test_at_390_pixels_wide_nothing_runs_off_the_right_edge(
    journey, page, front_door, provisioning
):
    owner = front_door.sign_up(
        f"{unique('a.very.long.owner.address.of.the.team')}@subdomain.example.com",
        unique("A team with a rather long name"),
    )
    front_door.join(owner, f"{unique('another.long.member.address')}@subdomain.example.com")
    front_door.invite(owner, f"{unique('a.pending.invitee.with.a.long.name')}@example.com")
    create_project(front_door, owner, "Website relaunch with a long name")
    page.set_viewport_size({"width": 390, "height": 844})

    journey.open_signed_in(owner)
    expect(page.get_by_role("region", name="Members").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_role("region", name="Invite someone").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_role("region", name="Your API tokens").locator("tbody tr")).to_have_count(1)

    assert overflowing(page) == []


# --- 7. Running a team ----------------------------------------------------------------------


def test_the_owner_revokes_a_pending_invitation(journey, page, owner, front_door):
    invitee = f"{unique('revoked')}@example.com"
    link = front_door.invite(owner, invitee)
    journey.open_signed_in(owner)
    expect(journey.row("Invite someone", invitee)).to_contain_text("pending")

    journey.click(f"Revoke invitation to {invitee}")
    journey.click(f"Confirm revoke invitation to {invitee}")

    journey.notice(f"The invitation to {invitee} is revoked.")
    expect(journey.row("Invite someone", invitee)).to_have_count(0)
    refused = front_door.call(
        "POST", "/v1/invitations/preview", body={"token": front_door.token_of(link)}
    )
    assert refused[0] == 400


def test_the_owner_changes_a_members_role_and_removes_a_member(journey, page, owner, front_door):
    promoted = front_door.join(owner, f"{unique('promoted')}@example.com")
    removed = front_door.join(owner, f"{unique('removed')}@example.com")
    journey.open_signed_in(owner)

    page.get_by_label(f"Role of {promoted.email}").select_option("owner")
    journey.click(f"Change role of {promoted.email}")

    journey.notice(f"{promoted.email} is now an owner.")
    expect(journey.row("Members", promoted.email)).to_contain_text("owner")
    assert front_door.members(owner)[promoted.email] == "owner"

    journey.click(f"Remove {removed.email}")
    journey.click(f"Confirm remove {removed.email}")

    journey.notice(f"{removed.email} was removed from")
    expect(journey.row("Members", removed.email)).to_have_count(0)
    assert removed.email not in front_door.members(owner)
    # The owner's own row offers neither: the page has "Leave" for that.
    expect(journey.row("Members", owner.email).get_by_role("button")).to_have_count(0)


def test_a_member_sees_no_owner_controls_and_leaves_the_team(journey, page, owner, front_door):
    project = create_project(front_door, owner, "Shared")
    pending = f"{unique('pending')}@example.com"
    front_door.invite(owner, pending)
    member = front_door.join(owner, f"{unique('leaver')}@example.com")
    journey.open_signed_in(member)
    expect(project_item(page, "Shared")).to_have_count(1)

    expect(page.get_by_role("region", name="Invite someone")).to_be_hidden()
    expect(page.get_by_role("button", name=re.compile("^Delete "))).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("^(Change role|Remove) "))).to_have_count(0)
    expect(page.get_by_role("combobox", name=re.compile("^Role of "))).to_have_count(0)
    expect(page.get_by_text(pending)).to_have_count(0)

    team = front_door.call("GET", "/v1/me", session=owner)[1]["tenants"][0]["name"]
    journey.click(f"Leave {team}")
    journey.click(f"Confirm leave {team}")

    journey.notice(f"You left {team}.")
    expect(page.locator("#team")).to_have_text("You belong to no team yet.")
    expect(page.get_by_role("region", name="Projects")).to_be_hidden()
    assert member.email not in front_door.members(owner)
    assert front_door.call("GET", f"/v1/projects/{project['id']}", session=owner)[0] == 200


def test_the_last_owner_cannot_leave_and_is_told_why(journey, page, owner):
    journey.open_signed_in(owner)
    team = page.locator("#who").inner_text().partition(" · ")[2].rpartition(" (")[0]

    journey.click(f"Leave {team}")
    journey.click(f"Confirm leave {team}")

    problem = page.get_by_role("alert")
    expect(problem).to_be_visible()
    expect(problem).not_to_contain_text("HTTP 409")
    journey.shows_signed_in(owner.email)


def test_api_tokens_are_listed_and_revoked(journey, page, owner, front_door):
    status, made = front_door.call(
        "POST", "/v1/tokens", session=owner, body={"name": "CI deploy", "expires_in_days": 30}
    )
    assert status == 201, made
    deploy = Session(owner.email, made["token"], made["expires_at"], owner.tenant_id)
    journey.open_signed_in(owner)

    tokens = page.get_by_role("region", name="Your API tokens")
    expect(tokens.get_by_role("row").filter(has_text="CI deploy")).to_contain_text(made["prefix"])
    expect(tokens.get_by_role("row").filter(has_text="this browser's session")).to_have_count(1)

    journey.click("Revoke token CI deploy")
    journey.click("Confirm revoke token CI deploy")

    journey.notice("Token CI deploy is revoked.")
    expect(tokens.get_by_role("row").filter(has_text="CI deploy")).to_have_count(0)
    assert front_door.call("GET", "/v1/me", session=deploy)[0] == 401
    assert front_door.call("GET", "/v1/me", session=owner)[0] == 200


def test_the_page_links_to_the_customers_portal(journey, page, owner, demo):
    journey.open_signed_in(owner)

    portal = page.get_by_role("region", name="Webhooks, messages and notifications")
    link = portal.get_by_role("link", name=f"http://localhost:{demo.port}/portal/")
    expect(link).to_have_attribute("href", f"http://localhost:{demo.port}/portal/")
    expect(portal).to_contain_text("portal-sessions")
