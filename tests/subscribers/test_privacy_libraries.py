"""A reader's library and learned model on request: export gives the library's entries, forget erases what is theirs
alone (a library another subscriber shares stays, stored once under its digest)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sqlalchemy as sa

from digest.app import App
from digest.store.tables import cache
from digest.subscribers.privacy import export_data, forget
from digest.subscribers.roster import import_path

from ..conftest import DAY, SEEDS

LINA = "Lina@Example.org"  # a profile file, written with capitals: the learned model's cache key keeps them
BO = "bo@example.org"  # imported
WREN = "wren@example.org"  # a web subscriber

OWN_BIB = """@article{kwon2023,
  title = {Efficient Memory Management for Large Language Model Serving with PagedAttention},
  abstract = {We page the KV cache of LLM inference like virtual memory.},
  author = {Kwon, Woosuk and Li, Zhuohan},
  doi = {10.1145/3600006.3613165},
  timestamp = {2024-02-01},
}
@misc{leviathan2023,
  title = {Fast Inference from Transformers via Speculative Decoding},
  eprint = {2211.17192},
  archivePrefix = {arXiv},
}
"""

SHARED_BIB = """@misc{dao2022,
  title = {FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness},
  author = {Dao, Tri},
  eprint = {2205.14135},
}
"""

LINA_TOML = """email = "Lina@Example.org"
name = "Lina"
timezone = "Europe/Berlin"
send_at = "07:00"
frequency = "daily"
max_papers = 10

[[interests]]
name = "Serving"
library = "own.bib"
authors = ["Tri Dao"]

[[interests]]
name = "Attention kernels"
library = "shared.bib"
"""


@pytest.fixture
def lib_app(make_config, subscribers_dir, tmp_path):
    """Lina's profile file names her own library and a shared one; Bo, imported, names a copy of the shared one."""
    (subscribers_dir / "own.bib").write_text(OWN_BIB)
    (subscribers_dir / "shared.bib").write_text(SHARED_BIB)
    (subscribers_dir / "lina.toml").write_text(LINA_TOML)
    folder = tmp_path / "import"
    folder.mkdir()
    (folder / "shared.bib").write_text(SHARED_BIB)
    (folder / "list.csv").write_text(f"email,name,interest,library\n{BO},Bo,Kernels,shared.bib\n")
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.ingest([SEEDS], seen_on=DAY)
    assert not app.profiles.sync().problems
    assert not import_path(app.store, folder / "list.csv").problems
    yield app
    app.close()


def library_keys(app: App, email: str) -> list[str]:
    """The digests of the libraries a stored subscriber's interests name."""
    return [i.library_key for i in app.store.subscribers_by_email([email])[email].interests if i.library_key]


def cache_keys(app: App, prefix: str) -> set[str]:
    with app.store.engine.connect() as conn:
        return set(conn.execute(sa.select(cache.c.key).where(cache.c.key.startswith(prefix))).scalars())


def test_export_data_gives_each_interests_library_entries_and_followed_authors(lib_app):
    """export-data gives, with each interest, the authors it follows and every entry of its library as stored."""
    data = json.loads(json.dumps(export_data(lib_app, LINA.lower())))
    serving, kernels = data["profile"]["interests"]
    assert serving["authors"] == ["Tri Dao"] and kernels["authors"] == []
    assert serving["library_source"].endswith("own.bib") and serving["library_key"] == library_keys(lib_app, LINA)[0]
    paged, speculative = serving["library"]
    assert paged == {"title": "Efficient Memory Management for Large Language Model Serving with PagedAttention",
                     "abstract": "We page the KV cache of LLM inference like virtual memory.", "arxiv_id": None,
                     "doi": "10.1145/3600006.3613165", "authors": ["Woosuk Kwon", "Zhuohan Li"],
                     "added": "2024-02-01", "line": 1}
    assert (speculative["title"], speculative["arxiv_id"], speculative["added"]) == (
        "Fast Inference from Transformers via Speculative Decoding", "2211.17192", None)
    assert [(e["arxiv_id"], e["authors"]) for e in kernels["library"]] == [("2205.14135", ["Tri Dao"])]


def test_forget_deletes_a_library_no_one_else_names_and_keeps_a_shared_one_until_its_last_reader_goes(lib_app):
    """Forgetting Lina deletes her own library and keeps the one Bo (import) and Wren (web) share; it goes with
    the last of them."""
    own, shared = library_keys(lib_app, LINA)
    assert library_keys(lib_app, BO) == [shared] and lib_app.store.library_entries(own)
    bo = lib_app.store.subscribers_by_email([BO])[BO]
    lib_app.store.put_subscribers([replace(bo, email=WREN)], "web")
    result = forget(lib_app, LINA)
    assert result.counts["libraries"] == 1 and result.profile_file.endswith("lina.toml")
    assert lib_app.store.library_entries(own) == ()  # not stored again by the sync that refuses her file
    assert [e.arxiv_id for e in lib_app.store.library_entries(shared)] == ["2205.14135"]
    assert forget(lib_app, WREN).counts["libraries"] == 0 and lib_app.store.library_entries(shared)
    assert forget(lib_app, BO).counts["libraries"] == 1 and lib_app.store.library_entries(shared) == ()


def test_forget_deletes_the_learned_model_and_leaves_the_text_models_profiles(lib_app):
    """Forget deletes the subscriber's learned model (cached under the address as written), not another's, and
    leaves the text model's profiles (keyed by content digests, not by person)."""
    papers = lib_app.store.all_papers()
    readers = lib_app.store.subscribers_by_email([LINA, BO])
    for n, email in enumerate((LINA, BO)):
        lib_app.profiles.feedback(email, f"#{papers[n].store_id}", more=True)
    signals = lib_app.composer.signals(list(readers.values()), DAY)
    assert signals[LINA].model is not None and signals[BO].model is not None
    assert cache_keys(lib_app, "feedback-model/") == {f"feedback-model/{LINA}", f"feedback-model/{BO}"}
    profiles = cache_keys(lib_app, "dense-profile/")
    assert any("/library/" in key for key in profiles)
    assert forget(lib_app, LINA).counts["cache"] == 1
    assert cache_keys(lib_app, "feedback-model/") == {f"feedback-model/{BO}"}
    assert cache_keys(lib_app, "dense-profile/") == profiles
