"""Forged bounces and complaints suppress nobody; reports quoting a real digest's keyed identifiers still do.

A digest's Message-ID and its return-path tag carry a MAC under the store's key (`mail.message_id`), so only
a report quoting what a real digest carried names it; one naming a subscriber by address alone, or by an
identifier anyone can compute, is recorded as unmatched. The operator can lift a complaint, and the lift is kept.
"""

from __future__ import annotations

import hashlib
from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from digest.app import App
from digest.bounces.intake import read_mailbox
from digest.store import Store
from digest.tokens import Signer

from .. import mailsamples as ms
from ..conftest import DAY, sample_site
from .test_intake import ADA, ALAN, GRACE, KATHERINE, app_with_digests, mid, table_rows

RETURN_PATH = "bounces@example.org"
PEOPLE = (ADA, GRACE, KATHERINE, ALAN)


def unkeyed(email: str, day: date = DAY) -> str:
    """The Message-ID earlier versions gave a digest: a hash of the address and date that anyone can compute."""
    digest = hashlib.sha256(f"{email.lower()}\n{day.isoformat()}".encode()).hexdigest()[:20]
    return f"<digest.{day.isoformat()}.{digest}@example.org>"


def tagged(message_id: str) -> str:
    """The return path a digest with this Message-ID was sent from (`delivery.return_path` set)."""
    return f"bounces+{message_id.removeprefix('<digest.').partition('@')[0]}@example.org"


@pytest.fixture
def sent_app(make_config, subscribers_dir):
    """The example subscribers, sent digests of DAY and the two days before, with tagged return paths."""
    application = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)},
                                               delivery={"return_path": RETURN_PATH}))
    yield application
    application.close()


def forgeries(app: App) -> dict[str, bytes]:
    """Reports anyone could write who knows a subscriber's address and the scheme of our identifiers."""
    real_link = app.links(GRACE, DAY).unsubscribe
    altered = real_link[:-3] + ("AAA" if not real_link.endswith("AAA") else "BBB")
    guessed = Signer("a guessed secret").make("unsubscribe", GRACE, DAY)
    invented = f"<digest.{DAY}.0123456789abcdef01234567@example.org>"  # the keyed shape, a made-up MAC
    return {
        "a DSN naming the address only": ms.postfix_dsn(ADA, report_id="<f1@x>"),
        "a DSN quoting the unkeyed Message-ID earlier versions would have given": ms.postfix_dsn(
            ADA, original=ms.original_headers(ADA, unkeyed(ADA)), report_id="<f2@x>"),
        "a DSN to a forged return-path tag (the unkeyed kind)": ms.postfix_dsn(
            "someone@forward.example.net", to=tagged(unkeyed(ALAN)), report_id="<f3@x>"),
        "a DSN to a forged return-path tag (the keyed shape, a guessed MAC)": ms.postfix_dsn(
            "someone@forward.example.net", to=f"bounces+{DAY}.{'ab' * 12}@example.org", report_id="<f3b@x>"),
        "an ARF complaint with a forged Message-ID": ms.arf(ms.original_headers(GRACE, "<forged-1@example.org>"),
                                                            report_id="<f4@x>", rcpt=GRACE),
        "an ARF complaint naming the address only": ms.arf(
            "From: Paper Digest <digest@example.org>\r\nTo: grace@example.org\r\nSubject: Your papers\r\n",
            report_id="<f5@x>"),
        "an ARF complaint quoting an altered List-Unsubscribe link": ms.arf(ms.original_headers(
            GRACE, "<redacted@example.org>", unsubscribe=altered), report_id="<f6@x>", rcpt=GRACE),
        "an ARF complaint quoting a link made with a guessed secret": ms.arf(ms.original_headers(
            GRACE, "<redacted@example.org>", unsubscribe=f"https://digest.example.org/unsubscribe/{guessed}"),
            report_id="<f6b@x>", rcpt=GRACE),
        "a multipart/report carrying a fake original": ms.rfc3464_dsn(
            KATHERINE, ms.original_headers(KATHERINE, invented), report_id="<f7@x>", status="5.1.1",
            action="failed"),
    }


@pytest.mark.slow
def test_forged_reports_suppress_nobody_and_are_counted_as_unmatched(sent_app, tmp_path):
    """Every forgery is recorded as unmatched with a warning naming it; no address is suppressed, no digest is
    marked bounced, no bounce is kept against anyone."""
    forged = forgeries(sent_app)
    summary = read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "box", list(forged.values())))
    assert summary.counts["unmatched"] == len(forged) == 9, summary.line()
    assert summary.suppressed == [] and sent_app.store.suppressed() == {}
    assert table_rows(sent_app, "bounces") == 0 and table_rows(sent_app, "mail_reports") == len(forged)
    assert {sent_app.store.delivery(e, DAY).status for e in PEOPLE} == {"sent"}
    assert len(summary.notes) == len(forged) and summary.ok
    named = [n for n in summary.notes if "names subscriber" in n]
    assert len(named) >= 4 and all("an address or a link alone suppresses nobody" in n for n in named)


def test_reports_quoting_a_real_digest_still_suppress(sent_app, tmp_path):
    """The keyed Message-ID and the keyed return-path tag (where the report was sent, or the Return-Path of the
    original it quotes, as a feedback loop that redacts the recipient and the Message-ID keeps it) each name their
    digest: the hard bounces and the complaints suppress the subscriber they are about."""
    real = [
        ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(sent_app, ADA)), report_id="<r1@x>"),
        ms.postfix_dsn("forwarded@elsewhere.example.net", to=tagged(mid(sent_app, ALAN)), report_id="<r2@x>"),
        ms.arf(ms.original_headers("(redacted)", "<redacted@example.org>", return_path=tagged(mid(sent_app, GRACE)),
                                   unsubscribe=sent_app.links(GRACE, DAY).unsubscribe), report_id="<r3@x>"),
        ms.arf(ms.original_headers(KATHERINE, mid(sent_app, KATHERINE, DAY - timedelta(days=1))),
               report_id="<r4@x>"),
    ]
    summary = read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "box", real))
    assert (summary.counts["hard"], summary.counts["complaint"], summary.counts["unmatched"]) == (2, 2, 0)
    reasons = sent_app.store.suppressed()
    assert set(reasons) == set(PEOPLE)
    assert reasons[ADA].startswith("bounced: hard bounce 5.1.1") and reasons[ALAN].startswith("bounced: hard")
    assert reasons[GRACE].startswith("complaint:") and reasons[KATHERINE].startswith("complaint:")
    assert sent_app.store.delivery(ALAN, DAY).status == "bounced"


def test_an_unsubscribe_link_names_no_digest(sent_app, tmp_path):
    """Every digest's footer carries the reader's unsubscribe link, so whoever a digest was forwarded to holds it and
    its date. A DSN and an ARF complaint quoting Grace's real link with an X-Digest-Date never sent, the link alone,
    or the link with the date of a digest she was sent: each recorded as unmatched, with why, and nobody is
    suppressed. The same DSN and ARF quoting the Message-ID of her sent digest suppress her."""
    link = sent_app.links(GRACE, DAY).unsubscribe
    never = (DAY + timedelta(days=3)).isoformat()

    def original(day: str = never, message_id: str = "<redacted@example.org>", unsubscribe: str = link) -> str:
        return ms.original_headers(GRACE, message_id, unsubscribe=unsubscribe, day=day)

    forged = {
        "<l1@x>": ms.postfix_dsn(GRACE, original=original(), report_id="<l1@x>"),
        "<l2@x>": ms.arf(original(), report_id="<l2@x>", rcpt=GRACE),
        "<l3@x>": ms.arf(original(day=""), report_id="<l3@x>", rcpt=GRACE),
        "<l4@x>": ms.postfix_dsn(GRACE, original=original(day=DAY.isoformat()), report_id="<l4@x>"),
    }
    summary = read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "forged", list(forged.values())))
    assert summary.counts["unmatched"] == 4 and summary.suppressed == [], summary.line()
    assert sent_app.store.suppressed() == {} and table_rows(sent_app, "bounces") == 0
    assert {sent_app.store.delivery(e, DAY).status for e in PEOPLE} == {"sent"}
    evidence = {key: sent_app.store.report_evidence(f"message-id:{key}") for key in forged}
    assert {outcome for outcome, _ in evidence.values()} == {"unmatched"}
    for _, why in evidence.values():  # (kept with the report, it names no address: an erasure could not reach it)
        assert why.startswith("unmatched: ") and "it quotes a subscriber's unsubscribe link" in why
        assert "a link names no digest" in why and "the Message-ID <redacted@example.org> is no digest" in why
        assert GRACE not in why
    assert f"X-Digest-Date {never}: no digest of that date was sent to them" in evidence["<l1@x>"][1]
    assert f"X-Digest-Date {never}: no digest" in evidence["<l2@x>"][1]
    assert "X-Digest-Date" not in evidence["<l3@x>"][1]
    assert f"X-Digest-Date {DAY}: a digest of that date was sent to them" in evidence["<l4@x>"][1]
    assert len(summary.notes) == 4 and all(f"names subscriber {GRACE} but no digest sent to them" in note
                                           for note in summary.notes)

    real = [ms.postfix_dsn(GRACE, original=original(message_id=mid(sent_app, GRACE)), report_id="<m1@x>"),
            ms.arf(original(message_id=mid(sent_app, GRACE, DAY - timedelta(days=1))), report_id="<m2@x>", rcpt=GRACE)]
    summary = read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "real", real))
    assert (summary.counts["hard"], summary.counts["complaint"]) == (1, 1), summary.line()
    assert sent_app.store.suppressed()[GRACE].startswith("bounced: hard bounce 5.1.1")  # (the first report's)
    assert sent_app.store.delivery(GRACE, DAY).status == "bounced"
    assert sent_app.store.report_evidence("message-id:<m1@x>") == (
        "hard", f"matched by the Message-ID {mid(sent_app, GRACE)}: the digest of {DAY} the send log has as sent")
    assert sent_app.store.report_evidence("message-id:<m2@x>") == ("complaint", (
        f"matched by the Message-ID {mid(sent_app, GRACE, DAY - timedelta(days=1))}: the digest of "
        f"{DAY - timedelta(days=1)} the send log has as sent"))


def test_a_digest_never_sent_is_named_by_nothing(sent_app, tmp_path):
    """A report quoting the keyed Message-ID (or return path) of a digest the send log holds but never sent
    (queued, failed) matches nothing; once a report has marked a sent digest bounced, a later report about it (a
    complaint) still matches it."""
    later = DAY + timedelta(days=1)
    sent_app.store.enqueue(later, [ADA, ALAN], message_id=lambda e: mid(sent_app, e, later), transport="smtp")
    reports = [ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(sent_app, ADA, later)), report_id="<q1@x>"),
               ms.postfix_dsn("fwd@elsewhere.example.net", to=tagged(mid(sent_app, ALAN, later)), report_id="<q2@x>")]
    summary = read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "queued", reports))
    assert summary.counts["unmatched"] == 2 and sent_app.store.suppressed() == {}, summary.line()
    assert "never sent (the send log has it queued)" in sent_app.store.report_evidence("message-id:<q1@x>")[1]
    assert f"the return path {tagged(mid(sent_app, ALAN, later))} is a digest of {later} never sent" in (
        sent_app.store.report_evidence("message-id:<q2@x>")[1])
    bounced = ms.postfix_dsn(KATHERINE, original=ms.original_headers(KATHERINE, mid(sent_app, KATHERINE)),
                             report_id="<b1@x>")
    complaint = ms.arf(ms.original_headers(KATHERINE, mid(sent_app, KATHERINE)), report_id="<b2@x>")
    read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "bounced", [bounced]))
    assert sent_app.store.delivery(KATHERINE, DAY).status == "bounced"
    read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "complaint", [complaint]))
    assert sent_app.store.suppressed()[KATHERINE].startswith("bounced:")  # (a complaint replaces an unsubscribe)
    assert sent_app.store.report_evidence("message-id:<b2@x>")[0] == "complaint"


def test_a_real_digest_of_one_subscriber_suppresses_only_that_one(sent_app, tmp_path):
    """A subscriber quoting their own digest in a report that names someone else among its recipients suppresses
    only themselves: the digest went to them, and the other address is matched by nothing but its text."""
    own = ms.original_headers(ALAN, mid(sent_app, ALAN))
    both = ms.postfix_dsn(KATHERINE, original=own, report_id="<two@x>").replace(
        b"Final-Recipient", b"Final-Recipient: rfc822; alan@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n"
                            b"Final-Recipient", 1)
    read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "box", [both]))
    assert set(sent_app.store.suppressed()) == {ALAN}


def test_unkeyed_message_ids_match_only_if_sent_within_link_days(make_config, subscribers_dir, tmp_path):
    """Digests sent by earlier versions carry unkeyed identifiers (the send log holds them): a report quoting one
    matches for web.link_days after the digest's date, by Message-ID or by return-path tag; an older one, or an
    unkeyed id that was never sent, matches nothing."""
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, delivery={"return_path": RETURN_PATH},
                          web={"link_days": 30}))
    app.profiles.sync()
    recent, old = DAY, DAY - timedelta(days=40)
    for email, day in ((ADA, recent), (ALAN, recent), (GRACE, old), (KATHERINE, recent)):
        sent = unkeyed(email, day) if email != KATHERINE else mid(app, email, day)
        app.store.enqueue(day, [email], message_id=lambda _, m=sent: m, transport="smtp")
        assert app.store.mark_sent(email, day, [], message_id=sent)
    reports = [
        ms.postfix_dsn(ADA, original=ms.original_headers(ADA, unkeyed(ADA, recent)), report_id="<o1@x>"),
        ms.postfix_dsn("fwd@elsewhere.example.net", to=tagged(unkeyed(ALAN, recent)), report_id="<o2@x>"),
        ms.postfix_dsn(GRACE, original=ms.original_headers(GRACE, unkeyed(GRACE, old)), report_id="<o3@x>"),
        ms.postfix_dsn(KATHERINE, original=ms.original_headers(KATHERINE, unkeyed(KATHERINE)), report_id="<o4@x>"),
    ]
    summary = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "box", reports), today=DAY + timedelta(days=5))
    assert (summary.counts["hard"], summary.counts["unmatched"]) == (2, 2), summary.line()
    assert set(app.store.suppressed()) == {ADA, ALAN}
    later = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "later", [ms.postfix_dsn(
        KATHERINE, status="4.2.2", original=ms.original_headers(KATHERINE, unkeyed(ADA, recent)),
        report_id="<o5@x>")]), today=DAY + timedelta(days=31))
    assert later.counts["unmatched"] == 1  # ADA's unkeyed id, read 31 days after its digest: no longer trusted
    app.close()


def test_the_operator_lifts_a_complaint_and_the_lift_is_kept(sent_app, tmp_path):
    """The operator lifts a complaint once, and the lift is kept with the address's data (so the soft bounces before
    it no longer count toward a suppression); an unsubscribe is not the operator's to lift."""
    complaint = ms.arf(ms.original_headers(GRACE, mid(sent_app, GRACE)), report_id="<c1@x>")
    read_mailbox(sent_app, maildir=ms.write_maildir(tmp_path / "box", [complaint]))
    assert sent_app.store.suppressed()[GRACE].startswith("complaint:")
    lifted = sent_app.store.lift_suppression(GRACE.upper())
    assert lifted is not None and lifted.startswith("complaint: marked as spam")
    assert GRACE not in sent_app.store.suppressed() and sent_app.store.lift_suppression(GRACE) is None
    [lift] = [r for r in sent_app.store.subscriber_data(GRACE)["bounce_reports"] if r["kind"] == "lifted"]
    assert lift["status"] == "operator" and lift["detail"] == lifted
    sent_app.store.suppress(ADA, "unsubscribed")
    assert sent_app.store.lift_suppression(ADA) is None and sent_app.store.suppressed()[ADA] == "unsubscribed"


def test_soft_bounces_before_a_lift_do_not_count(make_config, subscribers_dir, tmp_path):
    """Two soft bounces suppress (soft_limit 2); after the operator's lift, one more soft bounce does not."""
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}, bounces={"soft_limit": 2}))
    soft = [ms.postfix_dsn(ADA, status="4.2.2", original=ms.original_headers(ADA, mid(app, ADA, DAY - timedelta(n))),
                           report_id=f"<s{n}@x>", date="Thu, 01 Jan 2026 09:00:00 +0000") for n in range(3)]
    read_mailbox(app, maildir=ms.write_maildir(tmp_path / "one", soft[:2]))
    assert app.store.suppressed()[ADA].startswith("bounced: 2 soft bounces")
    with app.store.engine.begin() as conn:  # the reports arrived a while before the lift
        conn.execute(sa.text("UPDATE bounces SET reported_at = '2026-01-01 09:00:00'"))
    assert app.store.lift_suppression(ADA)
    summary = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "two", [ms.postfix_dsn(
        ADA, status="4.2.2", original=ms.original_headers(ADA, mid(app, ADA, DAY - timedelta(2))),
        report_id="<s9@x>")]))
    assert summary.counts["soft"] == 1 and ADA not in app.store.suppressed()
    app.close()


def test_digest_subscribers_lift(tmp_path, monkeypatch, capsys):
    """`digest subscribers lift EMAIL`: a complaint lifted, saying what it was (exit 0); then nothing to lift, in one
    line (exit 2); an unsubscribe is not the operator's to lift (exit 2, saying why)."""
    from digest.cli import main

    site = sample_site(tmp_path)
    store = Store(f"sqlite:///{site / 'digest.db'}")
    store.suppress(GRACE, "complaint: marked as spam (abuse report) on 2026-06-12")
    store.suppress(ADA, "unsubscribed")
    store.close()
    monkeypatch.chdir(site)
    assert main(["subscribers", "lift", "Grace@Example.org"]) == 0
    assert capsys.readouterr().out.startswith("lifted grace@example.org (was complaint: marked as spam")
    assert main(["subscribers", "lift", GRACE]) == 2
    err = capsys.readouterr().err
    assert err == f"digest: error: no bounce or complaint suppression of {GRACE} to lift: it is not suppressed\n"
    assert main(["subscribers", "lift", ADA]) == 2
    assert "its suppression is 'unsubscribed', not a bounce or complaint" in capsys.readouterr().err


forgery = st.fixed_dictionaries({
    "shape": st.sampled_from(["postfix", "rfc3464", "arf", "exim"]),
    "victim": st.sampled_from(PEOPLE),
    "back": st.integers(0, 3),
    "message_id": st.one_of(st.none(), st.just("unkeyed"), st.just("random"),
                            st.text("0123456789abcdef", min_size=24, max_size=24)),
    "tag": st.one_of(st.none(), st.text("0123456789abcdef", min_size=20, max_size=20),
                     st.text("0123456789abcdef", min_size=24, max_size=24)),
    "link": st.one_of(st.none(), st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
                                         min_size=10, max_size=60)),
    "number": st.integers(0, 10**9),
})


def forged_report(f: dict) -> bytes:
    """One report written from what a forger knows: an address, a date, the shapes of our identifiers."""
    day = DAY - timedelta(days=f["back"])
    if f["message_id"] == "unkeyed":
        quoted = unkeyed(f["victim"], day)
    elif f["message_id"] == "random":
        quoted = f"<{f['number']}@example.org>"
    else:
        quoted = f"<digest.{day}.{f['message_id']}@example.org>" if f["message_id"] else ""
    link = f"https://digest.example.org/unsubscribe/{f['link']}" if f["link"] else ""
    headers = ms.original_headers(f["victim"], quoted or "<none@none>", unsubscribe=link, day=day.isoformat())
    to = f"bounces+{day}.{f['tag']}@example.org" if f["tag"] else "digest@example.org"
    report_id = f"<forged-{f['number']}@x>"
    if f["shape"] == "postfix":
        return ms.postfix_dsn(f["victim"], original=headers, to=to, report_id=report_id)
    if f["shape"] == "rfc3464":
        return ms.rfc3464_dsn(f["victim"], headers, report_id=report_id, status="5.1.1", action="failed")
    if f["shape"] == "arf":
        return ms.arf(headers, report_id=report_id, rcpt=f["victim"])
    return ms.exim_bounce(f["victim"], report_id=report_id)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(forgery, min_size=1, max_size=3))
def test_generated_forgeries_suppress_nobody(sent_app, tmp_path_factory, forged):
    """Reports built from every combination of what a forger can know (an address, a date, an unkeyed or invented
    Message-ID, a tag of either shape, an invented link) suppress nobody and are each accounted for."""
    box = ms.write_maildir(tmp_path_factory.mktemp("forged") / "box", [forged_report(f) for f in forged])
    summary = read_mailbox(sent_app, maildir=box)
    assert sum(summary.counts.values()) == len(forged) and summary.ok, summary.line()
    assert summary.suppressed == [] and sent_app.store.suppressed() == {}
