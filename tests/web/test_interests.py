"""The "Your interests" page (`/interests/<token>`) over real HTTP (waitress) and a real store: a web reader sees
and edits every interest, topic, send time and time zone, checked by the profile files' own validator; the next
digest follows; a profile file's reader sees theirs read-only; marks are listed, removable and reset."""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Iterator
from dataclasses import replace
from datetime import date, timedelta
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest.app import App
from digest.config import build_config
from digest.models import Interest, LibraryEntry, Subscriber
from digest.store import Store
from digest.store.signups import SignupRecord
from digest.store.subscribers import profile_json
from digest.store.tables import _now
from digest.subscribers.libraries import digest_of
from digest.subscribers.profiles import parse_profile, validate
from digest.web.interests import MAX_MARKS_SHOWN, zone_groups

from ..conftest import DAY, SEEDS, SUBSCRIBERS, background_papers, prime
from ..web_server import Server
from .test_browser import axe_source, browser, check_screens  # noqa: F401 - the module's fixtures

ADA = "ada@example.org"  # a profile file's subscriber
READER = "Reader@example.org"  # a web subscriber (signed up and confirmed)
TOPICS = [{"name": "LLM inference", "summary": "Serving large language models fast and cheaply.",
           "keywords": ["KV cache", "speculative decoding", "LLM serving", "quantization"]},
          {"name": "Robots", "summary": "Robot learning and manipulation.", "keywords": ["robot", "manipulation"]}]
LIBRARY = (LibraryEntry("Attention Is All You Need", "The Transformer, based solely on attention.", "1706.03762"),
           LibraryEntry("Deep Residual Learning for Image Recognition", "Residual networks.", "1512.03385"))
KEY = digest_of(LIBRARY)


def web_reader(store: Store, subscriber: Subscriber) -> None:
    """A web subscriber as a reader becomes one: a pending signup, confirmed (the store's own path)."""
    nonce = secrets.token_hex(16)
    store.put_signup(SignupRecord(email=subscriber.email, status="pending", nonce=nonce,
                                  profile=profile_json(subscriber), requested_at=_now(), form_version="v",
                                  ip_hash="ip", detail=""), expired_before=_now() - timedelta(hours=48))
    assert store.confirm_signup(subscriber.email, nonce, "ip").outcome in ("confirmed", "updated")


@pytest.fixture(scope="module")
def served(tmp_path_factory, model_rows) -> Iterator[Server]:
    """`digest serve` over the example subscribers and a topic catalogue, the seed pages ingested (once a module)."""
    folder = tmp_path_factory.mktemp("interests")
    config = build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
                           "ingest": {"paths": [str(SEEDS)]}, "select": {"max_age_days": 0}, "topics": TOPICS},
                          base=folder)
    prime(config.store.url, model_rows)
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    app.store.put_library(KEY, LIBRARY)
    server = Server(app)
    yield server
    server.close()
    app.close()


@pytest.fixture
def site(served) -> Server:
    """The server with its web reader as they signed up (a topic, their own words, a library) and nobody's marks."""
    store = served.app.store
    topic = served.app.config.topics[0].interest
    web_reader(store, Subscriber(email=READER, name="Reader", timezone="Europe/London", interests=(
        topic, Interest("In your words", ("diffusion", "image generation")),
        Interest("My library", description="Papers like the ones I keep.", library_key=KEY,
                 library_source="upload: library.bib"))))
    for email in (READER, ADA):
        store.remove_feedback(email)
    return served


def url(site: Server, email: str = READER, issued: date | None = None) -> str:
    """The reader's interests page: the preferences link's token under /interests/."""
    return site.path(site.app.links(email, issued).preferences).replace("/preferences/", "/interests/")


def form(page: str) -> dict[str, object]:
    """The save form's fields as a browser would send them unchanged (checked boxes, selected options)."""
    save = page.split('name="do" value="save"', 1)[1].split("</form>", 1)[0]
    fields: dict[str, object] = {"do": "save"}
    for tag in re.findall(r"<input [^>]*>", save):
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name and ('type="checkbox"' not in tag or " checked" in tag):
            fields.setdefault(name.group(1), []).append(html.unescape(value.group(1) if value else ""))
    for name, text in re.findall(r'<textarea [^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', save, re.S):
        fields[name] = [html.unescape(text)]
    select = re.search(r'<select [^>]*name="timezone".*?</select>', save, re.S).group(0)
    fields["timezone"] = [re.search(r'<option value="([^"]+)" selected>', select).group(1)]
    for name, options in re.findall(r'<select [^>]*name="(share-\d+)"[^>]*>(.*?)</select>', save, re.S):
        fields[name] = [re.search(r'<option value="([^"]+)" selected>', options).group(1)]
    return {k: v[0] if isinstance(v, list) and len(v) == 1 and k != "topics" else v for k, v in fields.items()}


def stored(site: Server, email: str = READER) -> Subscriber:
    return site.app.store.profile_of(email)[1]


def test_a_web_reader_sees_every_interest_topic_time_and_zone(site):
    """The page shows the own interests' names, keywords and descriptions, the library's count, the topic ticked,
    the send time and the time zone selected in a picker grouped by region, and the preferences page links to it."""
    page = site.client.get(url(site))
    assert page.status_code == 200 and "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert 'value="In your words"' in page.text and ">diffusion, image generation</textarea>" in page.text
    assert ">Papers like the ones I keep.</textarea>" in page.text and "2 papers in its library" in page.text
    assert 'value="LLM inference" checked' in page.text and 'value="Robots">' in page.text
    assert 'value="LLM inference"' not in page.text.split("<legend>Interest 1")[1]  # a topic is ticked, not edited
    assert 'name="send_at" value="07:00"' in page.text
    assert '<optgroup label="Europe">' in page.text and '<option value="Europe/London" selected>London' in page.text
    assert "data-guess" not in page.text  # the reader's own zone: the script preselects nothing
    preferences = site.client.get(site.path(site.app.links(READER).preferences))
    assert f'href="{url(site)}"' in preferences.text
    assert site.client.get(url(site)).text == page.text  # a GET changes nothing


@pytest.mark.slow
def test_an_edit_applies_to_the_next_digest(site):
    """Renaming an interest and changing its words, unticking a topic, ticking another, adding an interest, moving
    the send time and zone: stored as the reader's profile (the library kept), the delivery slot moved, and the next
    digest composed by the app has the new sections and none of the old."""
    app = site.app
    before = app.composer.compose(app.profiles.roster().find(READER), DAY, app.composer.pool(DAY))
    assert "LLM inference" in {s.name for s in before.digest.sections}
    fields = form(site.client.get(url(site)).text)
    fields.update({"name-0": "Reinforcement learning", "keywords-0": "reinforcement learning, reward model",
                   "topics": ["Robots"], "name-2": "Protein design", "keywords-2": "protein",
                   "send_at": "18:30", "timezone": "America/New_York"})
    saved = site.client.post(url(site), data=fields)
    assert saved.status_code == 200 and "Saved. Your next digest follows these interests." in saved.text
    profile = stored(site)
    assert [i.name for i in profile.interests] == ["Robots", "Reinforcement learning", "My library", "Protein design"]
    assert profile.interests[1].keywords == ("reinforcement learning", "reward model")
    assert (profile.interests[2].library_key, profile.interests[2].description) == (
        KEY, "Papers like the ones I keep.")
    assert app.store.library_entries(KEY) == LIBRARY
    assert (profile.timezone, f"{profile.send_at:%H:%M}") == ("America/New_York", "18:30")
    assert any((s.timezone, f"{s.send_at:%H:%M}") == ("America/New_York", "18:30") for s in app.store.slot_counts())
    after = app.composer.compose(app.profiles.roster().find(READER), DAY + timedelta(days=1), app.composer.pool(DAY))
    sections = {s.name: s for s in after.digest.sections}
    assert "Reinforcement learning" in sections and not {"LLM inference", "In your words"} & set(sections)
    assert "Reinforcement learning" not in before.rendered.html
    assert all("reinforcement" in (i.paper.title + i.paper.abstract).lower()
               for i in sections["Reinforcement learning"].items)
    assert "Reinforcement learning" in after.rendered.html


def test_removing_an_interest_and_leaving_the_new_one_blank(site):
    """A ticked "Remove this interest" drops it; the blank "Add an interest" adds nothing; unchanged fields stay."""
    fields = form(site.client.get(url(site)).text)
    fields["remove-0"] = "1"
    assert site.client.post(url(site), data=fields).status_code == 200
    assert [i.name for i in stored(site).interests] == ["LLM inference", "My library"]


def test_mistakes_are_the_profile_validators_with_what_was_typed_kept(site, tmp_path):
    """A keyword past the limit, an unknown zone, a bad time and a topic's name: 422, each message the profile file
    validator's (naming the interest as the page shows it), the typed values kept in the form, nothing stored."""
    before = stored(site)
    long_keyword = "k" * 101
    fields = form(site.client.get(url(site)).text)
    fields.update({"keywords-0": f"video, {long_keyword}", "timezone": "Mars/Olympus", "send_at": "25:00",
                   "name-2": "Robots", "keywords-2": "arms"})
    page = site.client.post(url(site), data=fields)
    assert page.status_code == 422 and "nothing was saved" in page.text
    problems = [html.unescape(p) for p in re.findall(r"<li>(.*?)</li>", page.text.split('role="alert"')[1])]
    # The same interest in a profile file: the validator's own words, "interest 2" there (the topic is first).
    profile = tmp_path / "p.toml"
    profile.write_text(f'email = "x@example.org"\ntimezone = "Mars/Olympus"\nsend_at = "25:00"\n'
                       f'[[interests]]\nname = "LLM inference"\nkeywords = ["KV cache"]\n'
                       f'[[interests]]\nname = "In your words"\nkeywords = ["video", "{long_keyword}"]\n')
    _, file_problems = parse_profile(profile)
    assert len(file_problems) == 3
    assert problems == [m[:1].upper() + m[1:] if not m.startswith("interest 2: ") else
                        "Interest 1 (In your words): " + m.removeprefix("interest 2: ")
                        for m in (p.message for p in file_problems)] + [
        "Interest 3: “Robots” is the name of a topic; tick the topic instead, or choose another name."]
    assert f"video, {long_keyword}</textarea>" in page.text and 'value="25:00"' in page.text
    assert 'name="name-2" value="Robots"' in page.text and ">arms</textarea>" in page.text  # the new one, as typed
    assert stored(site) == before


def test_an_interest_left_with_nothing_is_the_validators_problem(site):
    """Clearing an interest's words: the profile validator's "give keywords, a description, …" and "name must be
    a non-empty string"; a library-only interest stays valid by its library (as `library` does in a profile)."""
    fields = form(site.client.get(url(site)).text)
    fields.update({"name-0": " ", "keywords-0": "", "description-1": "", "keywords-1": ""})
    page = site.client.post(url(site), data=fields)
    assert page.status_code == 422
    assert "Interest 1: name must be a non-empty string" in page.text
    assert "Interest 1: give keywords, a description, seed_papers, a library or authors" in page.text
    assert "Interest 2" not in page.text.split('role="alert"')[1].split("</div>")[0]
    fields.update({"name-0": "Kept", "keywords-0": "agents"})
    assert site.client.post(url(site), data=fields).status_code == 200
    library = stored(site).interests[2]
    assert (library.name, library.description, library.keywords, library.library_key) == ("My library", "", (), KEY)


def test_the_validators_interest_limit_holds_on_the_page(site):
    """51 interests (the limit is 50): the validator's message, nothing stored."""
    fields = form(site.client.get(url(site)).text)
    for n in range(2, 50):  # the topic, the 2 interests kept, 48 new ones
        fields.update({f"name-{n}": f"Topic {n}", f"keywords-{n}": f"word{n}"})
    page = site.client.post(url(site), data=fields)
    assert page.status_code == 422 and "51 interests; a profile has at most 50" in html.unescape(page.text)
    assert len(stored(site).interests) == 3


def test_a_profile_files_reader_sees_their_interests_read_only(site):
    """Ada's profile is a file: the page lists her interests with a line saying the operator manages them (the
    file's path is not shown), offers no save form, and a forged save changes nothing (409)."""
    page = site.client.get(url(site, ADA))
    assert page.status_code == 200 and "managed by the newsletter's operator (a profile file)" in page.text
    ada = site.app.profiles.roster().find(ADA)
    for interest in ada.interests:
        assert f"<dt>{html.escape(interest.name, quote=False)}</dt>" in page.text
    assert 'value="save"' not in page.text and "subscribers/" not in page.text
    refused = site.client.post(url(site, ADA), data={"do": "save", "name-0": "Changed", "keywords-0": "x",
                                                     "send_at": "09:00", "timezone": "UTC"})
    assert refused.status_code == 409 and "managed by the newsletter's operator" in refused.text
    assert stored(site, ADA) == site.app.store.profile_of(ADA)[1] and stored(site, ADA).interests == ada.interests


def test_marks_are_listed_each_removable_and_reset(site):
    """The papers marked "more / less like this", newest first (the latest MAX_MARKS_SHOWN of more), each with a
    Forget button naming it; one forgotten, then the reset forgets the rest and the model learned from them."""
    store = site.app.store
    papers = store.candidates(DAY, 3650)[:MAX_MARKS_SHOWN + 1]
    for n, paper in enumerate(papers):
        store.add_feedback(READER, paper.store_id, 1 if n % 2 else -1)
    store.put_cache(f"feedback-model/{READER}", b"a model")
    page = site.client.get(url(site))
    assert f"(the latest {MAX_MARKS_SHOWN} of {MAX_MARKS_SHOWN + 1})" in page.text
    assert page.text.count('name="do" value="unmark"') == MAX_MARKS_SHOWN
    first = papers[-1]
    assert f'<span class="sr"> “{html.escape(first.title, quote=False)}”</span>' in page.text
    done = site.client.post(url(site), data={"do": "unmark", "paper": str(first.store_id)})
    assert done.status_code == 200 and "Forgotten." in done.text
    assert first.store_id not in store.feedback_by_subscriber(READER)[READER]
    assert site.client.post(url(site), data={"do": "unmark", "paper": "x"}).status_code == 400
    reset = site.client.post(url(site), data={"do": "reset"})
    assert f"Forgotten: {MAX_MARKS_SHOWN} marks." in reset.text and "Nothing yet" in reset.text
    assert store.feedback_by_subscriber(READER) == {} and store.get_cache(f"feedback-model/{READER}") is None


def test_a_profile_files_reader_controls_their_marks_too(site):
    """Marks are the reader's whatever the profile's source: Ada (a file) forgets hers."""
    paper = site.app.store.candidates(DAY, 3650)[0]
    site.app.store.add_feedback(ADA, paper.store_id, 1)
    assert html.escape(paper.title, quote=False) in site.client.get(url(site, ADA)).text
    assert site.client.post(url(site, ADA), data={"do": "reset"}).status_code == 200
    assert site.app.store.feedback_by_subscriber(ADA) == {}


def test_other_sites_bad_links_and_big_bodies_change_nothing(site):
    """A POST naming another site: 403; a forged token: 400; an expired one: 410; a body past 64 KiB: 413; an
    unknown action: 400. The stored profile is the same after each."""
    before = stored(site)
    fields = form(site.client.get(url(site)).text)
    fields["name-0"] = "Changed"
    assert site.client.post(url(site), data=fields, headers={"Origin": "https://evil.example"}).status_code == 403
    assert site.client.post(url(site)[:-3] + "abc", data=fields).status_code == 400
    old = url(site, issued=date.today() - timedelta(days=site.app.config.web.link_days + 1))
    assert site.client.get(old).status_code == 410 and site.client.post(old, data=fields).status_code == 410
    assert site.client.post(url(site), data={**fields, "description-0": "x" * 70_000}).status_code == 413
    assert site.client.post(url(site), data={"do": "other"}).status_code == 400
    assert stored(site) == before


def test_everything_the_reader_typed_is_escaped(site):
    """Markup in a name, keyword and description comes back as text, in the form and in the fieldset's legend."""
    fields = form(site.client.get(url(site)).text)
    fields.update({"name-0": '<script>alert(1)</script>"', "keywords-0": "</textarea><b>x</b>",
                   "description-0": "<img src=x onerror=alert(1)>"})
    page = site.client.post(url(site), data=fields)
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img src=x" not in page.text and "<b>x</b>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in page.text and "&lt;/textarea&gt;&lt;b&gt;" in page.text


def test_the_zone_picker_groups_by_region_and_keeps_an_outside_zone():
    """Every region's zones under its own group, UTC first; a zone outside the regions (a profile's US/Eastern) is
    offered too, so the page never changes it unasked."""
    groups = dict(zone_groups("Europe/London"))
    assert list(groups)[0] == "UTC" and ("Europe/London", "London") in groups["Europe"]
    assert ("America/Argentina/Buenos_Aires", "Argentina – Buenos Aires") in groups["America"]
    assert "Other" not in groups and sum(map(len, groups.values())) > 300
    assert dict(zone_groups("US/Eastern"))["Other"] == [("US/Eastern", "US/Eastern")]


def test_marks_and_web_profiles_on_both_databases(store_url):
    """marks_of (newest first, any case), remove_feedback (one, then all), replace_web_profile (a web subscriber's
    only) on SQLite and PostgreSQL alike."""
    store = Store(store_url)
    store.add_papers(background_papers()[:3], seen_on=DAY)
    ids = [p.store_id for p in store.candidates(DAY, 1)]
    for paper_id in ids:
        store.add_feedback(READER, paper_id, 1)
    marks, total = store.marks_of(READER.lower(), 2)
    assert total == 3 and [m.paper.store_id for m in marks] == ids[::-1][:2] and marks[0].value == 1
    assert store.remove_feedback(READER.upper(), ids[0]) == 1 and store.remove_feedback(READER, ids[0]) == 0
    assert store.remove_feedback(READER) == 2 and store.marks_of(READER, 5) == ([], 0)
    web_reader(store, Subscriber(email=READER, interests=(Interest("A", ("a",)),)))
    store.put_subscribers([Subscriber(email=ADA, interests=(Interest("B", ("b",)),))], "import")
    assert store.replace_web_profile(Subscriber(email=READER, interests=(Interest("C", ("c",)),)))
    assert store.profile_of(READER)[1].interests == (Interest("C", ("c",)),)
    assert not store.replace_web_profile(Subscriber(email=ADA, interests=(Interest("D", ("d",)),)))
    assert store.profile_of(ADA) == ("import", Subscriber(email=ADA, interests=(Interest("B", ("b",)),), path=None))
    store.close()


@pytest.mark.slow
def test_the_page_in_chromium_at_both_widths_light_and_dark(browser, axe_source, site):  # noqa: F811 - fixtures
    """In Chromium: without a script the reader's stored zone (UTC) stays selected; with it, the browser's zone is
    preselected. A mistake shows the alert and keeps the typed words; then the page (interests, topics, marks,
    problems) and a profile file reader's read-only page pass axe-core at 375 and 1280 px, light and dark (no serious
    or critical violation, the Save button's text at least 4.5:1); the corrected save stores the new interest."""
    site.app.store.replace_web_profile(replace(stored(site), timezone="UTC"))
    paper = site.app.store.candidates(DAY, 3650)[0]
    site.app.store.add_feedback(READER, paper.store_id, 1)
    plain = browser.new_context(java_script_enabled=False, timezone_id="Asia/Tokyo")
    page = plain.new_page()
    page.goto(site.base + url(site))
    assert page.locator("#timezone").input_value() == "UTC"
    plain.close()
    context = browser.new_context(bypass_csp=True, timezone_id="Asia/Tokyo")  # (bypass: for axe's script)
    page = context.new_page()
    page.goto(site.base + url(site))
    assert page.locator("#timezone").input_value() == "Asia/Tokyo"
    page.get_by_label("Name").last.fill("Agents")
    page.get_by_label("Keywords").last.fill("tool use, " + "w" * 101)
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()
    assert page.get_by_role("alert").is_visible() and "at most 100" in page.get_by_role("alert").inner_text()
    check_screens(page, axe_source, "interests", button="Save")
    page.get_by_label("Keywords").nth(2).fill("tool use, web agents")
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()
    assert "Saved." in page.inner_text("main")
    profile = stored(site)
    assert (profile.interests[-1].name, profile.interests[-1].keywords) == ("Agents", ("tool use", "web agents"))
    assert profile.timezone == "Asia/Tokyo"
    page.goto(site.base + url(site, ADA))
    check_screens(page, axe_source, "interests, read-only")
    context.close()


def test_the_welcome_email_shows_the_readers_own_words(site):
    """"In your words" in the welcome email's topics comes with the words typed (keywords, or the sentence), escaped
    in the HTML part."""
    from digest.signup.signups import Signups
    from digest.web.common import FREQUENCIES

    room = Signups(site.app, dict(FREQUENCIES))
    reader = stored(site)
    words = replace(reader, interests=(reader.interests[0], Interest("In your words", description="<b>bold</b> ideas")))
    for subscriber, shown in ((reader, "In your words (diffusion, image generation)"),
                              (words, "In your words (<b>bold</b> ideas)")):
        message = room.message("welcome", subscriber, {"links": site.app.links(READER)})
        assert f"Topics: LLM inference, {shown}" in message.get_body(("plain",)).get_content()
        assert f"Topics: LLM inference, {html.escape(shown, quote=False)}" in message.get_body(("html",)).get_content()


HOSTILE = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
                    st.sampled_from(["", " ", "0", "99", "-1", "9" * 30, "x" * 3000, "a,,b;;\n", "07:30", "UTC",
                                     "Europe/London", "../etc/passwd", "LLM inference", "Robots", "\x00", "\u202e"]))
FIELDS = st.sampled_from(["do", "name-0", "keywords-0", "description-0", "of-0", "remove-0", "name-1", "of-1",
                          "keywords-3", "name-3", "topics", "send_at", "timezone", "paper"])


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.dictionaries(FIELDS, HOSTILE, max_size=8), st.sampled_from(["save", "unmark", "reset", None]))
@example({"send_at": "07:30", "timezone": "UTC", "name-3": "\u202e", "keywords-3": "a,,b;;\n", "of-0": "99"}, "save")
def test_hostile_forms_answer_4xx_or_a_valid_profile(site, fields, action):
    """Any values in any of the page's fields: 200, 400, 409 or 422, never a 5xx; whatever was stored after a 200 is
    a profile the validator passes (the page never stores what a profile file could not hold)."""
    data = {**fields, **({"do": action} if action else {})}
    response = site.client.post(url(site), data=data)
    assert response.status_code in (200, 400, 422), (data, response.status_code)
    profile = stored(site)
    assert profile.interests and all(i.name.strip() for i in profile.interests)
    tables = [{"name": i.name, "keywords": list(i.keywords) or ["(a library)"], "description": i.description}
              for i in profile.interests]
    assert validate({"email": profile.email, "timezone": profile.timezone, "send_at": f"{profile.send_at:%H:%M}",
                     "interests": tables}, "p", lambda _k, _n: 0)[1] == []


def test_under_a_base_path_the_page_and_its_links_are_beside_the_preferences(make_config):
    """base_url with a path: the preferences page links PATH/interests/<token>, which answers with its script at
    PATH/interests.js, links back to PATH/preferences/<token> and on to PATH/library/<token>, and saves there."""
    app = App(make_config(newsletter={"base_url": "https://digest.example.org/papers"}))
    web_reader(app.store, Subscriber(email=READER, interests=(Interest("Agents", ("tool use",)),)))
    server = Server(app)
    try:
        preferences = urlsplit(app.links(READER).preferences).path
        assert preferences.startswith("/papers/preferences/")
        mine = preferences.replace("/papers/preferences/", "/papers/interests/")
        assert f'href="{mine}"' in server.client.get(preferences).text
        page = server.client.get(mine)
        assert page.status_code == 200 and f'href="{preferences}"' in page.text
        library = preferences.replace("/papers/preferences/", "/papers/library/")
        assert f'href="{library}"' in page.text and server.client.get(library).status_code == 200
        assert 'src="/papers/interests.js"' in page.text
        assert server.client.get("/papers/interests.js").status_code == 200
        saved = server.client.post(mine, data={**form(page.text), "keywords-0": "tool use, planning"})
        assert saved.status_code == 200 and stored(server).interests[0].keywords == ("tool use", "planning")
    finally:
        server.close()
        app.close()


def test_a_new_interest_left_unnamed_is_named_from_its_words(site):
    """Adding an interest with only a sentence gives it a name made of its own words, never a placeholder, and keeps
    the sentence whole as its description."""
    sentence = "robots that learn dexterous manipulation from human video"
    fields = form(site.client.get(url(site)).text)
    fields.update({"name-2": "", "keywords-2": "", "description-2": sentence})
    saved = site.client.post(url(site), data=fields)
    assert saved.status_code == 200 and "Saved." in saved.text
    added = stored(site).interests[-1]
    assert (added.description, added.keywords) == (sentence, ())
    assert added.name.startswith("Robots, ") and "learn dexterous manipulation" in added.name


def test_a_reader_gives_an_interest_a_larger_share(site):
    """The interests page sets an interest's share of the places (its weight), and the digest follows it."""
    fields = form(site.client.get(url(site)).text)
    assert fields.get("share-0") == "1"
    fields["share-0"] = "2"
    saved = site.client.post(url(site), data=fields)
    assert saved.status_code == 200 and "Saved." in saved.text
    profile = stored(site)
    assert profile.interests[[i.name for i in profile.interests].index(fields["name-0"])].weight == 2.0
    assert 'value="2" selected' in site.client.get(url(site)).text
