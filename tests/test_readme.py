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


def github_slug(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def without_code(text: str) -> str:
    """The text outside fenced code blocks, where links and headings live."""
    return re.sub(r"^(```|~~~).*?^\1[ \t]*$", "", text, flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, numbered as GitHub numbers repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+?)#*$", without_code(path.read_text(encoding="utf-8")), flags=re.M):
        slug = github_slug(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_relative_link_of_the_docs_leads_somewhere():
    """Every relative link in README.md and docs/*.md names a file that exists, and every #anchor a heading of it."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    checked = 0
    for page in pages:
        text = re.sub(r"`[^`\n]*`", "code", without_code(page.read_text(encoding="utf-8")))
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert checked > 100 and not broken, "\n".join(broken)
