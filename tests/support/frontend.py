"""What the example front end's browser tests share: the demo and chromium they run on, the
page as a person uses it (`Journey`), the demo's API as a test sets a team up through it
(`FrontDoor`), a provisioning API whose answers the test holds or refuses
(`ProvisioningStandIn`), and the overflow measure of a narrow window."""

import json
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect, sync_playwright

from operations.demo.siteverify import DUMMY_TOKEN
from tests.support.browser import CHROMIUM, TIMEOUT_MS
from tests.support.demo import Demo, free_port, running_demo
from tests.support.http_server import RecordedRequest, RecordingServer, Reply

# How long a link the tick sends may take to show in the demo's output (a bound: a busy
# machine's tick is late).
LINK_SECONDS = 60
# The demo's provisioning calls wait this long for an answer; the stand-in holds one for less.
PROVISIONING_TIMEOUT_SECONDS = 60


@contextmanager
def frontend_demo(tmp_path: Path, *, env: dict[str, str] | None = None) -> Iterator[Demo]:
    """The demo with its page served: API, workers, Turnstile stand-in and the page."""
    with running_demo(tmp_path, free_port(), env=env) as demo:
        # Bounds, not pauses: on a busy machine (the suite's other workers start their own
        # demos and servers) the development server may take tens of seconds to answer.
        demo.wait_for(r"page \| serving examples/frontend at ", timeout=60)
        demo.wait_healthy(timeout=60)
        yield demo


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        expect.set_options(timeout=TIMEOUT_MS)
        yield browser
        browser.close()


@dataclass
class Session:
    """A signed-in user as the API answered: their token, its end, their team."""

    email: str
    token: str
    expires_at: str
    tenant_id: str


class FrontDoor:
    """The demo's API called as a script would, and the e-mailed links the demo prints
    (the console backend, under tick |), to set a team up without the page."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.origin = f"http://localhost:{demo.frontend_port}"

    def call(
        self,
        method: str,
        path: str,
        *,
        session: Session | None = None,
        body: dict | None = None,
        tenant_id: str = "",
    ) -> tuple[int, Any]:
        """(status, JSON answer or None) of a call; a problem is an answer, not an error."""
        headers = {"Authorization": f"Bearer {session.token}"} if session else {}
        if tenant_id:
            headers["X-Tenant-ID"] = tenant_id
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers |= {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.demo.port}{path}", data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as answer:
            raw = answer.read()
            return answer.code, json.loads(raw) if raw else None

    def links_so_far(self, path: str) -> list[str]:
        """The links to `path` the demo printed so far."""
        pattern = rf"tick \| ({re.escape(self.origin)}/{path}\?token=[A-Za-z0-9_-]+)"
        return re.findall(pattern, self.demo.output)

    def wait_for_new_link(self, path: str, before: list[str]) -> str:
        """The first link to `path` printed after `before` (the tick sends within seconds)."""
        deadline = time.monotonic() + LINK_SECONDS
        while len(links := self.links_so_far(path)) <= len(before):
            assert time.monotonic() < deadline, f"no new {path} link in:\n{self.demo.output}"
            time.sleep(0.2)
        return links[len(before)]

    @staticmethod
    def token_of(link: str) -> str:
        return link.rpartition("token=")[2]

    def sign_up(self, email: str, team: str) -> Session:
        """A new team, its owner signed in through the e-mailed verification link."""
        before = self.links_so_far("signup/verify")
        body = {"email": email, "tenant_name": team, "captcha_token": DUMMY_TOKEN}
        assert self.call("POST", "/v1/signup", body=body)[0] == 202
        link = self.wait_for_new_link("signup/verify", before)
        status, answer = self.call("POST", "/v1/signup/verify", body={"token": self.token_of(link)})
        assert status == 201, answer
        return Session(email, answer["token"], answer["expires_at"], answer["tenant_id"])

    def invite(self, owner: Session, email: str, role: str = "member") -> str:
        """The accept link of a new invitation to the owner's team."""
        before = self.links_so_far("invitations/accept")
        status, answer = self.call(
            "POST",
            "/v1/invitations",
            session=owner,
            tenant_id=owner.tenant_id,
            body={"email": email, "role": role},
        )
        assert status == 201, answer
        return self.wait_for_new_link("invitations/accept", before)

    def join(self, owner: Session, email: str, role: str = "member") -> Session:
        """`email` invited to the owner's team and accepting, signed out: their session."""
        link = self.invite(owner, email, role)
        body = {"token": self.token_of(link)}
        status, answer = self.call("POST", "/v1/invitations/accept", body=body)
        assert status == 200, answer
        return Session(email, answer["token"], answer["expires_at"], answer["tenant_id"])

    def members(self, session: Session) -> dict[str, str]:
        """The team's members: e-mail to role."""
        status, answer = self.call(
            "GET", "/v1/members", session=session, tenant_id=session.tenant_id
        )
        assert status == 200, answer
        return {member["email"]: member["role"] for member in answer["results"]}


class Journey:
    """The page as a person uses it."""

    def __init__(self, demo: Demo, page: Page, screenshots: str = "") -> None:
        self.demo, self.page = demo, page
        self.front_door = FrontDoor(demo)
        self.origin = self.front_door.origin
        self.screenshots = screenshots
        self.steps = 0

    def open(self, origin: str = "") -> None:
        api = f"http://localhost:{self.demo.port}"
        self.page.goto(f"{origin or self.origin}/?api={api}")

    def open_signed_in(self, session: Session) -> None:
        """The page with `session` kept in this browser, as after signing in."""
        self.open()
        kept = json.dumps({"token": session.token, "expires_at": session.expires_at})
        self.page.evaluate("kept => localStorage.setItem('tickwork.session', kept)", kept)
        self.page.reload()
        self.shows_signed_in(session.email)

    def kept_session(self) -> dict | None:
        return self.page.evaluate("JSON.parse(localStorage.getItem('tickwork.session'))")

    def fill(self, section: str, fields: dict[str, str]) -> None:
        region = self.page.get_by_role("region", name=section)
        for label, value in fields.items():
            region.get_by_label(label, exact=True).fill(value)

    def click(self, name: str) -> None:
        self.page.get_by_role("button", name=name, exact=True).click()

    def shows(self, who: str) -> None:
        expect(self.page.locator("#who")).to_have_text(who)

    def shows_signed_in(self, email: str) -> None:
        expect(self.page.locator("#who")).to_contain_text(f"Signed in as {email}")

    def notice(self, text: str) -> None:
        try:
            expect(self.page.get_by_role("status")).to_contain_text(text)
        except AssertionError:
            problem = self.page.locator("#problem")
            shown = problem.inner_text() if problem.is_visible() else "no problem shown"
            raise AssertionError(f"no notice {text!r}; the page shows: {shown}") from None

    def row(self, section: str, text: str):
        """The row of the `section` table whose cells mention `text`."""
        region = self.page.get_by_role("region", name=section)
        return region.get_by_role("row").filter(has_text=text)

    def shot(self, name: str) -> None:
        self.steps += 1
        if self.screenshots:
            path = Path(self.screenshots) / f"{self.steps:02d}-{name}.png"
            self.page.screenshot(path=path, full_page=True)


class ProvisioningStandIn:
    """The operator's provisioning API: a project named "Doomed …" is refused with a 400 (a
    permanent error: its job dead-letters), any other is provisioned. While the test holds
    it (`hold`), a "Held …" or "Doomed …" project's call waits for `release`."""

    def __init__(self) -> None:
        self._released = threading.Event()
        self._released.set()
        self._server = RecordingServer(self._answer)

    @property
    def environment(self) -> dict[str, str]:
        """The demo's settings that send its provisioning calls here."""
        return {
            "PROVISIONING_URL": f"{self._server.url}/provision",
            "PROVISIONING_TIMEOUT_SECONDS": str(PROVISIONING_TIMEOUT_SECONDS),
        }

    def _answer(self, request: RecordedRequest) -> Reply:
        name = json.loads(request.body)["name"]
        if name.startswith(("Held", "Doomed")):
            # Within the call's timeout (`environment`): a timed-out call would be retried.
            self._released.wait(timeout=PROVISIONING_TIMEOUT_SECONDS - 10)
        if name.startswith("Doomed"):
            return Reply(status=400, body=b'{"error": "no room"}')
        return Reply(status=200, body=b"{}")

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    @contextmanager
    def running(self) -> Iterator["ProvisioningStandIn"]:
        self._server.start()
        try:
            yield self
        finally:
            self.release()
            self._server.stop()


def overflowing(page: Page) -> list[str]:
    """What runs past the window's right edge: the page itself when it scrolls sideways
    (scrollWidth > clientWidth), and each element drawn beyond the edge (those clipped out
    of sight for screen readers aside); empty when everything fits."""
    return page.evaluate(
        """() => {
          const root = document.documentElement;
          const width = root.clientWidth;
          const found = [];
          if (root.scrollWidth > width) found.push(`the page: ${root.scrollWidth} > ${width}`);
          for (const node of document.body.querySelectorAll('*')) {
            if (node.closest('thead, .visually-hidden')) continue;
            const box = node.getBoundingClientRect();
            if (box.width && box.right > width + 0.5) {
              const text = node.textContent.trim().slice(0, 40);
              const name = node.tagName.toLowerCase();
              found.push(`<${name}> "${text}" ends at ${box.right} > ${width}`);
            }
          }
          return found;
        }"""
    )
