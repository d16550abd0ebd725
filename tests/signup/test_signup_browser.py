"""The whole signup path as a reader lives it, in headless Chromium against a running `digest serve` and a real SMTP
server (aiosmtpd): the form, the confirmation email, the button, the welcome page with today's digest, the welcome
email, then the first digest from a `digest send`. Screenshots land in tests/artifacts/.

Skipped without Chromium, unless DIGEST_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import date

import pytest

from ..conftest import cli_env, sample_site
from ..smtpd import Recorder, free_port, smtp_server
from ..web.test_browser import ARTIFACTS, axe_source, browser, check_screens  # noqa: F401 - the module's fixtures
from ..web_server import Served
from .test_signups import settings

READER = "reader@example.org"


def wait_for(inbox: Recorder, subject: str, timeout: float = 30, *, digest: bool = False) -> str:
    """The plain text of the first message to READER whose subject holds `subject` (with `digest`: the first digest,
    told by its List-Unsubscribe header, which the signup's own emails do not carry)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for received in list(inbox.messages):
            message = received.message
            if READER in received.rcpt_tos and subject in message["Subject"] and (
                    not digest or message["List-Unsubscribe"]):
                return message.get_body(("plain",)).get_content()
        time.sleep(0.1)
    raise AssertionError(f"no message {subject!r} to {READER} within {timeout} s")


def digest_cli(folder, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "digest", *args], cwd=folder, capture_output=True, text=True,
                          timeout=300, env=cli_env())
    assert done.returncode in (0, 1), done.stderr
    return done


@pytest.mark.slow
def test_from_the_signup_page_to_the_first_digest(browser, axe_source, tmp_path):  # noqa: F811 - the fixtures above
    """A reader signs up in Chromium, confirms from the emailed link, sees the welcome page with today's digest,
    gets the welcome email, and the next `digest send` delivers their first digest; nobody touched a file. Each page
    passes axe-core at 375 and 1280 px, light and dark (`check_screens`)."""
    inbox = Recorder()
    with smtp_server(inbox) as smtp_port:
        sample_site(tmp_path, settings(smtp_port))
        today = date.today().isoformat()
        digest_cli(tmp_path, "ingest", "--date", today)
        port = free_port()
        served = Served(tmp_path / "digest.toml", port, cli_env(DIGEST_OPERATOR_PASSWORD="pw"))
        try:
            context = browser.new_context(timezone_id="Asia/Tokyo", viewport={"width": 720, "height": 1000},
                                          bypass_csp=True)  # (for axe's script)
            page = context.new_page()
            page.goto(f"{served.base}/subscribe")
            check_screens(page, axe_source, "subscribe", button="Subscribe")
            page.set_viewport_size({"width": 720, "height": 1000})
            assert page.locator("#timezone").input_value() == "Asia/Tokyo"  # filled in by the page's script
            page.fill("#email", READER)
            page.fill("#name", "Rea Der")
            page.get_by_label("LLM inference").check()
            page.fill("#interests", "mixture of experts, attention")
            page.select_option("#frequency", "daily")
            page.screenshot(path=ARTIFACTS / "signup-form.png", full_page=True)
            page.get_by_role("button", name="Subscribe").click()
            page.wait_for_load_state()
            assert page.get_by_role("heading").first.inner_text() == "Check your inbox"
            check_screens(page, axe_source, "subscribe sent")

            text = wait_for(inbox, "Confirm your subscription")
            link = re.search(r"https://\S+/confirm/\S+", text).group(0)
            page.goto(served.base + link.split("digest.example.org", 1)[1])
            assert page.get_by_role("heading").first.inner_text() == "Confirm your subscription"
            check_screens(page, axe_source, "confirm", button="Confirm my subscription")
            page.set_viewport_size({"width": 720, "height": 1000})
            page.get_by_role("button", name="Confirm my subscription").click()
            page.wait_for_load_state()
            assert page.get_by_role("heading").first.inner_text() == "Welcome to Paper Digest"
            frame = page.frame_locator("iframe.digest")
            assert frame.locator("table.wrap").count() == 1  # the digest's HTML, rendered
            shown = frame.locator("body").inner_text()
            assert "Hi Rea Der" in shown and "Why:" in shown  # their papers, with the reasons
            page.screenshot(path=ARTIFACTS / "signup-welcome.png", full_page=True)
            check_screens(page, axe_source, "welcome")
            context.close()
            assert "Rea Der" in wait_for(inbox, "Welcome to Paper Digest")
        finally:
            _, errors = served.close()
        assert "Traceback" not in errors

        sent = digest_cli(tmp_path, "send", "--date", today)
        digest = wait_for(inbox, "", digest=True)
        assert "LLM inference" in digest or "In your words" in digest, sent.stderr
        profile = digest_cli(tmp_path, "subscribers", "list").stdout
        assert READER in profile and "Asia/Tokyo" in profile
