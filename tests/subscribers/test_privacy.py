"""A subscriber's data on request: export everything as JSON; forget it all but a hash that keeps them unmailed."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import pytest
import sqlalchemy as sa
from bs4 import BeautifulSoup

from digest import daily
from digest.app import App
from digest.bounces.intake import read_mailbox
from digest.delivery.message import message_id
from digest.store import forgotten_key
from digest.store.tables import metadata
from digest.subscribers.privacy import export_data, forget
from digest.subscribers.roster import import_path

from .. import mailsamples as ms
from ..conftest import DAY, SEEDS, cli_env, sample_site
from ..web_server import Server

ZOE = "Zoe@Example.org"  # imported, written with capitals: every table must find her whatever the case
ADA = "ada@example.org"


@pytest.fixture
def zoe_app(make_config, subscribers_dir, store_url, tmp_path, monkeypatch):
    """An imported subscriber with something in every table: deliveries, papers, feedback, preferences, bounces."""
    monkeypatch.setenv("DIGEST_SECRET", "privacy-test-secret")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, store={"url": store_url}))
    app.ingest([SEEDS], seen_on=DAY)
    app.profiles.sync()
    csv = tmp_path / "list.csv"
    csv.write_text(f"email,name,interest,keywords\n{ZOE},Zoe,LLM inference,KV cache;speculative decoding\n")
    assert not import_path(app.store, csv).problems
    papers = [p.store_id for p in app.composer.pool(DAY).papers[:3]]
    for n, day in enumerate((DAY - timedelta(days=1), DAY)):
        mid = message_id(ZOE, day, "digest@example.org", app.signer.message_key)
        app.store.enqueue(day, [ZOE], message_id=lambda e, m=mid: m, transport="smtp")
        app.store.mark_sent(ZOE, day, papers[n:n + 2], message_id=mid)
    app.store.add_feedback(ZOE, papers[0], 1)
    app.store.set_preference(ZOE, frequency="weekdays")
    report = ms.postfix_dsn(ZOE.lower(), status="4.2.2", report_id="<soft-zoe@x>",
                            original=ms.original_headers(ZOE, message_id(ZOE, DAY, "digest@example.org",
                                                                         app.signer.message_key)))
    assert read_mailbox(app, maildir=ms.write_maildir(tmp_path / "box", [report])).counts["soft"] == 1
    yield app
    app.close()


def everything(app: App) -> str:
    """Every row of every table, as text."""
    out = []
    with app.store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            out += [repr(tuple(row)) for row in conn.execute(sa.select(table))]
    return "\n".join(out).lower()


def test_export_data_holds_profile_source_feedback_deliveries_and_bounces(zoe_app):
    """export-data gives the stored profile, where it came from, preferences, feedback, the send log, the papers
    received and the bounce reports."""
    data = json.loads(json.dumps(export_data(zoe_app, "zoe@example.org")))
    assert data["email"] == ZOE and data["source"]["kind"] == "import"
    assert data["profile"]["interests"][0]["keywords"] == ["KV cache", "speculative decoding"]
    assert data["preferences"]["frequency"] == "weekdays"
    assert [f["value"] for f in data["feedback"]] == [1] and data["feedback"][0]["title"]
    assert [d["digest_date"] for d in data["deliveries"]] == [str(DAY - timedelta(days=1)), str(DAY)]
    assert {d["status"] for d in data["deliveries"]} == {"sent"} and len(data["received_papers"]) == 3
    assert [(b["kind"], b["status"]) for b in data["bounce_reports"]] == [("soft", "4.2.2")]
    assert data["suppression"] is None and data["forgotten"] is None


@pytest.mark.slow
def test_forget_leaves_the_address_nowhere_but_as_a_hash(zoe_app):
    """After forget, no row of any table holds the address; its hash is suppressed; the send log keeps its counts."""
    assert "zoe@example.org" in everything(zoe_app)
    result = forget(zoe_app, ZOE)
    assert result.profile_file is None and result.counts["subscribers"] == 1 and result.counts["deliveries"] == 2
    assert "zoe@example.org" not in everything(zoe_app)
    assert zoe_app.store.suppressed()[forgotten_key(ZOE)] == "forgotten"
    assert zoe_app.store.suppressed_among([ZOE]) == {"zoe@example.org": "forgotten"}
    assert zoe_app.store.delivery_counts(DAY) == {"sent": 1}
    data = export_data(zoe_app, ZOE)
    assert data["forgotten"] and not data["profile"] and not data["deliveries"] and not data["feedback"]
    assert forget(zoe_app, ZOE).already
    zoe_app.store.suppress(ZOE, "unsubscribed")  # an old unsubscribe link must not store the address again
    assert "zoe@example.org" not in everything(zoe_app)


def test_forget_leaves_no_letters_of_the_address_in_the_search_index(zoe_app):
    """SQLite's console search index (FTS5 trigrams) keeps a deleted row's triples in its segments until they merge:
    after forget they are gone from the index's own pages (PostgreSQL's dead index entries go at VACUUM)."""
    if zoe_app.store.engine.dialect.name != "sqlite":
        pytest.skip("the FTS5 search index is SQLite's")

    def blocks() -> bytes:
        with zoe_app.store.engine.connect() as conn:
            return b"".join(r[0] for r in conn.execute(sa.text("SELECT block FROM subscribers_search_data")) if r[0])

    assert b"zoe" in blocks()  # (the index holds "zoe" for the address and the name: no one else has it)
    forget(zoe_app, ZOE)
    assert b"zoe" not in blocks()
    assert zoe_app.store.console_slice(DAY, search="zoe").keys == ()


@pytest.mark.slow
def test_a_web_subscribers_signup_and_consent_are_exported_then_erased(zoe_app):
    """A reader who signed up on the web page: export-data shows the consent; forget erases the signup rows too."""
    from datetime import UTC, datetime

    from digest.store import SignupRecord
    from digest.store.subscribers import profile_json

    web = "web.reader@example.org"
    ada = zoe_app.profiles.roster().find(ADA)
    now = datetime.now(UTC).replace(tzinfo=None)
    record = SignupRecord(email=web, status="pending", nonce="n1", profile=profile_json(replace(ada, email=web)),
                          requested_at=now, form_version="v1", ip_hash="h-ip", detail="")
    zoe_app.store.put_signup(record, expired_before=now - timedelta(days=2))
    assert zoe_app.store.confirm_signup(web, "n1", "h-confirm").outcome == "confirmed"
    zoe_app.store.put_signup(replace(record, nonce="n2"), expired_before=now - timedelta(days=2))  # a second, open one
    data = export_data(zoe_app, web)
    assert data["source"]["kind"] == "web" and data["signup"]["status"] == "pending"
    assert [c["form_version"] for c in data["consents"]] == ["v1"] and data["consents"][0]["ip_hash"] == "h-ip"
    assert web in everything(zoe_app)
    result = forget(zoe_app, web)
    assert result.counts["signups"] == 1 and result.counts["consents"] == 1
    assert web not in everything(zoe_app)
    assert zoe_app.store.confirm_signup(web, "n2", "h").outcome == "void"  # the open link died with the data


def test_a_forgotten_address_is_never_imported_or_sent_even_past_the_catalogue(zoe_app, tmp_path):
    """An import of the address is refused; a subscriber row put straight into the store is still not sent:
    the send path checks the hash."""
    forget(zoe_app, ZOE)
    csv = tmp_path / "again.csv"
    csv.write_text(f"email,name\n{ZOE.upper()},Zoe\n")
    report = import_path(zoe_app.store, csv)
    assert report.imported == 0 and "erased at its owner's request" in str(report.problems[0])
    ada = zoe_app.profiles.roster().find(ADA)
    zoe_app.store.put_subscribers([replace(ada, email=ZOE, path=None)], "import")  # past the catalogue
    [outcome] = [o for o in daily.send(zoe_app, DAY + timedelta(days=1), only=ZOE).outcomes if o.subscriber == ZOE]
    assert outcome.status == "skipped" and "forgotten" in outcome.reason
    assert not list(zoe_app.config.delivery.outbox.glob("*/*oe@*"))


def run_cli(folder, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=folder, text=True, capture_output=True,
                          timeout=300, env=cli_env())


@pytest.mark.slow
def test_forgetting_a_profile_file_subscriber_says_so_and_the_file_is_refused_not_sent(tmp_path):
    """forget exits 1 naming the profile file to delete; every run then refuses that file and sends Ada nothing."""
    site = sample_site(tmp_path)
    exported = run_cli(site, "subscribers", "export-data", ADA)
    assert exported.returncode == 0 and json.loads(exported.stdout)["source"]["kind"] == "file"
    result = run_cli(site, "subscribers", "forget", ADA)
    assert result.returncode == 1
    assert f"forgot {ADA}" in result.stdout and "subscribers/ada.toml: delete that file" in result.stderr
    listed = run_cli(site, "subscribers", "list")
    assert listed.returncode == 1 and ADA not in listed.stdout
    assert run_cli(site, "ingest", "--date", "2026-06-12").returncode == 0
    sent = run_cli(site, "send", "--date", "2026-06-12")
    assert sent.returncode == 1, sent.stderr  # an invalid profile: the operator must delete the file
    assert "subscribers/ada.toml:1: this address was erased at its owner's request" in sent.stderr
    assert "sent 3, skipped 1" in sent.stdout
    files = sorted(p.name for p in (site / "outbox" / "2026-06-12").glob("*.eml"))
    assert files and f"{ADA}.eml" not in files
    status = run_cli(site, "status", "--date", "2026-06-12")
    assert "forgotten: erased on request, kept only as a hash" in status.stdout
    missing = run_cli(site, "subscribers", "export-data", "nobody@example.org")
    assert missing.returncode == 2 and "nothing is stored about nobody@example.org" in missing.stderr


def test_the_preferences_page_links_to_a_confirmed_erasure(make_config, subscribers_dir, monkeypatch):
    """The preferences page has "Delete my data"; its GET asks and erases nothing, the POST erases, a second POST
    answers the same, and the email's links then show that the data was erased."""
    monkeypatch.setenv("DIGEST_SECRET", "privacy-test-secret")
    (subscribers_dir / "ada.toml").unlink()  # Ada imported, so that nothing is left once erased
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.profiles.sync()
    grace = app.profiles.roster().find("grace@example.org")
    app.store.put_subscribers([replace(grace, email=ADA, path=None)], "import")
    server = Server(app)
    try:
        prefs = server.path(app.links(ADA).preferences)
        link = BeautifulSoup(server.client.get(prefs).text, "html.parser").find("a", string="Delete my data")
        asked = server.client.get(link["href"])
        assert asked.status_code == 200 and "Delete your data?" in asked.text and not app.store.is_forgotten(ADA)
        form = BeautifulSoup(asked.text, "html.parser").find("form")
        done = server.client.post(form["action"])
        assert done.status_code == 200 and "Your data was erased" in done.text and app.store.is_forgotten(ADA)
        assert server.client.post(form["action"]).status_code == 200
        assert app.store.subscribers_by_email([ADA]) == {}
        after = server.client.get(prefs)
        assert after.status_code == 410 and "Your data was erased" in after.text
    finally:
        server.close()
        app.close()
