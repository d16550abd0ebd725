"""The operator console at /admin/ at scale: paging, search and state filters read from the store a page at a time
(SQLite and PostgreSQL), and each action end to end over real HTTP, behind the password and the CSRF token."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, time, timedelta

import pytest
import sqlalchemy as sa
from bs4 import BeautifulSoup

from digest import daily, readiness
from digest.app import App
from digest.config import build_config
from digest.models import Interest, Subscriber
from digest.store import Store
from digest.store import console as console_store
from digest.store.console import SEARCH_INDEXES, drop_search_indexes, make_search_indexes
from digest.store.tables import bounces
from digest.web.console import PAGE_SIZE

from ..conftest import DAY
from ..web_server import OPERATOR, Server
from .test_browser import axe_source, browser, check_screens  # noqa: F401 (fixtures)
from .test_public import app  # noqa: F401 (the example subscribers, seeds ingested; conftest's `web` serves it)

ADA, GRACE = "ada@example.org", "grace@example.org"
MANY = 2_500


def people(n: int) -> list[Subscriber]:
    """`n` imported subscribers, r0000@… to r2499@…, named "Reader N", with an interest called "Ada's topic"."""
    return [Subscriber(email=f"r{i:04d}@example.net", name=f"Reader {i}", send_at=time(7, 0),
                       interests=(Interest("Ada's topic", ("kv cache",)),)) for i in range(n)]


@pytest.fixture
def big(make_config, tmp_path, monkeypatch) -> Iterator[Server]:
    """A console over 2,500 imported subscribers (no profile files)."""
    monkeypatch.setenv("DIGEST_SECRET", "console-test-secret")
    (tmp_path / "none").mkdir()
    served = App(make_config(subscribers={"dir": str(tmp_path / "none")}))
    served.store.put_subscribers(people(MANY), "import")
    server = Server(served)
    yield server
    server.close()
    served.close()


def listed(server: Server, **params: object) -> tuple[list[str], str]:
    """The addresses on a console page, and its "x–y of n" line."""
    response = server.client.get("/admin/", params={"date": DAY.isoformat(), **params}, auth=OPERATOR)
    assert response.status_code == 200, response.text
    page = BeautifulSoup(response.text, "html.parser")
    table = page.find(id="subscribers") or page.find(id="signups")
    rows = [tr.find("td").get_text(" ", strip=True).split(" ")[0] for tr in table.find("tbody").find_all("tr")] \
        if table and table.find("tbody") else []
    return rows, page.find(id="showing").get_text(strip=True)


@pytest.mark.slow
def test_pages_of_a_long_list(big):
    """2,500 subscribers: 50 a page by default, in address order; any page size offered; the last page holds the
    rest; a page past the end shows the last one; a bad page, size or state is a 400."""
    emails = sorted(s.email for s in people(MANY))
    first, showing = listed(big)
    assert first == emails[:PAGE_SIZE] and showing == "1–50 of 2,500"
    second, showing = listed(big, page=2)
    assert second == emails[50:100] and showing == "51–100 of 2,500"
    last, showing = listed(big, page=13, size=200)
    assert last == emails[2400:] and showing == "2,401–2,500 of 2,500"
    beyond, showing = listed(big, page=999, size=200)
    assert beyond == last and showing == "2,401–2,500 of 2,500"
    page = BeautifulSoup(big.client.get("/admin/", params={"size": 200}, auth=OPERATOR).text, "html.parser")
    pages = page.find("nav", attrs={"aria-label": "Pages"})
    assert "page 1 of 13" in pages.get_text() and pages.find("a", string="last")["href"].endswith("page=13")
    for bad in ({"page": "0"}, {"page": "-1"}, {"page": "x"}, {"page": "9" * 30}, {"size": "7"},
                {"state": "nonsense"}, {"q": "x" * 201}):
        assert big.client.get("/admin/", params=bad, auth=OPERATOR).status_code == 400, bad


def test_the_page_is_small_whatever_the_list(big):
    """A page of 50 of 2,500 subscribers is tens of kilobytes, not the whole list."""
    response = big.client.get("/admin/", auth=OPERATOR)
    assert len(response.content) < 80_000 and response.text.count("@example.net") < 3 * PAGE_SIZE


def test_search_by_address_or_name(big):
    """A search finds addresses and names containing it, in any case; an interest's name is not the reader's."""
    assert listed(big, q="R0042@")[0] == ["r0042@example.net"]
    by_name, showing = listed(big, q="reader 123")
    assert by_name == ["r0123@example.net", "r1230@example.net", "r1231@example.net"] + \
        [f"r123{i}@example.net" for i in range(2, 10)] and showing == "1–11 of 11"
    assert listed(big, q="Ada's topic") == ([], "none")
    assert listed(big, q="%")[1] == "none" and listed(big, q="_")[1] == "none"  # LIKE's wildcards are literal


def readiness_list(server: Server) -> list[str]:
    """The console's "not ready for real readers" items, as their text reads ([] when the section is not there)."""
    response = server.client.get("/admin/", auth=OPERATOR)
    assert response.status_code == 200, response.text
    section = BeautifulSoup(response.text, "html.parser").find(id="readiness")
    return [li.get_text(" ", strip=True) for li in section.find_all("li")] if section else []


def test_the_console_lists_what_digest_check_finds_first(web, monkeypatch):
    """The sample's settings and readers: the top of /admin/ lists each finding of `digest check` (as this server
    was started) with its setting, its problem and its fix, before the list of subscribers."""
    monkeypatch.delenv("DIGEST_SECRET")
    shown = readiness_list(web)  # (the page brings the profile files into the store first, as `digest check` does)
    findings = [*readiness.check(web.app.config, {}, readiness.Serve("127.0.0.1", int(web.base.rsplit(":", 1)[1]))),
                *readiness.readers(web.app.store)]
    assert {f.setting for f in findings} >= {"newsletter.from_address", "newsletter.base_url", "newsletter.secret_env",
                                            "newsletter.postal_address", "dkim.selector", "subscribers", "sources"}
    assert len(shown) == len(findings)
    for finding, item in zip(findings, shown, strict=True):
        assert item.startswith(finding.setting) and finding.problem in item and f"Fix: {finding.fix}" in item
        assert ("(stops a send)" in item) == finding.stops_smtp
    page = web.client.get("/admin/", auth=OPERATOR).text
    assert page.index('id="readiness"') < page.index('id="list-heading"')


@pytest.mark.parametrize("relay_signs", [False, True])
def test_a_ready_install_lists_only_what_is_left_and_then_nothing(tmp_path, monkeypatch, relay_signs):
    """Settings of a real newsletter (its identity, a source to follow), the secret in the environment and no sample
    readers: only the missing DKIM is listed, and once the relay is said to sign, nothing (no section at all)."""
    monkeypatch.setenv("DIGEST_SECRET", "console-test-secret")
    (tmp_path / "none").mkdir()
    served = App(build_config({
        "store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": "none"}, "dkim": {"relay_signs": relay_signs},
        "newsletter": {"from_address": "digest@papers-lab.org", "base_url": "https://papers-lab.org",
                       "postal_address": "Papers Lab, 5 Long Road, Oxford OX1 2AB"},
        "sources": [{"kind": "arxiv", "categories": ["cs.LG"]}]}, base=tmp_path))
    served.store.put_subscribers([Subscriber("reader@papers-lab.org", interests=(Interest("KV", ("kv cache",)),))],
                                 "import")
    server = Server(served)
    try:
        shown = readiness_list(server)
        if relay_signs:
            assert shown == [] and 'id="readiness"' not in server.client.get("/admin/", auth=OPERATOR).text
        else:
            [item] = shown
            assert item.startswith("dkim.selector") and "empty, and dkim.relay_signs is false" in item
            assert "Fix: make a key" in item
    finally:
        server.close()
        served.close()


@pytest.mark.slow
def test_a_long_match_is_counted_only_past_the_page(big):
    """A search or filter counts COUNT_AHEAD matches past the page's start and says "more than" beyond, with next
    pages but no last; near the end of the matches the count is exact again."""
    first, showing = listed(big, q="EXAMPLE.NET")
    assert first == sorted(s.email for s in people(MANY))[:PAGE_SIZE] and showing == "1–50 of more than 1,000"
    page = BeautifulSoup(big.client.get("/admin/", params={"q": "example.net", "page": 30}, auth=OPERATOR).text,
                         "html.parser")
    pages = page.find("nav", attrs={"aria-label": "Pages"})
    assert page.find(id="showing").get_text(strip=True) == "1,451–1,500 of more than 2,450"
    assert "page 30" in pages.get_text() and " of " not in pages.get_text() and pages.find("a", string="next")
    assert pages.find("a", string="last") is None
    assert listed(big, q="example.net", page=49) == (sorted(s.email for s in people(MANY))[2400:2450],
                                                     "2,401–2,450 of 2,500")
    assert listed(big, q="example.net", page=60)[1] == "2,451–2,500 of 2,500"  # past the end: the last page
    assert listed(big, state="due")[1] == "1–50 of more than 1,000"  # a filter as well
    assert listed(big)[1] == "1–50 of 2,500"  # the whole list: counted


def test_search_with_and_without_the_trigram_indexes(store_url, monkeypatch):
    """A new store has the search indexes (PostgreSQL's pg_trgm, SQLite's FTS5 trigram table) and a search reads
    them, or for a needle many match the list in address order; without them (pg_trgm not allowed, an SQLite
    without FTS5) it scans the profiles; all find the same. An address or name changed or removed is found by
    what it is now."""
    store = Store(store_url)
    try:
        store.put_subscribers(people(30) + [Subscriber("zq@example.org", name='Zoë "Q" 100%_x', interests=(
            Interest("Reader 2", ("kv cache",)),))], "import")
        searches = ("reader 2", "R002", "@EXAMPLE.ORG", 'zoë "q" 100%_', "%%", "example.net", "r0")

        def found(on: Store) -> list[tuple[tuple[str, ...], int, bool]]:
            return [(s.keys, s.total, s.exact) for s in (on.console_slice(DAY, search=q, limit=5) for q in searches)]

        indexed = found(store)
        assert store._search_indexed() is True
        assert indexed[0] == (("r0002@example.net", "r0020@example.net", "r0021@example.net", "r0022@example.net",
                               "r0023@example.net"), 11, True)
        assert indexed[1:5] == [(("r0020@example.net", "r0021@example.net", "r0022@example.net",
                                  "r0023@example.net", "r0024@example.net"), 10, True),
                                (("zq@example.org",), 1, True), (("zq@example.org",), 1, True), ((), 0, True)]
        assert indexed[5][1:] == (30, True) and indexed[6][1:] == (30, True)
        monkeypatch.setattr(console_store, "FEW_MATCHES", 2)  # every needle "many": read in address order
        assert found(store) == indexed
        monkeypatch.undo()
        if store.engine.dialect.name == "postgresql":
            with store.engine.begin() as conn:  # the search's expressions are the indexes' (seen with scans off)
                conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
                plan = "\n".join(conn.execute(sa.text(
                    "EXPLAIN SELECT email_key FROM subscribers WHERE lower(email_key) LIKE '%r002%' OR "
                    "(subscribers.profile::jsonb ->> 'name') ILIKE '%reader 2%'")).scalars())
            assert all(name in plan for name in SEARCH_INDEXES), plan
            with store.engine.connect() as conn:  # (a GIN index of the bare column served `email_key IN (…)` too)
                definitions = conn.execute(sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = 'subscribers'"
                                                   " AND indexdef LIKE '%USING gin%'")).scalars().all()
            assert len(definitions) == 2 and not any("gin (email_key" in d for d in definitions), definitions
        with store.engine.begin() as conn:
            drop_search_indexes(conn)
        scanning = Store(store_url)
        try:
            assert scanning._search_indexed() is False and found(scanning) == indexed
        finally:
            scanning.close()
        with store.engine.begin() as conn:
            assert make_search_indexes(conn)  # (made again, over the rows there: as migration 0007 does)
        renamed = Store(store_url)
        try:
            renamed.put_subscribers([Subscriber("zq@example.org", name="Quinn Zed")], "import")
            assert renamed.remove_subscriber("r0029@example.net", "import")
            assert renamed.console_slice(DAY, search="zoë").keys == ()
            assert renamed.console_slice(DAY, search="QUINN").keys == ("zq@example.org",)
            assert renamed.console_slice(DAY, search="r0029").keys == ()
        finally:
            renamed.close()
    finally:
        store.close()


def test_search_without_the_right_to_create_pg_trgm(postgres):
    """A PostgreSQL user that may not create the extension still gets a store, and a search that scans."""
    url = postgres.new_database()
    name = url.rsplit("/", 1)[1]
    admin = sa.create_engine(postgres.url(name), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # (pg_trgm is trusted: only the right to CREATE in the database is missing)
        conn.execute(sa.text("DROP ROLE IF EXISTS console_plain"))
        conn.execute(sa.text("CREATE ROLE console_plain LOGIN"))
        conn.execute(sa.text("GRANT CREATE, USAGE ON SCHEMA public TO console_plain"))
    admin.dispose()
    store = Store(url.replace("postgres@", "console_plain@"))
    try:
        store.put_subscribers(people(30), "import")
        assert store._search_indexed() is False
        assert store.console_slice(DAY, search="READER 2").keys[:2] == ("r0002@example.net", "r0020@example.net")
    finally:
        store.close()


def test_state_filters_on_both_stores(store_url, monkeypatch):
    """Each filter finds the subscribers in that state on the date, on SQLite and PostgreSQL alike; with a search
    many match, a filter few match is read first and the search looked for among its addresses."""
    store = Store(store_url)
    try:
        store.put_subscribers(people(40), "import")
        emails = sorted(s.email for s in people(40))
        sent, failed, bounced, suppressed, paused = emails[:3], emails[3:5], emails[5:6], emails[6:8], emails[8:9]
        store.enqueue(DAY, sent + failed + bounced, message_id=lambda e: f"<{e}>", transport="outbox")
        for email in sent:
            store.mark_sent(email, DAY, [])
        for email in failed:
            store.mark_failed(email, DAY, "550 refused")
        store.suppress(bounced[0], "bounced: 550 5.1.1 no such user")
        for email in suppressed:
            store.suppress(email, "unsubscribed")
        store.set_preference(paused[0], paused_until=DAY + timedelta(days=3))

        def keys(state: str, **options: object) -> list[str]:
            return list(store.console_slice(DAY, state=state, **options).keys)

        assert keys("sent") == sent and keys("failed") == failed and keys("paused") == paused
        assert keys("suppressed") == sorted(bounced + suppressed) and keys("bounced") == bounced
        rest = [e for e in emails if e not in sent + failed + bounced + suppressed + paused]
        assert keys("due") == sorted(rest + bounced)  # (queued before it bounced: a send skips it)
        assert store.console_slice(DAY, state="all").total == 40
        assert keys("all", search="READER 3", limit=5) == ["r0003@example.net", "r0030@example.net",
                                                          "r0031@example.net", "r0032@example.net",
                                                          "r0033@example.net"]
        assert keys("all", offset=35, limit=10) == emails[35:]
        assert keys("sent", search="r0001") == ["r0001@example.net"]
        with monkeypatch.context() as patch:  # "r000" many (10 of 40), failed few (2 of 3), sent not (3 of 3)
            patch.setattr(console_store, "FEW_MATCHES", 3)
            assert keys("failed", search="r000") == failed and keys("sent", search="r000") == sent
            assert keys("failed", search="r001") == [] and keys("paused", search="READER") == paused
        store.put_subscribers([Subscriber("zq@example.org", name='Zoë "Q" 100%_x', interests=(
            Interest("Reader 3", ("kv cache",)),))], "import")
        assert keys("all", search='ZOË "q" 100%_') == ["zq@example.org"]  # quotes, LIKE's wildcards: literal
        assert "zq@example.org" not in keys("all", search="reader 3")  # its interest's name is not its own
        for offset in (0, 5, 100):  # a search counts as it pages; past the end, counted apart
            assert store.console_slice(DAY, search="reader 3", offset=offset, limit=5).total == 11
    finally:
        store.close()


def form_of(server: Server, button: str, email: str = ADA, **params: object) -> tuple[str, dict[str, str]]:
    """The action and fields of the form with this button on a subscriber's console page."""
    page = server.client.get("/admin/subscriber", params={"email": email, "date": DAY.isoformat(), **params},
                             auth=OPERATOR)
    assert page.status_code == 200, page.text
    form = BeautifulSoup(page.text, "html.parser").find("button", string=button).find_parent("form")
    return form["action"], {i["name"]: i.get("value", "") for i in form.find_all(["input", "select"])}


def post(server: Server, action: str, fields: dict[str, str], **changes: str):
    return server.client.post(action, data={**fields, **changes}, auth=OPERATOR, headers={"Origin": server.base})


def outcome(served: App, email: str, day: date = DAY):
    return next(o for o in daily.send(served, day, only=email).outcomes if o.subscriber == email)


@pytest.mark.slow
def test_lift_records_the_lift_and_the_next_send_delivers(web):
    """A bounced address's "Lift the suppression" calls what `digest subscribers lift` calls: the suppression goes,
    the lift is recorded in the bounce log, and the next send delivers again."""
    served = web.app
    served.store.suppress(GRACE, "bounced: 550 5.1.1 no such user")
    assert "suppressed" in outcome(served, GRACE).reason
    action, fields = form_of(web, "Lift the suppression", GRACE)
    done = post(web, action, fields)
    assert done.status_code == 303 and done.headers["Location"].startswith("/admin/subscriber?")
    assert "done=lifted" in done.headers["Location"] and GRACE not in served.store.suppressed()
    with served.store.engine.connect() as conn:
        kinds = conn.execute(sa.select(bounces.c.kind, bounces.c.detail).where(bounces.c.email == GRACE)).all()
    assert [tuple(k) for k in kinds] == [("lifted", "bounced: 550 5.1.1 no such user")]
    page = web.client.get(done.headers["Location"], auth=OPERATOR).text
    assert "The suppression is lifted" in page
    assert outcome(served, GRACE).status == "sent"
    again = post(web, action, fields)  # nothing left to lift: said, and nothing changes
    assert again.status_code == 400 and "it is not suppressed" in again.text
    served.store.suppress(GRACE, "unsubscribed")
    refused = post(web, action, fields)
    assert refused.status_code == 400 and "not a bounce or complaint" in refused.text
    assert served.store.suppressed() == {GRACE: "unsubscribed"}


@pytest.mark.slow
def test_pause_then_no_digest_and_resume(web):
    """Pause for 7 days: the send skips Ada until then; Resume: the next send delivers."""
    served, today = web.app, date.today()
    action, fields = form_of(web, "Pause")
    assert post(web, action, fields, days="7").status_code == 303
    assert served.store.preference(ADA).paused_until == today + timedelta(days=7)
    paused = outcome(served, ADA)  # (a pause covers every digest dated up to its end, DAY's too)
    assert paused.status == "skipped" and paused.reason == f"paused until {today + timedelta(days=7)}"
    assert post(web, action, fields, days="5").status_code == 400  # only the offered lengths
    action, fields = form_of(web, "Resume")
    assert post(web, action, fields).status_code == 303
    assert served.store.preference(ADA).paused_until is None
    resumed = outcome(served, ADA)
    assert resumed.status == "sent", resumed.reason


@pytest.mark.slow
def test_test_copy_goes_to_the_address_and_not_the_send_log(web):
    """"Send test copy" mails Ada's digest to another address, marked as a test; the send log is untouched."""
    served = web.app
    action, fields = form_of(web, "Send test copy")
    done = post(web, action, fields, to="editor@example.net")
    assert done.status_code == 303 and "done=test" in done.headers["Location"]
    copies = [p for p in served.config.delivery.outbox.rglob("*.eml") if "editor@example.net" in p.name]
    assert len(copies) == 1 and "editor@example.net" in copies[0].read_text(errors="replace")
    assert served.store.delivery(ADA, DAY) is None
    bad = post(web, action, fields, to="not an address")
    assert bad.status_code == 400 and "is not an email address" in bad.text


@pytest.mark.slow
def test_add_and_remove_an_imported_subscriber(web):
    """The add form imports a subscriber (checked as an import is); Remove removes it; a profile file's address is
    refused both ways with the file named."""
    served = web.app
    page = BeautifulSoup(web.client.get("/admin/", auth=OPERATOR).text, "html.parser")
    form = page.find("button", string="Add").find_parent("form")
    fields = {i["name"]: i.get("value", "") for i in form.find_all("input")}
    done = post(web, form["action"], fields, email="New@Example.net", name="New Reader", frequency="weekdays",
                interest="GPU kernels", keywords="CUDA; Triton")
    assert done.status_code == 303 and "done=added" in done.headers["Location"]
    added = served.store.subscribers_by_email(["new@example.net"])["new@example.net"]
    assert (added.name, added.frequency, added.interests[0].keywords) == ("New Reader", "weekdays", ("CUDA", "Triton"))
    assert served.store.owners(["new@example.net"]) == {"new@example.net": ("import", None)}
    assert "Added as an imported subscriber" in web.client.get(done.headers["Location"], auth=OPERATOR).text
    clash = post(web, form["action"], fields, email=ADA)
    assert clash.status_code == 400 and "ada.toml" in clash.text
    bad = post(web, form["action"], fields, email="x@example.net", timezone="Mars/Olympus")
    assert bad.status_code == 400 and "timezone" in bad.text
    action, remove = form_of(web, "Remove this subscriber", "New@Example.net")
    gone = post(web, action, remove)
    assert gone.status_code == 303 and gone.headers["Location"] == "/admin/"
    assert served.store.owners(["new@example.net"]) == {}
    refused = post(web, action, {**remove, "subscriber": ADA})
    assert refused.status_code == 400 and "ada.toml" in refused.text and served.store.owners([ADA])


@pytest.mark.slow
def test_every_action_needs_the_password_and_the_token(web):
    """Each action: 401 without the password, 403 without the CSRF token or from another site; nothing changes."""
    served = web.app
    served.store.suppress(GRACE, "bounced: 550 5.1.1 no such user")
    served.store.put_subscribers([Subscriber("x@example.net")], "import")
    token = form_of(web, "Pause")[1]["csrf"]
    forms = [form_of(web, "Lift the suppression", GRACE), form_of(web, "Pause"), form_of(web, "Send test copy"),
             form_of(web, "Remove this subscriber", "x@example.net"), ("/admin/resume", {}), ("/admin/add", {})]
    for action, fields in forms:
        fields = {"csrf": token, "subscriber": ADA, "to": "editor@example.net", "email": "y@example.net",
                  "days": "7", **fields}
        assert web.client.post(action, data=fields).status_code == 401, action
        assert web.client.post(action, data=fields, auth=("operator", "wrong")).status_code == 401, action
        no_token = {k: v for k, v in fields.items() if k != "csrf"}
        assert web.client.post(action, data=no_token, auth=OPERATOR).status_code == 403, action
        assert web.client.post(action, data={**fields, "csrf": "0" * 64}, auth=OPERATOR).status_code == 403, action
        assert web.client.post(action, data=fields, auth=OPERATOR,
                               headers={"Origin": "https://evil.example"}).status_code == 403, action
    assert served.store.suppressed() == {GRACE: "bounced: 550 5.1.1 no such user"}
    assert served.store.preference(ADA) is None and served.store.owners(["y@example.net"]) == {}
    assert served.store.owners(["x@example.net"]) == {"x@example.net": ("import", None)}
    assert not list(served.config.delivery.outbox.rglob("*.eml"))


@pytest.mark.slow
def test_subscriber_page_says_what_status_says(web):
    """A subscriber's page and row show source, schedule, state of the date in `digest status`'s words, and the
    last digest sent; a manual send shows under the send workers."""
    served = web.app
    assert outcome(served, ADA).status == "sent"
    page = BeautifulSoup(web.client.get("/admin/subscriber", params={"email": ADA, "date": DAY.isoformat()},
                                        auth=OPERATOR).text, "html.parser")
    assert page.find(id="state").get_text(" ", strip=True).startswith("sent — at ")
    assert page.find(id="source").get_text(strip=True).startswith("file ") and "ada.toml" in page.get_text()
    assert web.client.get("/admin/subscriber", params={"email": "nobody@example.net"}, auth=OPERATOR).status_code \
        == 404
    index = BeautifulSoup(web.client.get("/admin/", params={"date": DAY.isoformat(), "state": "sent"},
                                         auth=OPERATOR).text, "html.parser")
    row = index.find(id="subscribers").find("tbody").find("tr")
    assert ADA in row.get_text() and str(DAY) in row.find("td", attrs={"data-label": "last sent"}).get_text()
    runs = index.find(id="runs").get_text()
    assert "Send workers (last 24 hours):" in runs and "send " in runs and "sent 1," in runs


@pytest.mark.slow
def test_console_reads_on_a_phone_and_passes_axe(browser, web, axe_source):  # noqa: F811 - fixtures
    """The list, a subscriber's page and the preview at 375 and 1280 px, light and dark: no sideways scrolling, no
    serious or critical axe-core violation; on a phone each subscriber is a block whose cells say what they are."""
    web.app.store.suppress(GRACE, "bounced: 550 5.1.1 no such user")  # (a Lift button in the list)
    context = browser.new_context(bypass_csp=True, http_credentials={"username": OPERATOR[0],
                                                                      "password": OPERATOR[1]})
    page = context.new_page()
    page.goto(f"{web.base}/admin/?date={DAY.isoformat()}")
    check_screens(page, axe_source, "console", button="Find")
    page.set_viewport_size({"width": 375, "height": 800})
    cell = page.locator("#subscribers td[data-label='state']").first
    assert page.evaluate("c => getComputedStyle(c, '::before').content", cell.element_handle()) == '"state: "'
    assert cell.bounding_box()["width"] > 300  # a row is stacked: each cell as wide as the screen
    page.get_by_role("link", name=GRACE, exact=True).click()
    check_screens(page, axe_source, "console subscriber", button="Send test copy")
    page.get_by_role("link", name="Preview the digest").click()
    check_screens(page, axe_source, "console preview")
    context.close()


def test_the_console_shows_a_dead_run_as_digest_status_does(app):  # noqa: F811
    """A run of another machine not heard from for two hours: the console's run list says died (lease expired), as
    `digest status` does, not running."""
    from digest.store.tables import _now, locks
    from digest.web.console import activity

    silent = app.store.start_run("run", process="far.example/4242/99")
    with app.store.write() as conn:
        conn.execute(locks.update().where(locks.c.name == f"run/{silent}").values(heartbeat_at=_now()
                                                                                  - timedelta(hours=2)))
    runs, _ = activity(app)
    [line] = [r for r in runs if r.lstrip().startswith(f"#{silent} ")]
    assert line.split("UTC  ", 1)[1].startswith("died     (lease expired: pid 4242 on far.example")
