"""Subscriber profiles: validation with file:line, and one bad file never hides the good ones."""

from __future__ import annotations

from datetime import date, time
from pathlib import Path

from digest.subscribers.profiles import is_delivery_day, load_subscribers, parse_profile

from ..conftest import SUBSCRIBERS


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_example_profiles_are_valid():
    """Every shipped example profile validates, and one of them is a trending-only reader."""
    roster = load_subscribers(SUBSCRIBERS)
    assert roster.problems == ()
    assert len(roster.subscribers) >= 4
    assert any(not s.interests for s in roster.subscribers)
    ada = roster.find("ADA@example.org")
    assert ada is not None and ada.send_at == time(7, 30) and ada.interests[0].keywords[0] == "KV cache"


def test_each_problem_names_file_and_line(tmp_path):
    """Bad email, timezone, send_at, frequency and interest values are each reported on their own line."""
    path = write(tmp_path, "bad.toml", """# a comment
email = "not-an-email"
timezone = "Mars/Olympus"
send_at = "7:30pm"
frequency = "hourly"

[[interests]]
name = "ok"
keywords = ["x"]

[[interests]]
name = "second"
keywords = []
wieght = 2
""")
    subscriber, problems = parse_profile(path)
    assert subscriber is None
    found = {(p.line, p.message.split(" ")[0]) for p in problems}
    assert (2, "email") in found
    assert (3, "timezone") in found
    assert (4, "send_at") in found
    assert (5, "frequency") in found
    assert any(p.line == 13 and "keywords" in p.message for p in problems)
    assert any(p.line == 14 and "did you mean 'weight'" in p.message for p in problems)
    assert str(problems[0]).startswith(f"{path}:2: ")


def test_toml_syntax_error_has_its_line(tmp_path):
    """A TOML syntax error is reported at the line the parser stopped on."""
    path = write(tmp_path, "broken.toml", 'email = "a@b.org"\nname = "unterminated\n')
    subscriber, problems = parse_profile(path)
    assert subscriber is None
    assert problems[0].line == 2 and "invalid TOML" in problems[0].message


def test_bad_profile_is_skipped_and_others_load(tmp_path):
    """One invalid file is reported and the valid profiles still load; two files of one address are both refused."""
    write(tmp_path, "a.toml", 'email = "a@example.org"\n')
    write(tmp_path, "b.toml", 'email = "b@example.org"\nmax_papers = 0\n')
    write(tmp_path, "c.toml", 'name = "C"\nemail = "A@example.org"\n')
    write(tmp_path, "d.toml", 'email = "d@example.org"\n')
    roster = load_subscribers(tmp_path)
    assert [s.email for s in roster.subscribers] == ["d@example.org"]
    assert {Path(f).name for f in roster.invalid_files} == {"a.toml", "b.toml", "c.toml"}
    messages = [str(p) for p in roster.problems]
    assert any(m.endswith("b.toml:2: max_papers must be a whole number from 1 to 50") for m in messages)
    assert f"{tmp_path / 'a.toml'}:1: email a@example.org is also the address of the profile file " \
           f"{tmp_path / 'c.toml'}" in "\n".join(messages)
    assert f"{tmp_path / 'c.toml'}:2: email A@example.org is also the address of the profile file " \
           f"{tmp_path / 'a.toml'}" in "\n".join(messages)


def test_delivery_days_follow_frequency():
    """daily always, weekdays Monday to Friday, weekly:mon only on Mondays."""
    monday, saturday = date(2026, 11, 23), date(2026, 11, 28)
    assert is_delivery_day("daily", saturday)
    assert is_delivery_day("weekdays", monday) and not is_delivery_day("weekdays", saturday)
    assert is_delivery_day("weekly:mon", monday) and not is_delivery_day("weekly:mon", date(2026, 11, 24))


def test_exclude_written_after_interests_applies_to_profile(tmp_path):
    """`exclude` written below an [[interests]] table (as TOML nests it) still excludes for the whole profile."""
    path = write(tmp_path, "p.toml", 'email = "p@example.org"\n[[interests]]\nname = "A"\nkeywords = ["x"]\n'
                                     '\nexclude = ["autonomous driving"]\n')
    subscriber, problems = parse_profile(path)
    assert problems == [] and subscriber is not None
    assert subscriber.exclude == ("autonomous driving",)
