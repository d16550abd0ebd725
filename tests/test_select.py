"""Selection: relevant first, exclusions, the relevance floor, grouping, reasons, history."""

from __future__ import annotations

from datetime import date

from digest.models import Interest, Paper, Subscriber
from digest.select import Pool, SelectSettings, select_digest, tokens

DAY = date(2026, 6, 12)
SETTINGS = SelectSettings()


def paper(n: int, title: str, abstract: str, upvotes: int | None = None, published: date = DAY) -> Paper:
    return Paper(title=title, abstract=abstract, upvotes=upvotes, published=published, store_id=n)


POOL = [
    paper(1, "Fused CUDA Kernels for Attention", "We write CUDA kernels that fuse attention on GPUs.", 5),
    paper(2, "A Survey of Sheep Herding", "Sheep are herded by dogs in the Scottish highlands.", 500),
    paper(3, "KV Cache Compression for LLM Serving", "We compress the KV cache to speed up LLM serving.", 3),
    paper(4, "Triton kernel autotuning", "Autotuning Triton kernels; kernel fusion helps.", 40),
    paper(5, "Autonomous Driving with CUDA kernels", "CUDA kernels for autonomous driving perception.", 90),
    paper(6, "Graph neural networks", "A model. We mention a kernel once.", 1),
]
ADA = Subscriber(email="ada@example.org", max_papers=10, interests=(
    Interest("GPU kernels", ("CUDA", "kernel", "Triton", "kernel fusion")),
    Interest("LLM serving", ("KV cache", "LLM serving")),
), exclude=("autonomous driving",))


def titles(digest) -> list[str]:
    return [item.paper.title for item in digest.items]


def test_word_forms_match():
    """Stemming makes kernel/kernels, cache/caching and LLM/LLMs the same token."""
    assert tokens("Kernels caching LLMs") == tokens("kernel cache LLM")


def test_relevant_first_unrelated_and_excluded_dropped():
    """Matching papers are picked best first; an unrelated paper and an excluded one are not."""
    digest = select_digest(Pool(POOL), ADA, day=DAY, received=set(), settings=SETTINGS)
    picked = titles(digest)
    assert "A Survey of Sheep Herding" not in picked
    assert "Autonomous Driving with CUDA kernels" not in picked
    assert set(picked) == {POOL[0].title, POOL[2].title, POOL[3].title}
    scores = [item.score for section in digest.sections for item in section.items]
    for section in digest.sections:
        section_scores = [i.score for i in section.items]
        assert section_scores == sorted(section_scores, reverse=True)
    assert len(scores) == 3


def test_relevance_floor_holds():
    """A single passing mention in the abstract is below the floor; lowering the floor admits it."""
    strict = select_digest(Pool(POOL), ADA, day=DAY, received=set(), settings=SETTINGS)
    assert "Graph neural networks" not in titles(strict)
    loose = select_digest(Pool(POOL), ADA, day=DAY, received=set(),
                          settings=SelectSettings(relevance_floor=0.5))
    assert "Graph neural networks" in titles(loose)


def test_groups_follow_interests_with_reasons():
    """Each paper sits in its best interest's section and carries the keywords it matched."""
    digest = select_digest(Pool(POOL), ADA, day=DAY, received=set(), settings=SETTINGS)
    sections = {s.name: s for s in digest.sections}
    assert [i.paper.store_id for i in sections["LLM serving"].items] == [3]
    kv = sections["LLM serving"].items[0]
    assert set(kv.reasons) == {"KV cache", "LLM serving"}
    triton = next(i for i in sections["GPU kernels"].items if i.paper.store_id == 4)
    assert "Triton" in triton.reasons and "kernel fusion" in triton.reasons
    assert "CUDA" not in triton.reasons


def test_nothing_already_received_is_repeated():
    """Papers the subscriber already received are never picked again."""
    digest = select_digest(Pool(POOL), ADA, day=DAY, received={1, 4}, settings=SETTINGS)
    assert titles(digest) == [POOL[2].title]


def test_upvotes_break_ties_between_equal_matches():
    """Between two equally relevant papers, the one with more upvotes ranks first."""
    twins = [paper(1, "Triton kernels", "Triton.", 1), paper(2, "Triton kernels!", "Triton.", 80)]
    sub = Subscriber(email="g@example.org", interests=(Interest("K", ("Triton",)),))
    digest = select_digest(Pool(twins), sub, day=DAY, received=set(), settings=SETTINGS)
    assert [i.paper.store_id for i in digest.items] == [2, 1]


def test_max_papers_and_trending_profile():
    """A profile without interests gets the top papers by upvotes, capped at max_papers, minus exclusions."""
    reader = Subscriber(email="k@example.org", max_papers=3, exclude=("autonomous driving",))
    digest = select_digest(Pool(POOL), reader, day=DAY, received=set(), settings=SETTINGS)
    assert digest.trending
    assert [i.paper.store_id for i in digest.items] == [2, 4, 1]
    assert digest.items[0].reasons == ("trending: 500 upvotes",)


def test_weights_order_sections():
    """An interest's weight scales its papers' scores, so sections come out in order of strength."""
    heavy = Subscriber(email="w@example.org", interests=(
        Interest("GPU kernels", ("CUDA", "kernel", "Triton"), weight=0.1),
        Interest("LLM serving", ("KV cache", "LLM serving"), weight=5.0)))
    digest = select_digest(Pool(POOL), heavy, day=DAY, received=set(), settings=SETTINGS)
    assert digest.sections[0].name == "LLM serving"
