"""Signup with double opt-in over real HTTP (waitress) and a real SMTP server (aiosmtpd): the form, its refusals,
the confirmation link, the welcome, and the rule that nobody unconfirmed is ever sent a digest."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest

from digest.app import App
from digest.config import load_config
from digest.signup.signups import Signups
from digest.subscribers.roster import import_path
from digest.web.common import FREQUENCIES

from ..conftest import SEEDS, cli_env, sample_site
from ..smtpd import Recorder, smtp_server
from ..web_server import OPERATOR, Server

ADA = "ada@example.org"  # a profile file's subscriber
TOPICS = """
[[topics]]
name = "LLM inference"
summary = "Serving large language models fast and cheaply."
keywords = ["KV cache", "speculative decoding", "LLM serving", "quantization"]

[[topics]]
name = "GPU kernels"
summary = "Writing fast GPU kernels."
keywords = ["CUDA", "Triton", "kernel fusion"]
description = "Hand-written and compiled kernels for accelerators."
"""


def settings(port: int, extra: str = "") -> str:
    return (f'[store]\nurl = "sqlite:///digest.db"\n[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
            f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\ntimeout = 5\n{extra}\n{TOPICS}')


@dataclass
class Site:
    """A working folder with digest.toml, the app over it, `digest serve`'s app on a free port, and its inbox."""

    folder: Path
    app: App
    server: Server
    inbox: Recorder

    @property
    def client(self) -> httpx.Client:
        return self.server.client

    def csrf(self, client: httpx.Client | None = None) -> str:
        page = (client or self.client).get("/subscribe")
        assert page.status_code == 200
        return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)

    def signup(self, email: str, *, client: httpx.Client | None = None, csrf: str | None = None,
               **fields: object) -> httpx.Response:
        data = {"email": email, "name": "", "topics": ["LLM inference"], "interests": "", "timezone": "Europe/London",
                "frequency": "daily", "website": "", **fields}
        if csrf is None:
            data["csrf"] = self.csrf(client)
        elif csrf:
            data["csrf"] = csrf
        return (client or self.client).post("/subscribe", data=data)

    def mails(self, email: str, subject: str = "") -> list[EmailMessage]:
        return [m.message for m in self.inbox.messages if email in m.rcpt_tos and subject in m.message["Subject"]]

    def link(self, email: str) -> str:
        """The confirmation link of the latest confirmation email to `email`, as a path on the server."""
        [*_, mail] = self.mails(email, "Confirm")
        text = mail.get_body(("plain",)).get_content()
        return self.server.path(re.search(r"https://\S+/confirm/\S+", text).group(0))

    def send_cli(self, day: date) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "digest", "send", "--date", day.isoformat()], cwd=self.folder,
                              capture_output=True, text=True, timeout=300, env=cli_env())


def make_site(folder: Path, monkeypatch, extra: str = "") -> Iterator[Site]:
    monkeypatch.setenv("DIGEST_SECRET", "test-secret")  # as cli_env gives the `digest` subprocesses
    inbox = Recorder()
    with smtp_server(inbox) as port:
        sample_site(folder, settings(port, extra))
        app = App(load_config(folder / "digest.toml"))
        app.ingest([SEEDS], seen_on=date.today())
        server = Server(app)
        yield Site(folder, app, server, inbox)
        server.close()
        app.close()


@pytest.fixture
def site(tmp_path, monkeypatch) -> Iterator[Site]:
    yield from make_site(tmp_path, monkeypatch)


def body(response: httpx.Response) -> str:
    """The page's main text (what a reader reads), without the markup around it."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text.split("<main>", 1)[1])).strip()


def test_the_form_offers_the_catalogue_a_csrf_token_and_the_time_zone_script(site):
    """GET /subscribe: every topic with its summary, the frequencies, a CSRF field and cookie, the honeypot, and a
    time zone picker grouped by region, with a script (allowed by the page's CSP) that chooses the browser's zone."""
    page = site.client.get("/subscribe")
    assert page.status_code == 200
    for name, summary in [("LLM inference", "Serving large language models"), ("GPU kernels", "Writing fast GPU")]:
        assert f'value="{name}"' in page.text and summary in page.text
    assert all(f'value="{value}"' in page.text for value, _ in FREQUENCIES)
    assert 'name="csrf"' in page.text and 'name="website"' in page.text
    cookie = page.headers["set-cookie"]
    assert "digest_form=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = site.client.get("/subscribe.js")
    assert script.status_code == 200 and "resolvedOptions().timeZone" in script.text
    # the time zone: a list grouped by region (not a free-text box), UTC chosen until the script or reader changes it
    assert '<select id="timezone" name="timezone"' in page.text and 'list="zones"' not in page.text
    assert '<optgroup label="Europe">' in page.text and '<option value="Asia/Tokyo">Tokyo</option>' in page.text
    assert '<option value="UTC" selected>' in page.text


@pytest.mark.slow
def test_a_signup_sends_only_a_confirmation_and_subscribes_nobody(site):
    """The form records a pending signup and sends one confirmation email; no subscriber exists until it is
    confirmed, and a real `digest send` for today delivers nothing to the address."""
    response = site.signup("new@example.org", name="Newt", interests="FlashAttention, tensor cores")
    assert response.status_code == 200 and "Check your inbox" in response.text
    [mail] = site.mails("new@example.org")
    assert mail["Subject"] == "Confirm your subscription to Paper Digest"
    assert "/confirm/" in mail.get_body(("plain",)).get_content()
    assert site.app.store.signup("new@example.org").status == "pending"
    assert site.app.store.owners(["new@example.org"]) == {}
    sent = site.send_cli(date.today())
    assert "sent" in sent.stderr + sent.stdout
    assert [m["Subject"] for m in site.mails("new@example.org")] == [mail["Subject"]]  # only the confirmation
    assert site.mails(ADA)  # the send did run: the profile files' subscribers got theirs (Ada never signs up here)


@pytest.mark.slow
def test_the_same_page_whoever_the_address_belongs_to(site, caplog):
    """New, pending, already subscribed on the web, and a profile file's address all get the same page; the file's
    address is sent nothing, its profile is untouched, and the operator sees the held signup."""
    pages: dict[str, list[str]] = {}
    before = site.app.profiles.roster().find(ADA)
    for email in ("first@example.org", "first@example.org", ADA):
        response = site.signup(email, name="Impostor", topics=["GPU kernels"])
        pages.setdefault(email, []).append(body(response).replace(email, "EMAIL"))
    site.client.post(site.link("first@example.org"))  # now a web subscriber
    pages["first@example.org"].append(body(site.signup("first@example.org")).replace("first@example.org", "EMAIL"))
    assert len({text for texts in pages.values() for text in texts}) == 1
    assert site.mails(ADA) == []
    assert site.app.store.owners([ADA]) == {ADA: ("file", str(site.folder / "subscribers" / "ada.toml"))}
    assert site.app.profiles.roster().find(ADA) == before and before.name == "Ada Lovelace"
    assert "profile file" in caplog.text and ADA in caplog.text
    admin = site.client.get("/admin/", auth=OPERATOR)
    held = admin.text.split('id="held-signups"', 1)[1]
    assert ADA in held and "ada.toml" in held


@pytest.mark.slow
@pytest.mark.parametrize(("fields", "problem"), [
    ({"email": "not-an-address"}, "Enter your email address"),
    ({"email": "eve@example.org\r\nBcc: victim@example.org"}, "Enter your email address"),
    ({"topics": ["Astrology"]}, "Pick topics from the list only"),
    ({"timezone": "Mars/Olympus_Mons"}, "Choose a time zone from the list"),
    ({"timezone": "../../etc/passwd"}, "Choose a time zone from the list"),
    ({"frequency": "hourly"}, "Choose how often"),
    ({"interests": "x" * 501}, "keep them under 500"),
    ({"name": "N" * 101}, "Your name must be one line"),
])
def test_mistakes_get_the_form_back_with_what_is_wrong(site, fields, problem):
    """A form with a mistake is shown again (422) with the reader's values and the mistake; nothing is recorded."""
    email = fields.pop("email", "typo@example.org")
    response = site.signup(email, **fields)
    assert response.status_code == 422
    assert problem in response.text and 'role="alert"' in response.text
    assert site.inbox.messages == [] and site.app.store.signup(email) is None


def test_a_filled_honeypot_sends_nothing(site):
    """A bot that fills the hidden field gets the usual page, and nothing is recorded or sent."""
    response = site.signup("bot@example.org", website="https://spam.example")
    assert response.status_code == 200 and "Check your inbox" in response.text
    assert site.inbox.messages == [] and site.app.store.signup("bot@example.org") is None


@pytest.mark.slow
@pytest.mark.parametrize("how", ["no token", "wrong token", "no cookie", "other site"])
def test_a_post_without_its_csrf_token_or_from_another_site_is_refused(site, how):
    """Without the token (or its cookie), or from another site's page, the form is refused (403) and nothing sent."""
    client = httpx.Client(base_url=site.server.base, timeout=10)
    token = site.csrf(client)
    headers = {"Origin": "https://evil.example"} if how == "other site" else {}
    if how == "no cookie":
        client.cookies.clear()
    csrf = {"no token": "", "wrong token": "0" * 40}.get(how, token)
    data = {"email": "csrf@example.org", "timezone": "UTC", "frequency": "daily", "csrf": csrf}
    response = client.post("/subscribe", data=data, headers=headers)
    assert response.status_code == 403
    assert "expired" in response.text or "another web site" in response.text
    assert site.inbox.messages == [] and site.app.store.signup("csrf@example.org") is None
    client.close()


@pytest.mark.slow
def test_a_thousand_signups_from_one_address_are_rate_limited(site):
    """1,000 signups from one IP over one keep-alive connection: the first signup.per_ip_hour (10) are taken, the
    rest get 429 with Retry-After and a page that says why; only ten confirmations go out."""
    token = site.csrf()
    statuses = [site.signup(f"reader{n}@example.org", csrf=token).status_code for n in range(1000)]
    assert statuses[:10] == [200] * 10 and set(statuses[10:]) == {429}
    refused = site.signup("late@example.org", csrf=token)
    assert refused.headers["retry-after"] == "3600" and "Too many signups from your network" in refused.text
    assert len(site.inbox.messages) == 10


@pytest.mark.slow
def test_one_address_gets_at_most_three_confirmations_a_day(tmp_path, monkeypatch):
    """Signing one address up again and again (from many networks) stops after signup.per_address_day."""
    for site in make_site(tmp_path, monkeypatch, "[signup]\nproxy_hops = 1\n"):
        statuses = [site.client.post("/subscribe", headers={"X-Forwarded-For": f"192.0.2.{n}"}, data={
            "email": "target@example.org", "timezone": "UTC", "frequency": "daily", "csrf": site.csrf()}).status_code
            for n in range(5)]
        assert statuses == [200, 200, 200, 429, 429]
        assert len(site.mails("target@example.org")) == 3


@pytest.mark.slow
def test_confirming_subscribes_records_consent_welcomes_and_previews(site):
    """GET shows a button and confirms nothing; the POST makes a web subscriber, records the consent (wording
    version, hashed IPs), sends one welcome email and shows today's digest."""
    site.signup("newt@example.org", name="Newt", topics=["LLM inference", "GPU kernels"], timezone="Asia/Tokyo",
                frequency="weekdays")
    link = site.link("newt@example.org")
    page = site.client.get(link)
    assert page.status_code == 200 and "Confirm my subscription" in page.text and "Asia/Tokyo" in page.text
    assert site.app.store.owners(["newt@example.org"]) == {}
    welcome = site.client.post(link)
    assert welcome.status_code == 200 and "Welcome to Paper Digest" in welcome.text
    assert 'id="preview-subject"' in welcome.text and "srcdoc=" in welcome.text
    assert site.app.store.owners(["newt@example.org"]) == {"newt@example.org": ("web", None)}
    subscriber = site.app.profiles.roster().find("newt@example.org")
    assert (subscriber.name, subscriber.timezone, subscriber.frequency) == ("Newt", "Asia/Tokyo", "weekdays")
    assert [i.name for i in subscriber.interests] == ["LLM inference", "GPU kernels"]
    [consent] = site.app.store.consents_of("newt@example.org")
    assert consent["form_version"] == Signups(site.app, dict(FREQUENCIES)).form_version()
    assert len(consent["ip_hash"]) == 40 and "127.0.0.1" not in str(consent)
    [mail] = site.mails("newt@example.org", "Welcome")
    assert "/preferences/" in mail.get_body(("plain",)).get_content()


@pytest.mark.slow
def test_forged_expired_replaced_and_replayed_links_are_refused(site):
    """Forged or cut links: 400; expired: 410; replaced by a newer signup: 410; used again: 410 and no second
    welcome. None confirms anything, none is a 500."""
    site.signup("late@example.org")
    first = site.link("late@example.org")
    token = first.rsplit("/", 1)[1]
    for bad in (token[:-4], token[:10] + ("A" if token[10] != "A" else "B") + token[11:], "nonsense", "x" * 300):
        for method in ("GET", "POST"):
            response = site.client.request(method, f"/confirm/{bad}")
            assert response.status_code == 400 and "This link is not valid" in response.text
    room = Signups(site.app, dict(FREQUENCIES))
    nonce = site.app.store.signup("late@example.org").nonce
    old = room.make_link("late@example.org", nonce, issued=datetime.now(UTC) - timedelta(hours=49))
    expired = site.client.post(f"/confirm/{old}")
    assert expired.status_code == 410 and "This link has expired" in expired.text
    site.signup("late@example.org")  # a second signup voids the first link
    replaced = site.client.post(first)
    assert replaced.status_code == 410 and "no longer valid" in replaced.text
    assert site.app.store.owners(["late@example.org"]) == {}
    latest = site.link("late@example.org")
    assert site.client.post(latest).status_code == 200
    for method in ("GET", "POST"):  # used: it leads on (see below), and confirms nothing again
        again = site.client.request(method, latest)
        assert again.status_code == 200 and "You are already confirmed" in again.text
    assert len(site.mails("late@example.org", "Welcome")) == 1


@pytest.mark.slow
def test_two_confirmations_at_once_make_one_subscriber_and_one_welcome(site):
    """The button pressed twice at once (two tabs): one welcome, one "already confirmed", one consent and one welcome
    email."""
    site.signup("twice@example.org")
    link = site.link("twice@example.org")
    statuses: list[tuple[int, bool]] = []
    start = threading.Barrier(2)

    def press() -> None:
        with httpx.Client(base_url=site.server.base, timeout=30) as client:
            start.wait()
            answer = client.post(link)
            statuses.append((answer.status_code, "You are already confirmed" in answer.text))

    threads = [threading.Thread(target=press) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [(200, False), (200, True)]
    assert len(site.app.store.consents_of("twice@example.org")) == 1
    assert len(site.mails("twice@example.org", "Welcome")) == 1


def test_a_name_cannot_add_headers_and_is_escaped(site):
    """A name holding CR/LF and markup becomes one line in the To header and text in the HTML, never a header."""
    site.signup("mallory@example.org", name="Mal\r\nBcc: victim@example.org <b>bold</b>")
    [mail] = site.mails("mallory@example.org")
    assert mail["Bcc"] is None and mail.get_all("To") == [mail["To"]]
    assert "\n" not in str(mail["To"]) and "victim@example.org" not in str(mail["To"].addresses[0].addr_spec)
    html = mail.get_body(("html",)).get_content()
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "victim" not in [r for m in site.inbox.messages for r in m.rcpt_tos]


@pytest.mark.slow
def test_web_subscribers_and_profile_files_never_shadow_each_other(site):
    """A profile file written later for a web subscriber's address is refused naming the signup; an import of it
    is refused too; the web subscriber keeps their profile and gets their digest."""
    site.signup("webby@example.org", name="Webby")
    site.client.post(site.link("webby@example.org"))
    (site.folder / "subscribers" / "webby.toml").write_text('email = "webby@example.org"\nname = "File"\n')
    roster = site.app.profiles.roster()
    assert roster.find("webby@example.org").name == "Webby"
    assert any("signed up on the web page" in p.message and "webby.toml" in p.path for p in roster.problems)
    csv = site.folder / "list.csv"
    csv.write_text("email,name\nwebby@example.org,Imported\n")
    report = import_path(site.app.store, csv)
    assert report.imported == 0 and "signed up on the web page" in report.problems[0].message
    assert site.app.profiles.roster().find("webby@example.org").name == "Webby"


@pytest.mark.slow
def test_confirming_again_after_unsubscribing_resubscribes(site):
    """An unsubscribed web subscriber who signs up and confirms again is subscribed again, with no second welcome."""
    site.signup("back@example.org")
    site.client.post(site.link("back@example.org"))
    site.app.store.suppress("back@example.org", "unsubscribed")
    site.signup("back@example.org", frequency="weekly:fri")
    page = site.client.post(site.link("back@example.org"))
    assert page.status_code == 200 and "Your subscription is updated" in page.text
    assert site.app.store.suppressed_among(["back@example.org"]) == {}
    assert site.app.profiles.roster().find("back@example.org").frequency == "weekly:fri"
    assert len(site.mails("back@example.org", "Welcome")) == 1


def test_the_welcome_email_and_a_used_link_lead_to_the_papers_to_rate(site):
    """The welcome email links to the papers to rate (text and HTML), and the confirmation link opened again (its GET
    or its button) says the reader is already confirmed and leads on to those papers and to their preferences; it
    confirms nothing again. Once the reader has unsubscribed, it only says it was used."""
    site.signup("rae@example.org", topics=["LLM inference"])
    link = site.link("rae@example.org")
    assert site.client.post(link).status_code == 200
    [mail] = site.mails("rae@example.org", "Welcome")
    text, html = mail.get_body(("plain",)).get_content(), mail.get_body(("html",)).get_content()
    [rate_url] = re.findall(r"https://\S+/welcome/\S+", text)
    assert f'href="{rate_url}"' in html
    rating = site.client.get(site.server.path(rate_url))
    assert rating.status_code == 200 and "Teach it what you like" in rating.text and 'class="pair"' in rating.text
    for method in ("GET", "POST"):
        again = site.client.request(method, link)
        assert again.status_code == 200 and "You are already confirmed" in body(again)
        assert "rae@example.org gets Paper Digest every day" in body(again)
        onward = re.search(r'href="([^"]+)" id="rate"', again.text).group(1)
        assert onward.startswith("/welcome/")
        page = site.client.get(onward)
        assert page.status_code == 200 and "Teach it what you like" in page.text
        preferences = site.client.get(re.search(r'href="([^"]+)" id="preferences"', again.text).group(1))
        assert preferences.status_code == 200 and "rae@example.org" in preferences.text
    assert len(site.mails("rae@example.org", "Welcome")) == 1
    assert len(site.app.store.consents_of("rae@example.org")) == 1
    site.app.store.suppress("rae@example.org", "unsubscribed")  # unsubscribed since: used, and no way in
    for method in ("GET", "POST"):
        again = site.client.request(method, link)
        assert again.status_code == 410 and "already been used" in again.text
        assert "/welcome/" not in again.text and "/preferences/" not in again.text


def test_signup_turned_off_is_not_found(tmp_path, monkeypatch):
    """signup.enabled = false: the form and the links answer 404 pages."""
    for site in make_site(tmp_path, monkeypatch, "[signup]\nenabled = false\n"):
        assert site.client.get("/subscribe").status_code == 404
        assert site.client.post("/confirm/abc").status_code == 404


SENTENCE = "efficient inference for large language models, KV cache compression and speculative decoding"


def test_a_sentence_is_taken_as_a_sentence_and_named_from_its_words(site):
    """The form's own words become the interest's description, whole (not keywords cut at its commas), and the
    interest is named from its words; keywords come only from the keywords field. The welcome page uses the name."""
    site.signup("sam@example.org", name="Sam", topics=[], interests=SENTENCE, keywords="vLLM, PagedAttention")
    welcome = site.client.post(site.link("sam@example.org"))
    assert welcome.status_code == 200
    [interest] = site.app.profiles.roster().find("sam@example.org").interests
    assert interest.description == SENTENCE
    assert interest.keywords == ("vLLM", "PagedAttention")
    assert interest.name == "vLLM, PagedAttention"  # named by its keywords when it has some, as written
    site.signup("kim@example.org", name="Kim", topics=[], interests=SENTENCE)
    welcome = site.client.post(site.link("kim@example.org"))
    [interest] = site.app.profiles.roster().find("kim@example.org").interests
    assert (interest.description, interest.keywords) == (SENTENCE, ())
    assert interest.name == "Efficient inference, KV cache compression"
    assert "In your words" not in welcome.text and "Efficient inference, KV cache compression" in welcome.text
