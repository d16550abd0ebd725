"""What the operator sees: every failing source names its URL, `digest status` says what happens next to each
digest and why, huge ids in links are a clean 404."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, time, timedelta

from digest.app import App
from digest.models import Subscriber
from digest.sources.collect import collect
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.live import SourceSpec
from digest.status import delivery_lines
from digest.store import Store
from digest.store.records import DeliveryRecord

from ..smtpd import free_port

DAY = date(2026, 6, 12)
ADA = Subscriber(email="ada@example.org", timezone="Europe/London", send_at=time(7, 30))


def record(status: str, detail: str = "") -> DeliveryRecord:
    return DeliveryRecord("ada@example.org", DAY, "<m@x>", status, 1, "smtp", detail,
                          updated_at=datetime(2026, 6, 12, 6, 31))


def line_for(now: datetime | None = None, records=(), suppressed=None, paused=None, sub=ADA):
    [line] = delivery_lines([sub], DAY, list(records), suppressed or {}, now=now, grace=timedelta(hours=2),
                            paused=paused)
    return line.state, line.detail


def test_status_says_when_a_waiting_digest_is_due_and_when_its_slot_was_missed():
    """Before the slot: due at; after it (same day): due, the next run sends it; days later: missed, and how."""
    assert line_for(datetime(2026, 6, 12, 5, 0, tzinfo=UTC)) == ("waiting", "due at 07:30 Europe/London")
    assert line_for(datetime(2026, 6, 12, 12, 0, tzinfo=UTC)) == (
        "due", "since 07:30 Europe/London: the next run sends it")
    state, detail = line_for(datetime(2026, 6, 20, 12, 0, tzinfo=UTC))
    assert state == "missed" and "`digest send --date 2026-06-12` sends it" in detail


def test_status_says_paused_until_and_suppressed_for_good():
    """A paused subscriber is not "waiting": the line says until when; a suppressed one is never sent."""
    now = datetime(2026, 6, 12, 12, 0, tzinfo=UTC)
    assert line_for(now, paused={"Ada@example.org": date(2026, 6, 19)}) == ("paused", "until 2026-06-19")
    assert line_for(now, paused={"ada@example.org": date(2026, 6, 1)})[0] == "due"  # the pause is over
    suppressed = line_for(now, suppressed={"ada@example.org": "unsubscribed"})
    assert suppressed == ("suppressed", "unsubscribed by link: never sent")


def test_status_says_what_happens_to_a_digest_in_the_send_log():
    """Sent at when; deferred and not-attempted digests say the next run sends them; failed says it waits on a fix."""
    now = datetime(2026, 6, 12, 12, 0, tzinfo=UTC)
    assert line_for(now, [record("sent")]) == ("sent", "at 2026-06-12 06:31 UTC")
    state, detail = line_for(now, [record("pending", "421 try later")])
    assert state == "pending" and detail.startswith("421 try later; deferred after a temporary failure: the next")
    assert line_for(now, [record("queued")])[1] == "not attempted yet: the next send or run of this date sends it"
    assert "once the cause is fixed" in line_for(now, [record("failed", "554 5.7.1 policy")])[1]


def test_a_source_that_cannot_be_reached_names_its_url(tmp_path):
    """Offline: the failure line names the URL (and the default sources have a name, not "hf_daily:")."""
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    url = f"http://127.0.0.1:{free_port()}/api/daily_papers?date={{date}}"
    fetcher = Fetcher(FetchPolicy(timeout=2, retries=0, backoff=0, max_wait=0, user_agent="test"))
    [outcome] = collect(store, [SourceSpec("hf_daily", url=url)], fetcher, DAY).outcomes
    fetcher.close()
    store.close()
    line = outcome.line()
    assert line.startswith(f"hf_daily:{url}: failed: {url.replace('{date}', '2026-06-12')}: ")
    assert SourceSpec("hf_daily").label == "hf_daily" and SourceSpec("arxiv", categories=("cs.LG",)).label == \
        "arxiv:cs.LG"


def test_a_feedback_link_with_a_huge_paper_id_is_a_clean_404(make_config, monkeypatch):
    """/feedback/<valid token>/999999999999999999999999/more: 404, no OverflowError (was a 500 and a traceback);
    and `#` ids beyond 64 bits name no paper."""
    from digest.web import create_app

    monkeypatch.setenv("DIGEST_SECRET", "s")
    app = App(make_config())
    client = create_app(app, operator_password="pw").test_client()
    link = app.links("ada@example.org").feedback.removeprefix(app.newsletter.base_url)
    for method in (client.get, client.post):
        assert method(f"{link}/999999999999999999999999/more").status_code == 404
    assert app.store.find_papers(["#999999999999999999999999"]) == {}
    login = {"Authorization": "Basic " + base64.b64encode(b"operator:pw").decode()}
    assert client.get("/admin/?date=0001-01-01", headers=login).status_code == 400
    app.close()
