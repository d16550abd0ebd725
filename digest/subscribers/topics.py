"""The signup page's catalogue of topics: `[[topics]]` in digest.toml, each an interest a reader can tick.

A topic has the shape of a profile's `[[interests]]` (keywords, description, seed papers, weight, checked
by the same code) plus a one-line `summary` shown beside its checkbox. A reader who ticks it gets it as
one of their interests, exactly as if an operator had written it into a profile file.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from digest.errors import ConfigError
from digest.models import Interest
from digest.subscribers.profiles import check_interest

TOPIC_KEYS = ("name", "summary", "keywords", "description", "seed_papers", "weight")
MAX_NAME = 60
MAX_SUMMARY = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Topic:
    """One topic of the catalogue: its name and one-line summary (shown on the page), and the interest it adds."""

    name: str
    summary: str
    interest: Interest


def read_topics(raw: Any, where: str) -> tuple[Topic, ...]:
    """The `[[topics]]` tables checked one by one; ConfigError naming the first bad one and what is wrong."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise ConfigError(f"{where}: topics must be written as [[topics]] tables")
    topics: list[Topic] = []
    for number, entry in enumerate(raw, start=1):
        topic = _topic(entry, f"{where}: [[topics]] #{number}")
        clash = next((t for t in topics if t.name.lower() == topic.name.lower()), None)
        if clash is not None:
            raise ConfigError(f"{where}: [[topics]] #{number}: the name {topic.name!r} is already taken by "
                              "another topic (names must differ)")
        topics.append(topic)
    return tuple(topics)


def _topic(entry: dict[str, Any], here: str) -> Topic:
    for key in entry:
        if key not in TOPIC_KEYS:
            close = difflib.get_close_matches(key, TOPIC_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(TOPIC_KEYS)})"
            raise ConfigError(f"{here}: unknown field {key!r}{hint}")
    summary = entry.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise ConfigError(f"{here}: `summary` is required: one line saying what the topic covers, shown on the "
                          "signup page")
    interest, problems = check_interest({k: v for k, v in entry.items() if k != "summary"}, 0)
    if interest is None:
        raise ConfigError(f"{here}: {problems[0].removeprefix('interest 1: ')}")
    for label, text, limit in (("name", interest.name, MAX_NAME), ("summary", summary.strip(), MAX_SUMMARY)):
        if _CONTROL.search(text) or len(text) > limit:
            raise ConfigError(f"{here}: {label} must be one line of at most {limit} characters, not {text!r}")
    return Topic(interest.name, summary.strip(), interest)


def chosen(topics: Sequence[Topic], names: Sequence[str]) -> tuple[list[Topic], list[str]]:
    """The topics named (as the form sends them), and the names that are not in the catalogue."""
    by_name = {t.name: t for t in topics}
    found = [by_name[n] for n in dict.fromkeys(names) if n in by_name]
    return found, [n for n in names if n not in by_name]
