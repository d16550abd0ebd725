"""The `digest` command: parses arguments, prints, and turns errors into messages and exit codes."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from digest.config import Config, load_config
from digest.errors import ConfigError, DigestError, StoreError, UsageError
from digest.logs import masked, setup_logging
from digest.numbers import whole

if TYPE_CHECKING:  # the commands import what they use when they run, so `digest --help` loads none of it
    from digest.app import App
    from digest.delivery.sender import SendReport
    from digest.select import Ranked

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _date(text: str) -> date:
    from digest.models import FIRST_DAY, LAST_DAY

    if text == "today":
        return date.today()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2026-06-12 (or 'today')") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date from {FIRST_DAY} to {LAST_DAY}")
    return day


def _port(text: str) -> int:
    port = whole(text, 0, 65535)
    if port is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number from 0 to 65535 (0: any free port)")
    return port


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool = False) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (`digest -v send` = `digest send -v`).

    A command's copy (`suppress`) leaves an option it was not given out of the result, so one given before the
    command is not reset by the command's default.
    """
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--config", type=Path, default=default(None),
                        help="settings file (default: $DIGEST_CONFIG or ./digest.toml)")
    parser.add_argument("--debug", action="store_true", default=default(False), help="show tracebacks and debug logs")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False),
                        help="log each skipped digest and why")
    parser.add_argument("--log-format", choices=("text", "json"), default=default("text"),
                        help="logs on stderr as readable text (default) or JSON lines")
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = _global_options(argparse.ArgumentParser(prog="digest",
                                                     description="Personalised research-paper digests by email."))
    shared = _global_options(argparse.ArgumentParser(add_help=False), suppress=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_with_parents(shared))

    ingest = commands.add_parser("ingest", help="read papers from files into the store")
    ingest.add_argument("paths", nargs="*", type=Path, help="files or folders (default: [ingest] paths)")
    ingest.add_argument("--date", type=_date, default=None, help="the day these papers were seen (default: today)")

    subs = commands.add_parser("subscribers", help="check, list, import, export, remove or forget subscribers; "
                                                     "lift a suppression")
    actions = subs.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("check", help="validate every profile file; print each problem as file:line: message")
    actions.add_parser("list", help="one line per subscriber: email, name, schedule, topics")
    imports = actions.add_parser("import", help="add a CSV list or a folder of profiles to the store")
    imports.add_argument("path", type=Path, metavar="FILE.csv|DIR")
    exports = actions.add_parser("export", help="write every subscriber as CSV (the shape import reads)")
    exports.add_argument("--out", type=Path, metavar="FILE.csv", help="file to write (default: standard output)")
    remove = actions.add_parser("remove", help="remove an imported (or web) subscriber from the store")
    remove.add_argument("email")
    export_data = actions.add_parser("export-data", help="everything stored about one subscriber, as JSON")
    export_data.add_argument("email")
    forget = actions.add_parser("forget", help="erase a subscriber's data; keep the address only as a hash on the "
                                               "suppression list, so it is never mailed again")
    forget.add_argument("email")
    lift = actions.add_parser("lift", help="lift a bounce or complaint suppression once you have checked the "
                                           "address (recorded with what it lifted)")
    lift.add_argument("email")
    actions.add_parser("lookup", help="look up the arXiv ids and DOIs of every library (profile files, imports, the "
                                      "web) that the store lacks, and say what each found")

    preview = commands.add_parser("preview", help="write each digest as .html, .txt and .eml files")
    preview.add_argument("--subscriber", metavar="EMAIL")
    preview.add_argument("--date", type=_date, default=None, help="digest date (default: today)")
    preview.add_argument("--out", type=Path, default=Path("preview"), help="folder (default: ./preview)")

    send = commands.add_parser("send", help="deliver the digests of a date")
    send.add_argument("--date", type=_date, default=None, help="digest date (default: today)")
    send.add_argument("--dry-run", action="store_true", help="compose everything, send nothing")
    send.add_argument("--subscriber", metavar="EMAIL", help="only this subscriber")
    send.add_argument("--workers", type=_positive, default=None,
                      help="deliver with N processes (default: delivery.workers)")
    send.add_argument("--to", metavar="ADDRESS",
                      help="send the --subscriber's digest to ADDRESS as a test (the send log is not touched)")
    _allow_placeholder(send)

    run = commands.add_parser("run", help="fetch the sources, then send every digest due now (for cron)")
    run.add_argument("--date", type=_date, default=None,
                     help="send every digest of this date instead of those due now")
    run.add_argument("--dry-run", action="store_true", help="fetch, compose, send nothing")
    run.add_argument("--workers", type=_positive, default=None,
                     help="deliver with N processes (default: delivery.workers)")
    _allow_placeholder(run)

    worker = commands.add_parser("worker", help="deliver digests other runs have queued (another machine's share)")
    worker.add_argument("--date", type=_date, default=None, help="only this digest date (default: the last two days)")
    worker.add_argument("--follow", action="store_true", help="keep looking for queued digests until stopped")
    worker.add_argument("--poll", type=_positive, default=10, help="seconds between looks with --follow")
    worker.add_argument("--workers", type=_positive, default=None, help="processes (default: delivery.workers)")
    _allow_placeholder(worker)

    fetch = commands.add_parser("fetch", help="fetch the configured sources into the store")
    fetch.add_argument("--date", type=_date, default=None, help="the day to fetch (default: today)")

    _allow_placeholder(commands.add_parser("schedule", help="run as a daemon: fetch on fetch_cron, send at each "
                                                            "subscriber's time"))

    serve = commands.add_parser("serve", help="the web endpoints (unsubscribe, preferences, feedback) and "
                                              "the operator's preview pages")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8025, help="port (default: 8025; 0: any free port)")
    serve.add_argument("--access-log", metavar="PATH", default=None,
                       help="write an access log (common log format, link tokens redacted) to PATH, made 0600; "
                            "'-': stderr (default: web.access_log, else none)")
    _allow_placeholder(serve)

    check = commands.add_parser("check", help="what is not ready for real readers, each with its setting and fix; "
                                              "the DNS records to publish")
    check.add_argument("--host", default="127.0.0.1", help="the --host `digest serve` runs with (default: 127.0.0.1)")
    check.add_argument("--port", type=_port, default=8025, help="the --port `digest serve` runs with (default: 8025)")

    db = commands.add_parser("db", help="the database schema: show its revision, or upgrade it")
    db.add_argument("action", choices=("upgrade", "current"),
                    help="upgrade: apply the migrations this version needs; current: print the revision")

    bounces = commands.add_parser("bounces", help="read bounces and complaints from a mailbox; suppress addresses")
    box = bounces.add_mutually_exclusive_group(required=True)
    box.add_argument("--maildir", type=Path, metavar="PATH", help="a Maildir folder")
    box.add_argument("--mbox", type=Path, metavar="FILE", help="an mbox file")
    box.add_argument("--imap", metavar="URL", help="imaps://USER@HOST[:PORT]/MAILBOX (password: "
                                                   "$DIGEST_IMAP_PASSWORD, bounces.imap_password_env)")

    status = commands.add_parser("status", help="recent runs, sources, deliveries of a date, next sends")
    status.add_argument("--date", type=_date, default=None, help="deliveries of this date (default: today, UTC)")

    rank = commands.add_parser("rank", help="print a subscriber's ranked candidates, score parts and reasons")
    who = rank.add_mutually_exclusive_group(required=True)
    who.add_argument("--subscriber", metavar="EMAIL")
    who.add_argument("--profile", type=Path, metavar="FILE.toml", help="a profile file instead of the roster")
    rank.add_argument("--papers", type=Path, metavar="FILE", help="rank exactly these papers (any ingest format)")
    rank.add_argument("--date", type=_date, default=None, help="digest date (default: today)")
    rank.add_argument("--limit", type=_positive, default=None, help="the top N, whatever the floor and max_papers")
    rank.add_argument("--json", action="store_true", help="print a JSON array, best first")

    feedback = commands.add_parser("feedback", help="record that a subscriber wants more or less like a paper")
    feedback.add_argument("--subscriber", metavar="EMAIL", required=True)
    feedback.add_argument("--paper", metavar="ID", required=True, help="arXiv id, #store-id or exact title")
    vote = feedback.add_mutually_exclusive_group(required=True)
    vote.add_argument("--more", action="store_true")
    vote.add_argument("--less", action="store_true")
    return parser


def _allow_placeholder(command: argparse.ArgumentParser) -> None:
    command.add_argument("--allow-placeholder", action="store_true",
                         help="send over SMTP even under the sample's placeholder From, base_url or postal address "
                              "(a lab; or $DIGEST_ALLOW_PLACEHOLDER=1)")


def _with_parents(shared: argparse.ArgumentParser) -> type[argparse.ArgumentParser]:
    """A parser class whose every instance (each command, each `subscribers` action) takes the global options."""
    class Command(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parents", [shared])
            super().__init__(*args, **kwargs)

    return Command


def _app(config: Config, **options: Any) -> App:
    from digest.app import App

    return App(config, **options)


def _positive(text: str) -> int:
    number = whole(text, 1)
    if number is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return number


def _print_ingest(app: App, paths: Sequence[Path], day: date) -> int:
    report = app.ingest(paths, seen_on=day)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    print(report.summary())
    return EXIT_FAILED if report.errors or not report.files else EXIT_OK


def cmd_ingest(config: Config, args: argparse.Namespace) -> int:
    app = _app(config)
    try:
        return _print_ingest(app, args.paths or config.ingest.paths, args.date or date.today())
    finally:
        app.close()


def cmd_subscribers(config: Config, args: argparse.Namespace) -> int:
    if args.action == "check":  # the files alone: usable where there is no database (a profiles repository's CI)
        from digest.subscribers.profiles import load_subscribers

        roster = load_subscribers(Path(config.subscribers.dir))
        for problem in roster.problems:
            print(problem)
        print(f"{len(roster.subscribers)} valid, {len(roster.invalid_files)} invalid profiles")
        return EXIT_FAILED if roster.problems else EXIT_OK
    app = _app(config)
    try:
        return SUBSCRIBER_ACTIONS[args.action](app, args)
    finally:
        app.close()


def _subscribers_list(app: App, args: argparse.Namespace) -> int:
    problems = app.profiles.sync().problems
    for sub in app.store.iter_subscribers():
        topics = ", ".join(i.name for i in sub.interests) or "(trending)"
        print(f"{sub.email}\t{sub.name}\t{sub.frequency} at {sub.send_at:%H:%M} {sub.timezone}\t{topics}")
    return EXIT_FAILED if problems else EXIT_OK


def _subscribers_import(app: App, args: argparse.Namespace) -> int:
    from digest.subscribers.roster import import_path

    app.profiles.sync()  # an address a profile file defines stays the file's
    report = import_path(app.store, args.path, on_stored=app.analysis.interests)
    for problem in report.problems:
        print(f"error: {problem}", file=sys.stderr)
    print(f"imported {report.imported} subscribers from {args.path}, {len(report.problems)} problems")
    return EXIT_FAILED if report.problems else EXIT_OK


def _subscribers_export(app: App, args: argparse.Namespace) -> int:
    from digest.filemodes import open_private
    from digest.subscribers.roster import export_csv

    app.profiles.sync()
    if args.out is None:
        export_csv(app.store, sys.stdout)
        return EXIT_OK
    try:  # readers' addresses and interests: the file is its owner's alone (0600), whatever the umask
        with os.fdopen(open_private(args.out, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8", newline="") as out:
            count = export_csv(app.store, out, args.out.parent)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    print(f"exported {count} subscribers to {args.out}", file=sys.stderr)
    return EXIT_OK


def _subscribers_remove(app: App, args: argparse.Namespace) -> int:
    if not (app.store.remove_subscriber(args.email, "import") or app.store.remove_subscriber(args.email, "web")):
        owner = app.store.owners([args.email.lower()]).get(args.email.lower())
        where = f"; it is defined by the profile file {owner[1]}: delete that file" if owner else ""
        raise UsageError(f"no imported subscriber {args.email!r}{where}")
    print(f"removed {args.email}")
    return EXIT_OK


def _subscribers_export_data(app: App, args: argparse.Namespace) -> int:
    from digest.subscribers.privacy import export_data

    print(json.dumps(export_data(app, args.email), ensure_ascii=False, indent=1))
    return EXIT_OK


def _subscribers_forget(app: App, args: argparse.Namespace) -> int:
    from digest.subscribers.privacy import forget

    result = forget(app, args.email)
    print(result.summary())
    if result.profile_file:
        print(f"digest: error: {args.email} is defined by the profile file {result.profile_file}: delete that file "
              "(and its history); until then it is refused as a forgotten address and never sent", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _subscribers_lift(app: App, args: argparse.Namespace) -> int:
    lifted = app.store.lift_suppression(args.email)
    if lifted is None:
        reason = app.store.suppressed_among([args.email]).get(args.email.lower())
        why = (f"its suppression is {reason!r}, not a bounce or complaint (an unsubscribe is the reader's to undo, "
               "on the preferences page)" if reason else "it is not suppressed")
        raise UsageError(f"no bounce or complaint suppression of {args.email} to lift: {why}")
    print(f"lifted {args.email.lower()} (was {lifted}); the lift is recorded with its data")
    return EXIT_OK


def _subscribers_lookup(app: App, args: argparse.Namespace) -> int:
    from digest.daily import look_up_libraries

    app.profiles.sync()
    if not app.config.libraries.lookup:
        raise UsageError("libraries.lookup is false: this install does not look ids up")
    found = look_up_libraries(app)
    for where, looked in found:
        print(f"{where}: {looked.summary()}")
        for problem in looked.problems:
            print(f"  {problem}", file=sys.stderr)
    if not found:
        print("no library names an id the store lacks")
    return EXIT_FAILED if any(looked.not_looked for _, looked in found) else EXIT_OK


SUBSCRIBER_ACTIONS: dict[str, Callable[[App, argparse.Namespace], int]] = {
    "list": _subscribers_list, "import": _subscribers_import, "export": _subscribers_export,
    "remove": _subscribers_remove, "export-data": _subscribers_export_data, "forget": _subscribers_forget,
    "lift": _subscribers_lift, "lookup": _subscribers_lookup,
}


def cmd_preview(config: Config, args: argparse.Namespace) -> int:
    from digest.compose import preview
    from digest.filemodes import close_to_others, make_folder

    day = args.date or date.today()
    folder = args.out / day.isoformat()  # where `preview` writes: readers' digests, their owner's alone (0700)
    app = _app(config)
    try:
        synced = app.profiles.sync()
        problems = synced.problems
        chosen = app.profiles.chosen(app.profiles.roster(synced), args.subscriber)
        try:
            close_to_others(folder, "the preview folder")
            make_folder(folder)
        except OSError as exc:
            raise UsageError(f"cannot write {folder}: {exc.strerror or exc}") from exc
        results = preview(app.composer, chosen, day, args.out)
    finally:
        app.close()
    for composed, files in results:
        note = "" if composed.digest.count else "  (empty: nothing new above the relevance floor)"
        print(f"{composed.digest.subscriber.email}: {composed.rendered.subject}{note}")
        for path in files:
            print(f"  {path}")
    return EXIT_FAILED if problems and not args.subscriber else EXIT_OK


def _launch_gate(config: Config, args: argparse.Namespace, what: str = "this SMTP send") -> None:
    """The checks every send over SMTP starts with: a placeholder identity stops it (exit 2), the rest warns once."""
    from digest.readiness import ALLOW_ENV, smtp_gate

    if config.delivery.transport == "smtp" and not getattr(args, "dry_run", False):
        allow = args.allow_placeholder or os.environ.get(ALLOW_ENV) == "1"
        for warning in smtp_gate(config, os.environ, allow_placeholder=allow, what=what):
            logging.getLogger("digest").warning(warning)


def cmd_send(config: Config, args: argparse.Namespace) -> int:
    from digest import daily

    _launch_gate(config, args)
    if getattr(args, "to", None):
        return cmd_send_test(config, args)
    app = _app(config, workers=args.workers)
    day = args.date or date.today()
    try:
        report = daily.send(app, day, dry_run=args.dry_run, only=args.subscriber)
    finally:
        app.close()
    return _print_send(report)


def _print_send(report: SendReport) -> int:
    for outcome in report.outcomes:
        if outcome.status == "dry-run":
            print(f"would send {outcome.subscriber}: {outcome.reason}")
        elif outcome.status in ("failed", "deferred"):
            print(f"{outcome.status} {outcome.subscriber}: {outcome.reason}", file=sys.stderr)
    _print_halted(report)
    empty = [o.subscriber for o in report.outcomes if o.status == "skipped" and "relevance floor" in o.reason]
    if empty:
        print(f"note: empty digests (nothing new above select.min_relevance), not sent: {', '.join(empty[:10])}"
              f"{' …' if len(empty) > 10 else ''}; `digest rank --subscriber EMAIL --limit 10` shows the scores",
              file=sys.stderr)
    print(report.summary())
    return EXIT_OK if report.ok and not report.invalid_profiles else EXIT_FAILED


def _print_halted(report: SendReport) -> None:
    """Why a send stopped before its end (a transport or store that can take no more), as one line."""
    if report.halted:
        left = (f" ({report.not_attempted} more digests not attempted; the next run sends them)"
                if report.not_attempted else "")
        print(f"digest: error: {report.halted}{left}", file=sys.stderr)


def cmd_send_test(config: Config, args: argparse.Namespace) -> int:
    from digest import daily

    if not args.subscriber or args.dry_run:
        raise UsageError("--to sends one subscriber's digest as a test: give --subscriber EMAIL, and no --dry-run")
    app = _app(config)
    try:
        composed, outcome = daily.send_test(app, args.date or date.today(), args.subscriber, args.to)
    finally:
        app.close()
    if outcome.status != "sent":
        print(f"digest: error: test send to {args.to} {outcome.status}: {outcome.reason}", file=sys.stderr)
        return EXIT_FAILED
    print(f"test sent to {args.to}: [TEST] {composed.rendered.subject} "
          f"({args.subscriber}'s digest, {composed.digest.count} papers)")
    return EXIT_OK


def cmd_fetch(config: Config, args: argparse.Namespace) -> int:
    from digest import daily
    from digest.sources.ingest import IngestReport

    app = _app(config)
    try:
        report = daily.fetch_job(app, args.date or date.today())
    finally:
        app.close()
    if isinstance(report, IngestReport):
        errors, failed = report.errors, False
    else:
        errors, failed = [e for o in report.outcomes for e in o.errors], bool(report.failed)
        for outcome in report.outcomes:
            print(outcome.line())
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(report.summary())
    return EXIT_FAILED if failed or isinstance(report, IngestReport) and errors else EXIT_OK


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from digest import daily

    _launch_gate(config, args)
    app = _app(config, workers=args.workers)
    try:
        report = daily.run(app, datetime.now(UTC), args.date, dry_run=args.dry_run)
    finally:
        app.close()
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    for send in report.sends:
        for outcome in send.outcomes:
            if outcome.status == "failed":
                print(f"failed {outcome.subscriber} ({send.day}): {outcome.reason}", file=sys.stderr)
        _print_halted(send)
    for line in report.lines():
        print(line)
    return EXIT_FAILED if report.failed else EXIT_OK


def cmd_worker(config: Config, args: argparse.Namespace) -> int:
    from digest import daily

    _launch_gate(config, args)
    app = _app(config, workers=args.workers)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        reports = daily.drain(app, day=args.date, follow=args.follow, poll=float(args.poll), should_stop=stop.is_set,
                            wait=stop.wait)
    finally:
        app.close()
    codes = [_print_send(report) for report in reports]
    if not reports:
        print("nothing queued")
    return max(codes, default=EXIT_OK)


def cmd_schedule(config: Config, args: argparse.Namespace) -> int:
    from digest import daily

    _launch_gate(config, args)
    app = _app(config)
    daemon = daily.make_daemon(app)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        daemon.start()
        slots = len(daemon.scheduler.get_jobs(jobstore="default"))
        logging.getLogger("digest").warning("schedule: started (%s), %d send slots", daemon.owner, slots)
        stop.wait()
        logging.getLogger("digest").warning("schedule: stopping after the message in flight")
    finally:
        daemon.stop()
        app.close()
    return EXIT_OK


def cmd_serve(config: Config, args: argparse.Namespace) -> int:
    from urllib.parse import urlsplit

    from digest.readiness import url_host
    from digest.web import serve  # Flask and waitress load only for this command

    if config.signup.enabled:  # its confirmation and welcome emails go out as the digests do
        _launch_gate(config, args, what="`digest serve`'s signup emails over SMTP")
    app = _app(config)
    home = urlsplit(config.newsletter.base_url).path.rstrip("/") + "/"  # the public pages answer under its path
    try:
        serve(app, args.host, args.port, password_env=config.web.operator_password_env, access_log=args.access_log,
              ready=lambda host, port: print(f"serving on http://{url_host(host)}:{port}{home} "
                                             "(operator pages at /admin/); Ctrl-C stops", flush=True))
    finally:
        app.close()
    return EXIT_OK


def cmd_check(config: Config, args: argparse.Namespace) -> int:
    from digest import readiness

    serve = readiness.Serve(args.host, args.port)
    findings = readiness.check(config, os.environ, serve)
    app = _app(config)
    try:  # the subscribers a send would read (profile files synced)
        app.profiles.sync()
        findings += readiness.readers(app.store)
    finally:
        app.close()
    for finding in findings:
        print(f"{'stop' if finding.stops_smtp else 'not ready'}: {finding.line()}")
    print(f"publish in DNS for {config.newsletter.from_address.rpartition('@')[2]} (no lookup was made: compare with "
          "what your DNS holds):")
    for record in readiness.dns_records(config, os.environ):
        print(f"  {record}")
    for assumed in readiness.assumptions(config, serve):
        print(f"assumed: {assumed}")
    note = readiness.transport_note(config)
    if note:
        print(f"note: {note}")
    print(readiness.summary(findings))
    return EXIT_FAILED if findings else EXIT_OK


def cmd_bounces(config: Config, args: argparse.Namespace) -> int:
    from digest.bounces.intake import read_mailbox

    app = _app(config)
    try:
        summary = read_mailbox(app, maildir=args.maildir, mbox=args.mbox, imap=args.imap)
    finally:
        app.close()
    for problem in summary.problems:
        print(f"error: {problem}", file=sys.stderr)
    for note in summary.notes:
        print(f"warning: {note}", file=sys.stderr)
    for email, reason in summary.suppressed:
        print(f"suppressed {email}: {reason}")
    if summary.stopped:
        print(f"digest: error: {summary.stopped} (the messages before were processed)", file=sys.stderr)
    print(summary.line())
    return EXIT_OK if summary.ok else EXIT_FAILED


def cmd_db(config: Config, args: argparse.Namespace) -> int:
    from digest.store import schema
    from digest.store.engine import make_engine

    engine = make_engine(config.store.url)
    where = engine.url.render_as_string(hide_password=True)
    try:
        if args.action == "current":
            with engine.connect() as conn:
                revision = schema.current(conn)
            state = "up to date" if revision == schema.HEAD else f"this version needs {schema.HEAD}"
            print(f"{where}: schema revision {revision or '(empty database)'} ({state})")
            return EXIT_OK if revision in (None, schema.HEAD) else EXIT_FAILED
        before, after = schema.upgrade(engine)
    except sa_errors() as exc:
        raise StoreError(f"{where}: {getattr(exc, 'orig', None) or exc}") from exc
    finally:
        engine.dispose()
    if before == after:
        print(f"{where}: schema revision {after}, already up to date")
    else:
        print(f"{where}: schema upgraded from {before or '(empty database)'} to {after}")
    return EXIT_OK


def sa_errors() -> type[Exception]:
    import sqlalchemy

    return sqlalchemy.exc.SQLAlchemyError


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from digest.schedule import Slot
    from digest.status import (
        ATTENTION,
        LIST_LIMIT,
        delivery_lines,
        large_list,
        recent_runs,
        render_status,
        suppression_section,
    )

    app = _app(config)
    now = datetime.now(UTC)
    day = args.date or now.date()
    try:
        app.profiles.sync()
        store, counts = app.store, None
        total = store.count_subscribers()
        if total <= LIST_LIMIT:
            paused = {p.email: p.paused_until for p in store.preferences().values() if p.paused_until}
            lines = delivery_lines(app.profiles.roster().subscribers, day, store.deliveries_on(day), store.suppressed(),
                                   now=now, grace=timedelta(minutes=config.schedule.grace_minutes), paused=paused)
        else:
            counts, lines = large_list(total, store.delivery_counts(day), store.deliveries_in(day, ATTENTION, 50),
                                       store.count_suppressed())
        runs = recent_runs(store, now)  # one whose process was killed shows as died
        suppressions = suppression_section(store, config.bounces.soft_limit, config.bounces.soft_window_days, now)
        text = render_status(now=now, day=day, runs=runs, fetches=store.fetches(), lines=lines, counts=counts,
                             slots={Slot(c.timezone, c.send_at, c.frequency): c.subscribers
                                    for c in store.slot_counts()},
                             workers=store.workers(now.replace(tzinfo=None) - timedelta(days=1)),
                             suppressions=suppressions, sources=[s.label for s in config.sources],
                             ingest_paths=config.ingest.paths)
    finally:
        app.close()
    print(text)
    finished = [run for run in runs if run.status != "running"]
    if finished and finished[0].status in ("failed", "died"):  # monitoring can alert on the exit code
        print(f"digest: the last run (#{finished[0].id} {finished[0].command}) {finished[0].status}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _ranked_json(r: Ranked) -> dict[str, Any]:
    from digest.render.filters import paper_url

    paper = r.paper
    return {"rank": r.rank, "id": paper.arxiv_id or (f"#{paper.store_id}" if paper.store_id else paper.key),
            "store_id": paper.store_id, "title": paper.title, "url": paper_url(paper), "score": r.score,
            "relevance": r.relevance, "passes_floor": r.passes_floor, "section": r.section,
            "reasons": list(r.reasons), "parts": r.parts, "place": r.place, "share": r.share}


def _ranked_text(r: Ranked) -> str:
    paper, parts = r.paper, r.parts
    ref = paper.arxiv_id or (f"#{paper.store_id}" if paper.store_id else "-")
    mark = "✓" if r.passes_floor else "·"
    raw = ", ".join(f"{k} {parts[k]:.2f}" for k in ("keywords", "description") if parts.get(k))
    learned = (f"; learned model {parts['feedback']:.2f} at share {parts['feedback_share']:.2f}"
               if parts.get("feedback_share") else "")
    dense = ", ".join(f"{k} z {parts[k]:+.2f}" for k in ("query", "model", "neighbours") if parts.get(k))
    lexical = (f"profile {parts['lexical']:.2f} from words: {raw or 'no match'} (unit {parts.get('unit', 0):.2f})"
               f"{'; text model: ' + dense if dense else ''}" if "lexical" in parts else "no interests")
    boosts = f"trend {parts.get('trend', 0):.2f}, recency {parts.get('recency', 0):.2f}"
    return (f"{r.rank:3d}. {r.score:6.3f} {mark} [{r.section}] {ref}  {' '.join(paper.title.split())}\n"
            f"      relevance {r.relevance:.3f}: {lexical}{learned}; {boosts}\n"
            f"      matched: {', '.join(r.reasons) or '-'}")


def cmd_rank(config: Config, args: argparse.Namespace) -> int:
    from digest.sources.ingest import read_papers

    app = _app(config)
    day = args.date or date.today()
    errors: list[Any] = []
    try:
        subscriber = app.profiles.profile(args.subscriber, args.profile)
        papers = None
        if args.papers:
            papers, errors = read_papers(args.papers, day)
            for error in errors:
                print(f"error: {error}", file=sys.stderr)
        ranked = app.composer.rank(subscriber, day, papers=papers, limit=args.limit)
    finally:
        app.close()
    if args.json:
        print(json.dumps([_ranked_json(r) for r in ranked], ensure_ascii=False, indent=1))
        return EXIT_OK
    for line in _rank_header(subscriber.email, day, ranked, app.settings, limited=args.limit is not None):
        print(line)
    for r in ranked:
        print(_ranked_text(r))
    return EXIT_FAILED if args.papers and errors else EXIT_OK


def _rank_header(email: str, day: date, ranked: Sequence[Ranked], settings: Any, *, limited: bool) -> list[str]:
    """What the list is, how many pass the floor, and why the scores may not fall steadily."""
    passing = sum(r.passes_floor for r in ranked)
    what = f"the top {len(ranked)} candidates, whatever the floor" if limited else f"{len(ranked)} picks"
    lines = [f"{email} on {day}: {what}; {passing} at or above select.min_relevance {settings.min_relevance:g} "
             "(✓; relevance = estimated probability of being on topic)"]
    if not passing:
        lines.append("none passes the floor: this digest would be empty (delivery.quiet_days decides whether it is "
                     "skipped or replaced by the trending papers)")
    lines += _allocation_lines(ranked)
    scores = [r.score for r in ranked]
    if any(later > earlier for earlier, later in zip(scores, scores[1:], strict=False)):
        lines.append(f"order: the digest's, re-ranked for diversity (select.diversity {settings.diversity:g}): a "
                     "paper close to one above it moves down, so the scores do not fall steadily")
    return lines


def _allocation_lines(ranked: Sequence[Ranked]) -> list[str]:
    """How the reader's interests shared the places (select.allocation), when they did."""
    shared = [r for r in ranked if r.place]
    if not shared:
        return []
    given: dict[str, int] = {}
    taken: dict[str, int] = {}
    rest: dict[str, int] = {}
    for r in shared:
        if r.place == "share":
            given[r.section] = r.share
            taken[r.section] = taken.get(r.section, 0) + 1
        else:
            rest[r.section] = rest.get(r.section, 0) + 1
    parts = []
    for name in dict.fromkeys([*given, *rest]):
        part = f"{name} {taken.get(name, 0)}"
        if name in given and taken.get(name, 0) < given[name]:
            part += f" of {given[name]} given"
        if rest.get(name):
            part += f" + {rest[name]} left by the others"
        parts.append(part)
    return ["places shared by interest (select.allocation): " + "; ".join(parts)]


def cmd_feedback(config: Config, args: argparse.Namespace) -> int:
    app = _app(config)
    try:
        paper = app.profiles.feedback(args.subscriber, args.paper, more=args.more)
    finally:
        app.close()
    print(f"{args.subscriber}: {'more' if args.more else 'less'} like “{' '.join(paper.title.split())}”")
    return EXIT_OK


COMMANDS: dict[str, Callable[[Config, argparse.Namespace], int]] = {
    "ingest": cmd_ingest, "subscribers": cmd_subscribers, "preview": cmd_preview,
    "send": cmd_send, "run": cmd_run, "fetch": cmd_fetch, "schedule": cmd_schedule, "status": cmd_status,
    "serve": cmd_serve, "rank": cmd_rank, "feedback": cmd_feedback, "db": cmd_db, "worker": cmd_worker,
    "bounces": cmd_bounces, "check": cmd_check,
}


def _database_errors() -> tuple[type[BaseException], ...]:
    """Looked up only when an exception reaches `main` (importing the store costs `digest --help` its speed)."""
    from digest.store.engine import database_errors

    return database_errors()


def _one_line(text: str) -> str:
    """A message on one line, however many the error held (a TOML parser's, a server's reply), with any password
    in a URL masked."""
    return masked(" ".join(text.split("\n")).strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.WARNING
    setup_logging(level, args.log_format)
    # Only `subscribers check` runs without a digest.toml (a profiles repository's CI); anything else would
    # quietly make a digest.db wherever it was started.
    files_only = args.command == "subscribers" and args.action == "check"
    try:
        return COMMANDS[args.command](load_config(args.config, required=not files_only), args)
    except DigestError as exc:
        if args.debug:
            raise
        print(f"digest: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (UsageError, ConfigError)) else EXIT_FAILED
    except _database_errors() as exc:  # a store that fails mid-command: read-only, full, locked, damaged, gone
        if args.debug:
            raise
        from digest.store.engine import explain

        print(f"digest: error: the database failed: {explain(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("digest: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `digest rank | head` stopped reading: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
