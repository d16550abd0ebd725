"""'View in browser': every email links to its web copy, signed and dated like its other links; and a send over SMTP
without DKIM says so once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import date

import pytest
from bs4 import BeautifulSoup

from digest import daily
from digest.app import App

from ..conftest import SEEDS
from ..smtpd import Recorder, smtp_server

ADA = "ada@example.org"


@pytest.fixture
def app(make_config, subscribers_dir, monkeypatch) -> Iterator[App]:
    """The seed pages new today (so today's digest links have not expired), the example subscribers."""
    monkeypatch.setenv("DIGEST_SECRET", "view-test-secret")
    application = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    application.ingest([SEEDS], seen_on=date.today())
    yield application
    application.close()


def titles(html: str) -> list[str]:
    return [a.get_text() for a in BeautifulSoup(html, "html.parser").find_all("a", class_="ttl")]


@pytest.mark.slow
def test_the_emails_view_link_shows_the_same_digest(web, app):
    """The link in the sent email (HTML and text) opens the same rendering of that subscriber's digest of that day,
    even after it was sent (its papers are then recorded as received)."""
    today = date.today()
    mailed = app.composer.compose(app.profiles.roster().find(ADA), today, app.composer.pool(today)).rendered
    assert mailed.links.view and mailed.links.view in mailed.html and mailed.links.view in mailed.text
    assert daily.send(app, today, only=ADA).counts["sent"] == 1
    response = web.client.get(web.path(mailed.links.view))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert response.text == mailed.html
    assert titles(response.text) == titles(mailed.html) and len(titles(mailed.html)) >= 3
    assert "unsafe-inline" in response.headers["content-security-policy"]


@pytest.mark.slow
def test_a_forged_other_action_or_expired_view_link_shows_nothing(web, app):
    """A changed token, another link's token, or a digest older than web.link_days answers 400 or 410."""
    view = web.path(app.links(ADA, date.today()).view)
    at = len(view) - 3  # not the last character: in base64 its low bits can be padding, which no check reads
    forged = view[:at] + ("A" if view[at] != "A" else "B") + view[at + 1:]
    other = web.path(app.links(ADA, date.today()).preferences).replace("/preferences/", "/view/")
    old = web.path(app.links(ADA, date(2020, 1, 6)).view)
    assert web.client.get(forged).status_code == 400
    assert web.client.get(other).status_code == 400
    assert web.client.get(old).status_code == 410
    legacy = "/view/" + app.signer.make_legacy("view", ADA)
    assert web.client.get(legacy).status_code == 400  # an undated token names no digest
    assert ADA not in web.client.get(forged).text


@pytest.mark.slow
@pytest.mark.parametrize(("dkim", "warned"), [({}, 1), ({"relay_signs": True}, 0)])
def test_an_unsigned_smtp_send_warns_once(smtp_app, caplog, dkim, warned):
    """A send over SMTP without DKIM logs one warning naming the docs section (none when the relay signs)."""
    with smtp_server(Recorder()) as port:
        app = smtp_app(port, dkim=dkim)
        with caplog.at_level(logging.WARNING, logger="digest"):
            report = daily.send(app, date(2026, 6, 12))
    assert report.counts["sent"] >= 3
    warnings = [r.getMessage() for r in caplog.records if "DKIM" in r.getMessage()]
    assert len(warnings) == warned
    assert all('docs/delivery.md, section "DKIM"' in w and "dkim.selector" in w for w in warnings)


@pytest.mark.slow
def test_the_outbox_never_warns_about_dkim(app, caplog):
    """Writing to the outbox is no bulk mail: no DKIM warning."""
    with caplog.at_level(logging.WARNING, logger="digest"):
        daily.send(app, date.today(), only=ADA)
    assert not [r for r in caplog.records if "DKIM" in r.getMessage()]
