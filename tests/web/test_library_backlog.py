"""Library uploads cannot queue work without bound: a burst past the backlog's bound gets 429 pages (the library page
and the signup form) and changes nothing, the threads stay WORKERS however many uploads come, one job waits per reader,
every accepted upload's library is in the store before its page answers, and each is worked on once the workers are
free; the page's forms are rate-limited per reader and per network.

Real parts: `digest serve`'s app under waitress (httpx), a real SQLite store, and a real HTTP server standing in for
the arXiv API that holds its answers until the test lets them go (so the workers are busy for as long as it takes).
"""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from digest.app import App
from digest.models import Interest, Subscriber
from digest.sources.lookup import LOOKUP_KEY, Looked
from digest.subscribers.libraries import library_interest, read_upload
from digest.web.backlog import QUEUE, WORKERS
from digest.web.library import PER_NETWORK_HOUR, PER_READER_HOUR

from ..conftest import DAY, FIXTURES, SEEDS
from ..web_server import Server

ATOM = (FIXTURES / "arxiv_api.atom").read_bytes()  # 2606.12569 and others, not in the seed pages
READERS = [f"reader{n:02d}@example.org" for n in range(QUEUE + WORKERS + 4)]


class HeldAPI:
    """An arXiv API on 127.0.0.1 whose answers wait until `release` (each request on a thread of its own)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = 0
        held = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                held.asked += 1
                held.release.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "application/atom+xml")
                self.send_header("Content-Length", str(len(ATOM)))
                self.end_headers()
                self.wfile.write(ATOM)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/query"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def busy_site(make_config, tmp_path: Path) -> Iterator[tuple[Server, HeldAPI]]:
    """`digest serve` over the seed pages with READERS as web subscribers; library ids are looked up on HeldAPI."""
    api = HeldAPI()
    folder = tmp_path / "subscribers"
    folder.mkdir()
    app = App(make_config(subscribers={"dir": str(folder)}, fetch={"retries": 0, "timeout": 90},
                          libraries={"lookup": True, "arxiv_api": api.url, "doi_api": api.url}))
    app.ingest([SEEDS], seen_on=DAY)
    app.store.put_subscribers([Subscriber(r, interests=(Interest("Robots", ("robots",)),)) for r in READERS], "web")
    server = Server(app)
    yield server, api
    api.close()
    backlog = server.server.application.config.get("LIBRARY_WORK")
    if backlog is not None:
        assert backlog.wait(60)
    server.close()
    app.close()


def library_path(site: Server, email: str) -> str:
    return site.path(site.app.links(email).preferences).replace("/preferences/", "/library/")


def paste(site: Server, email: str, text: str, name: str = "Pasted", client: httpx.Client | None = None,
          ) -> httpx.Response:
    return (client or site.client).post(library_path(site, email), data={
        "do": "upload", "interest": "new", "name": name, "library_text": text}, files={"library_file": ("", b"")})


def library_keys(site: Server, email: str) -> list[str]:
    found = site.app.store.profile_of(email)
    assert found is not None
    return [i.library_key for i in found[1].interests if i.library_key]


def text_of(response: httpx.Response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text)))


def workers(before: set[threading.Thread]) -> int:
    """Library worker threads alive that were not there `before` (an earlier test's may still be idling)."""
    return sum(1 for t in threading.enumerate() if t.name == "library-work" and t not in before)


def test_a_burst_past_the_bound_gets_429_pages_and_bounded_threads_and_loses_nothing(busy_site):
    """WORKERS + QUEUE + 4 readers each paste an id the store lacks while the arXiv API holds its answers: the first
    WORKERS are worked on, QUEUE wait, the rest get 429 with a page that says to try again in a minute (and nothing
    of theirs is stored); a waiting reader's second upload joins their job; a signup with a library is refused the
    same way and records nothing; the threads stay WORKERS. Once the API answers, every accepted library is looked
    up."""
    site, api = busy_site
    threads_before, before = threading.active_count(), set(threading.enumerate())
    answers = {email: paste(site, email, "2606.12569\n2606.12599") for email in READERS[:WORKERS]}
    deadline = time.monotonic() + 30
    while api.asked < WORKERS and time.monotonic() < deadline:  # both workers are held by the API from here on
        time.sleep(0.01)
    waiting = READERS[WORKERS]  # this one's job waits, and their second upload joins it
    answers[waiting] = paste(site, waiting, "2606.12569\n2606.12599")
    again = paste(site, waiting, "2606.12569", name="Second")
    assert again.status_code == 200 and len(library_keys(site, waiting)) == 2
    answers.update({email: paste(site, email, "2606.12569\n2606.12599") for email in READERS[WORKERS + 1:]})
    accepted = [e for e, a in answers.items() if a.status_code == 200]
    refused = [e for e, a in answers.items() if a.status_code == 429]
    assert accepted == READERS[:WORKERS + QUEUE] and refused == READERS[WORKERS + QUEUE:]
    for email in refused:
        page = answers[email]
        assert "Too many library uploads at once. This server is busy reading other libraries: please try again " \
               "in a minute. Nothing was changed." in text_of(page) and page.headers["Retry-After"] == "60"
        assert library_keys(site, email) == []  # nothing stored
    for email in accepted:  # stored before the page answered, whatever happens to the work on it
        key = library_keys(site, email)[0]
        assert [e.arxiv_id for e in site.app.store.library_entries(key)] == ["2606.12569", "2606.12599"]
        assert "2 ids: 0 in the store, 2 being looked up on arXiv and Crossref" in answers[email].text
    assert workers(before) == WORKERS and threading.active_count() - threads_before <= WORKERS + api.asked
    assert api.asked == WORKERS
    with httpx.Client(base_url=site.base, timeout=10) as browser:  # a signup carrying a library: refused, unrecorded
        form = browser.get("/subscribe")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        signup = browser.post("/subscribe", data={
            "email": "newcomer@example.org", "topics": [], "interests": "robots", "timezone": "UTC",
            "frequency": "daily", "website": "", "csrf": csrf, "library_text": "2606.12569"},
            files={"library_file": ("", b"")})
    assert signup.status_code == 429 and "Too many library uploads at once" in text_of(signup)
    assert "please try again in a minute" in text_of(signup)
    assert signup.headers["Retry-After"] == "60" and site.app.store.signup("newcomer@example.org") is None
    api.release.set()
    assert site.server.application.config["LIBRARY_WORK"].wait(60)
    assert workers(before) <= WORKERS
    for email in accepted:
        for key in library_keys(site, email):
            looked = Looked.from_json(site.app.store.get_cache(LOOKUP_KEY + key).decode())
            assert looked.from_arxiv >= 1, (email, looked)
    assert paste(site, refused[0], "2606.12569").status_code == 200  # room again


def test_the_page_asks_again_the_ids_whose_lookup_was_lost(busy_site):
    """A library whose lookup never happened (the server stopped with it queued): opening the library page queues it
    again, and what it found is then shown."""
    site, api = busy_site
    api.release.set()
    email = READERS[0]
    lost = library_interest("Lost", read_upload("pasted text", "2606.12569\n"))  # stored; its job went with the server
    site.app.store.replace_web_profile(Subscriber(email, interests=(Interest("Robots", ("robots",)), lost)))
    assert site.app.store.get_cache(LOOKUP_KEY + lost.library_key) is None
    page = site.client.get(library_path(site, email))
    assert page.status_code == 200
    assert site.server.application.config["LIBRARY_WORK"].wait(60) and api.asked == 1
    assert "Lost · 1 paper in its library" in text_of(site.client.get(library_path(site, email)))
    assert "1 id: 1 fetched from arXiv" in text_of(site.client.get(library_path(site, email)))
    assert api.asked == 1  # asked once: now that it is known, the page asks nothing more


def test_the_library_forms_are_rate_limited_per_reader_and_per_network(busy_site):
    """PER_READER_HOUR posts of the page's forms an hour per reader, then 429 with a page saying so (and nothing
    changes); PER_NETWORK_HOUR from one address across readers."""
    site, api = busy_site
    api.release.set()

    def remove(email: str) -> httpx.Response:  # (a form that changes nothing: the cheapest to send many of)
        return site.client.post(library_path(site, email), data={"do": "remove", "interest": "0"})

    statuses = [remove(READERS[0]).status_code for _ in range(PER_READER_HOUR)]
    assert statuses == [422] * PER_READER_HOUR
    over = remove(READERS[0])
    assert over.status_code == 429 and over.headers["Retry-After"] == "3600"
    assert f"Too many library uploads for your address: at most {PER_READER_HOUR} an hour" in text_of(over)
    blocked = paste(site, READERS[0], "2606.12569")
    assert blocked.status_code == 429 and library_keys(site, READERS[0]) == []
    counted = PER_READER_HOUR  # (the network counts the posts its readers' limits let through)
    for email in READERS[1:]:
        for _ in range(min(PER_READER_HOUR, PER_NETWORK_HOUR - counted)):
            assert remove(email).status_code == 422
            counted += 1
    last = remove(READERS[-1])
    assert last.status_code == 429 and f"from your network: at most {PER_NETWORK_HOUR} an hour" in text_of(last)
