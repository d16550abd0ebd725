"""Settings: defaults without a file, unknown keys and wrong types rejected with a hint."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from digest.config import SETTINGS, SOURCE_FIELDS, load_config
from digest.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_serve_without_a_file(tmp_path):
    """With no digest.toml the embedded defaults point at seeds/, subscribers/, outbox/ and a SQLite file."""
    config = load_config(cwd=tmp_path)
    assert config.source is None
    assert config.ingest.paths == [tmp_path / "seeds"]
    assert config.delivery.outbox == tmp_path / "outbox"
    assert config.store.url == f"sqlite:///{tmp_path}/digest.db"
    assert config.newsletter_info.name == "Paper Digest"


def test_file_values_and_relative_paths(tmp_path):
    """Values from the file win, and relative paths are relative to the file's folder."""
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "digest.toml"
    path.write_text('[newsletter]\nname = "Kernel Weekly"\n[delivery]\noutbox = "mail"\n')
    config = load_config(path)
    assert config.newsletter.name == "Kernel Weekly"
    assert config.delivery.outbox == tmp_path / "conf" / "mail"


@pytest.mark.parametrize("text, expected", [
    ('[newsleter]\nname = "x"\n', "unknown section [newsleter] (did you mean 'newsletter'?)"),
    ('[newsletter]\nbase_ur = "x"\n', "unknown setting newsletter.base_ur (did you mean 'base_url'?)"),
    ('[select]\nwindow_days = "seven"\n', "select.window_days must be a whole number, not str"),
    ('[delivery]\ntransport = "pigeon"\n', "delivery.transport must be one of"),
])
def test_bad_settings_are_rejected_with_a_hint(tmp_path, text, expected):
    """Typos get a did-you-mean hint; wrong types and choices are named."""
    path = tmp_path / "digest.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value) and str(path) in str(info.value)


def test_explicit_missing_file_is_an_error(tmp_path, monkeypatch):
    """DIGEST_CONFIG naming a missing file is an error, not a silent fallback to defaults."""
    monkeypatch.setenv("DIGEST_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(cwd=tmp_path)


def test_docs_list_every_setting():
    """The configuration page's settings table has exactly one row per declared setting, with its default."""
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z_]+\.[a-z0-9_]+)` \| (.*?) \|", readme, flags=re.M))
    assert set(rows) == {s.name for s in SETTINGS}
    for setting in SETTINGS:
        default = setting.default
        if isinstance(default, bool):  # as TOML spells it
            shown = f"`{str(default).lower()}`"
        else:
            shown = "`" + (str(default).replace("'", '"') if not isinstance(default, str) else f'"{default}"') + "`"
        assert rows[setting.name].startswith(shown), setting.name


def test_docs_list_every_source_field():
    """The configuration page's [[sources]] table has one row per declared source field, in order."""
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = readme.split("### Sources", 1)[1]
    rows = re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)
    assert rows[: len(SOURCE_FIELDS)] == [f.key for f in SOURCE_FIELDS]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[sources]]\nkind = "hf_daily"\nulr = "x"\n', "unknown field 'ulr' (did you mean 'url'?)"),
        ('[[sources]]\nurl = "https://x"\n', "`kind` is required"),
        ('[[sources]]\nkind = "rss"\n', "sources.kind must be one of hf_daily, hf_page, arxiv, file"),
        ('[[sources]]\nkind = "arxiv"\n', "exactly one of `url`, `categories` or `query`"),
        ('[[sources]]\nkind = "file"\n', "needs `path`"),
        ('[sources]\nkind = "file"\n', "[[sources]] tables"),
        ('[[sources]]\nkind = "file"\npath = "in\\u0000box"\n', "sources.path must be one line of text"),
        ('[fetch]\nuser_agent = "digest ²"\n', "fetch.user_agent must be printable ASCII"),
    ],
)
def test_bad_sources_are_rejected_with_their_entry(tmp_path, text, expected):
    """Each malformed [[sources]] entry is named by its number with what is wrong."""
    (tmp_path / "digest.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(cwd=tmp_path)
    assert expected in str(err.value)


def test_sources_are_read_with_file_paths_relative_to_the_config(tmp_path):
    """Valid sources become specs; a file source's path is resolved against the config's folder."""
    (tmp_path / "digest.toml").write_text(
        '[[sources]]\nkind = "hf_daily"\n\n[[sources]]\nkind = "arxiv"\ncategories = ["cs.DC", "cs.AR"]\n\n'
        '[[sources]]\nkind = "file"\npath = "inbox/*.jsonl"\n', encoding="utf-8")
    daily, arxiv, files = load_config(cwd=tmp_path).sources
    assert daily.url_for(date(2026, 6, 12)) == "https://huggingface.co/api/daily_papers?date=2026-06-12"
    assert arxiv.url_for(date(2026, 6, 12)) == "https://rss.arxiv.org/atom/cs.DC+cs.AR"
    assert files.path == str(tmp_path / "inbox/*.jsonl")
