"""`digest status`: what ran, what each source gave, where each digest of a date stands, what comes next."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from digest.delivery.owners import Owner
from digest.models import Subscriber, is_delivery_day
from digest.schedule import Slot, next_sends
from digest.store import DeliveryRecord, FetchRecord, RunRecord, Store

STALE_WORKER_SECONDS = 120  # a worker reports after every batch; silent for longer, it probably died
# A run not heard from for this long is taken for dead (its senders renew the lease once a minute; fetching and
# ranking before the first batch can take minutes). Only for a run of another machine: one of this machine is dead
# the moment its process is gone, and under way while it lives.
RUN_LEASE = timedelta(hours=1)
LIST_LIMIT = 200  # subscribers beyond which status counts the digests and lists only the ones needing a look
ATTENTION = ("failed", "pending", "bounced", "claimed", "queued")  # states worth a line in a large list


@dataclass(frozen=True)
class DeliveryLine:
    """Where one subscriber's digest of the date stands."""

    email: str
    state: str  # a send-log state (sent, queued, pending, failed, ...), or suppressed, paused, not due, waiting,
    # due (its slot has passed: the next run sends it) or missed (its slot passed outside the grace)
    detail: str = ""


# What happens next to a digest in each send-log state (said after the state's own detail).
NEXT = {
    "queued": "not attempted yet: the next send or run of this date sends it",
    "pending": "deferred after a temporary failure: the next send or run of this date retries it",
    "failed": "refused: the next send of this date tries again once the cause is fixed",
    "claimed": "being sent now",
    "empty": "nothing above the relevance floor: skipped",
}


def delivery_lines(subscribers: Sequence[Subscriber], day: date, records: Sequence[DeliveryRecord],
                   suppressed: dict[str, str], *, now: datetime | None = None, grace: timedelta = timedelta(0),
                   paused: Mapping[str, date] | None = None) -> list[DeliveryLine]:
    """One line per valid subscriber, plus any send-log row of an address no longer in the profiles; each says
    what will happen next and why (sent at, deferred, paused until, not due until, due at, missed)."""
    by_email = {r.subscriber.lower(): r for r in records}
    paused = {k.lower(): v for k, v in (paused or {}).items()}
    lines = []
    for sub in subscribers:
        record = by_email.pop(sub.email.lower(), None)
        if record is not None:
            lines.append(DeliveryLine(sub.email, record.status, _detail(record)))
        elif sub.email.lower() in suppressed:
            lines.append(DeliveryLine(sub.email, "suppressed", f"{why_suppressed(suppressed[sub.email.lower()])}: "
                                                               "never sent"))
        elif paused.get(sub.email.lower()) and paused[sub.email.lower()] >= day:
            lines.append(DeliveryLine(sub.email, "paused", f"until {paused[sub.email.lower()]}"))
        elif not is_delivery_day(sub.frequency, day):
            lines.append(DeliveryLine(sub.email, "not due", f"frequency {sub.frequency}"))
        else:
            lines.append(_waiting(sub, day, now, grace))
    lines += [DeliveryLine(r.subscriber, r.status, _detail(r) or "profile removed") for r in by_email.values()]
    return lines


def _detail(record: DeliveryRecord) -> str:
    then = NEXT.get(record.status, "")
    if record.status == "sent" and record.updated_at:
        then = f"at {record.updated_at:%Y-%m-%d %H:%M} UTC"
    return "; ".join(part for part in (record.detail, then) if part)


def _waiting(sub: Subscriber, day: date, now: datetime | None, grace: timedelta) -> DeliveryLine:
    """A digest not in the send log yet: due later, due now, or its slot passed without a send."""
    zone = ZoneInfo(sub.timezone)
    at = datetime.combine(day, sub.send_at, zone)
    where = f"{sub.send_at:%H:%M} {sub.timezone}"
    if now is None or now < at:
        return DeliveryLine(sub.email, "waiting", f"due at {where}")
    if at.date() == now.astimezone(zone).date() or now - at <= grace:
        return DeliveryLine(sub.email, "due", f"since {where}: the next run sends it")
    return DeliveryLine(sub.email, "missed", f"its {where} slot passed with no send; `digest send --date {day}` "
                                             "sends it")


def large_list(total: int, day_counts: Mapping[str, int], records: Sequence[DeliveryRecord],
               suppressed: int) -> tuple[dict[str, int], list[DeliveryLine]]:
    """The counts and the lines of `digest status` for a list of `total` subscribers (too many to list)."""
    counts = dict(day_counts)
    counts["suppressed"] = suppressed
    counts["waiting or not due"] = max(0, total - sum(day_counts.values()) - suppressed)
    return counts, [DeliveryLine(r.subscriber, r.status, r.detail) for r in records]


SUPPRESSED_LIMIT = 50  # the newest suppressions listed by `digest status`


def why_suppressed(reason: str) -> str:
    """A suppression's reason as an operator reads it (bounces and complaints say their status and date already)."""
    return {"unsubscribed": "unsubscribed by link", "forgotten": "forgotten: erased on request, kept only as a hash"
            }.get(reason, reason)


def shown_address(key: str) -> str:
    """A suppressed address as listed: a forgotten one's hash cut short (it identifies nobody anyway)."""
    return key[:19] + "…" if key.startswith("sha256:") else key


def suppression_lines(records: Sequence[tuple[str, str, datetime]], total: int,
                      soft: Mapping[str, int], soft_limit: int, soft_days: int) -> list[str]:
    """Why each (newest) suppressed address is suppressed, and the addresses whose soft bounces are being counted."""
    out = [f"Suppressed addresses ({total}{f', the newest {len(records)}' if total > len(records) else ''}):"]
    out += [f"  {shown_address(email)}  since {since:%Y-%m-%d}: "
            f"{why_suppressed(reason)}" for email, reason, since in records] or ["  (none)"]
    held = {email for email, _, _ in records}
    counting = sorted((e, n) for e, n in soft.items() if e not in held and not e.startswith("sha256:"))
    if counting:
        out += [f"Soft bounces being counted (suppressed at {soft_limit} within {soft_days} days):"]
        out += [f"  {email}  {n} of {soft_limit}" for email, n in counting[:SUPPRESSED_LIMIT]]
    return out


def suppression_section(store: Store, soft_limit: int, soft_days: int, now: datetime) -> list[str]:
    """The suppressed addresses and soft-bounce counts of `digest status`, read from the store."""
    since = now.replace(tzinfo=None) - timedelta(days=soft_days)
    return suppression_lines(store.suppression_records(SUPPRESSED_LIMIT), store.count_suppressed(),
                             store.soft_bounce_counts(since), soft_limit, soft_days)


def render_status(*, now: datetime, day: date, runs: Sequence[RunRecord], fetches: Sequence[FetchRecord],
                  lines: Sequence[DeliveryLine], slots: Mapping[Slot, int],
                  workers: Sequence[Mapping[str, Any]] = (), counts: Mapping[str, int] | None = None,
                  suppressions: Sequence[str] = (), sources: Sequence[str] | None = None,
                  ingest_paths: Sequence[str | Path] = ()) -> str:
    """The whole report as text, section by section.

    `counts` (state → number) is given for a large list, when `lines` holds only the digests that
    need a look rather than one line per subscriber. `sources` names the configured `[[sources]]` (None: not
    said), `ingest_paths` what a run reads without any.
    """
    out = ["Recent runs:"]
    out += [run_line(r) for r in runs] or ["  (none yet)"]
    if workers:
        out += ["", "Send workers (last 24 hours):"]
        out += [worker_line(w, now) for w in workers]
    out += ["", "Sources (last fetch):"]
    out += source_lines(fetches, sources, ingest_paths)
    shown = counts if counts is not None else Counter(line.state for line in lines)
    summary = ", ".join(f"{n} {state}" for state, n in sorted(shown.items()) if n) or "no subscribers"
    out += ["", f"Deliveries for {day}: {summary}"]
    if counts is not None:
        out.append(f"  (too many subscribers to list; the first {len(lines)} digests that need a look:)"
                   if lines else "  (too many subscribers to list; none needs a look)")
    out += [f"  {line.state:<10} {line.email}" + (f"  ({line.detail})" if line.detail else "") for line in lines]
    if suppressions:
        out += ["", *suppressions]
    out += ["", "Next scheduled sends:"]
    upcoming = next_sends(slots, now)
    out += [f"  {when:%Y-%m-%d %H:%M %Z}  {slot.frequency:<10} {n} subscriber{'s' * (n != 1)}"
            for when, slot, n in upcoming] or ["  (no subscribers)"]
    return "\n".join(out)


def recent_runs(store: Store, now: datetime, limit: int = 10) -> list[RunRecord]:
    """The run log's newest runs; one logged as running that is no longer under way is shown as "died": its
    process is gone (a process of this machine, killed or crashed) or its lease expired (another machine's, not
    heard from for RUN_LEASE)."""
    runs = store.recent_runs(limit)
    leases = store.run_leases(r.id for r in runs if r.status == "running")
    return [died(run, leases.get(run.id), now) if run.status == "running" else run for run in runs]


def died(run: RunRecord, lease: tuple[str, datetime] | None, now: datetime) -> RunRecord:
    """`run` (logged as running) as it stands: running, or "died" and why. `lease`: its process and when it was last
    heard from (None for a run logged before runs had leases: its start is the last word from it)."""
    owner, heard = lease if lease else ("", run.started_at)
    process = Owner.parse(owner)
    if process is not None and process.gone():
        return replace(run, status="died", summary=f"(process gone: {process} no longer runs)")
    if process is not None and process.here:  # alive on this machine: under way, however long it takes
        return run
    silent = now.replace(tzinfo=None) - heard
    if silent > RUN_LEASE:
        return replace(run, status="died", summary=f"(lease expired: {'' if process is None else f'{process}, '}"
                                                   f"not heard from since {heard:%Y-%m-%d %H:%M} UTC)")
    return run


def run_line(run: RunRecord) -> str:
    """One run as `digest status` lists it (the operator console shows the same line)."""
    end = f"{run.finished_at:%H:%M:%S}" if run.finished_at else "…"
    started = f"{run.started_at:%Y-%m-%d %H:%M:%S}"
    return f"  #{run.id:<4} {run.command:<9} {started} → {end} UTC  {run.status:<8} {run.summary}"


def worker_line(row: Mapping[str, Any], now: datetime) -> str:
    """One send run or worker process: where, what date, how far, and whether it is still heard from."""
    heard = (now.replace(tzinfo=None) - row["heartbeat_at"]).total_seconds()
    process = Owner.parse(row["owner"])
    if row["finished_at"]:
        state = "finished"
    elif process is not None and process.gone():  # killed or crashed, on this machine: its claims are free
        state = "died (process gone)"
    else:
        state = "running" if heard < STALE_WORKER_SECONDS else f"silent for {heard:.0f} s (stopped?)"
    return (f"  {row['command']:<9} {_owner(row['owner']):<28} {row['digest_date']}  claimed {row['claimed']}, "
            f"sent {row['sent']}, failed {row['failed']}, deferred {row['deferred']}, skipped {row['skipped']}"
            f"  {state}")


def _owner(text: str) -> str:
    owner = Owner.parse(text)
    return str(owner) if owner else text


def source_lines(fetches: Sequence[FetchRecord], sources: Sequence[str] | None,
                 ingest_paths: Sequence[str | Path] = ()) -> list[str]:
    """Where papers come from: each configured source's last fetch (or that it has none yet), or, with no
    `[[sources]]`, the files every run reads again (the sample, as shipped); then the fetches of sources no
    longer configured."""
    if sources is None:
        return [_fetch(f) for f in fetches] or ["  (none fetched yet)"]
    last = {f.source: f for f in fetches}
    out = [_fetch(last[name]) if name in last else f"  {name:<24} not fetched yet" for name in sources]
    if not sources:
        paths = ", ".join(map(str, ingest_paths)) or "none"
        out.append(f"  none configured: every run reads [ingest] paths ({paths}) again, as shipped the sample "
                   "pages; add [[sources]] for new papers (docs/configuration.md, \"Sources\")")
    return out + [_fetch(f) for f in fetches if f.source not in sources]


def _fetch(record: FetchRecord) -> str:
    tail = record.detail if record.result == "failed" else f"{record.papers} papers, {record.errors} errors"
    since = f", last good {record.last_ok_at:%Y-%m-%d %H:%M}" if record.result == "failed" and record.last_ok_at \
        else ""
    return f"  {record.source:<24} {record.fetched_at:%Y-%m-%d %H:%M} UTC  {record.result:<12} {tail}{since}"
