"""The "Why" line: whole keywords, the reader's own phrases, library and liked papers by title, followed authors, and
how strong a match it is, on real papers and real profiles.

Papers: the seed pages and the Hugging Face Daily Papers fixture (arXiv ids and author lists), in one real SQLite
store. Profiles: the example subscribers, a reader's quoted sentence, and the relevance benchmark's sentences
(`bench/relevance_profiles.py`, written by a helper who saw neither the code nor the data).
"""

from __future__ import annotations

import importlib.util
import math
import re
from dataclasses import replace

import pytest

from digest.app import App
from digest.config import build_config
from digest.models import Interest, Paper, Subscriber
from digest.select.explain import COMMON_SHARE, GOOD_MATCH, LEADING, STRONG_MATCH, TRAILING, chunks, strength
from digest.select.scores import SECTION_SURE
from digest.select.text import STOP_WORDS, bigrams, terms, tokens

from ..conftest import DAY, FIXTURES, ROOT, SEEDS, SUBSCRIBERS, prime

ISSUE_SENTENCE = "Making LLM inference faster on long inputs, and routing tokens in mixture-of-experts models"
# The relevance benchmark's categories whose papers the seed pages have (systems, hardware, agents, software).
CATEGORIES = ("cs.DC", "cs.AR", "cs.MA", "cs.SE", "cs.NE", "cs.IR")
KV_LIBRARY = ("SnapKV", "H_2O", "Locret", "CSKV", "ALISA", "Tangram")  # seed papers, by the start of their title


def written_sentences() -> list[str]:
    """The relevance benchmark's one-sentence descriptions of CATEGORIES, both sets."""
    spec = importlib.util.spec_from_file_location("relevance_profiles", ROOT / "bench" / "relevance_profiles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [str(s[c]["description"]) for s in (module.SET_T, module.SET_R) for c in CATEGORIES]


@pytest.fixture(scope="module")
def site(tmp_path_factory, model_rows):
    """One store for the module: the seed pages and the Daily Papers fixture ingested on DAY; the example readers."""
    folder = tmp_path_factory.mktemp("why")
    config = build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": str(SUBSCRIBERS)},
                           "ingest": {"paths": [str(SEEDS)]}, "select": {"max_age_days": 0}}, base=folder)
    prime(config.store.url, model_rows)
    app = App(config)
    app.ingest([SEEDS, FIXTURES / "hf_daily_papers_2026-06-12.json"], seen_on=DAY)
    app.profiles.sync()
    yield app
    app.close()


def text_of(paper: Paper) -> set[str]:
    return set(terms(f"{paper.title} {paper.abstract}"))


def has_phrase(paper: Paper, phrase: str) -> bool:
    """The paper has the phrase as the index reads one: each of its words, and each pair of them in turn."""
    words = tokens(phrase)
    found = text_of(paper)
    return set(words) <= found and set(bigrams(words)) <= found


def quoted(reason: str) -> str | None:
    """The reader's phrase a reason quotes (“…”), or None for any other reason."""
    found = re.fullmatch(r"“(.+)”", reason)
    return found.group(1) if found else None


def test_a_sentence_is_cut_into_its_topic_phrases_without_filler():
    """A reader's sentence gives its four topic phrases whole: "Making" and "faster" trimmed, "of" kept inside."""
    sentence = ISSUE_SENTENCE
    assert [sentence[c.spans[0][0]:c.spans[-1][1]] for c in chunks(sentence)] == [
        "LLM inference", "long inputs", "routing tokens", "mixture-of-experts models"]
    assert [c.words for c in chunks("I want papers on agents that use tools reliably.")] == [("agent",), ("tool",)]
    assert chunks("Papers, work and research.") == ()


@pytest.mark.slow
def test_phrases_of_the_readers_sentence_are_whole_never_stop_words_filler_or_lone_common_words(site):
    """For the issue's sentence and a dozen sentences written for the benchmark, each quoted phrase is a run of the
    sentence the paper has as a phrase, starting and ending on a topic word; a lone word only when it is a whole
    chunk and in at most one paper in fifteen; never "(in part)"."""
    pool = site.composer.pool(DAY)
    idf = pool.corpus.idf()
    from digest.select.text import columns

    shown = 0
    for n, sentence in enumerate([ISSUE_SENTENCE, *written_sentences()]):
        reader = Subscriber(f"r{n}@example.org", interests=(Interest("Mine", description=sentence),))
        lone_chunks = {c.words[0] for c in chunks(sentence) if len(c.words) == 1}
        for r in site.composer.rank(reader, DAY, limit=10):
            for reason in r.reasons:
                assert "(in part)" not in reason
                phrase = quoted(reason)
                if phrase is None:
                    assert reason.startswith(("like “", "close in meaning")), reason
                    continue
                shown += 1
                assert phrase in sentence and has_phrase(r.paper, phrase), (phrase, r.paper.title)
                words = phrase.split()
                assert words[0].lower() not in LEADING | STOP_WORDS and words[-1].lower() not in TRAILING | STOP_WORDS
                if len(tokens(phrase)) == 1:
                    [word] = tokens(phrase)
                    assert word in lone_chunks, phrase  # never a word of a longer phrase alone
                    assert idf[columns([word])[0]] >= math.log(1 / COMMON_SHARE), phrase
    assert shown >= 20


def test_the_issues_sentence_no_longer_quotes_its_filler(site):
    """The words once found quoted ("Making", "inputs", "long", "routing" alone) are not reasons; the phrases
    the papers have are ("LLM inference", "mixture-of-experts")."""
    reader = Subscriber("d@example.org", interests=(Interest("In your words", description=ISSUE_SENTENCE),))
    reasons = {reason for r in site.composer.rank(reader, DAY, limit=15) for reason in r.reasons}
    assert not reasons & {"Making", "inputs", "long", "routing", "models", "“Making”", "“inputs”", "“long”",
                          "“routing”", "“models”", "“faster”"}
    assert {"“LLM inference”", "“mixture-of-experts”"} <= reasons


def test_keywords_are_named_whole_and_only_when_the_paper_has_the_phrase(site):
    """The example subscribers' keyword reasons are their keywords as written; a phrase one only when the paper has
    the phrase, never one of its words."""
    multi = 0
    for email in ("ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"):
        reader = site.profiles.subscriber(email)
        keywords = {k for i in reader.interests for k in i.keywords}
        words = {w for k in keywords if len(k.split()) > 1 for w in k.split()} - keywords
        for r in site.composer.rank(reader, DAY, limit=20):
            named = [reason for reason in r.reasons if reason in keywords]
            assert not set(r.reasons) & words, r.reasons
            assert all(x in keywords or x.startswith(("like “", "close in meaning")) for x in r.reasons), r.reasons
            for keyword in named:
                if len(tokens(keyword)) > 1:
                    multi += 1
                    assert has_phrase(r.paper, keyword), (keyword, r.paper.title)
    assert multi >= 20


def test_a_library_reason_names_a_paper_of_the_library(site):
    """A library of six KV-cache papers (seed papers by title) explains picks by the title of one of them."""
    papers = site.store.all_papers()
    library = [next(p for p in papers if p.title.startswith(start)) for start in KV_LIBRARY]
    reader = Subscriber("lib@example.org", interests=(Interest("KV", seed_papers=tuple(p.title for p in library)),))
    titles = [p.title for p in library]
    named = []
    for r in site.composer.rank(reader, DAY, limit=10):
        for reason in r.reasons:
            found = re.fullmatch(r"like “(.+)” in your library \((?:both on .+|close in meaning)\)", reason)
            if found:
                title = found.group(1).removesuffix("…")
                assert any(t.startswith(title) for t in titles), reason
                named.append(title)
    assert len(named) >= 3


def test_an_author_reason_names_the_author_followed(site):
    """Following "Haoran Xu" picks his two papers of the day, each "by Haoran Xu, whom you follow"; no other."""
    reader = Subscriber("au@example.org", max_papers=10,
                        interests=(Interest("Serving", ("speculative decoding",), authors=("Haoran Xu",)),))
    digest = site.composer.compose(reader, DAY, site.composer.pool(DAY)).digest
    by = {item.paper.arxiv_id: item for item in digest.items}
    assert {"2606.09290", "2606.09304"} <= set(by)
    for item in digest.items:
        followed = "by Haoran Xu, whom you follow" in item.reasons
        assert followed == ("Haoran Xu" in item.paper.authors), item.paper.title
        assert not any("follow" in r for r in item.reasons if r != "by Haoran Xu, whom you follow")


LIKED_REASON = re.compile(r"like “(.+)”, which you marked more \((?:both on .+|close in meaning)\)")


def test_a_liked_paper_is_named_by_its_title(site):
    """With two speculative-decoding papers marked more, a pick the learned model lifts names one of them."""
    ada = site.profiles.subscriber("ada@example.org")
    papers = site.store.all_papers()
    liked = tuple(p for p in papers if "speculative decoding" in p.title.lower())[:2]
    signals = replace(site.composer.signals([ada], DAY)[ada.email], liked=liked)
    items = site.composer.compose(ada, DAY, site.composer.pool(DAY), signals=signals).digest.items
    names = [found.group(1).removesuffix("…") for item in items for reason in item.reasons
             if (found := LIKED_REASON.fullmatch(reason))]
    assert names and all(any(p.title.startswith(n) for p in liked) for n in names)


def test_a_paper_marked_under_one_interest_explains_only_that_interests_picks(site):
    """A reader of two interests marks papers of one of them more: picks of that interest may name a marked paper
    (one among the pick's nearest, saying what the two share), picks of the other interest never do, and no marked
    paper is named by more than three picks of the digest."""
    reader = Subscriber("two@example.org", max_papers=10, interests=(
        Interest("LLM inference", ("KV cache", "LLM inference", "speculative decoding", "LLM serving")),
        Interest("Quantization", ("quantization", "low-bit", "post-training quantization")),
    ))
    papers = site.store.all_papers()
    liked = tuple(p for p in papers if "kv cache" in f"{p.title} {p.abstract}".lower()
                  and "quantiz" not in f"{p.title} {p.abstract}".lower())[:8]
    assert len(liked) == 8
    signals = replace(site.composer.signals([reader], DAY)[reader.email], liked=liked)
    digest = site.composer.compose(reader, DAY, site.composer.pool(DAY), signals=signals).digest
    named: dict[str, int] = {}
    for section in digest.sections:
        for item in section.items:
            for reason in item.reasons:
                if found := LIKED_REASON.fullmatch(reason):
                    assert section.name == "LLM inference", (section.name, reason)
                    title = found.group(1).removesuffix("…")
                    assert any(p.title.startswith(title) for p in liked)
                    named[title] = named.get(title, 0) + 1
    assert named and max(named.values()) <= 3
    assert {s.name for s in digest.sections} >= {"LLM inference", "Quantization"}


def test_a_shared_word_is_named_only_when_both_papers_have_it_and_it_names_a_topic(site):
    """What a pick and its library or liked paper share: phrases of that paper's title the pick also has, never a
    word most papers have."""
    from digest.select.explain import shared_words

    index = site.composer.pool(DAY).index(site.settings.title_weight)
    pick = Paper(title="Fast KV cache eviction for long contexts", abstract="We evict entries of the KV cache.")
    assert shared_words(pick, "SnapKV: LLM Knows What You are Looking for: KV Cache compression", index) == ["KV Cache"]
    assert shared_words(pick, "A study of the model", index) == []


def test_strength_words_follow_the_calibrated_relevance():
    """"strong match" from the relevance the sections count as sure (log-odds SECTION_SURE, 88%), "good match" from
    70%, "possible match" below."""
    assert math.isclose(STRONG_MATCH, 1 / (1 + math.exp(-SECTION_SURE))) and GOOD_MATCH == 0.7
    assert [strength(x) for x in (1.0, STRONG_MATCH, 0.88, 0.7, 0.6999, 0.5, 0.2)] == [
        "strong match", "strong match", "good match", "good match", "possible match", "possible match",
        "possible match"]


@pytest.mark.slow
def test_each_pick_says_how_strong_a_match_it_is_in_both_parts(site):
    """Every pick of a digest carries the strength its relevance gives (as `digest rank` prints it), shown first on
    its Why line in the HTML and the text; a trending digest's papers carry none."""
    ada = site.profiles.subscriber("ada@example.org")
    description = Subscriber("d@example.org", interests=(Interest("In your words", description=ISSUE_SENTENCE),))
    seen = set()
    for reader in (ada, description):
        relevance = {r.paper.store_id: r.relevance for r in site.composer.rank(reader, DAY)}
        composed = site.composer.compose(reader, DAY, site.composer.pool(DAY))
        for item in composed.digest.items:
            assert item.strength == strength(relevance[item.paper.store_id])
            seen.add(item.strength)
            why = f"{item.strength}; {', '.join(item.reasons)}" if item.reasons else item.strength
            assert f"<b>Why:</b> {why}</div>" in composed.rendered.html
            assert " ".join(f"Why: {why}".split()) in " ".join(composed.rendered.text.split())
    assert {"strong match", "good match"} <= seen
    trending = site.composer.compose(site.profiles.subscriber("katherine@example.org"), DAY, site.composer.pool(DAY))
    assert all(item.strength == "" for item in trending.digest.items)
    assert "match;" not in trending.rendered.text
