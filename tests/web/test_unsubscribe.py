"""After an unsubscribe, no dead end: Resubscribe and "Pause instead" while the email's preferences link works, the
signup page once it has expired."""

from __future__ import annotations

from datetime import date, timedelta

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
