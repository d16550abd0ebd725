"""The README's two commands come first, and CI runs the README's test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_readme_starts_with_run_and_test_commands():
    """The first two code blocks are one-line commands: the sample run, then the tests."""
    first, second = readme_commands()[:2]
    assert "\n" not in first and "\n" not in second
    assert first.endswith("digest run --date today")
    assert "pytest" in second


def test_ci_runs_the_readme_test_command():
    """.ci/run contains the README's test command exactly."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci.splitlines()
