"""The signup page's catalogue: `[[topics]]` in digest.toml, checked as profile interests are, one line per error."""

from __future__ import annotations

from pathlib import Path

import pytest

from digest.config import load_config
from digest.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_sample_catalogue_is_valid():
    """The repository's digest.toml offers a few topics, each with a summary and something to rank with."""
    topics = load_config(ROOT / "digest.toml").topics
    assert len(topics) >= 3
    assert all(t.summary and (t.interest.keywords or t.interest.description or t.interest.seed_papers)
               for t in topics)


def test_a_topic_becomes_an_interest(tmp_path):
    """Name, keywords, description, seed papers and weight are read as a profile's interest is."""
    (tmp_path / "digest.toml").write_text('[[topics]]\nname = " GPU kernels "\nsummary = "Fast kernels."\n'
                                          'keywords = ["CUDA", " Triton "]\ndescription = "Kernels  by hand."\n'
                                          'seed_papers = ["2205.14135"]\nweight = 0.8\n')
    [topic] = load_config(tmp_path / "digest.toml").topics
    assert (topic.name, topic.summary) == ("GPU kernels", "Fast kernels.")
    assert topic.interest.keywords == ("CUDA", "Triton") and topic.interest.description == "Kernels by hand."
    assert topic.interest.seed_papers == ("2205.14135",) and topic.interest.weight == 0.8


@pytest.mark.parametrize(("text", "expected"), [
    ('[topics]\nname = "x"\n', "topics must be written as [[topics]] tables"),
    ('[[topics]]\nname = "A"\nsummary = "s"\nkeyword = ["x"]\n', "unknown field 'keyword' (did you mean 'keywords'?)"),
    ('[[topics]]\nname = "A"\nsummary = "s"\nexclude = ["x"]\nkeywords = ["x"]\n', "unknown field 'exclude'"),
    ('[[topics]]\nname = "A"\nkeywords = ["x"]\n', "`summary` is required"),
    ('[[topics]]\nname = "A"\nsummary = "s"\n', "give keywords, a description, seed_papers, a library or authors"),
    ('[[topics]]\nname = "A"\nsummary = "s"\nkeywords = ["x"]\nweight = 11\n', "weight must be a number above 0"),
    ('[[topics]]\nsummary = "s"\nkeywords = ["x"]\n', "name must be a non-empty string"),
    ('[[topics]]\nname = "A"\nsummary = "two\\nlines"\nkeywords = ["x"]\n', "summary must be one line"),
    ('[[topics]]\nname = "A"\nsummary = "s"\nkeywords = ["x"]\n[[topics]]\nname = "a"\nsummary = "t"\n'
     'keywords = ["y"]\n', "[[topics]] #2: the name 'a' is already taken"),
])
def test_bad_topics_are_one_line_errors_naming_the_entry(tmp_path, text, expected):
    """Each mistake names the file, the topic's number and what is wrong, on one line."""
    path = tmp_path / "digest.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert expected in message and str(path) in message and "\n" not in message
