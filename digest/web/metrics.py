"""`/metrics`: the send log, the queue, bounces, runs, fetches and workers in Prometheus' text format.

Everything is read from the store when Prometheus scrapes (a custom collector, nothing counted in
this process), so the numbers are those of every `digest` process and worker on the store, whichever
`digest serve` answers. Behind the operator password (HTTP basic, as /admin/) or, for a scraper that
should not hold it, a bearer token from the environment variable `web.metrics_token_env` names.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from flask import Blueprint, Flask, Response, current_app, request
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from digest.store import Snapshot, Store
from digest.web.operator import authorise

blueprint = Blueprint("metrics", __name__)

RATE_WINDOW = timedelta(minutes=5)  # digest_send_rate_per_second: digests marked sent within this, per second
QUEUE_STATES = ("queued", "claimed", "pending")  # pending: deferred after a temporary failure
STATES = (*QUEUE_STATES, "sent", "failed", "bounced", "empty")  # every state of the send log, 0 when none
WORKER_COUNTS = ("claimed", "sent", "failed", "deferred", "skipped")


class StoreCollector(Collector):
    """Prometheus collector over the store: one snapshot a scrape, turned into metric families."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        snap = self.store.metrics_snapshot(datetime.now(UTC).replace(tzinfo=None), RATE_WINDOW)
        yield from _digests(snap)
        yield from _bounces(snap)
        yield from _ages(snap)
        yield from _workers(snap)


def _digests(snap: Snapshot) -> Iterator[Metric]:
    digests = GaugeMetricFamily("digest_digests", "Digests in the send log of the latest two digest dates, by date "
                                "and state (pending: deferred after a temporary failure; bounced: sent, then "
                                "reported as a hard bounce).", labels=["date", "state"])
    for day in sorted({day for day, _ in snap.digests}):
        for state in sorted({*STATES, *(s for d, s in snap.digests if d == day)}):
            digests.add_metric([day.isoformat(), state], snap.digests.get((day, state), 0))
    yield digests
    queue = GaugeMetricFamily("digest_queue_depth", "Digests of those dates waiting to be sent, by state.",
                              labels=["state"])
    for state in QUEUE_STATES:
        queue.add_metric([state], sum(n for (_, s), n in snap.digests.items() if s == state))
    yield queue
    rate = GaugeMetricFamily("digest_send_rate_per_second",
                             f"Digests marked sent in the last {int(RATE_WINDOW.total_seconds())} s, per second.")
    rate.add_metric([], snap.sent_recently / RATE_WINDOW.total_seconds())
    yield rate


def _bounces(snap: Snapshot) -> Iterator[Metric]:
    events = CounterMetricFamily("digest_bounces", "Bounces and complaints recorded about our digests, by kind "
                                 "(hard, soft, complaint) and status (DSN code or feedback type).",
                                 labels=["kind", "status"])
    for (kind, status), n in sorted(snap.reports.items()):
        events.add_metric([kind, status], n)
    yield events
    reports = CounterMetricFamily("digest_bounce_reports", "Bounce reports read (mailbox messages and provider "
                                  "webhook events), by outcome.", labels=["outcome"])
    for outcome, n in sorted(snap.report_outcomes.items()):
        reports.add_metric([outcome], n)
    yield reports
    suppressed = GaugeMetricFamily("digest_suppressed_addresses", "Addresses that get no digest, by reason "
                                   "(unsubscribed, bounced, complaint, erased).", labels=["reason"])
    for reason, n in sorted(snap.suppressions.items()):
        suppressed.add_metric([reason], n)
    yield suppressed


def _ages(snap: Snapshot) -> Iterator[Metric]:
    runs = GaugeMetricFamily("digest_last_success_age_seconds", "Seconds since the last successful run of each "
                             "command (run, send, fetch, ...).", labels=["command"])
    for command, when in sorted(snap.last_runs.items()):
        runs.add_metric([command], _age(snap, when))
    yield runs
    fetches = GaugeMetricFamily("digest_last_fetch_age_seconds", "Seconds since each source was last fetched "
                                "successfully.", labels=["source"])
    for source, when in sorted(snap.last_fetches.items()):
        fetches.add_metric([source], _age(snap, when))
    yield fetches


def _workers(snap: Snapshot) -> Iterator[Metric]:
    labels = ["worker", "command", "date"]
    families = {name: GaugeMetricFamily(f"digest_worker_{name}", f"Digests this send run or worker has {name} "
                                        "so far (workers heard from within a day).", labels=labels)
                for name in WORKER_COUNTS}
    running = GaugeMetricFamily("digest_worker_running", "1 while the worker has not finished.", labels=labels)
    heartbeat = GaugeMetricFamily("digest_worker_heartbeat_age_seconds", "Seconds since the worker was last "
                                  "heard from.", labels=labels)
    for row in snap.workers:
        values = [str(row["owner"]), str(row["command"]), str(row["digest_date"] or "")]
        for name, family in families.items():
            family.add_metric(values, int(row[name] or 0))  # type: ignore[call-overload]
        running.add_metric(values, 0 if row["finished_at"] else 1)
        heartbeat.add_metric(values, _age(snap, row["heartbeat_at"]))  # type: ignore[arg-type]
    yield from families.values()
    yield running
    yield heartbeat


def _age(snap: Snapshot, when: datetime) -> float:
    return max(0.0, (snap.now - when).total_seconds())


def registry(store: Store) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one) holding only the store's collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(store))
    return reg


@blueprint.before_request
def allowed() -> Response | None:
    """The bearer token when one is configured, else (or also) the operator pages' own check."""
    token = current_app.config.get("METRICS_TOKEN") or ""
    auth = request.headers.get("Authorization", "")
    if token and auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip().encode(), token.encode()):
        return None
    return authorise()


@blueprint.get("/metrics")
def metrics() -> Response:
    """The metrics, read from the store now."""
    return Response(generate_latest(current_app.config["METRICS_REGISTRY"]), content_type=CONTENT_TYPE_LATEST)


def install(web: Flask, store: Store, token: str) -> None:
    """Serve /metrics from `store`; `token` ("" for none) is the bearer token accepted besides the password."""
    web.config["METRICS_REGISTRY"] = registry(store)
    web.config["METRICS_TOKEN"] = token
    web.register_blueprint(blueprint)
