"""The web endpoints over real HTTP (waitress on a free port of 127.0.0.1), as mailbox providers and people use them."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from itsdangerous import URLSafeSerializer

from digest import daily
from digest.app import App
from digest.errors import UsageError
from digest.tokens import Signer
from digest.web import serve

from ..conftest import DAY, SEEDS
from ..web_server import OPERATOR, Server

ADA = "ada@example.org"


BOTH_STORES = pytest.mark.parametrize("app", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def app(request, make_config, subscribers_dir, monkeypatch) -> Iterator[App]:
    """The example subscribers with the seeds ingested; on SQLite, or on PostgreSQL for tests marked BOTH_STORES."""
    monkeypatch.setenv("DIGEST_SECRET", "web-test-secret")
    store = {}
    if getattr(request, "param", "sqlite") == "postgresql":
        store = {"url": request.getfixturevalue("postgres").new_database()}
    application = App(make_config(subscribers={"dir": str(subscribers_dir)}, store=store))
    application.ingest([SEEDS], seen_on=DAY)
    yield application
    application.close()


def outcome(app: App, email: str, day: date = DAY):
    return next(o for o in daily.send(app, day, only=email).outcomes if o.subscriber == email)


@BOTH_STORES
def test_rfc8058_one_click_post_unsubscribes_at_once(web, app):
    """The provider's POST (form body List-Unsubscribe=One-Click, no cookie) unsubscribes; the next send skips Ada."""
    url = web.path(app.links(ADA).unsubscribe)
    response = web.client.post(url, content=b"List-Unsubscribe=One-Click",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 200 and "You are unsubscribed" in response.text
    assert app.store.suppressed() == {ADA: "unsubscribed"}
    skipped = outcome(app, ADA)
    assert skipped.status == "skipped" and "unsubscribed" in skipped.reason
    assert not (app.config.delivery.outbox / DAY.isoformat() / f"{ADA}.eml").exists()


@pytest.mark.slow
def test_get_shows_a_confirm_button_and_unsubscribes_nobody(web, app):
    """A GET (a person, or a link scanner) gets a page with a POST button; nothing changes."""
    url = web.path(app.links(ADA).unsubscribe)
    response = web.client.get(url)
    assert response.status_code == 200
    assert f'<form method="post" action="{url}">' in response.text and "<button" in response.text
    assert app.store.suppressed() == {}
    assert outcome(app, ADA).status == "sent"


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["forged", "altered", "truncated", "other action", "other key",
                                    "old kind altered", "old kind other key"])
def test_bad_tokens_get_400_and_change_nothing(web, app, tamper):
    """Forged, altered, truncated, wrong-action and wrong-key tokens (new or old kind) are refused with a 400 page."""
    good = app.links(ADA).unsubscribe.rsplit("/", 1)[1]
    flipped = base64.urlsafe_b64decode(good + "=" * (-len(good) % 4))
    flipped = flipped[:-1] + bytes([flipped[-1] ^ 1])
    old_signature = app.signer.make_legacy("unsubscribe", ADA).split(".")[1]
    token = {
        "forged": base64.urlsafe_b64encode(bytes(40)).decode().rstrip("="),
        "altered": base64.urlsafe_b64encode(flipped).decode().rstrip("="),
        "truncated": good[:-4],
        "other action": app.links(ADA).preferences.rsplit("/", 1)[1],
        "other key": Signer("another-secret").make("unsubscribe", ADA, date.today()),
        # Grace's address with Ada's signature: a subscriber cannot be swapped for another.
        "old kind altered": URLSafeSerializer("x").dump_payload({"e": "grace@example.org"}).decode() + "."
        + old_signature,
        "old kind other key": URLSafeSerializer("another-secret", salt="paper-digest.unsubscribe").dumps({"e": ADA}),
    }[tamper]
    response = web.client.post(f"/unsubscribe/{token}", content=b"List-Unsubscribe=One-Click",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400 and "This link is not valid" in response.text
    assert app.store.suppressed() == {}


@pytest.mark.slow
def test_resubscribe_button_after_unsubscribing(web, app):
    """The page after unsubscribing has a Resubscribe button; the form it posts makes the next send deliver again."""
    done = web.client.post(web.path(app.links(ADA).unsubscribe), data={"List-Unsubscribe": "One-Click"})
    assert app.store.suppressed() == {ADA: "unsubscribed"}
    form = BeautifulSoup(done.text, "html.parser").find("button", string="Resubscribe").find_parent("form")
    fields = {i["name"]: i["value"] for i in form.find_all("input")}
    response = web.client.post(form["action"], data=fields)
    assert response.status_code == 200 and "subscribed again" in response.text and app.store.suppressed() == {}
    assert outcome(app, ADA).status == "sent"


@pytest.mark.slow
@BOTH_STORES
def test_pause_and_frequency_take_effect_on_the_next_send(web, app):
    """Pausing for a week skips sends until then; choosing weekly:mon mails Ada on Mondays only."""
    prefs = web.path(app.links(ADA).preferences)
    profile = Path(app.profiles.roster().find(ADA).path).read_text()
    assert "Take a break" in web.client.get(prefs).text
    assert "Paused until" in web.client.post(prefs, data={"do": "pause", "days": "7"}).text
    paused = outcome(app, ADA, date.today())
    assert paused.status == "skipped" and paused.reason == f"paused until {date.today() + timedelta(days=7)}"
    web.client.post(prefs, data={"do": "resume"})
    assert "Saved: once a week, on monday" in web.client.post(
        prefs, data={"do": "frequency", "frequency": "weekly:mon"}).text
    friday, monday = date(2026, 6, 12), date(2026, 6, 15)
    assert "not a delivery day" in outcome(app, ADA, friday).reason
    assert outcome(app, ADA, monday).status == "sent"
    assert Path(app.profiles.roster().find(ADA).path).read_text() == profile  # state lives in the database


def test_responses_carry_security_headers(web, app):
    """Pages forbid framing, sniffing and cross-site referrers (their URLs hold tokens) and set a strict CSP."""
    headers = web.client.get(web.path(app.links(ADA).unsubscribe)).headers
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin" and "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "no-store"


@pytest.mark.slow
def test_operator_password_is_required_even_on_loopback(web, app):
    """/admin answers 401 without the password and with a wrong one, 200 with it; public links need none."""
    assert web.client.get("/admin/").status_code == 401
    assert web.client.get("/admin/", auth=("operator", "wrong")).status_code == 401
    index = web.client.get("/admin/", auth=OPERATOR)
    assert index.status_code == 200 and ADA in index.text and "preview" in index.text
    assert web.client.get(web.path(app.links(ADA).unsubscribe)).status_code == 200


def test_operator_login_turned_off_opens_on_loopback_only_and_not_through_a_proxy(app):
    """With the login explicitly off, a loopback server shows /admin; a proxied request (X-Forwarded-For) gets 403."""
    server = Server(app, operator_password=None)
    try:
        assert server.client.get("/admin/").status_code == 200
        assert server.client.get("/admin/", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 403
    finally:
        server.close()


def test_login_off_beyond_loopback_is_refused(make_config, subscribers_dir, monkeypatch):
    """Binding to 0.0.0.0 with web.operator_login = false is refused before anything listens."""
    monkeypatch.setenv("DIGEST_SECRET", "web-test-secret")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, web={"operator_login": False}))
    try:
        with pytest.raises(UsageError, match="would expose the operator pages"):
            serve(app, "0.0.0.0", 0, password_env="DIGEST_OPERATOR_PASSWORD")
    finally:
        app.close()


@pytest.mark.slow
@BOTH_STORES
def test_preview_shows_the_digest_as_it_will_be_sent(web, app):
    """The preview page shows the subject and preheader, and its frame serves the exact HTML part."""
    composed = app.composer.compose(app.profiles.roster().find(ADA), DAY, app.composer.pool(DAY))
    page = web.client.get("/admin/preview", params={"subscriber": ADA, "date": DAY.isoformat()}, auth=OPERATOR)
    assert page.status_code == 200 and "frame-src 'self'" in page.headers["Content-Security-Policy"]
    assert composed.rendered.subject.replace("&", "&amp;") in page.text
    html = web.client.get("/admin/preview.html", params={"subscriber": ADA, "date": DAY.isoformat()}, auth=OPERATOR)
    assert html.text == composed.rendered.html and html.headers["X-Frame-Options"] == "SAMEORIGIN"


def test_untrusted_profile_text_is_escaped_on_operator_pages(web, app, subscribers_dir):
    """A subscriber name with markup shows as text on the operator page."""
    (subscribers_dir / "evil.toml").write_text('email = "evil@example.org"\nname = "<script>alert(1)</script>"\n')
    text = web.client.get("/admin/", auth=OPERATOR).text
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_feedback_page_names_the_paper_as_a_reader_reads_it(web, app):
    """The page a "More like this" link opens names the paper by its title with its LaTeX made text: a seed page's
    "H_2O" shows as "H₂O"."""
    h2o = next(p for p in app.store.all_papers() if p.title.startswith("H_2O: "))
    asked = web.client.get(web.path(f"{app.links(ADA).feedback}/{h2o.store_id}/more"))
    assert asked.status_code == 200 and "H₂O: Heavy-Hitter Oracle" in asked.text and "H_2O" not in asked.text


@pytest.mark.slow
@BOTH_STORES
def test_feedback_link_asks_then_records_and_moves_the_next_ranking(web, app):
    """'Less like this' on Ada's top paper: the GET only asks; the POST records it and the paper drops out."""
    ada = app.profiles.roster().find(ADA)
    top = app.composer.compose(ada, DAY, app.composer.pool(DAY)).digest.items[0].paper
    url = web.path(f"{app.links(ADA).feedback}/{top.store_id}/less")
    asked = web.client.get(url)
    assert asked.status_code == 200 and "Fewer papers like this?" in asked.text
    assert app.store.feedback_by_subscriber(ADA) == {}
    done = web.client.post(url)
    assert done.status_code == 200 and "Thanks" in done.text
    assert app.store.feedback_by_subscriber(ADA) == {ADA: {top.store_id: -1}}
    after = [i.paper.store_id for i in app.composer.compose(ada, DAY, app.composer.pool(DAY)).digest.items]
    assert top.store_id not in after
    assert web.client.post(web.path(f"{app.links(ADA).feedback}/999999/more")).status_code == 404
    forged = url.replace(url.split("/")[2], url.split("/")[2][:-3] + "xyz")
    assert web.client.post(forged).status_code == 400


@pytest.mark.slow
def test_preview_rereads_a_changed_template(make_config, subscribers_dir, tmp_path, monkeypatch):
    """An operator editing an override template sees the change on the next preview, without a restart."""
    monkeypatch.setenv("DIGEST_SECRET", "web-test-secret")
    overrides = tmp_path / "overrides"
    overrides.mkdir()
    template = overrides / "digest.html.j2"
    header = ('{% extends "builtin/digest.html.j2" %}'
              '{% block header %}<tr><td class="hdr">VERSION</td></tr>{% endblock %}')
    template.write_text(header.replace("VERSION", "First draft"), encoding="utf-8")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, render={"templates": str(overrides)}))
    app.ingest([SEEDS], seen_on=DAY)
    server = Server(app)
    try:
        params = {"subscriber": ADA, "date": DAY.isoformat()}
        assert "First draft" in server.client.get("/admin/preview.html", params=params, auth=OPERATOR).text
        template.write_text(header.replace("VERSION", "Second draft"), encoding="utf-8")
        os.utime(template, (time.time() + 5, time.time() + 5))  # a later mtime, whatever the clock's resolution
        page = server.client.get("/admin/preview.html", params=params, auth=OPERATOR).text
        assert "Second draft" in page and "First draft" not in page
    finally:
        server.close()
        app.close()


@pytest.mark.slow
def test_admin_says_why_each_address_is_suppressed(web, app, tmp_path):
    """/admin/ lists the suppressed addresses with why: an unsubscribe by link, a hard bounce read from the mailbox
    with its status, and an erased address only as its hash."""
    from digest.bounces.intake import read_mailbox
    from digest.delivery.message import message_id
    from digest.subscribers.privacy import forget

    from .. import mailsamples as ms

    app.store.suppress("grace@example.org", "unsubscribed")
    sent = message_id("alan@example.org", DAY, "digest@example.org", app.signer.message_key)
    app.store.enqueue(DAY, ["alan@example.org"], message_id=lambda _: sent, transport="smtp")
    app.store.mark_sent("alan@example.org", DAY, [], message_id=sent)  # a report names the digest sent, by its id
    report = ms.postfix_dsn("alan@example.org", status="5.1.1", report_id="<hard-alan@x>",
                            original=ms.original_headers("alan@example.org", sent))
    summary = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "box", [report]))
    assert summary.counts["hard"] == 1, summary.line()
    forget(app, "zed@example.org")
    page = BeautifulSoup(web.client.get("/admin/", auth=OPERATOR).text, "html.parser")
    rows = {cells[0]: cells[2] for cells in ([td.get_text(" ", strip=True) for td in tr.find_all("td")]
                                             for tr in page.find_all("tr")) if len(cells) == 3}
    assert rows["grace@example.org"] == "unsubscribed by link"
    assert "hard bounce" in rows["alan@example.org"] and "5.1.1" in rows["alan@example.org"]
    erased = [address for address, why in rows.items() if why.startswith("forgotten")]
    assert erased and all(address.startswith("sha256:") for address in erased)
    assert "zed@example.org" not in page.get_text()
