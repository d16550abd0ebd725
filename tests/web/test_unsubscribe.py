"""After an unsubscribe, no dead end: Resubscribe and "Pause instead" while the email's preferences link works, the
signup page once it has expired. The preferences page and its Resubscribe agree with `digest status` whatever holds
the reader's digests back."""

from __future__ import annotations

import argparse
from datetime import date, timedelta

import pytest
from bs4 import BeautifulSoup

ADA = "ada@example.org"
ONE_CLICK = {"List-Unsubscribe": "One-Click"}


def test_the_page_after_a_one_click_unsubscribe_offers_resubscribe_and_pause_instead(web):
    """The one-click POST's page holds both forms, posting to the preferences page; "Pause instead" with a pause
    offered subscribes the address again, paused; one not offered changes nothing (400)."""
    links = web.app.links(ADA)
    done = web.client.post(web.path(links.unsubscribe), data=ONE_CLICK)
    assert done.status_code == 200 and web.app.store.suppressed() == {ADA: "unsubscribed"}
    preferences = web.path(links.preferences)
    assert done.text.count(f'action="{preferences}"') == 2
    assert 'value="resubscribe"' in done.text and 'value="pause-instead"' in done.text
    assert web.client.post(preferences, data={"do": "pause-instead", "days": "5"}).status_code == 400
    assert web.app.store.suppressed() == {ADA: "unsubscribed"}
    paused = web.client.post(preferences, data={"do": "pause-instead", "days": "30"})
    assert paused.status_code == 200 and "Subscribed again, and paused until" in paused.text
    assert web.app.store.suppressed() == {}
    assert web.app.store.preference(ADA).paused_until == date.today() + timedelta(days=30)


def test_an_old_emails_unsubscribe_page_offers_the_signup_page(web):
    """The unsubscribe link never expires but an old email's preferences link has: its page links the signup page
    (it mints no fresh preferences link)."""
    old = web.app.links(ADA, date.today() - timedelta(days=web.app.config.web.link_days + 1))
    done = web.client.post(web.path(old.unsubscribe), data=ONE_CLICK)
    assert done.status_code == 200 and "You are unsubscribed" in done.text
    assert "pause-instead" not in done.text and "/preferences/" not in done.text
    assert 'href="/subscribe">Subscribe again</a>' in done.text
    assert web.client.get("/subscribe").status_code == 200


SENT_ON = date.today() - timedelta(days=3)  # the digest Ada was sent, which the reports below are about


def digest_status(app, capsys) -> tuple[str, str]:
    """What `digest status` says of Ada for tomorrow: her line, and her entry among the suppressed addresses."""
    from digest.cli import cmd_status

    cmd_status(app.config, argparse.Namespace(date=date.today() + timedelta(days=1)))
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.split()[1:2] == [ADA])
    suppressed = text.split("Suppressed addresses")[1].split("\n\n")[0]
    return line, next((x for x in suppressed.splitlines() if x.strip().startswith(ADA)), "")


def page_state(web, url: str) -> tuple[str, bool]:
    """The preferences page's state line, and whether it offers Resubscribe."""
    page = BeautifulSoup(web.client.get(url).text, "html.parser")
    return page.find(id="state").get_text(" ", strip=True), page.find("button", string="Resubscribe") is not None


def report(web, tmp_path, kind: str) -> None:
    """A real hard bounce or spam complaint about the digest Ada was sent, read from a mailbox."""
    from digest.bounces.intake import read_mailbox
    from digest.delivery.message import message_id

    from .. import mailsamples as ms

    sent = message_id(ADA, SENT_ON, web.app.newsletter.from_address, web.app.signer.message_key)
    web.app.store.enqueue(SENT_ON, [ADA], message_id=lambda _: sent, transport="smtp")
    assert web.app.store.mark_sent(ADA, SENT_ON, [], message_id=sent)
    original = ms.original_headers(ADA, sent, day=SENT_ON.isoformat())
    message = (ms.postfix_dsn(ADA, original=original, report_id="<hard@x>") if kind == "bounced"
               else ms.arf(original, report_id="<spam@x>"))
    summary = read_mailbox(web.app, maildir=ms.write_maildir(tmp_path / kind, [message]))
    assert summary.counts["hard" if kind == "bounced" else "complaint"] == 1, summary.line()


# state: (what `digest status` says of Ada, what her preferences page says)
STATES = {"unsubscribed": ("unsubscribed by link", "unsubscribed"),
          "bounced": ("bounced: hard bounce 5.1.1", "mail to this address bounced"),
          "complained": ("complaint: marked as spam", "a digest was reported as spam"),
          "paused": ("paused", "paused until")}


@pytest.mark.parametrize("state", STATES)
def test_the_preferences_page_and_resubscribe_agree_with_digest_status(web, tmp_path, capsys, state):
    """Unsubscribed by link, bounced, reported as spam (real reports about the digest she was sent) or paused: the
    page says what `digest status` says. Resubscribe, offered while a suppression holds her digests back, lifts it:
    the page and `digest status` then both say subscribed, and a bounce's or complaint's lift is recorded as hers.
    Paused, she is offered Resume, not Resubscribe."""
    links = web.app.links(ADA)
    preferences = web.path(links.preferences)
    if state == "unsubscribed":
        assert web.client.post(web.path(links.unsubscribe), data=ONE_CLICK).status_code == 200
    elif state == "paused":
        assert web.client.post(preferences, data={"do": "pause", "days": "7"}).status_code == 200
    else:
        report(web, tmp_path, state)
    says, shown = STATES[state]
    line, suppressed = digest_status(web.app, capsys)
    held, offered = page_state(web, preferences)
    assert shown in held and offered == (state != "paused")
    if state == "paused":
        assert line.split()[0] == "paused" and suppressed == ""
        return
    assert line.split()[0] == "suppressed" and says in line and says in suppressed
    answer = web.client.post(preferences, data={"do": "resubscribe"})
    assert answer.status_code == 200 and "Welcome back: you are subscribed again." in answer.text
    line, suppressed = digest_status(web.app, capsys)
    assert line.split()[0] != "suppressed" and suppressed == "" and web.app.store.suppressed() == {}
    assert page_state(web, preferences) == ("subscribed, every day", False)
    lifts = [r for r in web.app.store.subscriber_data(ADA)["bounce_reports"] if r["kind"] == "lifted"]
    assert [r["status"] for r in lifts] == ([] if state == "unsubscribed" else ["reader"])


def test_an_unsubscribe_after_a_bounce_is_kept_as_an_unsubscribe(web, tmp_path, capsys):
    """A bounced reader who then unsubscribes is unsubscribed (`digest status` and the page say so), so the
    operator's lift of the bounce, once the address works, cannot mail them again; a complaint stays a complaint."""
    report(web, tmp_path, "bounced")
    links = web.app.links(ADA)
    assert web.client.post(web.path(links.unsubscribe), data=ONE_CLICK).status_code == 200
    line, suppressed = digest_status(web.app, capsys)
    assert "unsubscribed by link" in line and "unsubscribed by link" in suppressed
    assert page_state(web, web.path(links.preferences)) == ("unsubscribed", True)
    assert web.app.store.lift_suppression(ADA) is None and web.app.store.suppressed() == {ADA: "unsubscribed"}
