"""Property-based fuzzing (Hypothesis) of everything that reads outside input: the source parsers, the profile
loader, the settings loader and the web routes. Random bytes, random Unicode, huge numbers and huge inputs give a
one-line error or a clean 4xx, never a traceback, and never a damaged store.

The example counts add up to more than 10,000 cases a run (see FUZZ_CASES); `DIGEST_FUZZ_SCALE=10` fuzzes ten
times longer, `HYPOTHESIS_PROFILE=explore` draws new random cases instead of CI's repeatable ones.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import tomllib
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from digest.app import App
from digest.config import build_config
from digest.errors import ConfigError
from digest.models import REPLACEMENT, ParseResult
from digest.sources import PARSERS, SourceError, parse_bytes, parse_text, vet
from digest.subscribers.profiles import Problem, _Lines, validate

from .conftest import SEEDS, SUBSCRIBERS

SEEN = date(2026, 6, 12)
SCALE = float(os.environ.get("DIGEST_FUZZ_SCALE", "1"))
settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("explore", deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
FUZZ_CASES: dict[str, int] = {}


def cases(name: str, n: int) -> settings:
    """`n` examples for the test `name` (scaled), counted in FUZZ_CASES."""
    FUZZ_CASES[name] = max(1, int(n * SCALE))
    return settings(max_examples=FUZZ_CASES[name])


# -- strategies ------------------------------------------------------------------------------------------------

HUGE_INTS = st.one_of(st.integers(), st.integers(min_value=2**63 - 2, max_value=2**70),
                      st.integers(min_value=-(2**70), max_value=-(2**63)))
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
TEXT = st.text(max_size=24)
SCALARS = st.one_of(st.none(), st.booleans(), HUGE_INTS, FLOATS, TEXT,
                    st.sampled_from(["", "2026-06-12", "0001-01-01", "9999-12-31", "Jun 5", "2401.00001",
                                     "\ufffd", "a\r\nb", "x" * 5000, "ada@example.org", "07:30", "Europe/London"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=8), SCALARS, max_size=2))


def one_line(problem: object) -> None:
    """An error a person reads: one line (any newline of the input shown escaped)."""
    text = str(problem)
    assert "\n" not in text and "Traceback" not in text, text


def clean_result(result: ParseResult) -> None:
    for error in result.errors:
        one_line(error)
    for paper in result.papers:
        assert paper.title.strip() and isinstance(paper.abstract, str)


def parse_or_refuse(data: bytes, source: str = "fuzz") -> ParseResult | None:
    """A parse whose only failure is a SourceError with a one-line message."""
    try:
        result = vet(parse_bytes(data, source, seen_on=SEEN), source)
    except SourceError as exc:
        one_line(exc)
        return None
    clean_result(result)
    return result


# -- parsers ---------------------------------------------------------------------------------------------------

@pytest.mark.slow
@cases("random bytes, any format", 2000)
@given(st.binary(max_size=2000))
def test_random_bytes_parse_or_are_refused_in_one_line(data):
    """Arbitrary bytes are papers, per-record errors, or one SourceError; no paper holds U+FFFD from bad bytes."""
    result = parse_or_refuse(data)
    if result is not None and REPLACEMENT.encode() not in data:
        assert not any(REPLACEMENT in p.title + p.abstract for p in result.papers)


SEED_BYTES = sorted(SEEDS.glob("*.txt"))[0].read_bytes()[:6000]


@pytest.mark.slow
@cases("seed page with bytes flipped", 1000)
@given(st.lists(st.tuples(st.integers(0, len(SEED_BYTES) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_real_page_with_random_bytes_changed_never_stores_replacement_characters(changes):
    """A real Daily Papers page with bytes overwritten: records on undecodable lines are skipped, never mangled."""
    data = bytearray(SEED_BYTES)
    for at, byte in changes:
        data[at] = byte
    result = parse_or_refuse(bytes(data))
    if result is not None:
        assert not any(REPLACEMENT in p.title + p.abstract for p in result.papers)


@pytest.mark.slow
@cases("random Unicode, each parser", 1500)
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=1500))
def test_every_parser_takes_random_text(kind, text):
    """Each format's parser, given any text, returns papers and one-line errors (or refuses the source)."""
    try:
        clean_result(PARSERS[kind](text, "fuzz", seen_on=SEEN))
    except SourceError as exc:
        one_line(exc)


JSONL_FIELDS = st.fixed_dictionaries({}, optional={
    "id": VALUES, "title": st.one_of(TEXT, VALUES), "abstract": st.one_of(TEXT, VALUES), "authors": VALUES,
    "published": VALUES, "listing_date": VALUES, "upvotes": VALUES, "url": VALUES, "categories": VALUES,
    "primary_category": VALUES})


@pytest.mark.slow
@cases("JSONL objects with hostile values", 1500)
@given(st.lists(JSONL_FIELDS, min_size=1, max_size=3))
def test_jsonl_objects_with_hostile_values(objects):
    """JSONL rows with huge numbers, NaN, nested values and odd dates: a paper or a one-line record error."""
    lines = [json.dumps(o, allow_nan=True) for o in objects]
    result = parse_text("\n".join(lines), "fuzz.jsonl", seen_on=SEEN)
    clean_result(result)
    assert len(result.papers) + len(result.errors) == len(objects)
    for paper in result.papers:
        assert paper.upvotes is None or 0 <= paper.upvotes <= 2**63 - 1


API_ROWS = st.lists(st.fixed_dictionaries({"paper": st.fixed_dictionaries({}, optional={
    "id": VALUES, "title": st.one_of(TEXT, VALUES), "summary": st.one_of(TEXT, VALUES), "authors": VALUES,
    "publishedAt": VALUES, "upvotes": VALUES, "ai_keywords": VALUES, "githubRepo": VALUES})},
    optional={"numComments": VALUES, "submittedOnDailyAt": VALUES, "title": VALUES}), max_size=3)


@pytest.mark.slow
@cases("API JSON rows with hostile values", 1000)
@given(API_ROWS)
def test_api_json_rows_with_hostile_values(rows):
    """Daily Papers API rows with any values in any field: papers and one-line errors, nothing else."""
    try:
        clean_result(parse_text(json.dumps(rows, allow_nan=True), "fuzz.json", seen_on=SEEN))
    except SourceError as exc:
        one_line(exc)


BIORXIV_PAGE = json.loads((Path(__file__).parent / "fixtures" / "biorxiv" / "biorxiv_page0.json").read_text("utf-8"))
BIORXIV_FIELDS = ("title", "authors", "doi", "date", "version", "category", "abstract", "server", "published")


@pytest.mark.slow
@cases("bioRxiv details records with hostile values", 600)
@given(st.dictionaries(st.sampled_from(BIORXIV_FIELDS), VALUES, min_size=1, max_size=4), st.integers(0, 3))
def test_biorxiv_records_with_hostile_values_leave_the_others_in(changes, at):
    """A real details page with one record's fields replaced by any values (at any place among the others): that
    record is a paper or a one-line error, and every untouched record of the page is still a paper."""
    page = json.loads(json.dumps(BIORXIV_PAGE))
    records = page["collection"]
    bad = {**records[0], **changes}
    page["collection"] = records[:at] + [bad] + records[at:]
    result = parse_text(json.dumps(page, allow_nan=True), "fuzz.json", seen_on=SEEN)
    clean_result(result)
    dois = {p.doi for p in result.papers}
    assert {r["doi"].lower() for r in records} <= dois | {str(bad.get("doi", "")).lower()}


PAGE_LINES = st.lists(st.one_of(
    st.sampled_from(["Daily Papers", "Jan 5", "Feb 29", "Feb 30", "·", "• 9 authors", "• 0 authors", "Oct 15 3",
                     "Jun 20, 2024", "Dec 3, 2025 99999999999999999999999", "Sept 31", "", "", "org Org"]),
    st.text(max_size=80)), max_size=40)


@pytest.mark.slow
@cases("page text built from its own pieces", 1000)
@given(PAGE_LINES)
def test_page_text_from_its_own_pieces(lines):
    """Page text assembled from real header, date, byline and dot lines in any order parses or reports."""
    clean_result(PARSERS["hf_page_text"]("Daily Papers\n\n" + "\n".join(lines), "fuzz.txt", seen_on=SEEN))


# -- the profile loader ----------------------------------------------------------------------------------------

PROFILES = st.fixed_dictionaries({}, optional={
    "email": st.one_of(VALUES, st.just("ada@example.org")), "name": VALUES, "timezone": VALUES, "send_at": VALUES,
    "frequency": st.one_of(VALUES, st.sampled_from(["daily", "weekdays", "weekly:mon", "weekly:xyz"])),
    "max_papers": VALUES, "exclude": VALUES,
    "interests": st.one_of(VALUES, st.lists(st.dictionaries(
        st.sampled_from(["name", "keywords", "weight", "description", "seed_papers", "x"]), VALUES), max_size=3)),
    "extra": VALUES})


@pytest.mark.slow
@cases("profiles with hostile values", 1500)
@given(PROFILES)
def test_profiles_with_hostile_values_are_a_subscriber_or_problems(data):
    """Any table as a profile: a valid Subscriber or file:line problems, never an exception."""
    subscriber, problems = validate(data, "p.toml", lambda key, interest=None: 1)
    assert (subscriber is None) == bool(problems)
    for problem in problems:
        assert isinstance(problem, Problem)
        one_line(problem)
    if subscriber is not None:
        assert "\n" not in subscriber.email and "\r" not in subscriber.name


@cases("profile files of random text", 500)
@given(st.text(max_size=400))
def test_profile_files_of_random_text(text):
    """Random text as a profile file is invalid TOML or a table to validate, with lines found for its keys."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    subscriber, problems = validate(data, "p.toml", _Lines(text).of)
    for problem in problems:
        one_line(problem)


# -- the settings loader ---------------------------------------------------------------------------------------

SECTIONS = ["store", "ingest", "subscribers", "delivery", "smtp", "dkim", "render", "newsletter", "select",
            "schedule", "web", "fetch"]
KEYS = ["url", "paths", "dir", "transport", "attempts", "retry_delay", "port", "host", "timeout", "from_address",
        "base_url", "min_relevance", "diversity", "timezone", "fetch_cron", "retries", "window_days", "nmae"]
CONFIGS = st.dictionaries(st.sampled_from(SECTIONS + ["sources", "nope"]),
                          st.one_of(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4), VALUES,
                                    st.lists(st.dictionaries(st.sampled_from(["kind", "url", "path", "name"]),
                                                             st.one_of(VALUES, st.sampled_from(
                                                                 ["hf_daily", "arxiv", "file"]))), max_size=2)),
                          max_size=4)


@pytest.mark.slow
@cases("settings with hostile values", 1500)
@given(CONFIGS)
def test_settings_with_hostile_values_load_or_fail_naming_the_setting(raw):
    """Any settings table is valid settings or one ConfigError line naming the file; what loads is usable."""
    try:
        config = build_config(raw, base=Path("/srv/digest"), source=Path("/srv/digest/digest.toml"))
    except ConfigError as exc:
        one_line(exc)
        assert str(exc).startswith("/srv/digest/digest.toml: ")
        return
    for section in ("select", "delivery", "fetch", "smtp"):
        for value in vars(getattr(config, section)).values():
            assert not isinstance(value, float) or math.isfinite(value)


@cases("settings files of random bytes", 300)
@given(st.binary(max_size=300))
def test_settings_files_of_random_bytes(tmp_path_factory, data):
    """A digest.toml of random bytes loads or is one ConfigError line naming it."""
    from digest.config import load_config

    path = tmp_path_factory.mktemp("conf") / "digest.toml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as exc:
        one_line(exc)
        assert str(path) in str(exc)


# -- the web routes and the store ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Any:
    """One store with the seeds and example subscribers, and the web app over it (shared by the examples)."""
    os.environ.setdefault("DIGEST_SECRET", "fuzz-secret")
    base = tmp_path_factory.mktemp("site")
    config = build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
                           "signup": {"per_ip_hour": 1_000_000, "per_address_day": 1000}}, base=base)
    app = App(config)
    app.ingest([SEEDS], seen_on=SEEN)
    app.profiles.sync()
    from digest.web import create_app

    web = create_app(app, operator_password="fuzz-password", operator_pages=False)
    yield app, web.test_client(), base / "digest.db"
    app.close()


def snapshot(db: Path) -> list[list[tuple]]:
    """What a request or an ingest could damage: papers, feedback, suppressions, preferences, the send log."""
    with sqlite3.connect(db) as conn:
        return [conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()  # noqa: S608 - fixed names
                for table in ("papers", "feedback", "suppressions", "preferences", "deliveries")]


SEGMENT = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
                    HUGE_INTS.map(str), st.sampled_from(["more", "less", "..", "%00", "%ff", "x" * 3000]))


@pytest.mark.slow
@cases("web routes with forged tokens", 800)
@given(st.sampled_from(["unsubscribe", "preferences", "feedback", "admin", "nothing"]),
       st.lists(SEGMENT, max_size=3), st.sampled_from(["GET", "POST"]),
       st.dictionaries(st.sampled_from(["do", "days", "frequency", "List-Unsubscribe"]), SEGMENT, max_size=3))
def test_web_routes_with_forged_input_answer_4xx_and_change_nothing(site, route, segments, method, form):
    """Any path, token and form without a valid signature: a 4xx (or the 405 of a wrong method), never a 5xx,
    and the store is exactly as it was."""
    _app, client, db = site
    before = snapshot(db)
    path = "/" + "/".join([route, *(s.replace("/", "") or "x" for s in segments)])
    response = client.open(path, method=method, data=form)
    assert 400 <= response.status_code < 500 or (route == "nothing" and response.status_code == 404)
    assert snapshot(db) == before


@pytest.mark.slow
@cases("web routes with valid tokens and hostile values", 800)
@given(st.sampled_from(["feedback", "preferences", "unsubscribe-get"]), HUGE_INTS,
       st.dictionaries(st.sampled_from(["do", "days", "frequency"]), SEGMENT, max_size=3))
def test_signed_links_with_hostile_ids_and_forms_never_fail(site, route, number, form):
    """A valid token with a huge or negative paper id, or any preferences form: 200, 400 or 404, never a 5xx;
    a GET never changes the store."""
    app, client, db = site
    links = app.links("ada@example.org")
    base = app.newsletter.base_url
    before = snapshot(db)
    if route == "feedback":
        response = client.get(f"{links.feedback.removeprefix(base)}/{number}/more")
        assert response.status_code in (200, 404)
        assert snapshot(db) == before
    elif route == "preferences":
        response = client.post(links.preferences.removeprefix(base), data={**form, "days": str(number)})
        assert response.status_code in (200, 400)
    else:
        response = client.get(links.unsubscribe.removeprefix(base) + "?x=" + str(number))
        assert response.status_code == 200 and snapshot(db) == before


@pytest.mark.slow
@cases("ingest of random files into a full store", 300)
@given(st.one_of(st.binary(max_size=3000), st.builds(lambda b: SEED_BYTES[:b] + bytes([0xE9]) + SEED_BYTES[b:],
                                                     st.integers(0, len(SEED_BYTES)))))
def test_ingesting_random_files_never_damages_the_store(site, tmp_path_factory, data):
    """Whatever a file holds, every paper already stored keeps its dates (listing never earlier, publication
    never later) and its clean text; a refused file changes nothing at all."""
    app, _client, db = site
    before = {p.store_id: p for p in app.store.all_papers()}
    rows = snapshot(db)
    path = tmp_path_factory.mktemp("in") / "input.txt"
    path.write_bytes(data)
    report = app.ingest([path], seen_on=date(2026, 11, 24))
    for error in report.errors:
        one_line(error)
    if not report.files:
        assert snapshot(db) == rows
    for paper in app.store.all_papers():
        old = before.get(paper.store_id)
        if old is None:
            continue
        assert not (old.listed_on and paper.listed_on and paper.listed_on < old.listed_on)
        assert not (old.published and paper.published and paper.published > old.published)
        assert REPLACEMENT not in paper.title + paper.abstract or REPLACEMENT in old.title + old.abstract


# -- link tokens and the signup form ----------------------------------------------------------------------------

STATE = ("papers", "feedback", "suppressions", "preferences", "deliveries", "signups", "consents", "subscribers")
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def state(db: Path) -> list[list[tuple]]:
    """Everything a link or a form could change: who is subscribed, suppressed, paused, signed up, and why."""
    with sqlite3.connect(db) as conn:
        return [conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in STATE]  # noqa: S608


def _decoded(token: str) -> bytes | None:
    """The bytes a token stands for, decoded as leniently as `Signer.check` decodes it (None: not base64)."""
    import base64
    import binascii

    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None


def mutants(token: str) -> st.SearchStrategy[str]:
    """`token` cut short, with one character changed, with characters added, or two tokens spliced."""
    return st.one_of(
        st.integers(1, len(token) - 1).map(lambda k: token[:k]),  # (an empty one is no token: another route)
        st.tuples(st.integers(0, len(token) - 1), st.sampled_from(B64)).map(
            lambda change: token[:change[0]] + change[1] + token[change[0] + 1:]),
        st.text(B64, min_size=1, max_size=8).map(lambda extra: token + extra),
        st.integers(1, len(token) - 1).map(lambda k: token[k:] + token[:k]),
        st.sampled_from([".", "..", "%2e", "=" * 4, token.upper(), token + "." + token]))


# every request a token opens, with the form that would change something were the token good
TOKEN_REQUESTS = [
    ("unsubscribe", "POST", "/unsubscribe/{t}", {"List-Unsubscribe": "One-Click"}),
    ("unsubscribe", "GET", "/unsubscribe/{t}", {}),
    ("preferences", "POST", "/preferences/{t}", {"do": "pause", "days": "7"}),
    ("preferences", "POST", "/preferences/{t}", {"do": "frequency", "frequency": "weekdays"}),
    ("preferences", "POST", "/preferences/{t}/forget", {}),
    ("preferences", "GET", "/preferences/{t}", {}),
    ("feedback", "POST", "/feedback/{t}/1/more", {}),
    ("view", "GET", "/view/{t}", {}),
    ("feed", "GET", "/feed/{t}", {}),
    ("archive", "GET", "/archive/{t}", {}),
]


@pytest.mark.slow
@cases("link tokens cut short, altered, extended or spliced", 250)
@given(st.sampled_from(TOKEN_REQUESTS), st.data())
def test_an_altered_link_token_gets_400_and_changes_nothing(site, request_, data):
    """A real link's token changed in any way that changes what it decodes to (a character, its length, two
    spliced, another action's): 400 on every route and method, never a 5xx, and nothing in the store changes."""
    app, client, db = site
    action, method, path, form = request_
    real = app.signer.make(action, "ada@example.org", date.today())
    token = data.draw(mutants(real))
    if _decoded(token) == _decoded(real) and "." not in token:
        return  # the same bytes written another way (base64's spare bits): not an alteration
    before = state(db)
    response = client.open(path.format(t=token), method=method, data=form)
    assert response.status_code in (400, 404, 405), (path, token, response.status_code)
    assert state(db) == before


@pytest.mark.slow
@cases("one action's token used for another", 60)
@given(st.sampled_from(TOKEN_REQUESTS), st.sampled_from(["unsubscribe", "preferences", "feedback", "view", "feed",
                                                          "archive"]),
       st.sampled_from(["ada@example.org", "grace@example.org", "nobody@example.org"]))
def test_a_token_made_for_another_action_is_refused(site, request_, other, email):
    """A valid token of one action on another action's route: 400, nothing changes."""
    app, client, db = site
    action, method, path, form = request_
    if other == action:
        return
    before = state(db)
    response = client.open(path.format(t=app.signer.make(other, email, date.today())), method=method, data=form)
    assert response.status_code == 400 and state(db) == before


FIELD = st.one_of(st.text(max_size=40), st.text(st.characters(blacklist_categories=("Cs",)), max_size=300),
                  st.sampled_from(["", " ", "\r\n", "\x00", "x" * 5000, "=?utf-8?b?YUBiLmM=?=", "<a@b.c>",
                                   "a@b.c, d@e.f", "Ada <ada@example.org>", "ada@example.org\r\nBcc: x@y.z",
                                   "../../etc/passwd"]))
EMAILS = st.one_of(st.emails().map(str), FIELD, st.builds(lambda local, host: f"{local}@{host}", FIELD, FIELD))


@pytest.mark.slow
@cases("signup forms with hostile values", 120)
@given(st.fixed_dictionaries(
    {"email": EMAILS},
    optional={"name": FIELD, "interests": FIELD,
              "timezone": st.one_of(FIELD, st.sampled_from(["UTC", "Europe/London"])),
              "frequency": st.one_of(FIELD, st.sampled_from(["daily", "weekdays", "weekly:mon"])),
              "topics": st.lists(FIELD, max_size=4), "website": st.sampled_from(["", "http://bot.example"]),
              "csrf": st.sampled_from(["", "0" * 40, "good"])}))
def test_signup_forms_with_hostile_values_never_fail(site, form):
    """Any form: the "check your inbox" page (200), a page saying what is wrong (422), an expired form (403) or a
    rate limit (429), never a 5xx; nothing but the signup itself is stored, and a refused form stores nothing."""
    _app, client, db = site
    page = client.get("/subscribe")
    assert page.status_code == 200
    if form.get("csrf", "good") == "good":
        form["csrf"] = re.search(r'name="csrf" value="([^"]+)"', page.get_data(as_text=True)).group(1)
    before = state(db)
    response = client.post("/subscribe", data=form)
    assert response.status_code in (200, 403, 422, 429), response.status_code
    after = state(db)
    unchanged = [table for table, old, new in zip(STATE, before, after, strict=True) if old == new]
    assert set(STATE) - set(unchanged) <= {"signups"}
    if response.status_code != 200:
        assert after == before


@cases("confirmation links cut short, altered, extended or spliced", 60)
@given(st.data())
def test_an_altered_confirmation_link_confirms_nobody(site, confirm_token, data):
    """A real confirmation link's token altered: 400 (GET and POST), never a 5xx; no subscriber, no consent."""
    _app, client, db = site
    token = data.draw(mutants(confirm_token))
    if _decoded(token) == _decoded(confirm_token):
        return
    before = state(db)
    for method in ("GET", "POST"):
        response = client.open(f"/confirm/{token}", method=method)
        assert response.status_code in (400, 405), (token, response.status_code)
    assert state(db) == before


@pytest.fixture(scope="module")
def confirm_token(site) -> str:
    """The token of a real confirmation email (a signup through the form, read from the outbox)."""
    app, client, _db = site
    page = client.get("/subscribe").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    form = {"email": "fuzz-confirm@example.org", "timezone": "UTC", "frequency": "daily", "csrf": csrf}
    assert client.post("/subscribe", data=form).status_code == 200
    [mail] = Path(app.config.delivery.outbox).glob("confirm/*/fuzz-confirm@example.org.eml")
    return re.search(r"/confirm/([A-Za-z0-9_-]+)", mail.read_text()).group(1)


def test_the_suite_runs_at_least_ten_thousand_cases():
    """The counts above (at scale 1) add up to the issue's floor of 10,000 generated cases a run."""
    assert sum(FUZZ_CASES.values()) >= 10_000 * min(SCALE, 1), FUZZ_CASES


OPENREVIEW_PAGE = json.loads((Path(__file__).parent / "fixtures" / "openreview" / "regml_offset0.json")
                             .read_text("utf-8"))
NOTE_FIELDS = ("id", "forum", "pdate", "odate", "cdate", "content")
NOTE_CONTENT = ("title", "abstract", "authors", "keywords", "primary_area", "venueid", "TLDR")


@pytest.mark.slow
@cases("OpenReview notes with hostile values", 600)
@given(st.dictionaries(st.sampled_from(NOTE_FIELDS), VALUES, max_size=3),
       st.dictionaries(st.sampled_from(NOTE_CONTENT), st.one_of(VALUES, VALUES.map(lambda v: {"value": v})),
                       max_size=4),
       st.integers(0, 3))
def test_openreview_notes_with_hostile_values_leave_the_others_in(changes, content, at):
    """A notes page holding a real note with one note's fields, or its content's fields (bare or as {"value": …}),
    replaced by any values (at any place among the others): that note is a paper or a one-line error naming its
    number, and every untouched note of the page is still a paper."""
    page = json.loads(json.dumps(OPENREVIEW_PAGE))
    notes = page["notes"]
    bad = {**notes[0], **changes}
    if isinstance(bad.get("content"), dict):
        bad["content"] = {**bad["content"], **content}
    page["notes"] = notes[:at] + [bad] + notes[at:]
    result = parse_text(json.dumps(page, allow_nan=True), "fuzz.json", seen_on=SEEN)
    clean_result(result)
    assert len(result.errors) <= 1 and all(e.reason.startswith(f"record {at + 1}") for e in result.errors)
    urls = {p.url for p in result.papers}
    assert {f"https://openreview.net/forum?id={n['id']}" for n in notes} <= urls


OPENALEX_ANSWER = json.loads((Path(__file__).parent / "fixtures" / "signals" / "openalex_works.json")
                             .read_text("utf-8"))
WORK_FIELDS = ("doi", "cited_by_count", "id", "results", "meta")


@cases("trend signal answers with hostile values", 600)
@given(st.dictionaries(st.sampled_from(WORK_FIELDS), VALUES, max_size=3), st.integers(0, 3),
       st.dictionaries(st.sampled_from(("stargazers_count", "full_name", "owner")), VALUES, min_size=1, max_size=2))
def test_signal_answers_with_hostile_values_leave_the_others_counted(work, at, repo):
    """An OpenAlex answer with one work's fields replaced by any values (at any place among the others): the
    untouched works are still counted and the odd one is counted or skipped, never an error beyond one line; a
    GitHub answer with any values is a count or one line naming its URL."""
    from digest.errors import FetchError
    from digest.sources.signals import read_citations, read_stars

    answer = json.loads(json.dumps(OPENALEX_ANSWER))
    works = answer["results"]
    answer["results"] = works[:at] + [{**works[0], **work}] + works[at:]
    found = read_citations(json.dumps(answer, allow_nan=True).encode(), "https://api.openalex.org/works")
    expected = {w["doi"].removeprefix("https://doi.org/"): w["cited_by_count"] for w in works[1:]}
    assert all(found.get(doi) == n for doi, n in expected.items()), found
    body = json.dumps({"full_name": "a/b", "stargazers_count": 3, **repo}, allow_nan=True).encode()
    try:
        stars = read_stars(body, "https://api.github.com/repos/a/b")
    except FetchError as error:
        one_line(error)
        assert str(error).startswith("https://api.github.com/repos/a/b: ")
    else:
        assert isinstance(stars, int) and 0 <= stars <= 10**12
