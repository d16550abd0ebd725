"""Render stage: a Digest becomes subject, preheader, HTML and plain text through Jinja2 templates.

CSS is inlined once per template when Jinja loads its source (see `inlining.InliningLoader`), not
once per message: every rendered email gets the inline styles for the price of a plain Jinja render.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader, StrictUndefined, Template, TemplateError

from digest.errors import RenderError
from digest.models import AGAIN_SECTION, Digest, Links, Newsletter, Rendered
from digest.render.filters import FILTERS, SUBJECT_LIMIT, one_line
from digest.render.inlining import InliningLoader, inline_css, is_html_template

_HERE = Path(__file__).resolve().parent.parent  # the digest package
# Installed as a wheel the templates sit in the package; in a checkout, beside it.
BUILTIN_TEMPLATES = next((p for p in (_HERE / "templates", _HERE.parent / "templates") if p.is_dir()),
                         _HERE.parent / "templates")
BUILTIN_PREFIX = "builtin"
PREHEADER_LIMIT = 140
CONTENTS_LIMIT = 20  # "In this issue" lists the titles of a digest of at most this many papers

__all__ = ["BUILTIN_TEMPLATES", "RenderError", "Renderer", "inline_css"]


class Renderer:
    """Turns a Digest into subject, preheader, HTML and text with operator templates first, built-ins second."""

    HTML = "digest.html.j2"
    TEXT = "digest.txt.j2"
    SUBJECT = "subject.txt.j2"
    PREHEADER = "preheader.txt.j2"

    def __init__(self, template_dirs: Sequence[Path] = (), *,
                 inline_per_message: Callable[[str], str] | None = None) -> None:
        """`inline_per_message` (for comparison only) inlines each finished HTML instead of each template."""
        missing = [str(folder) for folder in template_dirs if not Path(folder).is_dir()]
        if missing:
            raise RenderError(f"template folder not found: {', '.join(missing)}")
        self.search_path = (*(Path(folder) for folder in template_dirs), BUILTIN_TEMPLATES)
        self.inline_per_message = inline_per_message
        self.environment = self._environment(inline_per_message is None)
        self._pinned: dict[str, Template] | None = None

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Templates looked up once while inside (a send run), not checked on disk for each message.

        Outside, every lookup checks the template files, so an edited template shows on the next preview.
        """
        self._pinned = {}
        try:
            yield
        finally:
            self._pinned = None

    def _environment(self, inline_at_load: bool) -> Environment:
        """The Jinja environment: `builtin/` always means a built-in, other names try overrides first."""
        builtin = PrefixLoader({BUILTIN_PREFIX: FileSystemLoader(BUILTIN_TEMPLATES)})
        choices = ChoiceLoader([builtin, *(FileSystemLoader(folder) for folder in self.search_path)])
        environment = Environment(
            loader=InliningLoader(choices, self.search_path, inline=inline_at_load),
            autoescape=is_html_template,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=True,
        )
        environment.filters.update(FILTERS)
        return environment

    def render(self, digest: Digest, newsletter: Newsletter, links: Links,
               summaries: Mapping[int, str] | None = None) -> Rendered:
        """The subject, preheader, HTML and text of `digest` as `newsletter` sends it; `summaries` (by store id) are
        the TL;DRs a model made (`digest.summaries`), shown where a paper's source gave none."""
        context = _context(digest, newsletter, links)
        context["summaries"] = summaries or {}
        subject = one_line(self.render_template(self.SUBJECT, context), SUBJECT_LIMIT)
        preheader = one_line(self.render_template(self.PREHEADER, context), PREHEADER_LIMIT)
        context.update(subject=subject, preheader=preheader)
        html = self.render_template(self.HTML, context)
        if self.inline_per_message is not None:
            html = self.inline_per_message(html)
        return Rendered(subject, preheader, html, self.render_template(self.TEXT, context), links)

    def preload(self) -> None:
        """Load (and inline) a digest's templates now, within `pinned`: worker processes forked after this
        share them instead of each loading them again. One that fails to load is left to the render that
        needs it, which reports it."""
        for name in (self.SUBJECT, self.PREHEADER, self.HTML, self.TEXT):
            with suppress(TemplateError):
                self._template(name)

    def render_template(self, name: str, context: dict[str, Any]) -> str:
        """One template rendered with `context`; Jinja errors become a RenderError naming the template."""
        try:
            return self._template(name).render(context)
        except RenderError:
            raise
        except TemplateError as exc:
            raise RenderError(f"{name}: {exc}") from exc

    def _template(self, name: str) -> Template:
        if self._pinned is None:
            return self.environment.get_template(name)
        if name not in self._pinned:
            self._pinned[name] = self.environment.get_template(name)
        return self._pinned[name]


def _context(digest: Digest, newsletter: Newsletter, links: Links) -> dict[str, Any]:
    """What every template sees."""
    return {
        "digest": digest,
        "subscriber": digest.subscriber,
        "sections": [section for section in digest.sections if section.items],
        "newsletter": newsletter,
        "links": links,
        "again_section": AGAIN_SECTION,
        "contents_limit": CONTENTS_LIMIT,
    }
