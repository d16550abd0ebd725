"""Settings: declared once as a table, read from `digest.toml`, validated at start."""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .errors import ConfigError
from .models import Newsletter

CONFIG_ENV = "DIGEST_CONFIG"
DEFAULT_FILE = "digest.toml"


@dataclass(frozen=True)
class Setting:
    """One declared setting: where it lives, its type, its default and what it does."""

    section: str
    key: str
    type: type | tuple[type, ...]
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    path: bool = False  # resolved relative to the config file's folder

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


SETTINGS: tuple[Setting, ...] = (
    Setting("store", "url", str, "sqlite:///digest.db",
            "Database URL (SQLAlchemy). A relative SQLite path is relative to the config file."),
    Setting("ingest", "paths", list, ["seeds"],
            "Files or folders `digest ingest` and `digest run` read when given no paths.", path=True),
    Setting("subscribers", "dir", str, "subscribers", "Folder of subscriber profiles (`*.toml`).", path=True),
    Setting("delivery", "transport", str, "outbox", "Where digests go.", choices=("outbox",)),
    Setting("delivery", "outbox", str, "outbox",
            "Folder the outbox transport writes `<date>/<subscriber>.eml` files into.", path=True),
    Setting("render", "templates", str, "",
            "Folder of template overrides, searched before the built-in templates (empty: none).", path=True),
    Setting("newsletter", "name", str, "Paper Digest", "Newsletter name: sender name, header and footer."),
    Setting("newsletter", "from_address", str, "digest@example.org", "The From address."),
    Setting("newsletter", "reply_to", str, "", "Reply-To address (empty: none)."),
    Setting("newsletter", "base_url", str, "https://digest.example.org",
            "Public https URL the unsubscribe, preferences and feedback links start with."),
    Setting("newsletter", "postal_address", str, "Paper Digest, 1 Example Street, Example City",
            "Postal address shown in every footer (required of bulk senders by CAN-SPAM)."),
    Setting("newsletter", "unsubscribe_mailto", str, "",
            "Address for mailto unsubscribes in List-Unsubscribe (empty: https link only)."),
    Setting("newsletter", "secret_env", str, "DIGEST_SECRET",
            "Environment variable holding the key that signs link tokens. Unset: a key kept in the database."),
    Setting("select", "window_days", int, 7,
            "A paper is new for this many days after it first reaches the store."),
    Setting("select", "relevance_floor", (int, float), 12.0,
            "Minimum relevance to be picked (BM25 units: one mention of a distinctive keyword in an abstract scores "
            "about 8, in a title about 13)."),
    Setting("select", "title_weight", (int, float), 3.0,
            "How much more a term in the title counts than one in the abstract."),
    Setting("select", "upvote_weight", (int, float), 0.5,
            "Weight of the trending signal (upvotes and comments, log-scaled) in the final score."),
    Setting("select", "comment_weight", (int, float), 2.0,
            "How many upvotes one comment counts as in the trending signal."),
    Setting("select", "recency_weight", (int, float), 0.3, "Weight of recency in the final score."),
    Setting("select", "recency_half_life_days", (int, float), 30.0,
            "Days after publication at which the recency bonus halves."),
    Setting("select", "description_weight", (int, float), 0.3,
            "How much each word of an interest's `description` counts next to a keyword (1)."),
    Setting("select", "seed_weight", (int, float), 3.0,
            "Weight of the similarity to an interest's `seed_papers` (Rocchio: their centroid joins the query)."),
    Setting("select", "liked_weight", (int, float), 3.0,
            "Rocchio β: weight of the centroid of papers the subscriber marked `--more`."),
    Setting("select", "disliked_weight", (int, float), 3.0,
            "Rocchio γ: weight subtracted for the centroid of papers marked `--less`."),
    Setting("select", "diversity", (int, float), 0.3,
            "Maximal marginal relevance: 0 ranks by score alone; higher keeps near-duplicates apart."),
    Setting("select", "semantic_weight", (int, float), 0.0,
            "Weight of sentence-embedding similarity (needs the `semantic` extra); 0 turns it off."),
)


_TYPE_NAMES = {str: "a string", int: "a whole number", list: "a list", bool: "true or false"}


def _find(section: str, key: str) -> Setting | None:
    return next((s for s in SETTINGS if s.section == section and s.key == key), None)


def _hint(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(options))})"


def _check_type(setting: Setting, value: Any, where: str) -> Any:
    ok = isinstance(value, setting.type) and not (isinstance(value, bool) and setting.type is not bool)
    if not ok:
        expected = _TYPE_NAMES.get(setting.type, "a number")
        raise ConfigError(f"{where}: {setting.name} must be {expected}, not {type(value).__name__} {value!r}")
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"{where}: {setting.name} must be one of {', '.join(setting.choices)}, not {value!r}")
    return value


def _validate(raw: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    sections = sorted({s.section for s in SETTINGS})
    values: dict[str, dict[str, Any]] = {}
    for section, table in raw.items():
        if section not in sections:
            raise ConfigError(f"{where}: unknown section [{section}]{_hint(section, sections)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        keys = [s.key for s in SETTINGS if s.section == section]
        for key, value in table.items():
            setting = _find(section, key)
            if setting is None:
                raise ConfigError(f"{where}: unknown setting {section}.{key}{_hint(key, keys)}")
            values.setdefault(section, {})[key] = _check_type(setting, value, where)
    return values


def _resolve(setting: Setting, value: Any, base: Path) -> Any:
    if setting.name == "store.url" and value.startswith("sqlite:///") and not value.startswith("sqlite:////"):
        path = value.removeprefix("sqlite:///")
        return value if path in ("", ":memory:") else "sqlite:///" + str(base / path)
    if not setting.path or value == "":
        return value
    if isinstance(value, list):
        return [base / str(item) for item in value]
    return base / value


class Config(SimpleNamespace):
    """Validated settings, one attribute per section (`config.select.window_days`)."""

    source: Path | None
    base: Path

    @property
    def newsletter_info(self) -> Newsletter:
        n = self.newsletter
        return Newsletter(name=n.name, from_address=n.from_address, reply_to=n.reply_to,
                          base_url=n.base_url.rstrip("/"), postal_address=n.postal_address,
                          unsubscribe_mailto=n.unsubscribe_mailto)


def build_config(raw: dict[str, Any], *, base: Path, source: Path | None = None) -> Config:
    """Validate a parsed settings table and fill in every default."""
    values = _validate(raw, str(source) if source else "settings")
    sections: dict[str, SimpleNamespace] = {}
    for setting in SETTINGS:
        value = values.get(setting.section, {}).get(setting.key, setting.default)
        ns = sections.setdefault(setting.section, SimpleNamespace())
        setattr(ns, setting.key, _resolve(setting, value, base))
    return Config(source=source, base=base, **sections)


def load_config(path: Path | None = None, *, cwd: Path | None = None) -> Config:
    """Read settings from `path`, else $DIGEST_CONFIG, else ./digest.toml, else the defaults."""
    cwd = cwd or Path.cwd()
    explicit = path or (Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None)
    candidate = explicit or cwd / DEFAULT_FILE
    if not candidate.exists():
        if explicit:
            raise ConfigError(f"{candidate}: config file not found")
        return build_config({}, base=cwd)
    try:
        raw = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{candidate}: {exc}") from exc
    return build_config(raw, base=candidate.resolve().parent, source=candidate)
