"""The web side under attack, over real HTTP: hosts, operator login and forms, link tokens, origins, floods."""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterator
from datetime import date, timedelta

import httpx
import pytest
import time_machine
from bs4 import BeautifulSoup

from digest.app import App

from ..conftest import DAY, SEEDS
from ..pg import free_port
from ..web_server import OPERATOR, Served

ADA, GRACE = "ada@example.org", "grace@example.org"
ONE_CLICK = {"List-Unsubscribe": "One-Click"}


@pytest.fixture
def app(make_config, subscribers_dir, monkeypatch) -> Iterator[App]:
    monkeypatch.setenv("DIGEST_SECRET", "web-test-secret")
    application = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    application.ingest([SEEDS], seen_on=DAY)
    yield application
    application.close()


def token_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[1]


# -- item 6: the operator pages ------------------------------------------------------------------------


def test_an_unknown_host_gets_400_and_is_never_redirected_to(web, app):
    """A Host that is neither base_url's nor the bind address's (DNS rebinding) is refused, /admin redirect included."""
    for path in ("/admin", "/admin/", web.path(app.links(ADA).unsubscribe)):
        response = web.client.get(path, headers={"Host": "evil.example"}, auth=OPERATOR)
        assert response.status_code == 400 and "evil" not in response.headers.get("Location", "")
    for host in ("127.0.0.1", "localhost:8025", "digest.example.org"):
        redirect = web.client.get("/admin", headers={"Host": host}, auth=OPERATOR)
        assert redirect.status_code in (301, 308) and redirect.headers["Location"] == "/admin/"


@pytest.mark.slow
def test_operator_form_needs_its_csrf_token_and_a_same_site_origin(web, app):
    """Lifting a bounce works from the page's own form; without its token, or posted from another site, it is 403."""
    app.store.suppress(GRACE, "bounced: 550 5.1.1 no such user")
    page = BeautifulSoup(web.client.get("/admin/", auth=OPERATOR).text, "html.parser")
    form = page.find("button", string="Lift the bounce").find_parent("form")
    fields = {i["name"]: i["value"] for i in form.find_all("input")}
    assert fields["subscriber"] == GRACE and len(fields["csrf"]) == 64
    forged = [({**fields, "csrf": "0" * 64}, {}), ({"subscriber": GRACE}, {}),
              (fields, {"Origin": "https://evil.example"}), (fields, {"Referer": "https://evil.example/x"})]
    for data, headers in forged:
        assert web.client.post(form["action"], data=data, headers=headers, auth=OPERATOR).status_code == 403
    assert web.client.post(form["action"], data=fields, auth=("operator", "wrong")).status_code == 401
    assert GRACE in app.store.suppressed()
    done = web.client.post(form["action"], data=fields, auth=OPERATOR, headers={"Origin": web.base})
    assert done.status_code == 303 and done.headers["Location"] == "/admin/"
    assert GRACE not in app.store.suppressed()


@pytest.mark.slow
def test_digest_serve_prints_an_operator_password_when_none_is_set(make_config, subscribers_dir, tmp_path):
    """Without $DIGEST_OPERATOR_PASSWORD, `digest serve` makes a password, prints it, and /admin/ needs it."""
    config = tmp_path / "digest.toml"
    database = tmp_path / "digest.db"
    config.write_text(f'[store]\nurl = "sqlite:///{database}"\n[subscribers]\ndir = "{subscribers_dir}"\n')
    served = Served(config, free_port(), {"DIGEST_SECRET": "s", "DIGEST_OPERATOR_PASSWORD": ""})
    try:
        assert httpx.get(f"{served.base}/admin/").status_code == 401
    finally:
        _, err = served.close()
    password = re.search(r"password: (\S+)\)", err).group(1)
    assert len(password) >= 20
    served = Served(config, free_port(), {"DIGEST_SECRET": "s", "DIGEST_OPERATOR_PASSWORD": "chosen-password"})
    try:
        assert httpx.get(f"{served.base}/admin/", auth=("operator", password)).status_code == 401
        assert httpx.get(f"{served.base}/admin/", auth=("operator", "chosen-password")).status_code == 200
    finally:
        _, err = served.close()
    assert "chosen-password" not in err


# -- item 7: tokens -------------------------------------------------------------------------------------


def test_tokens_do_not_carry_the_address(app):
    """No link of an email shows the subscriber's address, in the clear or in base64 of any part of the token."""
    links = app.links(ADA, DAY)
    for url in (links.unsubscribe, links.preferences, links.feedback):
        token = token_of(url)
        assert "ada" not in token.lower()
        for part in token.split("."):
            assert b"ada@" not in base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@pytest.mark.slow
def test_preferences_and_feedback_links_expire_but_unsubscribe_lasts(web, app):
    """After web.link_days the preferences and feedback links get 410 and change nothing; unsubscribe still works."""
    days = app.config.web.link_days
    old, last = date.today() - timedelta(days=days + 1), date.today() - timedelta(days=days)
    paper = app.store.candidates(DAY, 7)[0].store_id
    assert web.client.get(web.path(app.links(ADA, last).preferences)).status_code == 200
    expired = app.links(ADA, old)
    assert web.client.get(web.path(expired.preferences)).status_code == 410
    response = web.client.post(web.path(expired.preferences), data={"do": "pause", "days": "7"})
    assert response.status_code == 410 and "expired" in response.text and app.store.preference(ADA) is None
    assert web.client.post(web.path(f"{expired.feedback}/{paper}/less")).status_code == 410
    assert app.store.feedback_by_subscriber(ADA) == {}
    ancient = app.links(ADA, date.today() - timedelta(days=400))
    assert web.client.post(web.path(ancient.unsubscribe), data=ONE_CLICK).status_code == 200
    assert app.store.suppressed() == {ADA: "unsubscribed"}


def test_an_old_unsubscribe_link_offers_no_fresh_preferences_link(web, app):
    """The pages behind a link offer links dated like it: an old unsubscribe link cannot mint working ones."""
    week_ago = date.today() - timedelta(days=7)
    fresh = BeautifulSoup(web.client.get(web.path(app.links(ADA, week_ago).unsubscribe)).text, "html.parser")
    offered = fresh.find("a", string=re.compile("Change how often"))["href"]
    assert app.signer.check("preferences", token_of(offered)).issued == week_ago
    old = app.links(ADA, date.today() - timedelta(days=app.config.web.link_days + 1))
    page = web.client.get(web.path(old.unsubscribe)).text
    assert "/preferences/" not in page
    done = web.client.post(web.path(old.unsubscribe), data=ONE_CLICK).text
    assert "You are unsubscribed" in done and "Resubscribe" not in done and "/preferences/" not in done


def test_links_mailed_before_the_upgrade_keep_working_until_they_expire(web, app):
    """Old-kind tokens (readable, undated): unsubscribe always; preferences for web.link_days after the upgrade."""
    old_preferences = f"/preferences/{app.signer.make_legacy('preferences', ADA)}"
    assert web.client.post(old_preferences, data={"do": "pause", "days": "7"}).status_code == 200
    # A new connection in the travelled time: the server, which runs in this process, sees the pooled one idle
    # for weeks and may close it under the client (it did, in CI).
    with time_machine.travel(date.today() + timedelta(days=app.config.web.link_days + 1)), \
            httpx.Client(base_url=web.base, timeout=10) as client:
        assert client.get(old_preferences).status_code == 410
        old_unsubscribe = f"/unsubscribe/{app.signer.make_legacy('unsubscribe', ADA)}"
        assert client.post(old_unsubscribe, data=ONE_CLICK).status_code == 200
    assert app.store.suppressed() == {ADA: "unsubscribed"}


@pytest.mark.slow
def test_a_post_without_the_one_click_body_unsubscribes_nobody(web, app):
    """An empty POST (a scanner, a prefetch) gets 400; RFC 8058's body as form or multipart unsubscribes."""
    url = web.path(app.links(ADA).unsubscribe)
    for body in (b"", b"List-Unsubscribe=Other", b"unsubscribe=1"):
        response = web.client.post(url, content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert response.status_code == 400
    assert app.store.suppressed() == {}
    assert web.client.post(url, files={"List-Unsubscribe": (None, "One-Click")}).status_code == 200
    assert app.store.suppressed() == {ADA: "unsubscribed"}


@pytest.mark.slow
@pytest.mark.parametrize("headers", [{"Origin": "https://evil.example"}, {"Origin": "null"},
                                     {"Referer": "https://evil.example/page"}])
def test_posts_from_another_site_are_refused(web, app, headers):
    """A POST whose browser names another site (or hides it: Origin null) changes nothing: 403."""
    links = app.links(ADA)
    paper = app.store.candidates(DAY, 7)[0].store_id
    assert web.client.post(web.path(links.unsubscribe), data=ONE_CLICK, headers=headers).status_code == 403
    prefs = web.client.post(web.path(links.preferences), data={"do": "pause", "days": "7"}, headers=headers)
    assert prefs.status_code == 403
    assert web.client.post(web.path(f"{links.feedback}/{paper}/more"), headers=headers).status_code == 403
    assert app.store.suppressed() == {} and app.store.preference(ADA) is None
    assert app.store.feedback_by_subscriber(ADA) == {}


def test_posts_from_this_site_or_no_browser_pass(web, app):
    """The newsletter's own origin, this server's, or no Origin/Referer at all (a mail provider) may post."""
    url = web.path(app.links(ADA).preferences)
    for headers in ({"Origin": "https://digest.example.org"}, {"Origin": web.base}, {"Referer": f"{web.base}{url}"},
                    {}):
        assert web.client.post(url, data={"do": "pause", "days": "7"}, headers=headers).status_code == 200


@pytest.mark.slow
def test_replayed_posts_change_nothing_more(web, app):
    """The same unsubscribe, feedback and pause POSTs sent again answer 200 and leave the same state."""
    links = app.links(ADA)
    paper = app.store.candidates(DAY, 7)[0].store_id
    for _ in range(3):
        assert web.client.post(web.path(links.unsubscribe), data=ONE_CLICK).status_code == 200
        assert web.client.post(web.path(f"{links.feedback}/{paper}/more")).status_code == 200
        assert web.client.post(web.path(links.preferences), data={"do": "pause", "days": "7"}).status_code == 200
    assert app.store.suppressed() == {ADA: "unsubscribed"}
    assert app.store.feedback_by_subscriber(ADA) == {ADA: {paper: 1}}
    assert app.store.preference(ADA).paused_until == date.today() + timedelta(days=7)


# -- item 9: 200 identical POSTs at once against `digest serve`, on both stores --------------------------


def _all_at_once(url: str, data: dict[str, str], n: int) -> list[int]:
    """POST the same form `n` times at once (each on its own connection); the status codes."""
    barrier, codes = threading.Barrier(n), []

    def post() -> None:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            try:
                codes.append(client.post(url, data=data).status_code)
            except httpx.TransportError as exc:
                codes.append(type(exc).__name__)

    threads = [threading.Thread(target=post) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_simultaneous_identical_posts_all_succeed(store, request, tmp_path, subscribers_dir, monkeypatch):
    """200 one-click POSTs of one link and 50 first-time preferences POSTs at once: every answer 2xx, one row each."""
    url = (f"sqlite:///{tmp_path / 'digest.db'}" if store == "sqlite"
           else request.getfixturevalue("postgres").new_database())
    config = tmp_path / "digest.toml"
    config.write_text(f'[store]\nurl = "{url}"\n[subscribers]\ndir = "{subscribers_dir}"\n')
    env = {"DIGEST_SECRET": "flood", "DIGEST_OPERATOR_PASSWORD": "x"}
    monkeypatch.setenv("DIGEST_SECRET", "flood")
    served = Served(config, free_port(), env)
    reader = App(_load(config))
    try:
        links = reader.links(ADA)
        unsubscribe = served.base + links.unsubscribe.removeprefix(reader.newsletter.base_url)
        assert sorted(set(_all_at_once(unsubscribe, ONE_CLICK, 200))) == [200]
        grace = reader.links(GRACE).preferences
        preferences = served.base + grace.removeprefix(reader.newsletter.base_url)
        codes = _all_at_once(preferences, {"do": "frequency", "frequency": "weekly:tue"}, 50)
        assert sorted(set(codes)) == [200]
        assert reader.store.suppressed() == {ADA: "unsubscribed"}
        assert reader.store.preference(GRACE).frequency == "weekly:tue"
    finally:
        reader.close()
        served.close()


def _load(path):
    from digest.config import load_config

    return load_config(path)
