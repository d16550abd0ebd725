"""CSS inlining at template-load time: premailer runs once per template source, not once per message.

The Jinja constructs of a template are swapped for placeholders that lxml keeps in place, the CSS
is inlined into the markup, and the constructs are put back. A template whose markup lxml would
have to repair (an unclosed tag, an unbalanced `{% if %}`) is refused with a message that says so.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import premailer
from jinja2 import BaseLoader, Environment, TemplateNotFound

from digest.errors import RenderError

HTML_SUFFIXES = (".html", ".htm", ".html.j2", ".htm.j2")
WEB_PAGES = ("web/", "builtin/web/")  # pages for browsers, not emails: their <style> stays a stylesheet
_PREMAILER_OPTIONS: dict[str, Any] = {
    "disable_validation": True,
    # Inline styles beat <style> rules, so the kept @media rules need their !important.
    "strip_important": False,
    "allow_network": False,
    "cssutils_logging_level": logging.CRITICAL,
}
_JINJA = re.compile(r"{%-?\s*raw\s*-?%}.*?{%-?\s*endraw\s*-?%}|{#.*?#}|{%.*?%}|{{.*?}}", re.S)
_PLACEHOLDER = re.compile(r'<!--jinja:(\d+)-->|jinja(\d+)x(?:="")?')
_MARKUP = re.compile(r"<!--|-->|</?[A-Za-z][^\s/>\"']*|<!|>|[\"']")
_RAW_TEXT = {"style", "script", "title", "textarea"}
_EXTENDS = re.compile(r"{%-?\s*extends\s+([\"'])(.+?)\1\s*-?%}")
_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S | re.I)
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"</?([A-Za-z][\w:-]*)")
_STYLE_ATTRIBUTE = re.compile(r' style="[^"]*"')
_TAGS_LXML_MAY_ADD = {"html", "head", "body", "tbody", "style"}


class TemplateMissing(RenderError, TemplateNotFound):
    """A template is in none of the folders searched; the message lists them."""

    def __init__(self, name: str, searched: Sequence[Path]) -> None:
        folders = ", ".join(str(folder) for folder in searched)
        TemplateNotFound.__init__(self, name, f"template {name!r} not found; looked in: {folders}")


def is_html_template(name: str | None) -> bool:
    """True for names that hold HTML (autoescape on, CSS inlined); strings from code count as HTML."""
    return name is None or name.lower().endswith(HTML_SUFFIXES)


def inline_css(html: str) -> str:
    """`html` with its <style> rules moved into style attributes; @media and :hover rules stay in <style>."""
    inlined = str(premailer.Premailer(html, **_PREMAILER_OPTIONS).transform(pretty_print=False))
    # premailer writes "a:1; b:2": the spaces, repeated on every element of every paper, cost a digest kilobytes
    return _STYLE_ATTRIBUTE.sub(lambda m: m.group().replace("; ", ";"), inlined)


class _Scanner:
    """Follows HTML source chunk by chunk to tell whether the current point is text, a tag or raw text."""

    def __init__(self) -> None:
        self.state, self.quote, self.element = "text", "", ""

    def feed(self, chunk: str) -> None:
        for match in _MARKUP.finditer(chunk):
            getattr(self, "_in_" + self.state)(match.group())

    def _in_text(self, token: str) -> None:
        if token == "<!--":
            self.state = "comment"
        elif token.startswith("<"):
            self.state, self.element = "tag", token[1:].lower()

    def _in_tag(self, token: str) -> None:
        if token in "\"'":
            self.state, self.quote = "quoted", token
        elif token == ">":
            self.state = "raw" if self.element in _RAW_TEXT else "text"

    def _in_quoted(self, token: str) -> None:
        if token == self.quote:
            self.state = "tag"

    def _in_comment(self, token: str) -> None:
        if token == "-->":
            self.state = "text"

    def _in_raw(self, token: str) -> None:
        if token.lower() == "</" + self.element:
            self.state, self.element = "tag", ""


def _protect(source: str, name: str) -> tuple[str, list[str]]:
    """`source` with each Jinja construct swapped for a placeholder lxml keeps in place, and the constructs."""
    if _PLACEHOLDER.search(source):
        raise RenderError(f"{name}: contains text shaped like an inlining placeholder (jinjaNx / <!--jinja:N-->)")
    scanner, pos = _Scanner(), 0
    parts: list[str] = []
    constructs: list[str] = []
    for match in _JINJA.finditer(source):
        scanner.feed(source[pos : match.start()])
        parts += [source[pos : match.start()], _placeholder(len(constructs), scanner, name)]
        constructs.append(match.group())
        pos = match.end()
    return "".join(parts) + source[pos:], constructs


def _placeholder(index: int, scanner: _Scanner, name: str) -> str:
    """A comment between elements (lxml keeps it even between <tr> rows), a bare word anywhere else."""
    if scanner.state == "raw" and scanner.element == "style":
        raise RenderError(f"{name}: Jinja inside <style> is not supported (CSS is inlined when the template loads)")
    return f"<!--jinja:{index}-->" if scanner.state == "text" else f"jinja{index}x"


def _restore(html: str, constructs: list[str], name: str) -> str:
    """Put the Jinja constructs back; each must come back once and in order, or the template is refused."""
    seen: list[int] = []

    def put_back(match: re.Match[str]) -> str:
        seen.append(int(match.group(1) or match.group(2)))
        return constructs[seen[-1]]

    restored = _PLACEHOLDER.sub(put_back, html)
    if seen != list(range(len(constructs))):
        raise RenderError(f"{name}: CSS inlining lost or moved a Jinja construct (keep Jinja out of style attributes)")
    return restored


def _tag_sequence(html: str) -> list[str]:
    """Start and end tags of `html` outside comments and <style>, minus the ones lxml adds by itself."""
    bare = _COMMENT.sub("", _STYLE.sub("", html))
    return [tag for tag in map(str.lower, _TAG.findall(bare)) if tag not in _TAGS_LXML_MAY_ADD]


def _check_structure(before: str, after: str, name: str) -> None:
    """Refuse a template whose elements lxml had to close or move: the Jinja around them would break."""
    if _tag_sequence(before) != _tag_sequence(after):
        raise RenderError(
            f"{name}: CSS inlining would change the markup; close every tag explicitly and "
            "keep each {% if %} branch balanced"
        )


def _inline_fragment(fragment: str, css: str) -> str:
    """`fragment` (a child template's blocks) with `css` inlined, as if it sat in its parent's body."""
    document = f"<html><head><style>{css}</style></head><body>{fragment}</body></html>"
    match = _BODY.search(inline_css(document))
    return match.group(1) if match else ""


def inline_template(source: str, name: str, css: str | None = None) -> str:
    """Template `source` with CSS inlined around its Jinja: a whole document, or a fragment styled by `css`."""
    protected, constructs = _protect(source, name)
    inlined = inline_css(protected) if css is None else _inline_fragment(protected, css)
    _check_structure(protected, inlined, name)
    return _restore(inlined, constructs, name)


class InliningLoader(BaseLoader):
    """Wraps a loader: HTML sources come back with CSS inlined; a miss lists the folders searched."""

    def __init__(self, inner: BaseLoader, searched: Sequence[Path], inline: bool = True) -> None:
        self.inner, self.searched, self.inline = inner, tuple(searched), inline

    def get_source(self, environment: Environment, template: str) -> tuple[str, str | None, Callable[[], bool]]:
        source, filename, uptodate = self._source(environment, template)
        if not (self.inline and is_html_template(template)) or template.startswith(WEB_PAGES):
            return source, filename, uptodate
        parent = _EXTENDS.search(source)
        if parent:
            css, checks = self._inherited_css(environment, parent.group(2), {template})
            inlined = inline_template(source, template, css) if css else source
            return inlined, filename, _all_uptodate([uptodate, *checks])
        inlined = inline_template(source, template) if _style_text(source) else source
        return inlined, filename, uptodate

    def list_templates(self) -> list[str]:
        return self.inner.list_templates()

    def _source(self, environment: Environment, template: str) -> tuple[str, str | None, Callable[[], bool]]:
        """The raw source from the wrapped loader, with a not-found that says where it looked."""
        try:
            source, filename, uptodate = self.inner.get_source(environment, template)
        except TemplateMissing:
            raise
        except TemplateNotFound as exc:
            raise TemplateMissing(template, self.searched) from exc
        return source, filename, uptodate or (lambda: True)

    def _inherited_css(
        self, environment: Environment, name: str, seen: set[str]
    ) -> tuple[str, list[Callable[[], bool]]]:
        """The <style> text of `name` and its own parents (their change must reload the child too)."""
        if name in seen:
            return "", []
        source, _, uptodate = self._source(environment, name)
        css, checks = _style_text(source), [uptodate]
        parent = _EXTENDS.search(source)
        if parent:
            parent_css, parent_checks = self._inherited_css(environment, parent.group(2), seen | {name})
            css, checks = parent_css + "\n" + css, checks + parent_checks
        return css, checks


def _style_text(source: str) -> str:
    """The CSS in the <style> elements of template `source` (not in Jinja or HTML comments such as MSO ones)."""
    return "\n".join(_STYLE.findall(_COMMENT.sub("", _JINJA.sub("", source)))).strip()


def _all_uptodate(checks: Iterable[Callable[[], bool]]) -> Callable[[], bool]:
    """One uptodate callable that is true while every one of `checks` is."""
    frozen = tuple(checks)
    return lambda: all(check() for check in frozen)
