"""Bring your library: a web reader uploads a BibTeX, RIS or CSL-JSON export or pastes arXiv ids and
DOIs on `/library/<token>` or on the signup form; the page says how many papers it read and lists what it could not
(file:line); a malformed or too large upload changes nothing; a library can be removed; the next digest follows.

Real parts throughout: `digest serve`'s app under waitress on a free port (httpx), a real SQLite store, the seed
pages' papers, and exports of real papers in tests/fixtures/libraries/ (a Zotero BibTeX export of five KV-cache
papers with their arXiv ids, a Zotero CSL-JSON export of four mixture-of-experts papers without ids).
"""

from __future__ import annotations

import csv
import gzip
import html
import io
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest import daily
from digest.app import App
from digest.models import Interest, Subscriber
from digest.store.signups import SignupRecord
from digest.store.tables import rate_limits
from digest.subscribers.libraries import MAX_ENTRIES, digest_of, read_library
from digest.subscribers.profiles import MAX_LIBRARIES
from digest.subscribers.roster import export_csv
from digest.web import MAX_BODY_BYTES as FORM_BODY_BYTES
from digest.web.uploads import MAX_BODY_BYTES, MAX_PASTE_BYTES

from ..conftest import DAY, FIXTURES, SEEDS
from ..web_server import Server
from .test_browser import axe_source, browser, check_screens  # noqa: F401 - the browser tests' fixtures

LIBRARIES = FIXTURES / "libraries"
KV_BIB = LIBRARIES / "kv_cache_zotero.bib"  # SnapKV, H2O, Locret, CSKV, ALISA (Zotero 6 BibTeX, arXiv ids)
MOE_JSON = LIBRARIES / "moe_zotero.json"  # FlashMoE, HybriMoE, MoETuner, LSH-MoE (Zotero CSL-JSON)
KV_WORDS = ("kv cache", "kv-cache", "kvcache", "long-context", "long context", "eviction")
READER = "reader@example.org"
ROBOTS = Interest("Robots", keywords=("robot manipulation", "legged locomotion"))


@pytest.fixture
def site(make_config, tmp_path: Path) -> Iterator[Server]:
    """`digest serve` over a store of the seed pages and no profile files; READER is a web subscriber."""
    folder = tmp_path / "subscribers"
    folder.mkdir()
    app = App(make_config(subscribers={"dir": str(folder)}))
    app.ingest([SEEDS], seen_on=DAY)
    app.store.put_subscribers([Subscriber(READER, name="Reader", max_papers=8, interests=(ROBOTS,))], "web")
    server = Server(app)
    yield server
    server.close()
    app.close()


def library_path(site: Server, email: str = READER) -> str:
    """The reader's library page: the preferences link's token under /library/."""
    return site.path(site.app.links(email).preferences).replace("/preferences/", "/library/")


def upload(site: Server, *, file: tuple[str, bytes] | None = None, paste: str = "", interest: str = "new",
           name: str = "", **headers: str) -> httpx.Response:
    files = {"library_file": file} if file else {"library_file": ("", b"")}
    return site.client.post(library_path(site), data={"do": "upload", "interest": interest, "name": name,
                                                       "library_text": paste}, files=files, headers=headers)


def text_of(response: httpx.Response) -> str:
    """The page's main text, without the markup."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text.split("<main>", 1)[1])).strip())


def stored(site: Server, email: str = READER) -> tuple[str, Subscriber]:
    found = site.app.store.profile_of(email)
    assert found is not None
    return found


def library_rows(site: Server) -> int:
    import sqlalchemy as sa

    from digest.store.tables import libraries

    with site.app.store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(libraries)).scalar_one())


def about(title: str, abstract: str, words: tuple[str, ...]) -> bool:
    text = f"{title} {abstract}".lower()
    return any(word in text for word in words)


# -- the page -------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_zotero_bibtex_upload_makes_a_new_interest_that_the_next_digest_follows(site):
    """Uploading the KV-cache BibTeX into a new interest: the page says 5 papers were read, the store keeps them
    under the new interest, and the next digest (composed, and as a send delivers it) has a "KV cache" section of
    KV-cache papers the reader does not already keep, saying which library paper each is like."""
    app = site.app
    before = app.composer.compose(stored(site)[1], DAY, app.composer.pool(DAY)).digest
    assert [s.name for s in before.sections if s.name == "KV cache"] == []
    page = site.client.get(library_path(site))
    assert page.status_code == 200 and "Robots" in text_of(page) and 'enctype="multipart/form-data"' in page.text
    done = upload(site, file=(KV_BIB.name, KV_BIB.read_bytes()), name="KV cache")
    assert done.status_code == 200, text_of(done)
    assert "Read 5 papers from kv_cache_zotero.bib (BibTeX) into “KV cache”" in text_of(done)
    assert "KV cache · 5 papers in its library" in text_of(done)
    source, reader = stored(site)
    assert source == "web" and [i.name for i in reader.interests] == ["Robots", "KV cache"]
    kv = reader.interests[1]
    entries = app.store.library_entries(kv.library_key)
    assert kv.library_key == digest_of(read_library(KV_BIB).entries) and len(entries) == 5
    assert [e.arxiv_id for e in entries] == ["2404.14469", "2306.14048", "2410.01805", "2409.10593", "2403.17312"]
    exported = io.StringIO()  # an upload is no file on this machine: an export names none for an import to look for
    export_csv(app.store, exported)
    assert [row[-2] for row in csv.reader(exported.getvalue().splitlines()[1:])] == ["", ""]
    after = app.composer.compose(app.store.subscribers_by_email([READER])[READER], DAY, app.composer.pool(DAY)).digest
    section = next(s for s in after.sections if s.name == "KV cache")
    owned = {e.title for e in entries}
    new = [i for i in section.items if i.paper.title not in owned and about(i.paper.title, i.paper.abstract, KV_WORDS)]
    assert len(new) >= 2 and not owned & {i.paper.title for i in after.items}  # kept papers are never sent back
    assert any(r.startswith("like “") and r.find("” in your library (") > 0 for i in new for r in i.reasons)
    assert daily.send(app, DAY).count("sent") == 1  # the send ranks in batches: the same picks go out
    sent = app.store.received_by_subscriber(DAY + timedelta(days=1), [READER], DAY)
    assert sent == {READER: {item.paper.store_id for item in after.items}}


def test_csl_json_goes_into_an_existing_interest_replaces_its_library_and_can_be_removed(site):
    """A CSL-JSON export into the reader's "Robots" interest gives it a library of 4; a BibTeX upload to the same
    interest replaces it (the old entries leave the store); removing it leaves the interest with its words. A library
    that made its own interest takes the interest with it when removed."""
    app = site.app
    done = upload(site, file=(MOE_JSON.name, MOE_JSON.read_bytes()), interest="0")
    assert done.status_code == 200 and "Read 4 papers from moe_zotero.json (CSL-JSON) into “Robots”" in text_of(done)
    first = stored(site)[1].interests[0].library_key
    assert len(app.store.library_entries(first)) == 4
    done = upload(site, file=(KV_BIB.name, KV_BIB.read_bytes()), interest="0")
    robots = stored(site)[1].interests[0]
    assert done.status_code == 200 and len(app.store.library_entries(robots.library_key)) == 5
    assert app.store.library_entries(first) == () and library_rows(site) == 1  # the replaced one is gone
    gone = site.client.post(library_path(site), data={"do": "remove", "interest": "0"})
    assert gone.status_code == 200 and "Removed the library of “Robots”; “Robots” keeps its words" in text_of(gone)
    assert stored(site)[1].interests == (ROBOTS,) and library_rows(site) == 0
    upload(site, file=(MOE_JSON.name, MOE_JSON.read_bytes()))
    assert [i.name for i in stored(site)[1].interests] == ["Robots", "moe_zotero"]  # named for the file
    gone = site.client.post(library_path(site), data={"do": "remove", "interest": "1"})
    assert "the interest “moe_zotero” with it" in text_of(gone) and stored(site)[1].interests == (ROBOTS,)


def library_profiles(site: Server) -> int:
    """How many libraries' profiles in the text model's space the store keeps."""
    import sqlalchemy as sa

    from digest.store.tables import cache

    with site.app.store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(cache).where(
            cache.c.key.contains("/library/"))).scalar_one())


def test_an_uploaded_librarys_profile_is_made_in_the_background_before_the_next_send(site):
    """A library of papers the store does not have (twelve arXiv papers as a CSL-JSON export): the page answers at
    once, and its profile in the text model's space is made and kept in the background, so the next send reads
    it instead of embedding the papers while it sends."""
    with gzip.open(FIXTURES / "arxiv_sample_head.jsonl.gz", "rt") as rows:
        papers = [json.loads(line) for line, _ in zip(rows, range(12), strict=False)]
    export = json.dumps([{"id": f"item{n}", "type": "article", "title": p["title"], "abstract": p["abstract"],
                          "URL": f"http://arxiv.org/abs/{p['id']}"} for n, p in enumerate(papers)])
    before = library_profiles(site)
    done = upload(site, file=("arxiv.json", export.encode()), name="Sample")
    assert done.status_code == 200 and "Read 12 papers from arxiv.json (CSL-JSON)" in text_of(done)
    deadline = time.monotonic() + 120
    while library_profiles(site) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert library_profiles(site) == before + 1


def test_pasted_ids_are_read_and_what_could_not_be_is_listed_with_its_line(site):
    """Pasted arXiv ids and DOIs: the usable ones are kept, each line that is none is listed as 'pasted text:N'."""
    paste = "# my reading list\n2404.14469v2\nnot-an-id\narXiv:2306.14048\n10.1145/3600006.3613165\n"
    done = upload(site, paste=paste, name="Reading list")
    assert done.status_code == 200
    assert "Read 3 papers from pasted text (a list of ids) into “Reading list”" in text_of(done)
    assert "What we could not read (1) pasted text:3: not an arXiv id or DOI (each line of a list starts with one; " \
        "'#' starts a comment): skipped" in text_of(done)
    entries = site.app.store.library_entries(stored(site)[1].interests[1].library_key)
    assert [(e.arxiv_id, e.doi) for e in entries] == [("2404.14469", None), ("2306.14048", None),
                                                      (None, "10.1145/3600006.3613165")]


UNREADABLE = [  # (file name, content, what the page says): each refused whole
    ("broken.json", b'[\n  {"title": "A"},\n  {"title": "B",\n  "abstract": }\n]\n',
     "broken.json:4: invalid JSON: Expecting value (column 15)"),
    ("old.bib", "@article{a,\n title = {Caf\xe9}\n}\n".encode("latin-1"), "old.bib:2: not UTF-8 (byte 0xe9)"),
    ("notes.txt", b"my favourite papers\nthe one about caches\n", "notes.txt: not a library export"),
    ("empty.ris", b"TY  - JOUR\nPY  - 2024\nER  - \n", "No paper could be read from empty.ris"),
]


def test_what_cannot_be_read_or_placed_gets_one_clear_message_and_changes_nothing(site):
    """Malformed JSON, a Latin-1 BibTeX, a text that is no library, an export of records without a title or id, no
    file and no paste, an interest that is not the reader's, a new interest's name already taken, a POST from
    another site, a bad or expired link: each a 4xx with one message (naming the file and line where there is
    one), and the stored profile and libraries exactly as before."""
    before, rows = stored(site), library_rows(site)
    for name, body, says in UNREADABLE:
        done = upload(site, file=(name, body))
        assert done.status_code == 422 and says in text_of(done) and "Nothing was changed." in text_of(done), name
        assert 'role="alert"' in done.text
    assert "Choose a library file, or paste" in text_of(upload(site))
    assert "Choose one of your interests" in text_of(upload(site, paste="2404.14469", interest="7"))
    taken = upload(site, paste="2404.14469", name="robots")  # names are compared without case
    assert taken.status_code == 422 and "already have an interest named “robots”" in text_of(taken)
    assert upload(site, file=(KV_BIB.name, KV_BIB.read_bytes()), Origin="https://evil.example").status_code == 403
    assert site.client.get("/library/not-a-token").status_code == 400
    old = site.app.signer.make("preferences", READER, date.today() - timedelta(days=400))
    assert site.client.post(f"/library/{old}", data={"do": "remove", "interest": "0"}).status_code == 410
    assert stored(site) == before and library_rows(site) == rows


# -- limits ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_body_over_the_upload_limit_is_413_and_changes_nothing_while_other_forms_keep_64_kib(site):
    """10 MiB is this route's bound: past it, a page says so (past twice that, waitress answers 413 itself); just
    under it, a file is read; the preferences form still refuses a body past 64 KiB."""
    before = stored(site)
    over = upload(site, file=("big.bib", b"%" * (MAX_BODY_BYTES + 1)))
    assert over.status_code == 413 and stored(site) == before
    assert "That file is larger than 10 MB" in text_of(over) and "Nothing was changed." in text_of(over)
    beyond = upload(site, file=("huge.bib", b"%" * (2 * MAX_BODY_BYTES + 1)))  # past waitress' bound: its own 413
    assert beyond.status_code == 413 and stored(site) == before
    padded = KV_BIB.read_bytes() + b"\n% " + b"x" * (MAX_BODY_BYTES - 150_000) + b"\n"  # one long comment line
    assert MAX_BODY_BYTES - 200_000 < len(padded) < MAX_BODY_BYTES
    done = upload(site, file=("padded.bib", padded), name="Padded")
    assert done.status_code == 200 and "Read 5 papers from padded.bib" in text_of(done)
    prefs = site.path(site.app.links(READER).preferences)
    assert site.client.post(prefs, data={"do": "resume", "x": "y" * FORM_BODY_BYTES}).status_code == 413


@pytest.mark.slow
def test_the_paste_box_and_the_entry_count_have_their_limits(site):
    """A paste past 500 KB is 413 (a file of the same size is read); of 2,001 ids the first 2,000 are kept and
    the page says where it stopped; a sixth library is refused (five at most, as in a profile file)."""
    ids = "".join(f"2401.{n:05d}\n" for n in range(1, MAX_ENTRIES + 2))
    assert len(ids) < MAX_PASTE_BYTES
    done = upload(site, paste=ids, name="Many")
    assert done.status_code == 200 and "Read 2,000 papers (the first 2,000) from pasted text" in text_of(done)
    assert f"pasted text:{MAX_ENTRIES + 1}: over 2,000 entries: this one and the rest are skipped" in text_of(done)
    big = "2404.14469\n" + "#" * MAX_PASTE_BYTES
    assert upload(site, paste=big, name="Big").status_code == 413
    assert upload(site, file=("big.txt", big.encode()), name="Big").status_code == 200
    for n in range(MAX_LIBRARIES - 2):
        assert upload(site, paste=f"2404.1446{n}", name=f"L{n}").status_code == 200
    assert sum(1 for i in stored(site)[1].interests if i.library_key) == MAX_LIBRARIES
    before = stored(site)
    sixth = upload(site, paste="2404.14469", name="Sixth")
    assert sixth.status_code == 422 and "You have 5 libraries, the most there can be" in text_of(sixth)
    assert stored(site) == before


@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.sampled_from([0, 0, 0, 1, 300, 5_000, MAX_BODY_BYTES - 1_000, MAX_BODY_BYTES, MAX_BODY_BYTES + 1,
                             2 * MAX_BODY_BYTES]),
       head=st.sampled_from([b"@misc{a,\n title = {T}\n}\n", b'[{"title": "T"}', b"TY  - JOUR\nTI  - T\n", b"",
                             b"[" * 40, b"\xff\xfe", b"2404.14469\n", b"@misc{b,\n title = {T}\n}\n@misc{c,\n"]),
       fill=st.sampled_from([b"{", b"[", b"@misc{", b"\\'", b" ", b"\n", b"\x00", b"and ", b"% note\n"]),
       filename=st.text(min_size=1, max_size=300), interest=st.sampled_from(["0", "new", "new", "1", "-1", "99", "x"]),
       paste_size=st.sampled_from([0, 0, 100, MAX_PASTE_BYTES + 1]))
@example(size=MAX_BODY_BYTES + 1, head=b"", fill=b" ", filename="a.bib", interest="new", paste_size=0)
def test_fuzz_uploads_around_the_limits_never_fail_and_never_half_apply(web_app, size, head, fill, filename, interest,
                                                                          paste_size):
    """Files and pastes of hostile content at, under and over the size limits, any file name, any interest choice:
    the answer is always a page (200, 413 or 422, never a 500), the name is escaped, and only a 200 changes the
    stored profile, never past five libraries or 2,000 entries."""
    flask_app, app, path = web_app
    with app.store.write() as conn:  # (the uploads' hourly limit is another test's: each example starts afresh)
        conn.execute(rate_limits.delete())
    before = app.store.profile_of(READER)
    body = (head + fill * size)[:size] if size else head
    data = {"do": "upload", "interest": interest, "name": "", "library_text": "2404.14469 " * (paste_size // 11)}
    with flask_app.test_client() as client:
        response = client.post(path, data={**data, "library_file": (io.BytesIO(body), filename)},
                               content_type="multipart/form-data")
    assert response.status_code in (200, 413, 422), response.status_code
    html = response.get_data(as_text=True)
    assert "<script" not in html.lower().replace("<script src", "")
    after = app.store.profile_of(READER)
    if response.status_code != 200:
        assert after == before
    libraries = [i for i in after[1].interests if i.library_key]
    assert len(libraries) <= MAX_LIBRARIES
    assert all(len(app.store.library_entries(i.library_key)) <= MAX_ENTRIES for i in libraries)


@pytest.fixture(scope="module")
def web_app(tmp_path_factory, model_rows):
    """The web application (no server: Flask's test client) over one store for the fuzz test's many examples."""
    from digest.config import build_config
    from digest.web import create_app

    from ..conftest import prime

    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "subscribers").mkdir()
    prime(f"sqlite:///{folder / 'digest.db'}", model_rows)
    app = App(build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": "subscribers"},
                            "ingest": {"paths": [str(SEEDS)]}}, base=folder))
    app.store.put_subscribers([Subscriber(READER, interests=(ROBOTS,))], "web")
    token = app.links(READER).preferences.rsplit("/", 1)[1]
    flask_app = create_app(app, operator_password="x")
    yield flask_app, app, f"/library/{token}"
    app.close()


# -- who may change it ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_profile_files_reader_sees_their_libraries_read_only(site, tmp_path):
    """A reader whose profile file names a library sees it counted, a line saying who manages it and no form; a
    POST changes nothing (403)."""
    folder = Path(site.app.config.subscribers.dir)
    (folder / "ada.bib").write_bytes(KV_BIB.read_bytes())
    (folder / "ada.toml").write_text('email = "ada@example.org"\n[[interests]]\nname = "Mine"\nlibrary = "ada.bib"\n')
    assert site.app.profiles.sync().problems == []
    page = site.client.get(library_path(site, "ada@example.org"))
    assert page.status_code == 200 and "Mine · 5 papers in its library" in text_of(page)
    assert "kept in a profile file by the newsletter's operator" in text_of(page) and "<form" not in page.text
    before = stored(site, "ada@example.org")
    refused = site.client.post(library_path(site, "ada@example.org"), data={"do": "remove", "interest": "0"})
    assert refused.status_code == 403 and stored(site, "ada@example.org") == before


# -- at signup ------------------------------------------------------------------------------------------------------


def test_a_pending_signups_library_goes_when_the_signup_expires(site):
    """A library kept with a pending signup is dropped with it when the next signup finds it expired (nobody else
    names it): the store keeps no reader's papers past their signup's link."""
    store = site.app.store
    entries = read_library(KV_BIB).entries
    key = digest_of(entries)
    profile = ('{"email":"old@example.org","name":"","timezone":"UTC","send_at":"07:00","frequency":"daily",'
               '"max_papers":10,"exclude":[],"interests":[{"name":"Your library","keywords":[],"weight":1.0,'
               f'"description":"","seed_papers":[],"library_key":"{key}","library_source":"kv.bib"}}]}}')
    stale = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=3)
    store.put_signup(SignupRecord("old@example.org", "pending", "ab" * 16, profile, stale, "v", "h", ""),
                     expired_before=stale - timedelta(days=1), libraries={key: entries})
    assert len(store.library_entries(key)) == 5
    fresh = json.loads(profile) | {"email": "new@example.org", "interests": []}
    store.put_signup(SignupRecord("new@example.org", "pending", "cd" * 16, json.dumps(fresh), stale + timedelta(
        days=2), "v", "h", ""), expired_before=stale + timedelta(hours=1))
    assert store.signup("old@example.org") is None and store.library_entries(key) == ()


@pytest.fixture
def signup_site(tmp_path, monkeypatch) -> Iterator[object]:
    """The signup tests' site: digest.toml with the catalogue, `digest serve`, a real SMTP server as the inbox."""
    from ..signup.test_signups import make_site

    yield from make_site(tmp_path, monkeypatch)


def signup_form(site, email: str) -> dict[str, object]:
    return {"email": email, "name": "", "interests": "", "timezone": "Europe/London", "frequency": "daily",
            "website": "", "csrf": site.csrf()}


@pytest.mark.slow
def test_a_library_given_at_signup_waits_with_the_signup_and_is_the_readers_once_confirmed(signup_site):
    """The signup form takes a library file (multipart, CSRF token as ever): the "check your inbox" page says how
    many papers were read; the entries are kept with the pending signup (nobody is subscribed yet); following the
    confirmation link makes a web subscriber whose "Your library" interest shapes their digest."""
    site, email = signup_site, "lib@example.org"
    sent = site.client.post("/subscribe", data=signup_form(site, email),
                            files={"library_file": (KV_BIB.name, KV_BIB.read_bytes())})
    assert sent.status_code == 200, text_of(sent)
    assert "From your library we read 5 papers from kv_cache_zotero.bib (BibTeX)" in text_of(sent)
    store = site.app.store
    pending = json.loads(store.signup(email).profile)
    [mine] = pending["interests"]
    assert mine["name"] == "Your library" and len(store.library_entries(mine["library_key"])) == 5
    assert store.profile_of(email) is None and site.mails(email, "Confirm")
    link = site.link(email)
    assert site.client.post(link).status_code == 200
    source, reader = store.profile_of(email)
    assert source == "web" and [(i.name, i.library_key) for i in reader.interests] == [("Your library",
                                                                                       mine["library_key"])]
    assert store.signup(email) is None and len(store.library_entries(mine["library_key"])) == 5
    digest = site.app.composer.compose(store.subscribers_by_email([email])[email], date.today(),
                              site.app.composer.pool(date.today())).digest
    assert any(r.find(" in your library (") > 0 for item in digest.items for r in item.reasons)


@pytest.mark.slow
def test_a_malformed_library_at_signup_shows_the_form_again_and_records_nothing(signup_site):
    """A broken CSL-JSON file: 422, the form again with the file:line message and the reader's values, no signup
    kept, no email sent; pasted ids are kept in the paste box; a file past 10 MB: 413 and a page that says so."""
    site, email = signup_site, "broken@example.org"
    again = site.client.post("/subscribe", data=signup_form(site, email),
                             files={"library_file": ("mine.json", b'[{"title": "A"},\n{"title": }]')})
    assert again.status_code == 422 and "Your library could not be read (mine.json:2: invalid JSON" in text_of(again)
    assert f'value="{email}"' in again.text
    assert site.app.store.signup(email) is None and not site.mails(email)
    pasted = site.client.post("/subscribe", data={**signup_form(site, email), "email": "not an address",
                                                  "library_text": "2404.14469\n"}, files={"library_file": ("", b"")})
    assert pasted.status_code == 422 and ">2404.14469\n</textarea>" in pasted.text
    huge = site.client.post("/subscribe", data=signup_form(site, email),
                            files={"library_file": ("all.bib", b"%" * (MAX_BODY_BYTES + 1))})
    assert huge.status_code == 413 and "Your library is larger than 10 MB" in text_of(huge)
    assert site.app.store.signup(email) is None and not site.mails(email)


# -- in a browser ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_library_page_in_chromium_reads_a_file_and_passes_axe(site, browser, axe_source):  # noqa: F811
    """From the preferences page's link, in Chromium: the page, then a file chosen and sent (a paste with a line
    that is no id beside it is ignored: the file wins), then ids pasted with one bad line, at 375 and 1280 px light
    and dark: no sideways scrolling, no serious or critical axe-core violation, the main button readable."""
    context = browser.new_context(bypass_csp=True)  # (for axe's script)
    page = context.new_page()
    page.goto(site.base + site.path(site.app.links(READER).preferences))
    page.get_by_role("link", name="Bring your library").click()
    check_screens(page, axe_source, "library", button="Read my library")
    page.get_by_label("A library file").set_input_files(str(KV_BIB))
    page.get_by_label("A new interest").check()
    page.get_by_label("Its name").fill("KV cache")
    page.get_by_role("button", name="Read my library").click()
    page.wait_for_load_state()
    done = page.locator("[role=status]").inner_text()
    assert "Read 5 papers from kv_cache_zotero.bib (BibTeX) into “KV cache”" in done
    page.get_by_label("Or paste arXiv ids or DOIs").fill("2404.14469\nnot-an-id\n")
    page.get_by_label("Robots").check()
    page.get_by_role("button", name="Read my library").click()
    check_screens(page, axe_source, "library, read", button="Read my library")
    assert "pasted text:2: not an arXiv id or DOI" in page.locator("[role=status]").inner_text()
    assert page.get_by_role("button", name="Remove the library of KV cache").is_visible()
    context.close()
    assert [len(site.app.store.library_entries(i.library_key)) for i in stored(site)[1].interests] == [1, 5]

