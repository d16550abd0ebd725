"""Library ids the store lacks are looked up in the background (the arXiv API, Crossref for DOIs; here a local server
serving their saved answers), and the library page says what happened to each, never a success it does not have."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from digest.app import App
from digest.models import Interest, LibraryEntry, Subscriber
from digest.sources.lookup import Looked, look_up

from ..conftest import DAY, FIXTURES, SEEDS
from ..http_server import Reply, ScriptedServer
from ..web_server import Server

READER = "reader@example.org"
ATOM = (FIXTURES / "arxiv_api.atom").read_bytes()  # 2606.12451, 2606.12569 and two more
CROSSREF = (FIXTURES / "lookup" / "crossref_10.1038_d41586-020-02761-z.json").read_bytes()
IN_STORE = ["2606.09290", "2606.09304"]  # papers of the Daily Papers answer the store holds
FROM_ARXIV = ["2606.12569", "2606.12599"]  # in the arXiv API's answer, not in the store
UNKNOWN_ARXIV = "2606.99999"
DOI = "10.1038/d41586-020-02761-z"
UNKNOWN_DOI = "10.9999/no-such-work"
PASTE = "\n".join([*IN_STORE, *FROM_ARXIV, UNKNOWN_ARXIV, DOI, UNKNOWN_DOI])  # lines 1..7


def services() -> ScriptedServer:
    return ScriptedServer({"/api/query": [Reply(body=ATOM, content_type="application/atom+xml")],
                           f"/works/{DOI}": [Reply(body=CROSSREF)],
                           f"/works/{UNKNOWN_DOI}": [Reply(status=404, body=b"Resource not found.",
                                                           content_type="text/plain")]})


@pytest.fixture
def lookup_site(make_config, tmp_path: Path, request) -> Iterator[tuple[Server, ScriptedServer]]:
    down = getattr(request, "param", False)
    with services() as remote:
        folder = tmp_path / "subscribers"
        folder.mkdir()
        app = App(make_config(subscribers={"dir": str(folder)}, fetch={"retries": 0, "backoff": 0.01},
                              libraries={"lookup": True, "arxiv_api": base(remote, down) + "/api/query",
                                         "doi_api": base(remote, down) + "/works/"}))
        app.ingest([SEEDS, FIXTURES / "hf_daily_papers_2026-06-12.json"], seen_on=DAY)
        app.store.put_subscribers([Subscriber(READER, name="Reader", interests=(Interest("Robots", ("robots",)),))],
                                  "web")
        server = Server(app)
        yield server, remote
        server.close()
        app.close()


def base(remote: ScriptedServer, down: bool) -> str:
    """The services' address: the local server, or (offline) a port of this machine where nothing listens."""
    return "http://127.0.0.1:9" if down else remote.base


def page_text(response: httpx.Response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text.split("<main>", 1)[1])))


def library_path(site: Server) -> str:
    return site.path(site.app.links(READER).preferences).replace("/preferences/", "/library/")


def paste(site: Server, text: str) -> httpx.Response:
    return site.client.post(library_path(site), data={"do": "upload", "interest": "new", "name": "Pasted",
                                                      "library_text": text}, files={"library_file": ("", b"")})


def settled(site: Server, key: str, seconds: float = 20.0) -> Looked | None:
    """What the background lookup of a library found, once it has (None if it never finished)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        saved = site.app.store.get_cache("library-lookup/" + key)
        if saved:
            return Looked.from_json(saved.decode())
        time.sleep(0.05)
    return None


def test_pasted_ids_are_counted_looked_up_and_said(lookup_site):
    """Seven ids: the page says at once how many the store has and how many are being looked up (no claim of a
    library it does not have); in the background the arXiv ids are asked in one request and each DOI in one, what
    was found fills the library's entries, and the page then says "7 ids: 2 in the store, 2 fetched from arXiv, 1
    fetched from Crossref, 2 not found (lines 5, 7)"."""
    site, remote = lookup_site
    done = paste(site, PASTE)
    assert done.status_code == 200, page_text(done)
    said = page_text(done)
    assert "7 ids: 2 in the store, 5 being looked up on arXiv and Crossref" in said
    assert "Your next digest uses it" not in said or "once found" in said
    interest = site.app.store.subscribers_by_email([READER])[READER].interests[-1]
    looked = settled(site, interest.library_key)
    assert looked is not None
    assert (looked.ids, looked.in_store, looked.from_arxiv, looked.from_doi, looked.not_found) == (7, 2, 2, 1, [5, 7])
    assert remote.hits("/api/query") == 0  # (the query string is part of the path the server saw)
    asked = [seen.path for seen in remote.requests]
    assert sum(p.startswith("/api/query?") for p in asked) == 1 and "id_list=2606.12569%2C2606.12599%2C2606.99999" \
        in next(p for p in asked if p.startswith("/api/query?"))
    entries = {e.arxiv_id or e.doi: e for e in site.app.store.library_entries(interest.library_key)}
    assert entries["2606.12569"].title.startswith("EDEN") and len(entries["2606.12569"].abstract) > 100
    assert entries[DOI].title == "Attention science: some people have only one name"
    assert not entries[UNKNOWN_ARXIV].title and not entries[UNKNOWN_DOI].title
    again = page_text(site.client.get(library_path(site)))
    assert "7 ids: 2 in the store, 2 fetched from arXiv, 1 fetched from Crossref, 2 not found (lines 5, 7)" in again


@pytest.mark.parametrize("lookup_site", [True], indirect=True)
def test_offline_the_ids_are_not_yet_looked_up_never_found(lookup_site):
    """With the services failing, nothing is claimed: the ids the store lacks are "not yet looked up", and the library
    keeps them as they were."""
    site, _ = lookup_site
    assert paste(site, PASTE).status_code == 200
    interest = site.app.store.subscribers_by_email([READER])[READER].interests[-1]
    looked = settled(site, interest.library_key)
    assert looked is not None and (looked.from_arxiv, looked.from_doi, looked.not_found) == (0, 0, [])
    assert looked.not_looked == 5 and looked.problems
    assert "7 ids: 2 in the store, 5 not yet looked up" in page_text(site.client.get(library_path(site)))


def test_a_lookup_without_the_store_or_a_service_counts_every_id_once():
    """The counts add up whatever is found: every bare id is in the store, found, not found or not yet looked up."""
    entries = [LibraryEntry("", arxiv_id=f"2606.{n:05d}", line=n + 1) for n in range(3)] + [
        LibraryEntry("A title", arxiv_id="2606.00009")]

    class Offline:
        def get(self, url, **_):  # noqa: ANN001, ANN003, ANN201 - a fetcher that cannot reach anything
            from digest.errors import FetchError

            raise FetchError(url, "connection refused", 1)

    found, looked = look_up(entries, lambda refs: {refs[0]}, Offline())  # type: ignore[arg-type]
    assert looked.ids == 3 and looked.in_store == 1 and looked.not_looked == 2 and found == entries
    assert looked.summary() == "3 ids: 1 in the store, 2 not yet looked up"


def test_a_profile_files_library_of_ids_is_looked_up_by_the_command(make_config, tmp_path):
    """`digest subscribers lookup`: a profile file's library of ids is looked up like a web reader's; what was found
    fills its entries (the interest's profile made from them), and each library is named by its file."""
    from digest.daily import look_up_libraries

    folder = tmp_path / "subscribers"
    folder.mkdir()
    (folder / "ids.txt").write_text(PASTE + "\n")
    (folder / "ada.toml").write_text('email = "ada@example.org"\n\n[[interests]]\nname = "Mine"\nlibrary = "ids.txt"\n')
    with services() as remote:
        app = App(make_config(subscribers={"dir": str(folder)}, fetch={"retries": 0},
                              libraries={"lookup": True, "arxiv_api": remote.url("/api/query"),
                                         "doi_api": remote.url("/works/")}))
        try:
            app.ingest([SEEDS, FIXTURES / "hf_daily_papers_2026-06-12.json"], seen_on=DAY)
            assert app.profiles.sync().problems == []
            [(where, looked)] = look_up_libraries(app)
            assert where.endswith("ids.txt") and looked.summary() == (
                "7 ids: 2 in the store, 2 fetched from arXiv, 1 fetched from Crossref, 2 not found (lines 5, 7)")
            interest = app.profiles.roster().find("ada@example.org").interests[0]
            titles = {e.title for e in app.store.library_entries(interest.library_key)}
            assert "Attention science: some people have only one name" in titles
            assert look_up_libraries(app)[0][1].from_arxiv == 0  # what was found is asked no more
        finally:
            app.close()
