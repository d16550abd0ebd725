"""The signup tables on SQLite and PostgreSQL alike: rate-limit counters, one open signup per address, and a
confirmation that happens once."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from digest.models import Interest, Subscriber
from digest.store import SignupRecord, Store
from digest.store.subscribers import profile_json
from digest.store.tables import _now

NEW = Subscriber(email="New@Example.org", name="New", interests=(Interest("LLM inference", ("KV cache",)),))


def record(nonce: str, *, status: str = "pending", when: datetime | None = None) -> SignupRecord:
    return SignupRecord(email=NEW.email, status=status, nonce=nonce, profile=profile_json(NEW),
                        requested_at=when or _now(), form_version="abc123", ip_hash="ip", detail="")


def test_hits_count_per_key_and_window(store_url):
    """Each key counts on its own, a new window starts again at 1, and old windows are cleared out."""
    store = Store(store_url)
    assert [store.hit("a", 3600, now=7200.5) for _ in range(3)] == [1, 2, 3]
    assert store.hit("b", 3600, now=7201) == 1
    assert store.hit("a", 3600, now=10800) == 1  # the next hour
    assert store.hit("a", 3600, now=7300) == 4  # the earlier window kept its count
    assert store.hit("a", 3600, now=7200 + 3 * 86400) == 1  # days later: a new window clears the old ones
    assert store.hit("a", 3600, now=7300) == 1
    store.close()


def test_hits_from_many_threads_are_all_counted(store_url):
    """Counting is atomic: 8 threads × 25 hits on one key leave 200, whatever the interleaving."""
    store = Store(store_url)
    seen: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(25):
            hits = store.hit("k", 3600, now=3600)
            with lock:
                seen.append(hits)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == list(range(1, 201))
    store.close()


def test_a_newer_signup_voids_the_older_link_and_a_link_confirms_once(store_url):
    """The latest signup's nonce confirms (a web subscriber, the consent); the older one is void, the used one used."""
    store = Store(store_url)
    store.put_signup(record("11" * 16), expired_before=_now() - timedelta(hours=48))
    store.put_signup(record("22" * 16), expired_before=_now() - timedelta(hours=48))
    assert store.confirm_signup(NEW.email, "11" * 16, "ip2").outcome == "void"
    done = store.confirm_signup(NEW.email, "22" * 16, "ip2")
    assert done.outcome == "confirmed" and done.subscriber.interests == NEW.interests
    assert store.owners(["new@example.org"]) == {"new@example.org": ("web", None)}
    assert store.confirm_signup(NEW.email, "22" * 16, "ip2").outcome == "used"
    [consent] = store.consents_of("NEW@example.org")
    assert (consent["form_version"], consent["ip_hash"], consent["confirm_ip_hash"]) == ("abc123", "ip", "ip2")
    assert store.signup(NEW.email) is None
    store.close()


def test_expired_signups_are_deleted_and_held_ones_confirm_nothing(store_url):
    """A pending signup older than the expiry goes with the next signup; a held one (an address a file has) is
    listed for the operator and its nonce confirms nothing."""
    store = Store(store_url)
    store.put_signup(record("33" * 16, when=_now() - timedelta(hours=50)), expired_before=_now())
    other = SignupRecord(email="other@example.org", status="held", nonce="44" * 16, profile=profile_json(NEW),
                         requested_at=_now(), form_version="v", ip_hash="h", detail="the profile file ada.toml")
    store.put_signup(other, expired_before=_now() - timedelta(hours=48))
    assert store.signup(NEW.email) is None
    assert [s.detail for s in store.held_signups()] == ["the profile file ada.toml"]
    assert store.confirm_signup("other@example.org", "44" * 16, "ip").outcome == "void"
    store.close()


def test_a_file_that_took_the_address_meanwhile_wins(store_url):
    """A confirmation for an address a profile file got after the signup leaves the file's subscriber alone."""
    store = Store(store_url)
    store.put_signup(record("55" * 16), expired_before=_now() - timedelta(hours=48))
    file_profile = Subscriber(email="new@example.org", name="From the file")
    store.put_subscribers([file_profile], "import")
    done = store.confirm_signup(NEW.email, "55" * 16, "ip")
    assert done.outcome == "held" and done.holder == "an imported subscriber"
    assert store.subscribers_by_email(["new@example.org"])["new@example.org"].name == "From the file"
    assert store.consents_of(NEW.email) == []
    store.close()


def test_two_confirmations_at_once_confirm_once(store_url):
    """Eight threads following one link at once: one confirms, the rest find it used; one consent."""
    store = Store(store_url)
    store.put_signup(record("66" * 16), expired_before=_now() - timedelta(hours=48))
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def press() -> None:
        start.wait()
        outcomes.append(store.confirm_signup(NEW.email, "66" * 16, "ip").outcome)

    threads = [threading.Thread(target=press) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["confirmed"] + ["used"] * 7
    assert len(store.consents_of(NEW.email)) == 1
    store.close()
